package spank

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trainrun/trainrun/topo"
)

// The plugin on GB200 NVL72 trays (the built-in gb200-nvl72 capture, 4 GPUs
// a tray) for a 4-tray step planned with TP=8: each TP group spans two
// trays. Without a block model the tray's own clique is taken for every
// tray (a note says so); with topology/block naming two racks that Slurm
// interleaves (gb0 gb1 gb2 gb3: racks A B A B), each tray's tasks get ranks
// whose TP peers are on a tray of the same rack, computed on each tray alone.
func TestComputeStepGB200Cliques(t *testing.T) {
	root, node := machine(t, "gb200-nvl72")
	if node.NVLinkDomain() == "" || len(node.GPUs) != 4 {
		t.Fatalf("capture: %d GPUs, clique %q", len(node.GPUs), node.NVLinkDomain())
	}
	conf := filepath.Join(t.TempDir(), "topology.conf")
	if err := os.WriteFile(conf, []byte("BlockName=rackA Nodes=gb[0,2]\nBlockName=rackB Nodes=gb[1,3]\nBlockSizes=2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	racks, err := topo.LoadTopologyConf(conf)
	if err != nil {
		t.Fatal(err)
	}
	hosts := []string{"gb0", "gb1", "gb2", "gb3"}
	rack := map[string]string{"gb0": "A", "gb2": "A", "gb1": "B", "gb3": "B"}
	for _, tc := range []struct {
		name    string
		cluster *topo.Cluster
	}{{"one clique", nil}, {"two racks interleaved", racks}} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Config{Policy: policyConfig(t, "").Policy, CacheDir: t.TempDir(), Cluster: tc.cluster}
			r := resolveWith(t, c, map[string]string{"train-model": "llama3-8b", "train-batch": "64x8192", "train-layout": "tp=8"})
			nodeOf := map[int]string{}
			for id, h := range hosts {
				st := Step{JobID: 42, StepID: 1, NodeID: id, NNodes: 4, LocalTasks: 4, TotalTasks: 16, Nodelist: "gb[0-3]",
					NodeAddrs: []string{"10.20.0.11"}, Root: root}
				tasks, notes, err := ComputeStep(c, r, st, node)
				if err != nil {
					t.Fatal(err)
				}
				if tp, _ := lookup(tasks[0].Vars, "TRAINRUN_TP"); tp != "8" {
					t.Fatalf("TRAINRUN_TP=%s, want the pinned 8", tp)
				}
				assumed := strings.Contains(strings.Join(notes, "\n"), "NVLink clique "+node.NVLinkDomain()+" of this node taken for all 4 nodes")
				if assumed != (tc.cluster == nil) {
					t.Fatalf("clique assumed %v with cluster %v; notes %q", assumed, tc.cluster != nil, notes)
				}
				for _, task := range tasks {
					nodeOf[task.Rank] = h
				}
			}
			if len(nodeOf) != 16 {
				t.Fatalf("ranks %v", nodeOf)
			}
			for r := 0; r < 16; r++ {
				peer := r ^ 4 // same TP group, the other tray's half
				if nodeOf[r] == nodeOf[peer] {
					t.Fatalf("rank %d and TP peer %d both on %s: TP=8 must span two trays", r, peer, nodeOf[r])
				}
				if tc.cluster != nil && rack[nodeOf[r]] != rack[nodeOf[peer]] {
					t.Fatalf("rank %d on %s and its TP peer %d on %s are in different racks (%v)", r, nodeOf[r], peer, nodeOf[peer], nodeOf)
				}
			}
		})
	}
}
