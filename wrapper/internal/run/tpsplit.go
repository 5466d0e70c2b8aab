package run

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/trainrun/trainrun/topo"
	"github.com/trainrun/trainrun/wrapper/internal/launch"
)

// tpSlowLinks says which TP groups Slurm's pick of GPUs split across a slow
// link: on a node whose probe shows NVLink between some of its GPUs, a TP
// group whose GPUs are not all NVLink-connected to each other (a partial
// node got GPUs of two NVLink islands, or of two sockets). One line per
// such group, at most max; nil when the nodes were not probed.
func tpSlowLinks(slots []rankSlot, facts map[string]launch.NodeFacts, max int) []string {
	type key struct {
		node          string
		cp, dp, pp, e int
	}
	groups := map[key][]int{} // GPU indices of each TP group on each node
	var order []key
	for _, s := range slots {
		k := key{s.Node, s.CP, s.DP, s.PP, 0}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], s.GPU)
	}
	var out []string
	for _, k := range order {
		f, ok := facts[k.node]
		if !ok || f.Topo == nil || len(groups[k]) < 2 || !hasNVLink(f.Topo) {
			continue
		}
		worst, a, b := worstLink(f.Topo, groups[k])
		if worst <= topo.PathNVLink {
			continue
		}
		if len(out) == max {
			out = append(out, "... more TP groups split (see plan.json)")
			break
		}
		gpus := append([]int(nil), groups[k]...)
		sort.Ints(gpus)
		out = append(out, fmt.Sprintf("TP group (dp=%d pp=%d cp=%d) on %s has GPUs %s: %d and %d are linked by %s, not NVLink (Slurm's pick of GPUs split it; whole nodes, or --gres-flags=enforce-binding, keep TP groups on NVLink)",
			k.dp, k.pp, k.cp, k.node, joinInts(gpus), a, b, worst))
	}
	return out
}

func hasNVLink(n *topo.Node) bool {
	for i := range n.GPULinks {
		for j := range n.GPULinks[i] {
			if i != j && n.GPULinks[i][j].Type == topo.PathNVLink {
				return true
			}
		}
	}
	return false
}

// worstLink is the slowest link between two of the GPUs (node indices) and
// which two; PathUnknown when an index is not among the node's GPUs.
func worstLink(n *topo.Node, gpus []int) (topo.PathType, int, int) {
	pos := map[int]int{}
	for i, g := range n.GPUs {
		pos[g.Index] = i
	}
	worst, wa, wb := topo.PathSelf, -1, -1
	for x := range gpus {
		for y := x + 1; y < len(gpus); y++ {
			i, ok1 := pos[gpus[x]]
			j, ok2 := pos[gpus[y]]
			if !ok1 || !ok2 || i >= len(n.GPULinks) || j >= len(n.GPULinks[i]) {
				return topo.PathUnknown, gpus[x], gpus[y]
			}
			if t := n.GPULinks[i][j].Type; t > worst {
				worst, wa, wb = t, gpus[x], gpus[y]
			}
		}
	}
	return worst, wa, wb
}

// joinInts is v as "1,2,3".
func joinInts(v []int) string {
	var s []string
	for _, x := range v {
		s = append(s, strconv.Itoa(x))
	}
	return strings.Join(s, ",")
}
