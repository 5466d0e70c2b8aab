package plan

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Rank placement: which node, local rank and GPU each global rank gets.
//
// Rank numbering is Megatron-LM's RankGenerator with order "tp-cp-ep-dp-pp"
// (megatron/core/parallel_state.py, generate_masked_orthogonal_rank_groups:
// the first name in the order varies fastest). The dense generator has no EP
// dimension, so
//
//	rank = tp + TP·(cp + CP·(dp + DP·pp))
//
// with DP = Megatron's --data-parallel-size = world/(TP·CP·PP). Experts use a
// second generator (expert tensor parallel = TP, cp = 1, order "tp-ep-dp-pp"
// once cp is dropped): rank = tp + TP·(ep + EP·(edp + EDP·pp)). Both describe
// the same ranks, so an expert group is EP consecutive values of
// y = cp + CP·dp: ep = y mod EP (Megatron core ≥ 0.9; with CP = 1 this is also
// what the older single generator, where ep was a sub-dimension of dp, gave).
//
// Placement never changes those formulas: a framework that builds its groups
// from RANK gets exactly the groups the coordinates below name. Placement
// only decides where each rank runs.
//
// How it decides. The rank space is a mixed-radix number over the dimensions
// tp, cp, dp, pp; a placement is an order of "factors" (a dimension, or a
// split of one, innermost first) laid over the hardware's slot order (GPU
// slot within node, then nodes in a chosen order). The innermost factors
// fill exactly one node, so every group has the same set of local slots on
// every node it touches (rail alignment: a DP or PP peer on another node
// sits on the same local GPU index, hence the same rail). Inside a node the
// factors keep Megatron's order, so local ranks ascend with global rank, the
// way srun --distribution=arbitrary numbers SLURM_LOCALID.
//
//   - node fill: TP first (whole TP group on one node when TP ≤ GPUs per
//     node), then CP, then the part of DP that makes up one EP group (so the
//     all-to-all stays on NVLink where it fits), then DP or PP (both tried);
//   - across nodes: what is left of TP, CP and the EP group first, then DP
//     before PP or PP before DP (both tried);
//   - node order: Slurm's, grouped by leaf switch (and NVLink block), or
//     grouped and packed so that whole groups of the innermost cross-node
//     dimension fit inside one leaf before partial leaves are combined.
//
// Every candidate is scored with the same traffic model (place_traffic.go)
// on the planner's per-group volumes, and the one with the fewest spine
// bytes, then leaf bytes, wins (ties: the first scored). Slurm's own block
// order under Megatron's numbering is scored first whenever the node boundary
// falls between whole digits of that order (always with power-of-two
// degrees; not e.g. for tp=1 dp=6 pp=4 on 8-GPU nodes, where that order is not
// rail-aligned), so the result then never puts more bytes on the spine than
// the default launch; the property test asserts it. Cost: each candidate is
// O(ranks) to lay out and O(ranks·(4 + EP)) to score; at most 13 candidates.

// PlaceNode is one node of the allocation as placement sees it.
type PlaceNode struct {
	Name string
	// Leaf is the leaf switch above the node (topology.conf SwitchName whose
	// Nodes= list has it). "" on every node means one switch.
	Leaf string
	// Block is the NVLink domain beyond the node (topology/block BlockName,
	// an NVL72 rack's clique). "" = the node is its own NVLink domain.
	Block string
	// Rails[i] is the GPU (index in PCI bus order, as CUDA_DEVICE_ORDER=
	// PCI_BUS_ID numbers them) nearest to the node's rail-i compute NIC:
	// local rank i drives GPU Rails[i]. nil = identity.
	Rails []int
	// PCIeOnly is true when the node's GPUs have no NVLink between them.
	PCIeOnly bool
}

// PlaceInput is everything placement needs; it is pure data.
type PlaceInput struct {
	// Layout: TP, CP, EP, DP, PP and VPP are used. DP is Megatron's
	// data-parallel size (world / (TP·CP·PP)); EP must divide CP·DP.
	Layout      Layout
	GPUsPerNode int         // GPUs (and ranks) per node, the same on every node
	Nodes       []PlaceNode // in Slurm's order (SLURM_JOB_NODELIST expanded)
	Traffic     Traffic     // bytes one GPU sends per step in each group (planner)
}

// RankPlacement is where one global rank runs and its group coordinates.
type RankPlacement struct {
	Rank      int    `json:"rank"`
	Node      string `json:"node"`
	NodeRank  int    `json:"node_rank"`  // index of Node in Placement.Nodes (torchrun NODE_RANK)
	LocalRank int    `json:"local_rank"` // slot on the node; rail index of its GPU
	GPU       int    `json:"gpu"`        // GPU index in PCI bus order
	TP        int    `json:"tp"`
	CP        int    `json:"cp"`
	EP        int    `json:"ep"`
	DP        int    `json:"dp"`
	PP        int    `json:"pp"`
}

// Placement is the answer: the contract's `--format placement` object.
type Placement struct {
	Traffic  LinkBytes `json:"traffic"`  // this placement, bytes per step
	Baseline LinkBytes `json:"baseline"` // Slurm's block order on the same nodes
	// Order names the chosen factors innermost first ("tp8 | dp16 pp4"; "|"
	// is the node boundary) and the node order used.
	Order string   `json:"order"`
	Why   []string `json:"why"`
	// Nodes in NODE_RANK order: the node holding rank 0 first.
	Nodes []string        `json:"nodes"`
	Ranks []RankPlacement `json:"ranks"`
}

// Hostfile is what SLURM_HOSTFILE needs for srun --distribution=arbitrary:
// line i is the host of global rank i.
func (p *Placement) Hostfile() string {
	var b strings.Builder
	for _, r := range p.Ranks {
		b.WriteString(r.Node)
		b.WriteByte('\n')
	}
	return b.String()
}

const (
	dimTP = iota
	dimCP
	dimDP
	dimPP
	numDims
)

var dimNames = [numDims]string{"tp", "cp", "dp", "pp"}

// factor is one digit of the mixed-radix rank space: size values of one
// dimension, the next-higher digits of that dimension's coordinate.
type factor struct {
	dim, size int
}

// candidate is one way to lay the rank space over the hardware.
type candidate struct {
	inner, outer []factor // inner fills exactly one node
	nodeOrder    string   // "slurm", "grouped", "packed"
	order        []int    // node indices (into PlaceInput.Nodes) in hardware order
	primary      int      // the dimension put first across nodes (dimDP or dimPP)
}

// placeTopo is the cluster model reduced to integer ids.
type placeTopo struct {
	leaf, block []int32 // per node; block -1 = none
	pcieOnly    []bool
	hasLeaves   bool
}

// Place computes the placement. It is deterministic and allocates O(ranks).
func Place(in PlaceInput) (*Placement, error) {
	l := normLayout(in.Layout)
	G := in.GPUsPerNode
	N := len(in.Nodes)
	if G < 1 {
		return nil, fmt.Errorf("placement: GPUs per node %d: need at least 1", G)
	}
	if N == 0 {
		return nil, fmt.Errorf("placement: no nodes given; pass --nodelist or run inside an allocation")
	}
	world := l.TP * l.CP * l.DP * l.PP
	if world != N*G {
		return nil, fmt.Errorf("placement: layout tp=%d cp=%d dp=%d pp=%d needs %d GPUs; the allocation has %d nodes × %d GPUs = %d; change dp or the node count",
			l.TP, l.CP, l.DP, l.PP, world, N, G, N*G)
	}
	if (l.CP*l.DP)%l.EP != 0 {
		return nil, fmt.Errorf("placement: ep=%d must divide cp·dp = %d (Megatron builds expert groups from the data-parallel ranks)", l.EP, l.CP*l.DP)
	}
	if l.TP <= G && G%l.TP != 0 || l.TP > G && l.TP%G != 0 {
		return nil, fmt.Errorf("placement: tp=%d and %d GPUs per node: one must divide the other, or TP groups straddle nodes", l.TP, G)
	}
	seen := map[string]bool{}
	for i, n := range in.Nodes {
		if n.Name == "" {
			return nil, fmt.Errorf("placement: node %d has no name", i)
		}
		if seen[n.Name] {
			return nil, fmt.Errorf("placement: node %q appears twice in the node list", n.Name)
		}
		seen[n.Name] = true
		if n.Rails != nil {
			if len(n.Rails) != G {
				return nil, fmt.Errorf("placement: node %s: %d rails for %d GPUs per node", n.Name, len(n.Rails), G)
			}
			used := map[int]bool{}
			for _, g := range n.Rails {
				if g < 0 || used[g] {
					return nil, fmt.Errorf("placement: node %s: rail map %v is not a list of distinct GPU indices", n.Name, n.Rails)
				}
				used[g] = true
			}
		}
	}
	tp := buildTopo(in.Nodes)

	cands := candidates(l, G, in.Nodes, tp)
	nodeOf := make([]int32, world)
	slotOf := make([]int32, world)
	bestNode := make([]int32, world)
	bestSlot := make([]int32, world)
	best := -1
	var bestBytes LinkBytes
	for i := range cands {
		assign(&cands[i], l, G, nodeOf, slotOf)
		b := linkBytes(l, in.Traffic, tp, nodeOf)
		if best < 0 || fewerSlowBytes(b, bestBytes) {
			best, bestBytes = i, b
			copy(bestNode, nodeOf)
			copy(bestSlot, slotOf)
		}
	}
	c := cands[best]

	// Baseline: srun's block distribution under Megatron's numbering: rank r
	// on node r/G of Slurm's list.
	for r := range nodeOf {
		nodeOf[r] = int32(r / G)
	}
	base := linkBytes(l, in.Traffic, tp, nodeOf)

	p := &Placement{Traffic: bestBytes, Baseline: base, Ranks: make([]RankPlacement, world)}
	nodeRank := make([]int, N)
	for i := range nodeRank {
		nodeRank[i] = -1
	}
	for r := 0; r < world; r++ {
		ni := bestNode[r]
		if nodeRank[ni] < 0 {
			nodeRank[ni] = len(p.Nodes)
			p.Nodes = append(p.Nodes, in.Nodes[ni].Name)
		}
		slot := int(bestSlot[r])
		gpu := slot
		if rails := in.Nodes[ni].Rails; rails != nil {
			gpu = rails[slot]
		}
		co := coords(l, r)
		p.Ranks[r] = RankPlacement{
			Rank: r, Node: in.Nodes[ni].Name, NodeRank: nodeRank[ni], LocalRank: slot, GPU: gpu,
			TP: co.tp, CP: co.cp, EP: co.ep, DP: co.dp, PP: co.pp,
		}
	}
	p.Order = describeOrder(c)
	p.Why = explainPlacement(l, G, in.Traffic, c, bestBytes, base, tp)
	return p, nil
}

// normLayout treats zero degrees as 1.
func normLayout(l Layout) Layout {
	for _, d := range []*int{&l.TP, &l.CP, &l.EP, &l.DP, &l.PP, &l.VPP} {
		if *d < 1 {
			*d = 1
		}
	}
	return l
}

// Coords are a rank's group coordinates under Megatron's tp-cp-ep-dp-pp order.
type Coords struct{ tp, cp, ep, dp, pp int }

func coords(l Layout, r int) Coords {
	var c Coords
	c.tp = r % l.TP
	r /= l.TP
	c.cp = r % l.CP
	r /= l.CP
	c.dp = r % l.DP
	c.pp = r / l.DP
	c.ep = (c.cp + l.CP*c.dp) % l.EP
	return c
}

func buildTopo(nodes []PlaceNode) *placeTopo {
	t := &placeTopo{leaf: make([]int32, len(nodes)), block: make([]int32, len(nodes)), pcieOnly: make([]bool, len(nodes))}
	leafID := map[string]int32{}
	blockID := map[string]int32{}
	for i, n := range nodes {
		id, ok := leafID[n.Leaf]
		if !ok {
			id = int32(len(leafID))
			leafID[n.Leaf] = id
		}
		t.leaf[i] = id
		t.block[i] = -1
		if n.Block != "" {
			id, ok := blockID[n.Block]
			if !ok {
				id = int32(len(blockID))
				blockID[n.Block] = id
			}
			t.block[i] = id
		}
		t.pcieOnly[i] = n.PCIeOnly
	}
	t.hasLeaves = len(leafID) > 1
	return t
}

// candidates lists the factor orders and node orders worth scoring.
func candidates(l Layout, G int, nodes []PlaceNode, t *placeTopo) []candidate {
	deg := [numDims]int{l.TP, l.CP, l.DP, l.PP}
	var out []candidate
	groups := leafGroups(t)
	// Slurm's block order under Megatron's numbering, when it is rail-aligned
	// (the node boundary falls on a digit boundary): scoring it means the
	// result is never worse than the default launch.
	if inner, outer, ok := megatronFactors(deg, G); ok {
		c := candidate{inner: inner, outer: outer, nodeOrder: "slurm", order: identityOrder(len(nodes)), primary: dimDP}
		out = append(out, c)
	}
	for _, fillFirst := range []int{dimDP, dimPP} {
		inner, rest, epRest := nodeFill(deg, G, l)
		inner, rest = fillRest(inner, rest, G, fillFirst)
		for _, primary := range []int{dimDP, dimPP} {
			var outer []factor
			if rest[dimTP] > 1 {
				outer = append(outer, factor{dimTP, rest[dimTP]})
			}
			if rest[dimCP] > 1 {
				outer = append(outer, factor{dimCP, rest[dimCP]})
			}
			restDP := rest[dimDP]
			if e := gcd(epRest, restDP); e > 1 {
				// The rest of one EP group comes next, so the all-to-all spans
				// as few nodes as possible.
				outer = append(outer, factor{dimDP, e})
				restDP /= e
			}
			second := dimPP
			if primary == dimPP {
				second = dimDP
			}
			r := [numDims]int{dimDP: restDP, dimPP: rest[dimPP]}
			if r[primary] > 1 {
				outer = append(outer, factor{primary, r[primary]})
			}
			if r[second] > 1 {
				outer = append(outer, factor{second, r[second]})
			}
			// unit: nodes spanned by one group of the innermost cross-node
			// dimension; packing keeps such units inside one leaf.
			unit := 1
			for _, f := range outer {
				unit *= f.size
				if f.dim == primary || f.dim == second {
					break
				}
			}
			for _, no := range []string{"slurm", "grouped", "packed"} {
				c := candidate{inner: inner, outer: outer, nodeOrder: no, primary: primary}
				if no != "slurm" && !t.hasLeaves && !hasBlocks(t) {
					continue // one switch, no blocks: every order is the same
				}
				switch no {
				case "slurm":
					c.order = identityOrder(len(nodes))
				case "grouped":
					c.order = packedOrder(groups, len(nodes), 1)
				case "packed":
					c.order = packedOrder(groups, len(nodes), unit)
				}
				// The same factors over the same node order score the same:
				// keep the first (packing often leaves the grouped order as is).
				if slices.ContainsFunc(out, func(o candidate) bool {
					return slices.Equal(o.inner, c.inner) && slices.Equal(o.outer, c.outer) && slices.Equal(o.order, c.order)
				}) {
					continue
				}
				out = append(out, c)
			}
		}
	}
	return out
}

func hasBlocks(t *placeTopo) bool {
	for _, b := range t.block {
		if b >= 0 {
			return true
		}
	}
	return false
}

// megatronFactors splits Megatron's own order tp, cp, dp, pp at the node
// boundary; ok is false when the boundary cuts a digit unevenly (then
// Megatron's order on consecutive nodes is not rail-aligned).
func megatronFactors(deg [numDims]int, G int) (inner, outer []factor, ok bool) {
	room := G
	for d := 0; d < numDims; d++ {
		size := deg[d]
		if size == 1 {
			continue
		}
		if room == 1 {
			outer = append(outer, factor{d, size})
			continue
		}
		if room%size == 0 {
			inner = append(inner, factor{d, size})
			room /= size
			continue
		}
		if size%room != 0 {
			return nil, nil, false
		}
		inner = append(inner, factor{d, room})
		outer = append(outer, factor{d, size / room})
		room = 1
	}
	return inner, outer, room == 1
}

// nodeFill puts TP, then CP, then the DP digits of one EP group inside a
// node, as far as they go. It returns the inner factors, what is left of each
// dimension, and how much of the EP group (in DP digits) is still outside.
func nodeFill(deg [numDims]int, G int, l Layout) (inner []factor, rest [numDims]int, epRest int) {
	rest = deg
	room := G
	take := func(d, want int) {
		f := gcd(room, want)
		if f > 1 {
			inner = append(inner, factor{d, f})
			rest[d] /= f
			room /= f
		}
	}
	take(dimTP, rest[dimTP])
	take(dimCP, rest[dimCP])
	epRest = 1
	if l.EP > 1 && rest[dimCP] == 1 && l.EP%l.CP == 0 {
		want := l.EP / l.CP // DP digits of one EP group
		before := rest[dimDP]
		take(dimDP, want)
		epRest = want / (before / rest[dimDP])
	}
	return inner, rest, epRest
}

// fillRest fills what room is left in the node with DP or PP digits, first
// first, and sorts the inner factors into Megatron's order so local ranks
// ascend with global rank.
func fillRest(inner []factor, rest [numDims]int, G int, first int) ([]factor, [numDims]int) {
	room := G
	for _, f := range inner {
		room /= f.size
	}
	in := append([]factor(nil), inner...)
	other := dimPP
	if first == dimPP {
		other = dimDP
	}
	for _, d := range []int{first, other} {
		if f := gcd(room, rest[d]); f > 1 {
			in = append(in, factor{d, f})
			rest[d] /= f
			room /= f
		}
	}
	// Merge per dimension, in dimension order; digits of one dimension stay
	// in the order they were taken (lowest first), so a product is exact.
	var sizes [numDims]int
	for i := range sizes {
		sizes[i] = 1
	}
	for _, f := range in {
		sizes[f.dim] *= f.size
	}
	var out []factor
	for d := 0; d < numDims; d++ {
		if sizes[d] > 1 {
			out = append(out, factor{d, sizes[d]})
		}
	}
	return out, rest
}

func identityOrder(n int) []int {
	o := make([]int, n)
	for i := range o {
		o[i] = i
	}
	return o
}

// leafGroups lists the nodes of each leaf (leaves in order of first
// appearance in Slurm's list), grouped within a leaf by NVLink block (blocks
// in order of first appearance in that leaf), otherwise in Slurm's order.
func leafGroups(t *placeTopo) [][]int {
	nLeaves := 0
	for _, id := range t.leaf {
		nLeaves = max(nLeaves, int(id)+1)
	}
	byLeaf := make([][]int, nLeaves)
	for i := range t.leaf {
		byLeaf[t.leaf[i]] = append(byLeaf[t.leaf[i]], i)
	}
	if !hasBlocks(t) {
		return byLeaf
	}
	for _, m := range byLeaf {
		first := map[int32]int{} // block → its first position in this leaf
		key := make(map[int]int, len(m))
		for pos, i := range m {
			k := pos
			if b := t.block[i]; b >= 0 {
				if f, ok := first[b]; ok {
					k = f
				} else {
					first[b] = pos
				}
			}
			key[i] = k
		}
		sort.SliceStable(m, func(a, b int) bool { return key[m[a]] < key[m[b]] })
	}
	return byLeaf
}

// packedOrder lays the leaf groups out one after the other. With unit > 1 it
// packs: each leaf contributes its whole units of `unit` consecutive nodes
// first, and the leftovers of all leaves follow, largest first, so that as
// many groups as possible live inside one leaf and the rest straddle as few
// leaves as a greedy fit allows.
func packedOrder(byLeaf [][]int, n, unit int) []int {
	order := make([]int, 0, n)
	if unit <= 1 || unit >= n {
		for _, m := range byLeaf {
			order = append(order, m...)
		}
		return order
	}
	var leftovers [][]int
	for _, m := range byLeaf {
		full := len(m) / unit * unit
		order = append(order, m[:full]...)
		if full < len(m) {
			leftovers = append(leftovers, m[full:])
		}
	}
	// Largest leftovers first (stable: ties keep leaf order).
	sort.SliceStable(leftovers, func(a, b int) bool { return len(leftovers[a]) > len(leftovers[b]) })
	for _, m := range leftovers {
		order = append(order, m...)
	}
	return order
}

// assign decodes every hardware position into a rank: position q is slot
// q mod G of node order[q / G]; its digits, read through the factors, give
// the rank's coordinates.
func assign(c *candidate, l Layout, G int, nodeOf, slotOf []int32) {
	factors := append(append([]factor(nil), c.inner...), c.outer...)
	stride := [numDims]int{1, l.TP, l.TP * l.CP, l.TP * l.CP * l.DP} // Megatron rank strides
	// Precompute, per factor, the rank increment of each digit step.
	type fs struct{ size, step int }
	steps := make([]fs, len(factors))
	var scale [numDims]int
	for i := range scale {
		scale[i] = 1
	}
	for i, f := range factors {
		steps[i] = fs{f.size, stride[f.dim] * scale[f.dim]}
		scale[f.dim] *= f.size
	}
	world := len(nodeOf)
	// Iterate positions with an odometer instead of dividing per position.
	digits := make([]int, len(steps))
	rank := 0
	for q := 0; q < world; q++ {
		nodeOf[rank] = int32(c.order[q/G])
		slotOf[rank] = int32(q % G)
		for i := range digits {
			digits[i]++
			rank += steps[i].step
			if digits[i] < steps[i].size {
				break
			}
			rank -= steps[i].step * steps[i].size
			digits[i] = 0
		}
	}
}

func describeFactors(inner, outer []factor) string {
	var b strings.Builder
	for i, f := range inner {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s%d", dimNames[f.dim], f.size)
	}
	b.WriteString(" |")
	for _, f := range outer {
		fmt.Fprintf(&b, " %s%d", dimNames[f.dim], f.size)
	}
	return b.String()
}

func describeOrder(c candidate) string {
	return describeFactors(c.inner, c.outer) + "; nodes: " + c.nodeOrder
}
