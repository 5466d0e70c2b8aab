package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trainrun/trainrun/internal/golden"
	"github.com/trainrun/trainrun/internal/slurm"
	"github.com/trainrun/trainrun/topo"
	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
)

func runTopoCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	return cli{}.run(args...)
}

func TestTopoMachineMatrixIsTheGolden(t *testing.T) {
	code, out, errs := runTopoCmd(t, "topo", "--machine", "hgx-h100")
	if code != exitcode.OK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	want, err := os.ReadFile(filepath.Join("..", "topo", "testdata", "golden", "hgx-h100.matrix.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if out != string(want) {
		t.Fatalf("trainrun topo --machine hgx-h100 differs from topo/testdata/golden/hgx-h100.matrix.txt:\n%s", out)
	}
	for _, s := range []string{"NV18", "=mlx5_0,mlx5_3,mlx5_4,mlx5_5,mlx5_6,mlx5_9,mlx5_10,mlx5_11", "Ethernet 100 Gb/s on an InfiniBand fabric"} {
		if !strings.Contains(out, s) {
			t.Errorf("output lacks %q", s)
		}
	}
}

func TestTopoFormats(t *testing.T) {
	code, out, errs := runTopoCmd(t, "topo", "--machine", "ibmcloud-h100-vsi", "--format", "json")
	if code != exitcode.OK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var n topo.Node
	if err := json.Unmarshal([]byte(out), &n); err != nil {
		t.Fatalf("json: %v", err)
	}
	if len(n.GPUs) != 8 || n.Root != "machine:ibmcloud-h100-vsi" || n.RDMA[0].Ports[0].RoCEv2GIDIndex == nil {
		t.Errorf("json node: %d GPUs, root %q", len(n.GPUs), n.Root)
	}
	code, out, errs = runTopoCmd(t, "topo", "--machine", "dgx-a100", "--format", "nccl-xml")
	if code != exitcode.OK || !strings.HasPrefix(out, `<system version="1">`+"\n") || strings.Contains(out, "\t") {
		t.Fatalf("exit %d: %s\n%s", code, errs, out)
	}
	if strings.Contains(errs, "warning") {
		t.Errorf("dgx-a100 has switches; no warning expected: %s", errs)
	}
	code, _, errs = runTopoCmd(t, "topo", "--machine", "azure-ndv5", "--format", "nccl-xml")
	if code != exitcode.OK || !strings.Contains(errs, "disables GPUDirect RDMA") || !strings.Contains(errs, "/opt/microsoft/ndvN/topo.xml") {
		t.Fatalf("azure-ndv5 xml: exit %d, stderr %q", code, errs)
	}
	code, out, _ = runTopoCmd(t, "topo", "--machine", "list")
	if code != exitcode.OK || !strings.Contains(out, "hgx-h100 ") || !strings.Contains(out, "aws-p4d ") {
		t.Fatalf("list: exit %d\n%s", code, out)
	}
}

func TestTopoRootIsACapturedTree(t *testing.T) {
	// A tree unpacked by hand reads the same as --machine.
	dir := t.TempDir()
	code, want, _ := runTopoCmd(t, "topo", "--machine", "aws-p4d")
	if code != exitcode.OK {
		t.Fatal(code)
	}
	if err := unpackForTest("aws-p4d", dir); err != nil {
		t.Fatal(err)
	}
	code, got, errs := runTopoCmd(t, "topo", "--root", dir)
	if code != exitcode.OK || got != want {
		t.Fatalf("exit %d %s\n%s", code, errs, got)
	}
}

func TestTopoBadInput(t *testing.T) {
	empty := t.TempDir()
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"not a sysfs tree", []string{"--root", empty}, "trainrun: topo: --root " + empty + ": " + empty + "/sys/bus/pci/devices: not a sysfs tree (missing); pass the root of a captured machine, the directory that holds sys/"},
		{"no such dir", []string{"--root", "/nonexistent/x"}, "--root /nonexistent/x: not a directory"},
		{"unknown machine", []string{"--machine", "dgx-z9"}, `--machine dgx-z9: no built-in machine "dgx-z9"; run 'trainrun topo --machine list'`},
		{"both", []string{"--machine", "hgx-h100", "--root", empty}, "--root and --machine both given"},
		{"format", []string{"--machine", "hgx-h100", "--format", "yaml"}, `--format "yaml": accepted: table, json, nccl-xml`},
		{"cluster and machine", []string{"--cluster", "--machine", "hgx-h100"}, "--cluster shows the cluster, --root/--machine one node; pick one"},
		{"cluster xml", []string{"--cluster", "--format", "nccl-xml"}, "--format nccl-xml describes one node"},
		{"topology-conf alone", []string{"--topology-conf", "x.conf"}, "--topology-conf goes with --cluster"},
		{"malformed topology.conf", []string{"--cluster", "--topology-conf", "testdata/topo-cluster-bad.conf"}, `--topology-conf: testdata/topo-cluster-bad.conf:2: Switchs: unknown key "Switchs"`},
		{"argument", []string{"extra"}, `unexpected argument "extra"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, _, errs := runTopoCmd(t, append([]string{"topo"}, c.args...)...)
			if code != exitcode.Usage || !strings.Contains(errs, c.want) {
				t.Fatalf("exit %d, stderr %q, want exit %d and %q", code, errs, exitcode.Usage, c.want)
			}
		})
	}
}

// On this machine (no GPU, no driver) the live path still works from sysfs
// and says once why NVLink is missing.
func TestTopoLive(t *testing.T) {
	if _, err := os.Stat("/sys/bus/pci/devices"); err != nil {
		t.Skip("no /sys/bus/pci/devices here")
	}
	code, out, errs := runTopoCmd(t, "topo", "--format", "json")
	if code != exitcode.OK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var n topo.Node
	if err := json.Unmarshal([]byte(out), &n); err != nil {
		t.Fatal(err)
	}
	if n.Root != "/" {
		t.Errorf("root %q", n.Root)
	}
	if len(n.GPUs) == 0 && n.Source != "sysfs" {
		t.Errorf("no GPUs but source %q", n.Source)
	}
}

func TestTopoClusterFromFile(t *testing.T) {
	code, out, errs := runTopoCmd(t, "topo", "--cluster", "--topology-conf", "testdata/topology-interleaved-64.conf")
	if code != exitcode.OK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	golden.CheckString(t, filepath.Join("testdata", "topo-cluster-interleaved-64.golden"), out)
	code, out, errs = runTopoCmd(t, "topo", "--cluster", "--topology-conf", "testdata/topology-interleaved-64.conf", "--format", "json")
	if code != exitcode.OK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var v clusterJSON
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatal(err)
	}
	if v.Levels != 2 || len(v.Nodes) != 64 || len(v.Switches) != 5 || v.Switches[1].Nodes != "node[002,006,010,014,018,022,026,030,034,038,042,046,050,054,058,062]" {
		t.Fatalf("cluster json: %+v", v)
	}
}

// Outside a Slurm installation --cluster says what is missing and how to
// read a file instead.
func TestTopoClusterWithoutScontrol(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	code, _, errs := cli{slurm: slurm.New()}.run("topo", "--cluster")
	if code != exitcode.Slurm || !strings.Contains(errs, "scontrol not found") || !strings.Contains(errs, "--topology-conf FILE") {
		t.Fatalf("exit %d: %s", code, errs)
	}
}

func TestTopoCapture(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cap")
	code, out, errs := runTopoCmd(t, "topo", "--capture", dir)
	if code != exitcode.OK || !strings.Contains(out, "trainrun topo --root "+dir) {
		t.Fatalf("exit %d: %s %s", code, out, errs)
	}
	code, live, _ := runTopoCmd(t, "topo")
	code2, fromCapture, errs := runTopoCmd(t, "topo", "--root", dir)
	if code != exitcode.OK || code2 != exitcode.OK {
		t.Fatalf("exit %d/%d: %s", code, code2, errs)
	}
	// Same report but for where it was read from and the NVML line (the
	// capture has no nvml.json on a machine without a driver).
	strip := func(s string) string {
		var keep []string
		for _, l := range strings.Split(s, "\n") {
			if !strings.Contains(l, "No NVIDIA GPU") && !strings.Contains(l, "NVLink:") {
				keep = append(keep, l)
			}
		}
		return strings.Join(keep, "\n")
	}
	if strip(live) != strip(fromCapture) {
		t.Fatalf("live:\n%s\ncapture:\n%s", live, fromCapture)
	}
	code, _, errs = runTopoCmd(t, "topo", "--capture", dir)
	if code != exitcode.Usage || !strings.Contains(errs, "not empty") {
		t.Fatalf("second capture into the same dir: exit %d %s", code, errs)
	}
}
