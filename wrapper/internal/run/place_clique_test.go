package run

import (
	"testing"

	"github.com/trainrun/trainrun/internal/slurm"
	"github.com/trainrun/trainrun/plan"
	"github.com/trainrun/trainrun/topo"
	"github.com/trainrun/trainrun/topo/snapshot"
	"github.com/trainrun/trainrun/wrapper/internal/launch"
)

// trainrun run's place phase with probe facts from four GB200 NVL72 trays
// (the built-in gb200-nvl72 capture, 4 GPUs each) of two racks, which Slurm
// interleaves (a0 b0 a1 b1): rack b's trays report another NVLink clique.
// TP=8 spans two trays; every TP group is placed on two trays of one
// clique, so it rides multi-node NVLink and never crosses racks.
func TestPlaceRanksGB200Cliques(t *testing.T) {
	dir, cleanup, err := snapshot.UnpackTemp("gb200-nvl72")
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	tray := func(clique uint32) *topo.Node {
		n, err := topo.Discover(topo.Options{Root: dir})
		if err != nil {
			t.Fatal(err)
		}
		for i := range n.GPUs {
			if clique != 0 {
				n.GPUs[i].Fabric.CliqueID = clique
			}
		}
		return n
	}
	a := &slurm.Allocation{Nodes: []string{"a0", "b0", "a1", "b1"}, TasksPerNode: 4, GPUsPerNode: 4}
	facts := map[string]launch.NodeFacts{}
	for _, h := range a.Nodes {
		f := launch.NodeFacts{Node: h, GPUs: []int{0, 1, 2, 3}, Topo: tray(0)}
		if h[0] == 'b' {
			f.Topo = tray(7)
		}
		facts[h] = f
	}
	if facts["a0"].Topo.NVLinkDomain() == "" || facts["a0"].Topo.NVLinkDomain() == facts["b0"].Topo.NVLinkDomain() {
		t.Fatalf("cliques: a %q, b %q", facts["a0"].Topo.NVLinkDomain(), facts["b0"].Topo.NVLinkDomain())
	}
	l := plan.Layout{TP: 8, PP: 1, VPP: 1, CP: 1, EP: 1, DP: 2}
	slots, p, notes, err := placeRanks(a, l, plan.Traffic{TP: 1e9, DP: 1e8}, facts, nil)
	if err != nil || p == nil {
		t.Fatalf("placeRanks: %v (notes %v)", err, notes)
	}
	for _, s := range slots {
		peer := slots[s.Rank^4] // same TP group, the other tray's half
		if s.Node[0] != peer.Node[0] {
			t.Fatalf("rank %d on %s and TP peer %d on %s are in different cliques (order %s)", s.Rank, s.Node, peer.Rank, peer.Node, p.Order)
		}
	}
	if p.Traffic.NVLink == 0 || p.Traffic.NVLink <= p.Traffic.Leaf {
		t.Fatalf("TP traffic not on NVLink: %+v", p.Traffic)
	}
}
