package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/trainrun/trainrun/plan"
	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
	"github.com/trainrun/trainrun/wrapper/internal/planflags"
)

// The acceptance case through the command's renderer: 64 nodes whose
// hostnames alternate between 4 leaf switches (testdata topology.conf),
// TP8·PP4·DP16 with DP traffic above 3× PP traffic. Expected figures, counted
// by hand (see plan/place_test.go): placement 384·PP on the spine (PP chains
// across leaves, DP rings inside), Slurm's order 512·DP (every DP ring edge
// alternates leaves).
func TestRenderPlacementInterleavedLeaves(t *testing.T) {
	tr := plan.Traffic{TP: 1e12, DP: 8e9, PP: 2e9}
	e := &plan.Evaluation{Layout: plan.Layout{TP: 8, PP: 4, DP: 16, CP: 1, EP: 1, VPP: 1}, Traffic: tr}
	o := &planflags.PlaceOptions{Nodelist: "node[001-064]", TopologyConf: "testdata/topology-interleaved-64.conf"}
	render := func(format string) string {
		env, out, errb := cli{}.env()
		if err := renderPlacement(env, format, o, plan.Model{}, plan.Job{}, plan.Cluster{GPUsPerNode: 8}, e); err != nil {
			t.Fatalf("%s: %v (%s)", format, err, errb.String())
		}
		return out.String()
	}
	var p struct {
		Ranks []struct {
			Rank, LocalRank, GPU, TP, CP, EP, DP, PP int
			Node                                     string
		} `json:"ranks"`
		Traffic  map[string]float64 `json:"traffic"`
		Baseline map[string]float64 `json:"baseline"`
	}
	if err := json.Unmarshal([]byte(render("placement")), &p); err != nil {
		t.Fatal(err)
	}
	if len(p.Ranks) != 512 {
		t.Fatalf("%d ranks", len(p.Ranks))
	}
	if got, want := p.Traffic["spine_bytes"], 384*tr.PP; got != want {
		t.Errorf("spine_bytes = %g, want %g", got, want)
	}
	if got, want := p.Baseline["spine_bytes"], 512*tr.DP; got != want {
		t.Errorf("baseline spine_bytes = %g, want %g", got, want)
	}
	for _, k := range []string{"nvlink_bytes", "pcie_bytes", "leaf_bytes", "spine_bytes"} {
		if _, ok := p.Traffic[k]; !ok {
			t.Errorf("traffic lacks %s", k)
		}
	}
	hosts := strings.Split(strings.TrimSuffix(render("hostfile"), "\n"), "\n")
	if len(hosts) != 512 {
		t.Fatalf("hostfile has %d lines", len(hosts))
	}
	for i, h := range hosts {
		if h != p.Ranks[i].Node {
			t.Fatalf("hostfile line %d = %s, placement says %s", i, h, p.Ranks[i].Node)
		}
		if i%8 != 0 && h != hosts[i-1] {
			t.Fatalf("TP group of rank %d split: %s vs %s", i, hosts[i-1], h)
		}
	}
}

func TestRenderPlacementErrors(t *testing.T) {
	e := &plan.Evaluation{Layout: plan.Layout{TP: 8, PP: 1, DP: 4}}
	cases := []struct {
		name string
		o    planflags.PlaceOptions
		vars map[string]string
		want string
	}{
		{"no nodes", planflags.PlaceOptions{}, nil, "pass --nodelist"},
		{"bad hostlist", planflags.PlaceOptions{Nodelist: "gpu[1-"}, nil, "--nodelist"},
		{"size mismatch", planflags.PlaceOptions{Nodelist: "gpu[1-3]"}, nil, "uses 32 GPUs"},
		{"missing topology file", planflags.PlaceOptions{Nodelist: "gpu[1-4]", TopologyConf: "testdata/none.conf"}, nil, "--topology-conf"},
		{"node under no switch", planflags.PlaceOptions{Nodelist: "gpu[1-4]", TopologyConf: "testdata/topology-interleaved-64.conf"}, nil, "under no switch"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env, _, _ := cli{vars: tc.vars}.env()
			err := renderPlacement(env, "hostfile", &tc.o, plan.Model{}, plan.Job{}, plan.Cluster{GPUsPerNode: 8}, e)
			if err == nil || !strings.Contains(err.Error(), tc.want) || exitCodeOf(err) != exitcode.Usage {
				t.Fatalf("err = %v (code %d), want usage error containing %q", err, exitCodeOf(err), tc.want)
			}
		})
	}
}

// The whole command: `trainrun plan` with a pinned layout, the node list and
// topology.conf prints the hostfile srun --distribution=arbitrary reads.
func TestPlanHostfileCommand(t *testing.T) {
	out, errs, code := runWithEnv(t, nil, "plan", "--model", "llama3-70b", "--gpu", "h100-sxm", "--gpus", "512",
		"--seq-len", "8192", "--global-batch", "1024", "--fix", "tp=8,pp=4,dp=16,cp=1,ep=1,vpp=1,mbs=1,recompute=selective,zero=1",
		"--nodelist", "node[001-064]", "--topology-conf", "testdata/topology-interleaved-64.conf", "--format", "hostfile")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	hosts := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(hosts) != 512 {
		t.Fatalf("%d lines", len(hosts))
	}
	// With the planner's volumes for this model DP outweighs 3× PP, so each
	// DP ring (ranks tp + 8·dp + 128·pp, dp = 0..15) lives in one leaf:
	// node k is on leaf (k−1) mod 4.
	leafOf := func(h string) int {
		var k int
		fmt.Sscanf(h, "node%d", &k)
		return (k - 1) % 4
	}
	for pp := 0; pp < 4; pp++ {
		l := leafOf(hosts[128*pp])
		for dp := 0; dp < 16; dp++ {
			if got := leafOf(hosts[8*dp+128*pp]); got != l {
				t.Fatalf("DP ring pp=%d: rank %d on leaf %d, rank %d on leaf %d", pp, 128*pp, l, 8*dp+128*pp, got)
			}
		}
	}
}

// Inside an allocation the nodes come from SLURM_JOB_NODELIST.
func TestRenderPlacementFromAllocation(t *testing.T) {
	env, out, _ := cli{vars: map[string]string{"SLURM_JOB_NODELIST": "gpu[07-08]"}}.env()
	e := &plan.Evaluation{Layout: plan.Layout{TP: 8, DP: 2}, Traffic: plan.Traffic{TP: 1, DP: 1}}
	if err := renderPlacement(env, "hostfile", &planflags.PlaceOptions{}, plan.Model{}, plan.Job{}, plan.Cluster{GPUsPerNode: 8}, e); err != nil {
		t.Fatal(err)
	}
	if want := strings.Repeat("gpu07\n", 8) + strings.Repeat("gpu08\n", 8); out.String() != want {
		t.Fatalf("hostfile = %q, want %q", out.String(), want)
	}
}
