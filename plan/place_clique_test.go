package plan

import (
	"testing"

	"github.com/trainrun/trainrun/topo"
	"github.com/trainrun/trainrun/topo/snapshot"
)

// GB200 NVL72 trays have 4 GPUs; TP=8 spans two trays. When the trays'
// GPUs report one NVLink clique (the built-in gb200-nvl72 capture), the TP
// groups ride multi-node NVLink; two trays of another clique (another
// rack) do not share it, so TP is kept within each clique's pair.
func TestPlaceTPAcrossTraysOfOneClique(t *testing.T) {
	dir, cleanup, err := snapshot.UnpackTemp("gb200-nvl72")
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	n, err := topo.Discover(topo.Options{Root: dir})
	if err != nil {
		t.Fatal(err)
	}
	clique := n.NVLinkDomain()
	if clique == "" || len(n.GPUs) != 4 {
		t.Fatalf("capture: %d GPUs, clique %q", len(n.GPUs), clique)
	}
	other := "00000000-0000-0000-0000-00000000beef.7"
	// Slurm interleaves the racks: a0 b0 a1 b1.
	hosts := []string{"a0", "b0", "a1", "b1"}
	domain := map[string]string{"a0": clique, "a1": clique, "b0": other, "b1": other}
	in := PlaceInput{Layout: Layout{TP: 8, CP: 1, EP: 1, DP: 2, PP: 1}, GPUsPerNode: 4,
		Traffic: Traffic{TP: 1e9, DP: 1e8}}

	plain, err := PlaceNodes(hosts, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	in.Nodes = plain
	without, err := Place(in)
	if err != nil {
		t.Fatal(err)
	}
	withNodes, _ := PlaceNodes(hosts, nil, nil)
	NVLinkBlocks(withNodes, domain)
	if withNodes[0].Block == "" || withNodes[0].Block != withNodes[2].Block || withNodes[0].Block == withNodes[1].Block {
		t.Fatalf("blocks %+v", withNodes)
	}
	in.Nodes = withNodes
	with, err := Place(in)
	if err != nil {
		t.Fatal(err)
	}
	// 16 ranks × 7 peers × 1 GB / 7 = 16 GB of TP traffic per step; half of
	// each group's peers are on the other tray.
	if without.Traffic.NVLink >= with.Traffic.NVLink || with.Traffic.Leaf >= without.Traffic.Leaf {
		t.Fatalf("cliques did not move TP onto NVLink: without %+v, with %+v", without.Traffic, with.Traffic)
	}
	for _, r := range with.Ranks {
		peer := with.Ranks[r.Rank^4] // same TP group, the other tray's half
		if domain[r.Node] != domain[peer.Node] {
			t.Fatalf("rank %d on %s and TP peer %d on %s are in different cliques (order %s)", r.Rank, r.Node, peer.Rank, peer.Node, with.Order)
		}
	}
}
