package plan

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Pins are the values the user fixed (--fix); nil means "search". ParsePins
// (pins.go) reads them.
type Pins struct {
	TP, PP, VPP, CP, EP, DP, MicroBatch, Zero *int
	ETP                                       *int // expert tensor parallel size (nil: tp)
	GradAccum                                 *int // micro-batches per step per data-parallel rank
	Recompute, Offload                        *string
	SP                                        *bool
}

// SearchOptions steer Search.
type SearchOptions struct {
	Pins                 Pins
	TopK                 int  // alternatives returned besides the plan (default 5; negative = none)
	MaxRejected          int  // rejected layouts returned (default 20)
	AllowTPOutsideDomain bool // let TP groups span NVLink domains
	AllowCP              bool // consider context parallelism (always allowed when pinned)
	// Calibration is a site calibration's observations: Search fits the
	// job's Correction from them (Calibrate) unless Correction is set.
	// Neither: the uncalibrated model.
	Calibration []Observation
	Correction  *Correction
}

// FullyPinned reports whether every parallel degree is fixed, so that the
// pinned layout is reported even if it does not fit.
func (o SearchOptions) FullyPinned(m Model) bool {
	p := o.Pins
	return p.TP != nil && p.PP != nil && p.MicroBatch != nil &&
		(p.CP != nil || !o.AllowCP) && (p.EP != nil || !m.isMoE())
}

// Config renders a layout as the "config" of a rejection: tp=4,pp=2,...
func (l Layout) Config() string {
	rc := l.Recompute
	if rc == "full" && l.RecomputeLayers > 0 {
		rc = fmt.Sprintf("full:%d", l.RecomputeLayers)
	}
	ep := strconv.Itoa(l.EP)
	if l.ETP > 0 {
		ep += ",etp=" + strconv.Itoa(l.ETP)
	}
	return fmt.Sprintf("tp=%d,pp=%d,vpp=%d,cp=%d,ep=%s,dp=%d,mbs=%d,sp=%t,recompute=%s,zero=%d,offload=%s",
		l.TP, l.PP, l.VPP, l.CP, ep, l.DP, l.MicroBatch, l.SP, rc, l.Zero, l.Offload)
}

func pinOr(p *int, all []int) []int {
	if p != nil {
		return []int{*p}
	}
	return all
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

var recomputeRank = map[string]int{"none": 0, "selective": 1, "full": 2}
var offloadRank = map[string]int{"none": 0, "optimizer": 1, "params": 2, "nvme": 3}

// better orders fitting evaluations: throughput first (within 0.2 %, a tie),
// a tight plan's discounted by TightPenalty, then less recompute, no
// offload, lower ZeRO stage, fewer model-parallel GPUs.
func better(a, b *Evaluation) bool {
	ka := math.Round(math.Log(rankedThroughput(a)) / math.Log(1.002))
	kb := math.Round(math.Log(rankedThroughput(b)) / math.Log(1.002))
	if ka != kb {
		return ka > kb
	}
	if ra, rb := recomputeRank[a.Recompute], recomputeRank[b.Recompute]; ra != rb {
		return ra < rb
	}
	if oa, ob := offloadRank[a.Offload], offloadRank[b.Offload]; oa != ob {
		return oa < ob
	}
	if a.Zero != b.Zero {
		return a.Zero < b.Zero
	}
	if a.TP*a.PP != b.TP*b.PP {
		return a.TP*a.PP < b.TP*b.PP
	}
	return a.MicroBatch < b.MicroBatch
}

// TightPenalty is the share of throughput a tight plan (one inside the
// memory margin, margin.go) gives up in the ranking: a plan with headroom
// up to this much slower is preferred. A tight plan is one fragmentation,
// a longer batch or a framework's workspace away from an out-of-memory
// crash, which costs a restart and the work since the last checkpoint, and
// recurs at the same step until someone replans by hand; a few per cent of
// throughput is cheaper. A tight plan much faster than any other still
// wins, and is shown as TIGHT.
const TightPenalty = 0.10

// rankedThroughput is the throughput better ranks e by.
func rankedThroughput(e *Evaluation) float64 {
	if e.Tight {
		return e.TokensPerSPerGPU * (1 - TightPenalty)
	}
	return e.TokensPerSPerGPU
}

// searcher keeps the best candidates in small sorted arrays.
type searcher struct {
	m       Model
	j       Job
	c       Cluster
	o       SearchOptions
	best    []Evaluation // sorted, at most TopK+1
	keep    int
	nofit   []Evaluation // did not fit: the fastest ones (they explain the choice)
	close   []Evaluation // did not fit: the nearest to fitting
	maxRej  int
	count   int
	invalid []Rejection // a few rule violations, reported when nothing else was evaluated
}

func (s *searcher) offer(e *Evaluation) {
	s.count++
	if e.Reason != "" && e.Memory.PerGPU == 0 {
		if len(s.invalid) < 5 {
			s.invalid = append(s.invalid, Rejection{Config: e.Layout.Config(), Reason: e.Reason})
		}
		return // invalid; not a candidate
	}
	if !e.Memory.Fits {
		insertBounded(&s.nofit, e, s.maxRej, func(a, b *Evaluation) bool { return a.TokensPerSPerGPU > b.TokensPerSPerGPU })
		insertBounded(&s.close, e, s.maxRej, func(a, b *Evaluation) bool {
			return a.Memory.PerGPU/a.Memory.Capacity < b.Memory.PerGPU/b.Memory.Capacity
		})
		return
	}
	// Alternatives that differ only in VPP say little: keep the best of each
	// family (all degrees and settings but VPP).
	for i := range s.best {
		if sameFamily(&s.best[i].Layout, &e.Layout) {
			if !better(e, &s.best[i]) {
				return
			}
			copy(s.best[i:], s.best[i+1:])
			s.best = s.best[:len(s.best)-1]
			break
		}
	}
	insertBounded(&s.best, e, s.keep, better)
}

func sameFamily(a, b *Layout) bool {
	x, y := *a, *b
	x.VPP, y.VPP = 0, 0
	return x == y
}

func insertBounded(list *[]Evaluation, e *Evaluation, n int, less func(a, b *Evaluation) bool) {
	if n <= 0 {
		return
	}
	l := *list
	if len(l) == n && !less(e, &l[n-1]) {
		return
	}
	i := sort.Search(len(l), func(i int) bool { return less(e, &l[i]) })
	if len(l) < n {
		l = append(l, Evaluation{})
	}
	copy(l[i+1:], l[i:len(l)-1])
	l[i] = *e
	*list = l
}

// Search enumerates the valid layouts for the job on the cluster, ranks those
// that fit by predicted throughput and returns the best, the next TopK and the
// rejected ones with the figure that did not fit. Plan is nil when nothing
// fits, unless every degree is pinned: then the pinned layout is evaluated and
// returned with Fits false.
func Search(m Model, j Job, c Cluster, o SearchOptions) Result {
	if o.TopK == 0 {
		o.TopK = 5
	}
	if o.TopK < 0 {
		o.TopK = 0
	}
	if o.MaxRejected == 0 {
		o.MaxRejected = 20
	}
	j.Precision = PrecisionFor(j.Precision, c.GPU)
	if o.Correction == nil && len(o.Calibration) > 0 {
		o.Correction = Calibrate(o.Calibration, m, j, c)
	}
	s := &searcher{m: m, j: j, c: c, o: o, keep: o.TopK + 1, maxRej: o.MaxRejected}
	offloads := []string{"none"}
	if o.Pins.Offload != nil {
		offloads = []string{*o.Pins.Offload}
	}
	s.run(offloads)
	if len(s.best) == 0 && o.Pins.Offload == nil {
		// Offload is the last resort (PRODUCT.md): only when nothing fits on the GPUs.
		s.run([]string{"optimizer", "params"})
		if len(s.best) == 0 && c.NVMeBW > 0 {
			// Larger than the machine's memory, host included: ZeRO-Infinity,
			// when the cluster states its NVMe bandwidth (--nvme-bw).
			s.run([]string{"nvme"})
		}
	}
	var r Result
	if len(s.best) > 0 {
		for i := range s.best {
			e := Evaluate(m, j, c, s.best[i].Layout)
			o.Correction.Apply(&e, j, c)
			if i == 0 {
				r.Plan = &e
			} else {
				r.Alternatives = append(r.Alternatives, e)
			}
		}
		// Rejected: layouts predicted faster than the plan that do not fit,
		// nearest to fitting first, then the fastest ones.
		seen := map[string]bool{}
		add := func(e *Evaluation) {
			cfg := e.Layout.Config()
			if seen[cfg] || e.TokensPerSPerGPU <= r.Plan.TokensPerSPerGPU || len(r.Rejected) >= o.MaxRejected {
				return
			}
			seen[cfg] = true
			r.Rejected = append(r.Rejected, Rejection{Config: cfg, Reason: e.Reason})
		}
		for i := range s.close {
			add(&s.close[i])
		}
		for i := range s.nofit {
			add(&s.nofit[i])
		}
	} else {
		for i := range s.close {
			r.Rejected = append(r.Rejected, Rejection{Config: s.close[i].Layout.Config(), Reason: s.close[i].Reason})
		}
		if len(s.close) == 0 {
			r.Rejected = append(r.Rejected, s.invalid...)
			r.Invalid = invalidKind(j, c, o.Pins)
		}
		if o.FullyPinned(m) && len(s.close) > 0 {
			e := Evaluate(m, j, c, s.close[0].Layout)
			o.Correction.Apply(&e, j, c)
			r.Plan = &e
		}
	}
	if r.Plan == nil && len(r.Rejected) == 0 {
		// Nothing was even evaluated: say which rule the pins (or the job) break.
		r.Rejected = []Rejection{pinnedReason(m, j, c, o.Pins)}
		r.Invalid = invalidKind(j, c, o.Pins)
	}
	if r.Alternatives == nil {
		r.Alternatives = []Evaluation{}
	}
	if r.Rejected == nil {
		r.Rejected = []Rejection{}
	}
	return r
}

// searchAxes are the degrees Search tries on each axis of the layout that
// does not depend on the others: TP, PP, CP and the recompute modes, each
// narrowed by the stack, the cluster and the pins, and the stack's layout
// rule (which narrows the per-layout axes: ZeRO, VPP).
type searchAxes struct {
	tps, pps, cps []int
	recs          []string
	rule          stackLayout
}

// axes is the degrees run walks: TP divides the heads and stays in the
// NVLink domain unless allowed or pinned; PP divides the layers or splits
// them unevenly; CP doubles while a rank keeps 1024 tokens.
func (s *searcher) axes() searchAxes {
	m, j, c, o := s.m, s.j, s.c, s.o
	p := o.Pins
	if c.NVLinkDomain <= 0 {
		c.NVLinkDomain = max(c.GPU.NVLinkDomain, 1)
	}
	if c.GPUsPerNode <= 0 {
		c.GPUsPerNode = max(c.GPU.GPUsPerNode, 1)
	}
	dom := tpDomain(c)
	var tps []int
	for _, t := range divisors(gcd(m.Heads, m.kvHeads())) {
		if t > c.GPUs || (t > dom && !o.AllowTPOutsideDomain && p.TP == nil) {
			continue
		}
		tps = append(tps, t)
	}
	if j.Stack == StackHF {
		tps = []int{1} // the Hugging Face Trainer shards with DDP or FSDP only (stacks.go)
	}
	tps = pinOr(p.TP, tps)
	// PP: divisors of the layer count, and uneven splits (heaviest stage
	// ceil(L/p), Megatron's first/last-stage layer counts) up to L/2 stages.
	var pps []int
	for pp := 1; pp <= min(m.Layers, max(c.GPUs, 1)); pp++ { // more stages than GPUs never fit
		if m.Layers%pp == 0 || pp <= m.Layers/2 {
			pps = append(pps, pp)
		}
	}
	rule := stackLayoutOf(j.Stack)
	if !rule.pp {
		pps = []int{1}
	}
	pps = pinOr(p.PP, pps)
	cps := []int{1}
	if o.AllowCP && c.GPU.AttentionEff > 0 && j.Stack != StackMegatron2022 {
		for cp := 2; j.SeqLen/cp >= 1024 && cp <= c.GPUs; cp *= 2 {
			cps = append(cps, cp)
		}
	}
	cps = pinOr(p.CP, cps)
	recs := []string{"none", "selective", "full"}
	if j.Stack == StackHF {
		recs = []string{"none", "full"} // gradient_checkpointing is the whole model's, on or off
	}
	if p.Recompute != nil {
		recs = []string{*p.Recompute}
	}
	return searchAxes{tps: tps, pps: pps, cps: cps, recs: recs, rule: rule}
}

// run evaluates every layout of the axes whose degrees multiply to the
// cluster's GPUs and divide the batch, with each MoE expert split, ZeRO
// stage, virtual pipeline, sequence parallelism and offload the layout
// allows, and the micro-batch sizes mbsLoop tries.
func (s *searcher) run(offloads []string) {
	m, j, c, p := s.m, s.j, s.c, s.o.Pins
	a := s.axes()
	tps, pps, cps, recs, rule := a.tps, a.pps, a.cps, a.recs, a.rule
	var x shape
	var e Evaluation
	for _, tp := range tps {
		for _, pp := range pps {
			if tp*pp > c.GPUs {
				continue
			}
			for _, cp := range cps {
				if c.GPUs%(tp*pp*cp) != 0 {
					continue
				}
				dp := c.GPUs / (tp * pp * cp)
				if p.DP != nil && *p.DP != dp {
					continue
				}
				if j.GlobalBatch%dp != 0 {
					continue
				}
				etp := 0 // = tp
				if p.ETP != nil {
					etp = *p.ETP
				}
				eps := []int{1}
				if m.isMoE() {
					eps = nil
					for _, ep := range divisors(m.Experts) {
						if etp == 0 && (dp*cp)%ep == 0 || etp > 0 && (tp*dp*cp)%(ep*etp) == 0 {
							eps = append(eps, ep)
						}
					}
				}
				eps = pinOr(p.EP, eps)
				zeros := pinOr(p.Zero, s.zerosFor(rule, pp, dp*cp))
				vpps := []int{1}
				if pp > 1 && m.Layers%pp == 0 && rule.vpp {
					vpps = divisors(m.Layers / pp)
				}
				vpps = pinOr(p.VPP, vpps)
				sps := []bool{tp > 1}
				if p.SP != nil {
					sps = []bool{*p.SP}
				}
				for _, ep := range eps {
					for _, zero := range zeros {
						for _, vpp := range vpps {
							for _, sp := range sps {
								for _, off := range offloads {
									s.mbsLoop(&x, &e, Layout{TP: tp, PP: pp, VPP: vpp, CP: cp, EP: ep, ETP: etp, DP: dp, SP: sp, Zero: zero, Offload: off}, recs)
								}
							}
						}
					}
				}
			}
		}
	}
}

// zerosFor is the ZeRO stages Search tries for pp stages and dpcp = dp·cp
// ranks sharing the weights. ZeRO-3/FSDP only without PP: with PP every
// micro-batch would gather the stage's weights again (Megatron does not
// combine them); the stack's rule (stackLayoutOf) and a deepspeed:zeroN
// stage narrow it.
func (s *searcher) zerosFor(rule stackLayout, pp, dpcp int) []int {
	switch {
	case dpcp == 1:
		return []int{0}
	case StackZero(s.j.Stack) >= 0:
		return []int{StackZero(s.j.Stack)}
	case rule.zeros != nil:
		return rule.zeros
	case pp > 1:
		return []int{1}
	}
	return []int{1, 3}
}

// mbsLoop tries micro-batch sizes upward and recompute from none to full,
// stopping as soon as more memory cannot help.
func (s *searcher) mbsLoop(x *shape, e *Evaluation, l Layout, recs []string) {
	m, j, c := s.m, s.j, s.c
	mbss := []int{1, 2, 4, 8, 16}
	if s.o.Pins.MicroBatch != nil {
		mbss = []int{*s.o.Pins.MicroBatch}
	} else if ga := s.o.Pins.GradAccum; ga != nil && j.GlobalBatch > 0 && j.GlobalBatch%(*ga*l.DP) == 0 {
		mbss = []int{j.GlobalBatch / (*ga * l.DP)} // a pinned grad_accum decides mbs
	}
	for _, mbs := range mbss {
		if j.GlobalBatch%(mbs*l.DP) != 0 {
			continue
		}
		if ga := s.o.Pins.GradAccum; ga != nil && j.GlobalBatch/(mbs*l.DP) != *ga {
			continue
		}
		l.MicroBatch = mbs
		anyFit := false
		for _, rc := range recs {
			if rc == "selective" && c.GPU.AttentionEff > 0 && j.Stack != StackMegatron2022 && len(recs) > 1 {
				continue // with flash attention selective recompute frees nothing
			}
			l.Recompute = rc
			l.RecomputeLayers = 0
			*e = Evaluation{}
			evaluate(x, m, j, c, l, e)
			if rc == "full" && e.Memory.Fits && s.o.Pins.Recompute == nil && j.Stack != StackHF {
				s.blockRecompute(x, e, l)
			}
			s.o.Correction.apply(e, c, float64(j.GlobalBatch)*float64(j.SeqLen), false)
			s.offer(e)
			if e.Reason != "" && e.Memory.PerGPU == 0 {
				break // invalid regardless of recompute
			}
			if e.Memory.Fits {
				anyFit = true
				if !e.Tight || s.o.Pins.Recompute != nil {
					break // more recompute only costs time
				}
				// Tight: the next recompute level may buy headroom for
				// less than TightPenalty; both are offered, better decides.
			}
		}
		if !anyFit && e.Memory.PerGPU > 0 {
			return // a larger micro-batch needs more memory still
		}
	}
}

// NoFit is "" when r (Search's answer for m, j, c, o) has a plan that fits;
// otherwise it says why not: the pinned layout's reason or the nearest miss,
// and what would fit (Suggest). trainrun plan, trainrun run and the plugin
// report it.
func NoFit(m Model, j Job, c Cluster, o SearchOptions, r Result) string {
	if r.Plan != nil && r.Plan.Memory.Fits {
		return ""
	}
	if r.Invalid != "" {
		j.Precision = PrecisionFor(j.Precision, c.GPU)
		return invalidMessage(m, j, c, o, r)
	}
	var msg string
	if r.Plan != nil {
		msg = fmt.Sprintf("the pinned layout %s does not fit on %s: %s", r.Plan.Layout.Config(), c.GPU.Name, r.Plan.Reason)
	} else {
		msg = fmt.Sprintf("no layout of %s fits %d x %s", m.Name, c.GPUs, c.GPU.Name)
		if len(r.Rejected) > 0 {
			msg += fmt.Sprintf(" (nearest: %s: %s)", r.Rejected[0].Config, r.Rejected[0].Reason)
		}
	}
	if s := Suggest(m, j, c, o); s != "" {
		msg += "; " + s
	} else {
		msg += "; no nearby change (more GPUs, recompute, LoRA, offload) makes it fit"
	}
	return msg
}

// Suggest says what nearest change makes a job fit when Search finds nothing:
// another GPU count (whole nodes up or down, then doublings), full recompute,
// context parallelism, LoRA, or offload. Empty if nothing does.
func Suggest(m Model, j Job, c Cluster, o SearchOptions) string {
	o.TopK = -1
	o.MaxRejected = -1
	var out []string
	// The nearest GPU count that works: whole nodes up or down (divisibility),
	// then doublings (memory).
	node := max(c.GPUsPerNode, 1)
	if node == 1 {
		node = max(c.GPU.GPUsPerNode, 1)
	}
	var counts []int
	for k := 1; k <= 16; k++ {
		counts = append(counts, c.GPUs+k*node)
		if c.GPUs-k*node > 0 {
			counts = append(counts, c.GPUs-k*node)
		}
	}
	for f := 4; f <= 64; f *= 2 {
		counts = append(counts, c.GPUs*f)
	}
	for _, n := range counts {
		cc := c
		cc.GPUs = n
		if r := Search(m, j, cc, o); r.Plan != nil && r.Plan.Memory.Fits {
			out = append(out, fmt.Sprintf("fits with %d GPUs", n))
			break
		}
	}
	if o.Pins.Recompute != nil && *o.Pins.Recompute != "full" {
		oo := o
		full := "full"
		oo.Pins.Recompute = &full
		if r := Search(m, j, c, oo); r.Plan != nil && r.Plan.Memory.Fits {
			out = append(out, "fits with recompute=full")
		}
	}
	if !o.AllowCP && j.SeqLen >= 8192 {
		oo := o
		oo.AllowCP = true
		if r := Search(m, j, c, oo); r.Plan != nil && r.Plan.Memory.Fits {
			out = append(out, "fits with context parallelism allowed")
		}
	}
	out = append(out, suggestFinetune(m, j, c, o)...)
	if o.Pins.Offload == nil || *o.Pins.Offload == "none" {
		oo := o
		for _, off := range []string{"optimizer", "params", "nvme"} {
			off := off
			oo.Pins.Offload = &off
			if r := Search(m, j, c, oo); r.Plan != nil && r.Plan.Memory.Fits {
				out = append(out, "fits with offload="+off)
				break
			}
		}
	}
	return strings.Join(out, "; or ")
}

// blockRecompute narrows e, full recompute of l that fits, to only as many
// layers per chunk as memory demands. When that is tight but recomputing
// every layer is not, it also offers the fewest layers that leave the
// margin free: better weighs the extra recompute against TightPenalty.
func (s *searcher) blockRecompute(x *shape, e *Evaluation, l Layout) {
	m, j, c := s.m, s.j, s.c
	roomy := !e.Tight
	if n := minRecomputeLayers(x, m, j, c, l); n > 0 {
		l.RecomputeLayers = n
		*e = Evaluation{}
		evaluate(x, m, j, c, l, e)
	}
	if !e.Tight || !roomy {
		return
	}
	var r Evaluation
	l.RecomputeLayers = recomputeLayersFor(x, m, j, c, l, true) // 0: every layer
	evaluate(x, m, j, c, l, &r)
	s.o.Correction.apply(&r, c, float64(j.GlobalBatch)*float64(j.SeqLen), false)
	s.offer(&r)
}

// minRecomputeLayers returns the fewest layers per model chunk that block
// recompute must cover for l to fit, or 0 when all of them are needed (or
// the chunk has a single layer). Memory falls monotonically with the count.
func minRecomputeLayers(x *shape, m Model, j Job, c Cluster, l Layout) int {
	return recomputeLayersFor(x, m, j, c, l, false)
}

// recomputeLayersFor is minRecomputeLayers; with roomy, the layers must
// also leave the memory margin free.
func recomputeLayersFor(x *shape, m Model, j Job, c Cluster, l Layout, roomy bool) int {
	chunk := m.Layers / (l.PP * max(l.VPP, 1))
	if chunk <= 1 {
		return 0
	}
	var e Evaluation
	lo, hi := 1, chunk // hi: known to fit (all layers)
	for lo < hi {
		mid := (lo + hi) / 2
		l.RecomputeLayers = mid
		e = Evaluation{}
		evaluate(x, m, j, c, l, &e)
		if e.Memory.Fits && (!roomy || !e.Tight) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	if hi >= chunk {
		return 0
	}
	return hi
}

// pinnedReason evaluates the layout the pins describe (unpinned degrees 1, DP
// what is left) to name the rule that leaves nothing to search.
func pinnedReason(m Model, j Job, c Cluster, p Pins) Rejection {
	get := func(v *int, def int) int {
		if v != nil {
			return *v
		}
		return def
	}
	l := Layout{TP: get(p.TP, 1), PP: get(p.PP, 1), VPP: get(p.VPP, 1), CP: get(p.CP, 1), EP: get(p.EP, 1), MicroBatch: get(p.MicroBatch, 1), Zero: get(p.Zero, 1)}
	l.DP = get(p.DP, max(c.GPUs/max(l.TP*l.PP*l.CP, 1), 1))
	if p.Recompute != nil {
		l.Recompute = *p.Recompute
	}
	if p.Offload != nil {
		l.Offload = *p.Offload
	}
	e := Evaluate(m, j, c, l)
	reason := e.Reason
	if ga := p.GradAccum; ga != nil && reason == "" && e.GradAccum != *ga {
		reason = fmt.Sprintf("grad_accum=%d pinned, but global batch %d over micro_batch·dp = %d·%d gives %d: leave grad_accum out (the batch decides it) or change the batch",
			*ga, j.GlobalBatch, l.MicroBatch, l.DP, e.GradAccum)
	}
	if reason == "" {
		reason = fmt.Sprintf("no layout meets the pins and the rules: tp·pp·cp·dp = %d GPUs, heads and KV heads divisible by tp, global batch %d divisible by micro_batch·dp", c.GPUs, j.GlobalBatch)
	}
	return Rejection{Config: e.Layout.Config(), Reason: reason}
}
