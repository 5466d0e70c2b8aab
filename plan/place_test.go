package plan

import (
	"fmt"
	"math/rand"
	"reflect"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/trainrun/trainrun/internal/units"
)

// megatronGroups is a line-by-line port of Megatron-LM's
// generate_masked_orthogonal_rank_groups (megatron/core/parallel_state.py):
// the rank space is decomposed with the first dimension of the order varying
// fastest; a group varies the masked dimensions and fixes the others.
func megatronGroups(world int, sizes []int, mask []bool) [][]int {
	prefix := func(a []int) []int {
		r := []int{1}
		p := 1
		for _, v := range a {
			p *= v
			r = append(r, p)
		}
		return r
	}
	decompose := func(index int, shape []int) []int {
		stride := prefix(shape)
		idx := make([]int, len(shape))
		for i, s := range shape {
			idx[i] = (index / stride[i]) % s
		}
		return idx
	}
	inner := func(a, b []int) int {
		s := 0
		for i := range a {
			s += a[i] * b[i]
		}
		return s
	}
	var masked, unmasked, maskedStride, unmaskedStride []int
	global := prefix(sizes)
	for i, s := range sizes {
		if mask[i] {
			masked = append(masked, s)
			maskedStride = append(maskedStride, global[i])
		} else {
			unmasked = append(unmasked, s)
			unmaskedStride = append(unmaskedStride, global[i])
		}
	}
	groupSize := prefix(masked)[len(masked)]
	var out [][]int
	for g := 0; g < world/groupSize; g++ {
		gi := decompose(g, unmasked)
		var ranks []int
		for r := 0; r < groupSize; r++ {
			ranks = append(ranks, inner(decompose(r, masked), maskedStride)+inner(gi, unmaskedStride))
		}
		out = append(out, ranks)
	}
	return out
}

// TestCoordsFollowMegatronRankGenerator checks that the coordinates placement
// reports name the same groups Megatron builds from RANK: the dense generator
// (order tp-cp-dp-pp, EP = 1) and the expert generator (order tp-ep-dp-pp,
// CP = 1, expert TP = TP, expert DP = world/(TP·EP·PP)).
func TestCoordsFollowMegatronRankGenerator(t *testing.T) {
	cases := []struct {
		name               string
		tp, cp, ep, dp, pp int
	}{
		{"dense tp2 cp2 dp4 pp2", 2, 2, 1, 4, 2},
		{"moe tp2 ep4 dp8 pp2", 2, 1, 4, 8, 2},
		{"moe with cp: tp1 cp2 ep4 dp4 pp3", 1, 2, 4, 4, 3},
		{"tp8 dp16 pp4", 8, 1, 1, 16, 4},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := Layout{TP: tc.tp, CP: tc.cp, EP: tc.ep, DP: tc.dp, PP: tc.pp}
			world := tc.tp * tc.cp * tc.dp * tc.pp
			dense := []int{tc.tp, tc.cp, tc.dp, tc.pp}
			get := func(c Coords, d int) int { return []int{c.tp, c.cp, c.dp, c.pp, c.ep}[d] }
			for d, name := range []string{"tp", "cp", "dp", "pp"} {
				mask := make([]bool, 4)
				mask[d] = true
				for _, g := range megatronGroups(world, dense, mask) {
					first := coords(l, g[0])
					for i, r := range g {
						c := coords(l, r)
						if get(c, d) != i {
							t.Fatalf("%s group %v: rank %d has %s=%d, want %d", name, g, r, name, get(c, d), i)
						}
						for o := 0; o < 4; o++ {
							if o != d && get(c, o) != get(first, o) {
								t.Fatalf("%s group %v: rank %d differs in %s from rank %d", name, g, r, []string{"tp", "cp", "dp", "pp"}[o], g[0])
							}
						}
					}
				}
			}
			if tc.ep > 1 {
				expert := []int{tc.tp, tc.ep, world / (tc.tp * tc.ep * tc.pp), tc.pp}
				for _, g := range megatronGroups(world, expert, []bool{false, true, false, false}) {
					for i, r := range g {
						if c := coords(l, r); c.ep != i {
							t.Fatalf("ep group %v: rank %d has ep=%d, want %d", g, r, c.ep, i)
						}
					}
				}
			}
		})
	}
}

// interleaved64 is the acceptance allocation: node001..node064 in Slurm's
// order, node i on leaf i mod 4, so consecutive hostnames alternate switches.
func interleaved64() []PlaceNode {
	nodes := make([]PlaceNode, 64)
	for i := range nodes {
		nodes[i] = PlaceNode{Name: fmt.Sprintf("node%03d", i+1), Leaf: fmt.Sprintf("leaf%d", i%4)}
	}
	return nodes
}

// acceptanceTraffic is a 70B-class dense model at TP8·PP4·DP16, bf16,
// sequence 8192, hidden 8192, micro-batch 1, global batch 1024 (64
// micro-batches per DP rank), computed here independently of the planner:
//   - DP: ring all-reduce of the bf16 gradients of 70e9/32 parameters per
//     GPU: 2·(16−1)/16 · (70e9/32) · 2 bytes;
//   - PP: per micro-batch the boundary carries activations s·h/TP (Megatron
//     with sequence parallelism sends the TP-sharded tensor) in bf16, and
//     as much gradient back: 2 · 8192·8192/8 · 2 bytes · 64 micro-batches;
//   - TP: 4 all-reduce-sized collectives per layer per micro-batch
//     (fwd+bwd) on s·b·h bf16, 80 layers / 4 stages: a figure only NVLink sees.
func acceptanceTraffic() Traffic {
	dp := 2.0 * 15 / 16 * (70e9 / 32) * 2
	pp := 2.0 * (8192 * 8192 / 8) * 2 * 64
	tp := 4.0 * 2 * 7 / 8 * 8192 * 8192 * 2 * 20 * 64
	return Traffic{TP: tp, DP: dp, PP: pp}
}

func TestPlaceAcceptanceInterleavedLeaves(t *testing.T) {
	l := Layout{TP: 8, PP: 4, DP: 16}
	nodes := interleaved64()
	leafOf := map[string]string{}
	for _, n := range nodes {
		leafOf[n.Name] = n.Leaf
	}
	tr := acceptanceTraffic()
	if !(tr.DP > 3*tr.PP) {
		t.Fatalf("test premise: DP volume %g should exceed 3× PP %g", tr.DP, tr.PP)
	}
	p, err := Place(PlaceInput{Layout: l, GPUsPerNode: 8, Nodes: nodes, Traffic: tr})
	if err != nil {
		t.Fatal(err)
	}
	// Every TP group on one node.
	for r := 0; r < len(p.Ranks); r += 8 {
		for i := 1; i < 8; i++ {
			if p.Ranks[r+i].Node != p.Ranks[r].Node {
				t.Fatalf("TP group of rank %d split: %s vs %s", r, p.Ranks[r].Node, p.Ranks[r+i].Node)
			}
		}
	}
	// Every DP ring (fixed tp, pp) inside one leaf.
	for pp := 0; pp < 4; pp++ {
		for tp := 0; tp < 8; tp++ {
			leaves := map[string]bool{}
			for dp := 0; dp < 16; dp++ {
				leaves[leafOf[p.Ranks[tp+8*(dp+16*pp)].Node]] = true
			}
			if len(leaves) != 1 {
				t.Fatalf("DP ring tp=%d pp=%d spans leaves %v", tp, pp, leaves)
			}
		}
	}
	// The model's prediction, counted by hand:
	//  placement: 32 DP rings (8 tp × 4 pp) of 16 ranks, each on 16 nodes of
	//    one leaf: 16 leaf edges each = 512·DP on the leaves, none on the
	//    spine. 128 PP chains (8 tp × 16 dp) with their 4 stages on the 4
	//    leaves: 3 spine edges each = 384·PP on the spine.
	//  baseline: rank r on node r/8, so DP ring (tp, pp) is nodes
	//    16·pp .. 16·pp+15, consecutive hostnames on alternating leaves: all
	//    16 edges cross the spine = 512·DP. PP chain (tp, dp) is nodes dp,
	//    dp+16, dp+32, dp+48, all on leaf dp mod 4: 3 leaf edges = 384·PP.
	//  TP: 64 rings of 8 edges on NVLink = 512·TP in both.
	wantP := LinkBytes{NVLink: 512 * tr.TP, Leaf: 512 * tr.DP, Spine: 384 * tr.PP}
	wantB := LinkBytes{NVLink: 512 * tr.TP, Leaf: 384 * tr.PP, Spine: 512 * tr.DP}
	if p.Traffic != wantP {
		t.Errorf("traffic = %+v, want %+v", p.Traffic, wantP)
	}
	if p.Baseline != wantB {
		t.Errorf("baseline = %+v, want %+v", p.Baseline, wantB)
	}
	saved := p.Baseline.Spine - p.Traffic.Spine
	if want := 512*tr.DP - 384*tr.PP; saved != want {
		t.Errorf("spine saving = %g, want 512·DP − 384·PP = %g", saved, want)
	}
	t.Logf("order %s; spine %s vs baseline %s; why: %s", p.Order, units.Bytes(p.Traffic.Spine), units.Bytes(p.Baseline.Spine), strings.Join(p.Why, "; "))
}

// When pipeline traffic dominates (T_DP < 3·T_PP here), keeping PP chains in
// a leaf and letting each DP ring cross the spine 4 times is cheaper:
// 32 rings × 4 spine edges = 128·DP.
func TestPlaceAcceptancePipelineHeavy(t *testing.T) {
	tr := Traffic{TP: 1e12, DP: 2e9, PP: 1e9}
	p, err := Place(PlaceInput{Layout: Layout{TP: 8, PP: 4, DP: 16}, GPUsPerNode: 8, Nodes: interleaved64(), Traffic: tr})
	if err != nil {
		t.Fatal(err)
	}
	if want := 128 * tr.DP; p.Traffic.Spine != want {
		t.Errorf("spine = %g, want 128·DP = %g (order %s)", p.Traffic.Spine, want, p.Order)
	}
	if want := 512 * tr.DP; p.Baseline.Spine != want {
		t.Errorf("baseline spine = %g, want %g", p.Baseline.Spine, want)
	}
	// PP chains inside one leaf.
	leafOf := map[string]string{}
	for _, n := range interleaved64() {
		leafOf[n.Name] = n.Leaf
	}
	for r := 0; r < 8*16; r++ {
		for s := 1; s < 4; s++ {
			if a, b := leafOf[p.Ranks[r].Node], leafOf[p.Ranks[r+128*s].Node]; a != b {
				t.Fatalf("PP chain of rank %d crosses leaves %s/%s", r, a, b)
			}
		}
	}
}

func TestPlaceHostfileAndRails(t *testing.T) {
	// 2 nodes, 4 GPUs, rails reversed on the second node (NIC order
	// reversed against GPU order): local rank i must drive GPU 3−i there.
	nodes := []PlaceNode{
		{Name: "a"},
		{Name: "b", Rails: []int{3, 2, 1, 0}},
	}
	p, err := Place(PlaceInput{Layout: Layout{TP: 4, DP: 2}, GPUsPerNode: 4, Nodes: nodes, Traffic: Traffic{TP: 10, DP: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := p.Hostfile(), "a\na\na\na\nb\nb\nb\nb\n"; got != want {
		t.Errorf("hostfile = %q, want %q", got, want)
	}
	for _, r := range p.Ranks {
		want := r.LocalRank
		if r.Node == "b" {
			want = 3 - r.LocalRank
		}
		if r.GPU != want {
			t.Errorf("rank %d on %s local %d: gpu %d, want %d", r.Rank, r.Node, r.LocalRank, r.GPU, want)
		}
	}
}

func TestPlaceErrors(t *testing.T) {
	two := []PlaceNode{{Name: "a"}, {Name: "b"}}
	cases := []struct {
		name string
		in   PlaceInput
		want string
	}{
		{"world mismatch", PlaceInput{Layout: Layout{TP: 8, DP: 4}, GPUsPerNode: 8, Nodes: two}, "needs 32 GPUs"},
		{"tp not dividing node", PlaceInput{Layout: Layout{TP: 3, DP: 2}, GPUsPerNode: 3 * 2 / 2, Nodes: []PlaceNode{{Name: "a"}, {Name: "b"}}}, ""},
		{"tp 3 on 4-gpu nodes", PlaceInput{Layout: Layout{TP: 3, DP: 4}, GPUsPerNode: 4, Nodes: []PlaceNode{{Name: "a"}, {Name: "b"}, {Name: "c"}}}, "one must divide the other"},
		{"ep not dividing", PlaceInput{Layout: Layout{TP: 1, DP: 6, EP: 4}, GPUsPerNode: 3, Nodes: two}, "ep=4 must divide"},
		{"duplicate node", PlaceInput{Layout: Layout{DP: 2}, GPUsPerNode: 1, Nodes: []PlaceNode{{Name: "a"}, {Name: "a"}}}, "appears twice"},
		{"bad rails", PlaceInput{Layout: Layout{DP: 4}, GPUsPerNode: 2, Nodes: []PlaceNode{{Name: "a", Rails: []int{0, 0}}, {Name: "b"}}}, "distinct GPU indices"},
		{"no nodes", PlaceInput{Layout: Layout{}, GPUsPerNode: 8}, "no nodes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Place(tc.in)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// divisorsOf lists the divisors of n.
func divisorsOf(n int) []int {
	var d []int
	for i := 1; i <= n; i++ {
		if n%i == 0 {
			d = append(d, i)
		}
	}
	return d
}

// randomCase draws an allocation and a layout that fills it.
func randomCase(rng *rand.Rand) PlaceInput {
	G := []int{1, 2, 4, 8, 8, 8, 4}[rng.Intn(7)]
	N := 1 + rng.Intn(48)
	world := N * G
	// TP: a divisor of G, or G·k when blocks let it span nodes.
	tpChoices := divisorsOf(G)
	useBlocks := rng.Intn(4) == 0
	if useBlocks && N%2 == 0 {
		tpChoices = append(tpChoices, 2*G)
	}
	tp := tpChoices[rng.Intn(len(tpChoices))]
	rest := world / tp
	cpChoices := []int{}
	for _, c := range divisorsOf(rest) {
		if c <= 4 {
			cpChoices = append(cpChoices, c)
		}
	}
	cp := cpChoices[rng.Intn(len(cpChoices))]
	rest /= cp
	ppd := divisorsOf(rest)
	pp := ppd[rng.Intn(len(ppd))]
	dp := rest / pp
	epd := divisorsOf(cp * dp)
	ep := epd[rng.Intn(len(epd))]
	if rng.Intn(2) == 0 {
		ep = 1
	}
	nLeaves := 1 + rng.Intn(5)
	nodes := make([]PlaceNode, N)
	blockSize := 2 + 2*rng.Intn(4)
	for i := range nodes {
		nodes[i] = PlaceNode{Name: fmt.Sprintf("n%03d", i), Leaf: fmt.Sprintf("s%d", rng.Intn(nLeaves))}
		if useBlocks {
			nodes[i].Block = fmt.Sprintf("b%d", i/blockSize)
		}
		if rng.Intn(3) == 0 {
			nodes[i].Rails = rng.Perm(G)
		}
		if G > 1 && rng.Intn(10) == 0 {
			nodes[i].PCIeOnly = true
		}
	}
	tr := Traffic{TP: rng.Float64() * 1e12, CP: rng.Float64() * 1e11, EP: rng.Float64() * 1e11, DP: rng.Float64() * 1e10, PP: rng.Float64() * 1e10}
	return PlaceInput{Layout: Layout{TP: tp, CP: cp, EP: ep, DP: dp, PP: pp, VPP: 1 + rng.Intn(2)}, GPUsPerNode: G, Nodes: nodes, Traffic: tr}
}

func TestPlacePropertiesRandom(t *testing.T) {
	rng := rand.New(rand.NewSource(20261129))
	n := 3000
	if testing.Short() {
		n = 300
	}
	skippedBaseline, unalignedWorse := 0, 0
	for i := 0; i < n; i++ {
		in := randomCase(rng)
		name := fmt.Sprintf("case %d: G=%d N=%d %+v", i, in.GPUsPerNode, len(in.Nodes), in.Layout)
		p, err := Place(in)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		p2, _ := Place(in)
		if !reflect.DeepEqual(p, p2) {
			t.Fatalf("%s: not deterministic", name)
		}
		if _, _, ok := megatronFactors([numDims]int{in.Layout.TP, in.Layout.CP, in.Layout.DP, in.Layout.PP}, in.GPUsPerNode); ok {
			if p.Traffic.Spine > p.Baseline.Spine {
				t.Fatalf("%s: spine %g > baseline %g (order %s)", name, p.Traffic.Spine, p.Baseline.Spine, p.Order)
			}
		} else {
			skippedBaseline++
			if p.Traffic.Spine > p.Baseline.Spine {
				unalignedWorse++
			}
		}
		checkInvariants(t, name, in, p)
	}
	// Where Megatron's order is not rail-aligned (odd degrees such as dp=6 on
	// 8-GPU nodes, or EP groups of 41), placement keeps rail alignment even
	// when the unaligned default would carry fewer spine bytes; counted here.
	t.Logf("%d cases; %d with Megatron's order not rail-aligned (baseline comparison not asserted), of which %d carry more spine bytes than that unaligned default", n, skippedBaseline, unalignedWorse)
}

func checkInvariants(t *testing.T, name string, in PlaceInput, p *Placement) {
	t.Helper()
	l := normLayout(in.Layout)
	G := in.GPUsPerNode
	world := l.TP * l.CP * l.DP * l.PP
	if len(p.Ranks) != world {
		t.Fatalf("%s: %d ranks, want %d", name, len(p.Ranks), world)
	}
	byName := map[string]PlaceNode{}
	for _, n := range in.Nodes {
		byName[n.Name] = n
	}
	// Bijection ranks ↔ (node, local) and (node, gpu).
	slots := map[string]bool{}
	gpus := map[string]bool{}
	for r, rp := range p.Ranks {
		if rp.Rank != r {
			t.Fatalf("%s: ranks[%d].rank = %d", name, r, rp.Rank)
		}
		node, ok := byName[rp.Node]
		if !ok {
			t.Fatalf("%s: rank %d on unknown node %q", name, r, rp.Node)
		}
		if rp.LocalRank < 0 || rp.LocalRank >= G {
			t.Fatalf("%s: rank %d local %d out of range", name, r, rp.LocalRank)
		}
		k := fmt.Sprintf("%s/%d", rp.Node, rp.LocalRank)
		if slots[k] {
			t.Fatalf("%s: two ranks on %s", name, k)
		}
		slots[k] = true
		g := fmt.Sprintf("%s/%d", rp.Node, rp.GPU)
		if gpus[g] {
			t.Fatalf("%s: two ranks on GPU %s", name, g)
		}
		gpus[g] = true
		// local rank i drives the GPU of rail i
		wantGPU := rp.LocalRank
		if node.Rails != nil {
			wantGPU = node.Rails[rp.LocalRank]
		}
		if rp.GPU != wantGPU {
			t.Fatalf("%s: rank %d local %d gpu %d, rail map says %d", name, r, rp.LocalRank, rp.GPU, wantGPU)
		}
		// coordinates consistent with Megatron's order, recomputed here
		x := r
		tp, cp := x%l.TP, (x/l.TP)%l.CP
		dp := (x / (l.TP * l.CP)) % l.DP
		pp := x / (l.TP * l.CP * l.DP)
		ep := (cp + l.CP*dp) % l.EP
		if rp.TP != tp || rp.CP != cp || rp.DP != dp || rp.PP != pp || rp.EP != ep {
			t.Fatalf("%s: rank %d coords %+v, want tp%d cp%d ep%d dp%d pp%d", name, r, rp, tp, cp, ep, dp, pp)
		}
		if p.Nodes[rp.NodeRank] != rp.Node {
			t.Fatalf("%s: rank %d node_rank %d names %s, not %s", name, r, rp.NodeRank, p.Nodes[rp.NodeRank], rp.Node)
		}
	}
	if len(slots) != len(in.Nodes)*G {
		t.Fatalf("%s: %d slots used of %d", name, len(slots), len(in.Nodes)*G)
	}
	// Local ranks ascend with global rank on each node (SLURM_LOCALID under
	// --distribution=arbitrary), and node ranks follow first appearance.
	last := map[string]int{}
	seenNode := 0
	for _, rp := range p.Ranks {
		if prev, ok := last[rp.Node]; ok && rp.LocalRank <= prev {
			t.Fatalf("%s: local ranks not ascending on %s", name, rp.Node)
		} else if !ok {
			if rp.NodeRank != seenNode {
				t.Fatalf("%s: node %s first seen as node_rank %d, want %d", name, rp.Node, rp.NodeRank, seenNode)
			}
			seenNode++
		}
		last[rp.Node] = rp.LocalRank
	}
	// TP group on one node when TP ≤ G; within one NVLink block when larger
	// and the blocks are multiples of the TP span.
	if l.TP <= G {
		for r := 0; r < world; r += l.TP {
			for i := 1; i < l.TP; i++ {
				if p.Ranks[r+i].Node != p.Ranks[r].Node {
					t.Fatalf("%s: TP group at rank %d split over %s and %s", name, r, p.Ranks[r].Node, p.Ranks[r+i].Node)
				}
			}
		}
	}
	// Rail alignment: every DP group and every PP group occupies the same
	// set of local slots on every node it touches.
	type key struct{ a, b, c int }
	checkGroups := func(kind string, groupOf func(RankPlacement) key) {
		slotsBy := map[key]map[string][]int{}
		for _, rp := range p.Ranks {
			k := groupOf(rp)
			if slotsBy[k] == nil {
				slotsBy[k] = map[string][]int{}
			}
			slotsBy[k][rp.Node] = append(slotsBy[k][rp.Node], rp.LocalRank)
		}
		for k, perNode := range slotsBy {
			var ref string
			first := true
			for node, s := range perNode {
				sort.Ints(s)
				str := fmt.Sprint(s)
				if first {
					ref, first = str, false
				} else if str != ref {
					t.Fatalf("%s: %s group %v not rail-aligned: %s has slots %s, another node %s", name, kind, k, node, str, ref)
				}
			}
		}
	}
	checkGroups("DP", func(rp RankPlacement) key { return key{rp.TP, rp.CP, rp.PP} })
	checkGroups("PP", func(rp RankPlacement) key { return key{rp.TP, rp.CP, rp.DP} })
	// Conservation: every byte lands on exactly one level.
	if d := p.Traffic.Total() - p.Baseline.Total(); d*d > 1e-12*p.Baseline.Total()*p.Baseline.Total() {
		t.Fatalf("%s: totals differ: %g vs %g", name, p.Traffic.Total(), p.Baseline.Total())
	}
}

// BenchmarkPlace2048x8 is the `make bench` figure: 2,048 nodes × 8 GPUs on
// 32 leaves of 64 nodes, interleaved, TP8·PP8·DP256.
func BenchmarkPlace2048x8(b *testing.B) {
	nodes := make([]PlaceNode, 2048)
	for i := range nodes {
		nodes[i] = PlaceNode{Name: fmt.Sprintf("gpu%04d", i), Leaf: fmt.Sprintf("leaf%02d", i%32)}
	}
	in := PlaceInput{Layout: Layout{TP: 8, PP: 8, DP: 256}, GPUsPerNode: 8, Nodes: nodes, Traffic: acceptanceTraffic()}
	benchPlace(b, in)
}

// benchPlace also reports the process's CPU time per placement (user+sys,
// getrusage), which stays meaningful when a shared machine stretches the
// wall-clock ns/op.
func benchPlace(b *testing.B, in PlaceInput) {
	b.ReportAllocs()
	var r0, r1 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &r0)
	n := 0
	for b.Loop() {
		if _, err := Place(in); err != nil {
			b.Fatal(err)
		}
		n++
	}
	syscall.Getrusage(syscall.RUSAGE_SELF, &r1)
	cpu := func(r syscall.Rusage) float64 {
		return float64(r.Utime.Nano() + r.Stime.Nano())
	}
	b.ReportMetric((cpu(r1)-cpu(r0))/float64(n)/1e6, "cpu-ms/op")
}

// BenchmarkPlace2048x8MoE adds EP=8 (all-to-all pairs are counted pairwise).
func BenchmarkPlace2048x8MoE(b *testing.B) {
	nodes := make([]PlaceNode, 2048)
	for i := range nodes {
		nodes[i] = PlaceNode{Name: fmt.Sprintf("gpu%04d", i), Leaf: fmt.Sprintf("leaf%02d", i%32)}
	}
	in := PlaceInput{Layout: Layout{TP: 2, EP: 8, PP: 8, DP: 1024}, GPUsPerNode: 8, Nodes: nodes, Traffic: Traffic{TP: 1e11, EP: 5e10, DP: 1e10, PP: 1e9}}
	benchPlace(b, in)
}

// GB200 NVL72-class: 4 GPUs per node, 18 nodes per NVLink block, TP=8 spans
// two nodes and must stay inside one block; Slurm's order interleaves the
// two racks' nodes, so the block-blind default splits every TP group over the
// network while the placement keeps them on NVLink.
func TestPlaceNVL72Blocks(t *testing.T) {
	nodes := make([]PlaceNode, 36)
	for i := range nodes {
		nodes[i] = PlaceNode{Name: fmt.Sprintf("gb%02d", i), Leaf: "leaf0", Block: fmt.Sprintf("rack%d", i%2)}
	}
	tr := Traffic{TP: 1e12, DP: 1e10}
	p, err := Place(PlaceInput{Layout: Layout{TP: 8, DP: 18}, GPUsPerNode: 4, Nodes: nodes, Traffic: tr})
	if err != nil {
		t.Fatal(err)
	}
	block := map[string]string{}
	for _, n := range nodes {
		block[n.Name] = n.Block
	}
	for r := 0; r < len(p.Ranks); r += 8 {
		for i := 1; i < 8; i++ {
			if block[p.Ranks[r+i].Node] != block[p.Ranks[r].Node] {
				t.Fatalf("TP group at rank %d spans blocks: %s and %s", r, p.Ranks[r].Node, p.Ranks[r+i].Node)
			}
		}
	}
	// Counted by hand. Baseline: TP group g on nodes 2g, 2g+1 (racks 0 and
	// 1): its ring crosses between racks twice = 36·TP on the leaf; DP ring
	// of tp t runs over nodes of one rack (2d + t/4) = all MNNVL. Placement:
	// rack 0's nodes first, TP groups 0..8 there and 9..17 in rack 1, so TP
	// is all NVLink and each of the 8 DP rings crosses racks twice = 16·DP,
	// the least possible (18 members cannot fit one rack's 9 groups).
	if want := 36 * tr.TP; p.Baseline.Leaf != want {
		t.Errorf("baseline leaf %g, want %g", p.Baseline.Leaf, want)
	}
	if want := 16 * tr.DP; p.Traffic.Leaf != want {
		t.Errorf("leaf %g, want %g (order %s)", p.Traffic.Leaf, want, p.Order)
	}
	if p.Traffic.Spine != 0 || p.Baseline.Spine != 0 {
		t.Errorf("one leaf, yet spine bytes %g / %g", p.Traffic.Spine, p.Baseline.Spine)
	}
}

// EP fills the node before DP and PP are chosen: with TP=1, EP=8 on 8-GPU
// nodes every expert group is one node.
func TestPlaceExpertGroupsInNode(t *testing.T) {
	nodes := make([]PlaceNode, 8)
	for i := range nodes {
		nodes[i] = PlaceNode{Name: fmt.Sprintf("n%d", i), Leaf: fmt.Sprintf("l%d", i%2)}
	}
	p, err := Place(PlaceInput{Layout: Layout{TP: 1, EP: 8, DP: 16, PP: 4}, GPUsPerNode: 8, Nodes: nodes,
		Traffic: Traffic{EP: 5e10, DP: 1e9, PP: 4e9}})
	if err != nil {
		t.Fatal(err)
	}
	byEP := map[[2]int]map[string]bool{}
	for _, r := range p.Ranks {
		k := [2]int{r.PP, r.DP / 8}
		if byEP[k] == nil {
			byEP[k] = map[string]bool{}
		}
		byEP[k][r.Node] = true
	}
	for k, nodes := range byEP {
		if len(nodes) != 1 {
			t.Errorf("expert group pp=%d block=%d on nodes %v", k[0], k[1], nodes)
		}
	}
}

// Uneven leaves (24, 20, 13 and 7 nodes, hostnames shuffled across them):
// whole DP rings of 16 nodes go into the leaves that can hold one, and the
// leftovers are combined largest first, so fewer rings straddle leaves than in
// a plain leaf-by-leaf order.
func TestPlacePacksUnevenLeaves(t *testing.T) {
	// Hostnames deal the leaves round-robin (A B C D A B C D …, skipping
	// full ones), so leaves first appear in the order A, B, C, D.
	sizes := []int{24, 20, 13, 7}
	left := append([]int(nil), sizes...)
	var leafOf []string
	for len(leafOf) < 64 {
		for li := range left {
			if left[li] > 0 {
				left[li]--
				leafOf = append(leafOf, fmt.Sprintf("leaf%c", 'A'+li))
			}
		}
	}
	nodes := make([]PlaceNode, 64)
	for i := range nodes {
		nodes[i] = PlaceNode{Name: fmt.Sprintf("n%02d", i), Leaf: leafOf[i]}
	}
	tr := Traffic{TP: 1e12, DP: 8e9, PP: 1e6}
	p, err := Place(PlaceInput{Layout: Layout{TP: 8, PP: 4, DP: 16}, GPUsPerNode: 8, Nodes: nodes, Traffic: tr})
	if err != nil {
		t.Fatal(err)
	}
	// Packing: ring 1 = A[0:16], ring 2 = B[0:16], then the leftovers
	// largest first (C13, A8, D7, B4): ring 3 = C13 + A3 (2 crossings),
	// ring 4 = A5 + D7 + B4 (3 crossings): 5 spine edges × 8 TP ranks =
	// 40·DP. PP boundary d joins ring k's node d to ring k+1's: A–B, B–C/A,
	// C/A–A/D/B, never one leaf: 128 chains × 3 = 384·PP.
	if want := 40*tr.DP + 384*tr.PP; p.Traffic.Spine != want {
		t.Errorf("spine = %g, want 40·DP + 384·PP = %g (order %s)", p.Traffic.Spine, want, p.Order)
	}
	// A plain leaf-by-leaf order (A24 B20 C13 D7 → rings A16 | A8+B8 |
	// B12+C4 | C9+D7) crosses 6 times per TP rank: 48·DP; its PP boundaries
	// stay in one leaf for d < 8 (ring 1→2, both A) and 8 ≤ d < 12 (ring
	// 2→3, both B): (8 + 12 + 16) × 8 = 288·PP.
	grouped := make([]int, 0, 64)
	for _, l := range []string{"leafA", "leafB", "leafC", "leafD"} {
		for i, n := range nodes {
			if n.Leaf == l {
				grouped = append(grouped, i)
			}
		}
	}
	nodeOf := make([]int, 512)
	for r := range nodeOf {
		// tp8 | dp16 pp4 over the grouped order: position = tp + 8·(dp + 16·pp)
		nodeOf[r] = grouped[r/8]
	}
	g, err := PlacementTraffic(Layout{TP: 8, PP: 4, DP: 16}, tr, nodes, nodeOf)
	if err != nil {
		t.Fatal(err)
	}
	if want := 48*tr.DP + 288*tr.PP; g.Spine != want {
		t.Errorf("leaf-by-leaf spine = %g, want %g", g.Spine, want)
	}
}
