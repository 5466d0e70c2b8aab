package plan

import (
	"fmt"

	"github.com/trainrun/trainrun/internal/units"
)

// The traffic model behind placement: which link level each byte of a
// training step crosses.
//
// Input volumes are the planner's Traffic: bytes ONE GPU sends per optimizer
// step in each kind of group. They become directed edges between ranks:
//
//   - TP, CP and DP are rings (NCCL ring all-reduce / all-gather /
//     reduce-scatter; ring attention for CP). The DP ring is Megatron's
//     dp-cp group (gradients are reduced over data and context parallel
//     ranks together, cp varying fastest), as the planner sizes Traffic.DP;
//     expert gradients' smaller expert-data-parallel groups are not told
//     apart. In a ring of n ≥ 2 ranks every
//     rank sends all its bytes to its successor, so each of the n edges
//     (i → i+1 mod n, in communicator rank order) carries the per-GPU volume.
//     NCCL orders the nodes of a ring by their ranks (node ids follow first
//     appearance in rank order), so the edges that leave a node are exactly
//     the consecutive pairs (in rank order) on different nodes. A ring whose
//     members sit in k ≥ 2 contiguous runs of leaves crosses a leaf
//     boundary on k edges; with members in one leaf it crosses none; with
//     members alternating between leaves (Slurm's order on an interleaved
//     hostlist) every edge does. A ring edge between two nodes of one leaf
//     crosses only that leaf switch.
//   - PP is a chain of point-to-point transfers: the boundary between stage
//     p and p+1 carries the activations forward and the same-sized gradients
//     back, which is what an interior stage GPU sends in total, so each
//     boundary edge carries Traffic.PP (end stages send half of it). With an
//     interleaved schedule (VPP = v > 1) the model chunks wrap from the last
//     stage to the first v−1 times out of v, so the wrap edge carries
//     Traffic.PP·(v−1)/v.
//   - EP is an all-to-all: each rank sends Traffic.EP/(EP−1) to each other
//     member of its expert group.
//
// Each edge is counted once, at the slowest level it crosses: the same node
// (NVLink, or PCIe when the node has no NVLink), the same NVLink block (MNNVL:
// NVLink), the same leaf switch (leaf), different leaves (spine). So the four
// numbers add up to the bytes all GPUs send per step, whatever the placement.
//
// Not modelled: NCCL's tree/NVLS algorithms, PXN relays, and rail-crossing
// inside a leaf (placement keeps peers rail-aligned, so none is expected).

// LinkBytes is the bytes per training step that cross each level, summed
// over all GPUs.
type LinkBytes struct {
	NVLink float64 `json:"nvlink_bytes"`
	PCIe   float64 `json:"pcie_bytes"`
	Leaf   float64 `json:"leaf_bytes"`
	Spine  float64 `json:"spine_bytes"`
}

// Total is every byte sent, whichever link carries it.
func (b LinkBytes) Total() float64 { return b.NVLink + b.PCIe + b.Leaf + b.Spine }

// link levels
const (
	lvNVLink = iota
	lvPCIe
	lvLeaf
	lvSpine
	numLevels
)

// fewerSlowBytes orders placements: fewer spine bytes, then fewer leaf bytes, then
// fewer PCIe bytes (all on the slower, shared links).
func fewerSlowBytes(a, b LinkBytes) bool {
	if a.Spine != b.Spine {
		return a.Spine < b.Spine
	}
	if a.Leaf != b.Leaf {
		return a.Leaf < b.Leaf
	}
	return a.PCIe < b.PCIe
}

func (t *placeTopo) level(a, b int32) int {
	switch {
	case a == b:
		if t.pcieOnly[a] {
			return lvPCIe
		}
		return lvNVLink
	case t.block[a] >= 0 && t.block[a] == t.block[b]:
		return lvNVLink
	case t.leaf[a] == t.leaf[b]:
		return lvLeaf
	default:
		return lvSpine
	}
}

// edgeCounts counts directed edges per level for each group kind; counts
// are integers so that totals are exact multiples of the per-edge volumes.
type edgeCounts struct {
	tp, cp, dp, pp, ppWrap, ep [numLevels]int64
}

func countEdges(l Layout, t *placeTopo, nodeOf []int32) edgeCounts {
	var c edgeCounts
	sCP, sDP, sPP := l.TP, l.TP*l.CP, l.TP*l.CP*l.DP
	// Nested loops in rank order (tp fastest) instead of dividing per rank.
	r := 0
	for pp := 0; pp < l.PP; pp++ {
		for dp := 0; dp < l.DP; dp++ {
			for cp := 0; cp < l.CP; cp++ {
				for tp := 0; tp < l.TP; tp++ {
					n := nodeOf[r]
					if l.TP > 1 {
						s := r + 1
						if tp == l.TP-1 {
							s = r - tp
						}
						c.tp[t.level(n, nodeOf[s])]++
					}
					if l.CP > 1 {
						s := r + sCP
						if cp == l.CP-1 {
							s = r - cp*sCP
						}
						c.cp[t.level(n, nodeOf[s])]++
					}
					if l.DP*l.CP > 1 {
						// Gradients are reduced over the data-parallel group
						// with CP folded in (Megatron's dp-cp group: ranks
						// varying cp and dp, cp fastest), so the ring runs
						// over y = cp + CP·dp.
						var s int
						switch {
						case cp < l.CP-1:
							s = r + sCP
						case dp < l.DP-1:
							s = r - cp*sCP + sDP
						default:
							s = r - cp*sCP - dp*sDP
						}
						c.dp[t.level(n, nodeOf[s])]++
					}
					if l.PP > 1 {
						if pp < l.PP-1 {
							c.pp[t.level(n, nodeOf[r+sPP])]++
						} else if l.VPP > 1 {
							c.ppWrap[t.level(n, nodeOf[r-(l.PP-1)*sPP])]++
						}
					}
					r++
				}
			}
		}
	}
	if l.EP > 1 {
		// Expert group: ranks tp + TP·(EP·g + e + CP·DP·pp), e = 0..EP−1.
		// Pairwise: O(world·EP), fine for EP ≤ a few hundred.
		members := make([]int32, l.EP)
		groups := l.CP * l.DP / l.EP
		for p := 0; p < l.PP; p++ {
			for g := 0; g < groups; g++ {
				for tp := 0; tp < l.TP; tp++ {
					for e := 0; e < l.EP; e++ {
						members[e] = nodeOf[tp+l.TP*(l.EP*g+e+l.CP*l.DP*p)]
					}
					for i, a := range members {
						for j, b := range members {
							if i != j {
								c.ep[t.level(a, b)]++
							}
						}
					}
				}
			}
		}
	}
	return c
}

func linkBytes(l Layout, tr Traffic, t *placeTopo, nodeOf []int32) LinkBytes {
	c := countEdges(l, t, nodeOf)
	var lv [numLevels]float64
	wrap := 0.0
	if l.VPP > 1 {
		wrap = tr.PP * float64(l.VPP-1) / float64(l.VPP)
	}
	epW := 0.0
	if l.EP > 1 {
		epW = tr.EP / float64(l.EP-1)
	}
	for i := 0; i < numLevels; i++ {
		lv[i] = float64(c.tp[i])*tr.TP + float64(c.cp[i])*tr.CP + float64(c.dp[i])*tr.DP +
			float64(c.pp[i])*tr.PP + float64(c.ppWrap[i])*wrap + float64(c.ep[i])*epW
	}
	return LinkBytes{NVLink: lv[lvNVLink], PCIe: lv[lvPCIe], Leaf: lv[lvLeaf], Spine: lv[lvSpine]}
}

// PlacementTraffic scores any rank→node assignment with the placement's
// model: nodeOf[rank] is an index into nodes. It is what Place uses for its
// candidates and the baseline, exported so callers can score other launches.
func PlacementTraffic(l Layout, tr Traffic, nodes []PlaceNode, nodeOf []int) (LinkBytes, error) {
	l = normLayout(l)
	world := l.TP * l.CP * l.DP * l.PP
	if len(nodeOf) != world {
		return LinkBytes{}, fmt.Errorf("placement traffic: %d ranks given, layout has %d", len(nodeOf), world)
	}
	if (l.CP*l.DP)%l.EP != 0 {
		return LinkBytes{}, fmt.Errorf("placement traffic: ep=%d must divide cp·dp = %d", l.EP, l.CP*l.DP)
	}
	n32 := make([]int32, world)
	for r, n := range nodeOf {
		if n < 0 || n >= len(nodes) {
			return LinkBytes{}, fmt.Errorf("placement traffic: rank %d on node index %d; %d nodes", r, n, len(nodes))
		}
		n32[r] = int32(n)
	}
	return linkBytes(l, tr, buildTopo(nodes), n32), nil
}

// explainPlacement says, in figures, why this candidate won.
func explainPlacement(l Layout, G int, tr Traffic, c candidate, got, base LinkBytes, t *placeTopo) []string {
	var why []string
	switch {
	case l.TP == 1:
		// no tensor parallelism: nothing to keep on NVLink
	case l.TP <= G:
		why = append(why, fmt.Sprintf("TP=%d inside one node (%d GPUs): tensor-parallel traffic stays on NVLink", l.TP, G))
	default:
		why = append(why, fmt.Sprintf("TP=%d spans %d nodes of %d GPUs: kept on consecutive nodes of one NVLink block where the allocation has blocks", l.TP, l.TP/G, G))
	}
	if l.EP > 1 {
		why = append(why, fmt.Sprintf("EP=%d groups placed before DP and PP so the all-to-all spans as few nodes as possible", l.EP))
	}
	crossDP, crossPP := false, false
	for _, f := range c.outer {
		crossDP = crossDP || f.dim == dimDP
		crossPP = crossPP || f.dim == dimPP
	}
	switch {
	case c.nodeOrder == "slurm" && !t.hasLeaves:
		// one switch: nothing to choose across nodes
	case crossDP && crossPP:
		prim, sec := "DP", "PP"
		pb, sb := tr.DP, tr.PP
		if c.primary == dimPP {
			prim, sec, pb, sb = "PP", "DP", tr.PP, tr.DP
		}
		why = append(why, fmt.Sprintf("across nodes %s groups are kept together first, then %s (%s %s, %s %s per GPU per step): of the orders scored, the one with the fewest spine bytes, then leaf bytes",
			prim, sec, prim, units.Bytes(pb), sec, units.Bytes(sb)))
	case crossDP || crossPP:
		d := "DP"
		if crossPP {
			d = "PP"
		}
		why = append(why, fmt.Sprintf("only %s crosses nodes; nodes ordered %s so its groups share leaves where the allocation allows", d, c.nodeOrder))
	}
	if t.hasLeaves {
		if base.Spine > 0 {
			why = append(why, fmt.Sprintf("spine bytes per step %s vs %s in Slurm's block order (%.1f%% less)",
				units.Bytes(got.Spine), units.Bytes(base.Spine), 100*(base.Spine-got.Spine)/base.Spine))
		} else {
			why = append(why, fmt.Sprintf("spine bytes per step %s (Slurm's block order: none either)", units.Bytes(got.Spine)))
		}
	} else {
		why = append(why, "one switch (no topology given): only NVLink versus network is weighed")
	}
	return why
}
