package run

import (
	"strings"
	"testing"

	"github.com/trainrun/trainrun/topo"
	"github.com/trainrun/trainrun/wrapper/internal/launch"
)

// islands is a node of 8 GPUs in two NVLink islands of 4 (0-3, 4-7), the
// islands joined over the SMP interconnect only.
func islands(nvlink bool) *topo.Node {
	n := &topo.Node{}
	for i := 0; i < 8; i++ {
		n.GPUs = append(n.GPUs, topo.GPU{Index: i})
	}
	n.GPULinks = make([][]topo.Link, 8)
	for i := range n.GPULinks {
		n.GPULinks[i] = make([]topo.Link, 8)
		for j := range n.GPULinks[i] {
			switch {
			case i == j:
				n.GPULinks[i][j] = topo.Link{Type: topo.PathSelf}
			case i/4 == j/4 && nvlink:
				n.GPULinks[i][j] = topo.Link{Type: topo.PathNVLink, NVLinks: 4}
			case i/4 == j/4:
				n.GPULinks[i][j] = topo.Link{Type: topo.PathPIX}
			default:
				n.GPULinks[i][j] = topo.Link{Type: topo.PathSYS}
			}
		}
	}
	return n
}

func tpSlots(node string, gpus ...int) []rankSlot {
	var s []rankSlot
	for i, g := range gpus {
		s = append(s, rankSlot{Rank: i, Node: node, LocalRank: i, GPU: g, TP: i})
	}
	return s
}

func TestTPSlowLinks(t *testing.T) {
	facts := map[string]launch.NodeFacts{"n1": {Topo: islands(true)}, "pcie": {Topo: islands(false)}, "bare": {}}
	if w := tpSlowLinks(tpSlots("n1", 0, 1, 2, 3), facts, 4); w != nil {
		t.Errorf("a TP group inside one NVLink island: %q", w)
	}
	w := tpSlowLinks(tpSlots("n1", 2, 3, 4, 5), facts, 4)
	if len(w) != 1 || !strings.Contains(w[0], "on n1 has GPUs 2,3,4,5: 2 and 4 are linked by SYS, not NVLink") {
		t.Errorf("a partial node across the islands: %q", w)
	}
	// No NVLink anywhere: PCIe is the node's fabric, nothing was split.
	if w := tpSlowLinks(tpSlots("pcie", 2, 3, 4, 5), facts, 4); w != nil {
		t.Errorf("PCIe-only node: %q", w)
	}
	if w := tpSlowLinks(tpSlots("bare", 2, 3, 4, 5), facts, 4); w != nil {
		t.Errorf("unprobed node: %q", w)
	}
	// Unknown GPU indices (-1: not probed per rank) say nothing.
	if w := tpSlowLinks(tpSlots("n1", -1, -1), facts, 4); w != nil {
		t.Errorf("unknown GPUs: %q", w)
	}
	// Two groups (dp=0 and dp=1), both split; max 1.
	s := append(tpSlots("n1", 2, 4), tpSlots("n1", 3, 5)...)
	s[2].DP, s[3].DP = 1, 1
	if w := tpSlowLinks(s, facts, 1); len(w) != 2 || !strings.HasPrefix(w[1], "... more") {
		t.Errorf("capped: %q", w)
	}
}
