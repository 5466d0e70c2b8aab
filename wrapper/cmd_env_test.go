package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/trainrun/trainrun/internal/golden"
	"github.com/trainrun/trainrun/topo/snapshot"
	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
)

// runTrainrun runs a subcommand in-process with the given environment.
func runWithEnv(t *testing.T, vars map[string]string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	code, stdout, stderr = cli{vars: vars}.run(args...)
	return stdout, stderr, code
}

// shellVars reads KEY=VALUE lines (comments skipped).
func shellVars(s string) map[string]string {
	m := map[string]string{}
	for _, l := range strings.Split(s, "\n") {
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		k, v, _ := strings.Cut(l, "=")
		m[k] = v
	}
	return m
}

// TestEnvMachines: `trainrun env --machine NAME --rank R` on every captured
// machine of topo/snapshot (each spec cites its public fixture). For each,
// the expected NCCL_IB_HCA, bootstrap interface and GID index, and why.
// --node-addr is the address Slurm reaches the node at (the spec's front-end
// address), so the interface rule is exercised, not the fallback.
func TestEnvMachines(t *testing.T) {
	cases := []struct {
		name    string
		machine string
		args    []string
		vars    map[string]string
		hca     string // "" = not set by trainrun
		ifname  string
		gid     string
		more    map[string]string // other variables expected exactly ("" = absent)
		explain []string          // substrings of --explain output
	}{
		{
			// fixtures/ib/h100-ibdev2netdev-8ib-plus-2x-dualport-eth.txt with the
			// IB links up: the 8 ConnectX-7 IB ports, exact names, PCI order;
			// mlx5_1/2/7/8 are the CX-6 Ethernet front-end (not compute on an IB
			// job) even though two are up. The node's address 10.0.0.11 is on
			// enp27s0f0np0. Bare metal with NVSwitch and sm_90: NVLS on.
			name: "HGX H100 interleaved mlx5", machine: "hgx-h100", args: []string{"--node-addr", "10.0.0.11"},
			hca:    "=mlx5_0:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_9:1,mlx5_10:1,mlx5_11:1",
			ifname: "=enp27s0f0np0",
			more:   map[string]string{"NCCL_NVLS_ENABLE": "1", "NCCL_TOPO_FILE": "", "CUDA_DEVICE_ORDER": "PCI_BUS_ID", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1"},
		},
		{
			// The same machine as captured in imbue-ai/cluster-health#4: every IB
			// port Down. Nothing is listed (listing the up Ethernet ports would
			// send GPU traffic over the front-end); the note says why.
			name: "HGX H100 with IB down", machine: "hgx-h100-ibdown", args: []string{"--node-addr", "10.0.0.11"},
			hca: "", ifname: "=enp27s0f0np0",
			explain: []string{"NCCL_IB_HCA not set: no active compute-fabric port", "mlx5_0:1 (port down)"},
		},
		{
			// fixtures/nvidia-smi-topo/h100-nv18-9nic-reversed-order-nccl-1453:
			// GPU0 sits beside mlx5_8 … GPU7 beside mlx5_1; rails follow PCI
			// order, so the list runs mlx5_8 … mlx5_1 and LOCAL_RANK i still
			// drives GPU i (no CUDA_VISIBLE_DEVICES reordering). mlx5_0, far
			// from every GPU, is not a rail.
			name: "H100 with NICs reversed", machine: "h100-reversed", args: []string{"--node-addr", "10.3.0.21"},
			hca:    "=mlx5_8:1,mlx5_7:1,mlx5_6:1,mlx5_5:1,mlx5_4:1,mlx5_3:1,mlx5_2:1,mlx5_1:1",
			ifname: "=enp225s0np0",
			more:   map[string]string{"CUDA_VISIBLE_DEVICES": ""},
		},
		{
			// Azure ND H100 v5 (azure-ndv5-topo.xml): 8 IB VFs mlx5_ib0..7 on a
			// flat Hyper-V bus; mlx5_an0 is the accelerated-networking Ethernet
			// VF behind eth0. Azure's /etc/nccl.conf (fixtures/nccl-env/
			// azure-ndv5-etc-nccl.conf) sets NCCL_TOPO_FILE: kept, not injected.
			name: "Azure NDv5", machine: "azure-ndv5", args: []string{"--node-addr", "10.0.0.4", "--nccl-conf", "testdata/azure-ndv5-etc-nccl.conf"},
			hca:     "=mlx5_ib0:1,mlx5_ib1:1,mlx5_ib2:1,mlx5_ib3:1,mlx5_ib4:1,mlx5_ib5:1,mlx5_ib6:1,mlx5_ib7:1",
			ifname:  "=eth0",
			more:    map[string]string{"NCCL_TOPO_FILE": ""},
			explain: []string{"# NCCL_TOPO_FILE=/opt/microsoft/ndv5/topo.xml stays (nccl.conf, not injected)"},
		},
		{
			// AWS p4d (aws-p4d-24xl-topo.xml, aws-ofi-nccl-platform-defaults):
			// EFA, so NCCL_IB_HCA stays unset (aws-ofi-nccl picks EFA devices;
			// NCCL's verbs transport is not used) and NCCL_TOPO_FILE is left to
			// the plugin, which installs p4d-24xl-topo.xml when it is unset.
			// A100 NVSwitch: no NVLS.
			name: "AWS p4d EFA", machine: "aws-p4d", args: []string{"--node-addr", "172.31.16.10"},
			hca: "", ifname: "=eth0",
			more:    map[string]string{"NCCL_TOPO_FILE": "", "NCCL_NVLS_ENABLE": ""},
			explain: []string{"NCCL_IB_HCA not set: EFA node", "aws-ofi-nccl"},
		},
		{
			// IBM Cloud gx3d H100 VSI (ibmcloud-h100-vsi-topo.xml): 8 RoCE VFs
			// named mlx5_7 … mlx5_0 in bus order; GID 3 is each port's RoCE v2
			// GID with an IPv4-mapped address (from the captured gid_attrs).
			// Bootstrap on enp0s3, the VSI's primary interface.
			name: "IBM Cloud RoCE", machine: "ibmcloud-h100-vsi", args: []string{"--node-addr", "10.240.0.10"},
			hca:    "=mlx5_7:1,mlx5_6:1,mlx5_5:1,mlx5_4:1,mlx5_3:1,mlx5_2:1,mlx5_1:1,mlx5_0:1",
			ifname: "=enp0s3", gid: "3",
		},
		{
			// IBM's tested environment (fixtures/nccl-env/ibmcloud-h100-vsi-tested-
			// nccl-env.sh) sets NCCL_IB_HCA without '=' and its own topology
			// file: both are the user's and kept; trainrun reports what it would
			// have set.
			name: "IBM Cloud RoCE with IBM's env", machine: "ibmcloud-h100-vsi", args: []string{"--node-addr", "10.240.0.10"},
			vars: map[string]string{"NCCL_IB_HCA": "mlx5_0,mlx5_1,mlx5_2,mlx5_3,mlx5_4,mlx5_5,mlx5_6,mlx5_7", "NCCL_TOPO_FILE": "/opt/ibm/topo.xml", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1"},
			hca:  "", ifname: "=enp0s3", gid: "3",
			more: map[string]string{"TORCH_NCCL_ASYNC_ERROR_HANDLING": "", "NCCL_TOPO_FILE": ""},
			explain: []string{"# NCCL_IB_HCA=mlx5_0,mlx5_1,mlx5_2,mlx5_3,mlx5_4,mlx5_5,mlx5_6,mlx5_7 stays (user, not injected): kept from the user's environment; trainrun would set =mlx5_7:1",
				"# NCCL_TOPO_FILE=/opt/ibm/topo.xml stays (user"},
		},
		{
			// DGX A100 (fixtures/nvidia-smi-topo/dgx-a100-8gpu-10nic.txt): the 8
			// HDR HCAs two per switch; mlx5_8/9 (storage card, SYS to every
			// GPU) are left out. A100's NVSwitch has no SHARP: no NVLS.
			name: "DGX A100", machine: "dgx-a100", args: []string{"--node-addr", "10.2.0.5"},
			hca:    "=mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_7:1",
			ifname: "=enp226s0f0",
			more:   map[string]string{"NCCL_NVLS_ENABLE": ""},
		},
	}
	// Unpack each machine once and read it with --root (the golden test
	// covers --machine).
	roots := map[string]string{}
	for _, tc := range cases {
		if _, ok := roots[tc.machine]; ok {
			continue
		}
		dir := t.TempDir()
		if err := snapshot.Unpack(tc.machine, dir); err != nil {
			t.Fatal(err)
		}
		roots[tc.machine] = dir
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"env", "--root", roots[tc.machine], "--rank", "5"}, tc.args...)
			out, errs, code := runWithEnv(t, tc.vars, args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			got := shellVars(out)
			want := map[string]string{"NCCL_IB_HCA": tc.hca, "NCCL_SOCKET_IFNAME": tc.ifname, "NCCL_IB_GID_INDEX": tc.gid, "RANK": "5", "LOCAL_RANK": "5"}
			for k, v := range tc.more {
				want[k] = v
			}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("%s = %q, want %q", k, got[k], v)
				}
			}
			for k := range got {
				if debugVar(k) {
					t.Errorf("%s set without policy", k)
				}
			}
			if len(tc.explain) > 0 {
				ex, _, _ := runWithEnv(t, tc.vars, append(args, "--explain")...)
				for _, s := range tc.explain {
					if !strings.Contains(ex, s) {
						t.Errorf("--explain lacks %q:\n%s", s, ex)
					}
				}
			}
		})
	}
}

func debugVar(k string) bool {
	switch k {
	case "NCCL_ALGO", "NCCL_PROTO", "NCCL_P2P_LEVEL", "NCCL_NET_GDR_LEVEL", "NCCL_BUFFSIZE":
		return true
	}
	return false
}

// TestEnvExplainGolden pins the printed form: one comment per variable with
// its source and reason, then KEY=VALUE (quoted where the shell needs it).
func TestEnvExplainGolden(t *testing.T) {
	out, errs, code := runWithEnv(t, map[string]string{"SLURM_JOB_ID": "4242"},
		"env", "--machine", "hgx-h100", "--node-addr", "10.0.0.11", "--nodelist", "gpu[01-04]", "--fix", "tp=8,pp=2",
		"--rank", "17", "--explain", "--master-addr", "gpu01")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	golden.CheckString(t, filepath.Join("testdata", "env-hgx-h100-rank17.golden"), out)
}

func TestEnvErrors(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"rank out of range", []string{"--machine", "hgx-h100", "--rank", "8"}, "--rank 8: the job has ranks 0..7"},
		{"unknown machine", []string{"--machine", "nope"}, "no built-in machine"},
		{"root and machine", []string{"--machine", "hgx-h100", "--root", "/x"}, "pick one"},
		{"bad fix key", []string{"--machine", "hgx-h100", "--fix", "tq=2"}, `unknown key "tq"`},
		{"layout not filling", []string{"--machine", "hgx-h100", "--fix", "tp=8,dp=2"}, "uses 16 GPUs"},
		{"bad format", []string{"--machine", "hgx-h100", "--format", "xml"}, "accepted: table, json"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, errs, code := runWithEnv(t, nil, append([]string{"env"}, tc.args...)...)
			if code != exitcode.Usage || !strings.Contains(errs, tc.want) {
				t.Fatalf("exit %d, stderr %q; want %d and %q", code, errs, exitcode.Usage, tc.want)
			}
		})
	}
}

// The policy file shapes the NCCL variables. contrib's example forces
// NCCL_IB_TIMEOUT=22 site-wide; its "roce" partition forces 23 and
// NCCL_IB_GID_INDEX=3 and says trainrun's values win (NCCLPrecedence=site).
func TestEnvPolicy(t *testing.T) {
	cases := []struct {
		name, partition, timeout string
		explain                  []string
	}{
		{"site-wide", "", "22", []string{"NCCL_IB_TIMEOUT (policy-force)", "overrides the user's 14"}},
		{"roce partition", "roce", "23", []string{"NCCL_IB_GID_INDEX (policy-force): forced by the site policy (and what trainrun computes"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			vars := map[string]string{"SLURM_JOB_PARTITION": tc.partition, "NCCL_IB_TIMEOUT": "14", "NCCL_IB_HCA": "mlx5"}
			out, errs, code := runWithEnv(t, vars, "env", "--machine", "ibmcloud-h100-vsi", "--node-addr", "10.240.0.10",
				"--policy", "../contrib/trainrun.conf.example", "--explain")
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			got := shellVars(out)
			if got["NCCL_IB_TIMEOUT"] != tc.timeout {
				t.Errorf("NCCL_IB_TIMEOUT = %q, want the forced %s over the user's 14", got["NCCL_IB_TIMEOUT"], tc.timeout)
			}
			if got["NCCL_IB_GID_INDEX"] != "3" {
				t.Errorf("NCCL_IB_GID_INDEX = %q, want 3", got["NCCL_IB_GID_INDEX"])
			}
			// NCCLPrecedence=site on the roce partition: trainrun's HCA list
			// replaces the user's prefix-matching "mlx5"; site-wide the
			// user's value stands.
			wantHCA := ""
			if tc.partition == "roce" {
				wantHCA = "=mlx5_7:1,mlx5_6:1,mlx5_5:1,mlx5_4:1,mlx5_3:1,mlx5_2:1,mlx5_1:1,mlx5_0:1"
			}
			if got["NCCL_IB_HCA"] != wantHCA {
				t.Errorf("NCCL_IB_HCA = %q, want %q", got["NCCL_IB_HCA"], wantHCA)
			}
			for _, s := range tc.explain {
				if !strings.Contains(out, s) {
					t.Errorf("--explain lacks %q:\n%s", s, out)
				}
			}
		})
	}
	_, errs, code := runWithEnv(t, nil, "env", "--machine", "hgx-h100", "--partition", "x")
	if code != exitcode.Usage || !strings.Contains(errs, "without --policy") {
		t.Errorf("--partition alone: exit %d, %q", code, errs)
	}
}

// Inside a step, the rank defaults to SLURM_PROCID.
func TestEnvRankFromSlurm(t *testing.T) {
	out, errs, code := runWithEnv(t, map[string]string{"SLURM_PROCID": "6"}, "env", "--machine", "dgx-a100")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if got := shellVars(out); got["RANK"] != "6" || got["LOCAL_RANK"] != "6" {
		t.Errorf("RANK=%s LOCAL_RANK=%s, want 6 and 6", got["RANK"], got["LOCAL_RANK"])
	}
	_, errs, code = runWithEnv(t, map[string]string{"SLURM_PROCID": "x"}, "env", "--machine", "dgx-a100")
	if code != exitcode.Slurm || !strings.Contains(errs, `SLURM_PROCID="x"`) {
		t.Errorf("bad SLURM_PROCID: exit %d, %q", code, errs)
	}
}

// --explain says which container the ranks would run in (issue 33): the
// image and runtime from pyxis's and trainrun's variables, or none.
func TestEnvExplainContainer(t *testing.T) {
	dir := t.TempDir()
	if err := snapshot.Unpack("hgx-h100", dir); err != nil {
		t.Fatal(err)
	}
	args := []string{"env", "--root", dir, "--node-addr", "10.0.0.11", "--explain"}
	for _, tc := range []struct {
		vars map[string]string
		want string
	}{
		{nil, "# container: none (the ranks run on the host"},
		{map[string]string{"PYXIS_CONTAINER_IMAGE": "nvcr.io#nvidia/pytorch:24.01-py3"}, "# container: nvcr.io#nvidia/pytorch:24.01-py3 (pyxis), from PYXIS_CONTAINER_IMAGE"},
		{map[string]string{"PYXIS_CONTAINER_IMAGE": "localhost/t:1", "TRAINRUN_CONTAINER_RUNTIME": "podman"}, "# container: localhost/t:1 (podman), from PYXIS_CONTAINER_IMAGE"},
	} {
		out, errs, code := runWithEnv(t, tc.vars, args...)
		if code != 0 || !strings.Contains(out, tc.want) {
			t.Errorf("%v: exit %d, output lacks %q:\n%s%s", tc.vars, code, tc.want, out, errs)
		}
	}
}
