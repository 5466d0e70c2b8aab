package plan

import "math"

// Step-time model. One micro-batch's work on the slowest pipeline stage is
// built from kernels the hardware really runs, each timed by what bounds it:
//
//   - GEMMs: a soft roofline per GEMM, t = 2mnk/(P·ε·q) + bytes/B_HBM, with m,n,k
//     the per-GPU shape after TP/CP/EP sharding. ε is the GPU's asymptotic
//     efficiency, derived from its measured maximum achievable matmul FLOPS
//     (gpus.go) by removing the memory term of the benchmark's 8192³ shape; q is
//     tile quantisation (dimensions rounded up to 128). The GPU's balance of peak
//     to HBM bandwidth (its ridge point) thus decides how fast small or skinny
//     GEMMs run: a mechanism, not one constant. FP8 runs the transformer GEMMs
//     at the FP8 peak with 1-byte operands; the output layer stays 16-bit
//     (Transformer Engine does not quantise it). The backward runs dgrad and
//     wgrad GEMMs; wgrad accumulates into FP32 main gradients (Megatron's
//     gradient-accumulation fusion: 8 bytes read+written per weight per
//     micro-batch). LoRA's frozen base needs no wgrad.
//   - Attention: fused flash attention at the GPU's attention efficiency (causal:
//     half the blocks), with a short-sequence factor s/(s+512) for per-block
//     overheads; backward 2.5× the forward FLOPs (FlashAttention-2 recomputes
//     the scores). The 2022 stack instead runs two batched GEMMs per head on the
//     full s×s scores (k = head dim: memory-bound) and reads and writes the
//     scores in softmax and dropout (9 bytes per score forward, 11 backward).
//   - Elementwise kernels (norms, residual adds, dropout, activation function,
//     rotary, FP8 casts with transposes): HBM-bound; bytes counted per token,
//     backward twice the forward. Without SP the norm/dropout/residual work is
//     replicated on every TP rank, which is why SP also saves time.
//   - Collectives: ring volumes (nccl-tests PERFORMANCE.md: all-reduce
//     2(n−1)/n, reduce-scatter and all-gather (n−1)/n) over the link the group
//     uses, at NCCL's achievable share of the link rate, plus a latency per call.
//   - Overlap: what hides behind what is stated per collective below.

// Achievable shares of link and memory rates, latencies and overlaps. Measured
// where a source is named, otherwise engineering assumptions; none was fitted
// to the calibration set except sustainedClock (marked).
const (
	hbmEff        = 0.85  // elementwise kernels' share of HBM peak (STREAM-like; ~0.9 measured on H100)
	nvlinkEff     = 0.80  // NCCL bus bandwidth / NVLink rate without NVLS (H100 ~360-380 of 450 GB/s; A100 ~230 of 300)
	netEff        = 0.85  // NCCL bus bandwidth / NIC rate at scale (46-48 of 50 GB/s per NDR NIC single-node, nccl-tests#290)
	pcieEff       = 0.80  // achievable PCIe DMA share
	a2aNetEff     = 0.60  // inter-node all-to-all: many small messages, no rail alignment
	nvlLatency    = 10e-6 // per NVLink collective call
	netLatency    = 30e-6 // per inter-node collective call or p2p transfer
	tpInterfere   = 0.10  // overlapped TP comm still slows the GEMM it hides behind (SMs and HBM shared)
	dpHide        = 0.90  // share of the last backward that gradient reduce-scatter can hide behind
	adamBytes     = 30.0  // Adam update per parameter: read grad, FP32 master, m, v (16) + write master, m, v (12) + 16-bit weight (2)
	hostAdamBW    = 200e9 // CPU Adam memory throughput per node (2-socket server), for optimizer offload
	flashSeqKnee  = 512.0 // flash attention's short-sequence knee: efficiency × s/(s+512)
	ceBytes       = 60.0  // cross-entropy bytes per logit, fwd+bwd: Megatron's vocab-parallel loss in FP32 (cast, max, subtract, exp, sum, divide: ~38; gradient, scale, cast back: ~22)
	unfusedFwdB   = 9.0   // softmax+dropout bytes per attention score, forward (2022 stack)
	unfusedBwdB   = 11.0  // the same, backward
	gradBytesFP32 = 4.0
	// sustainedClock: training runs for hours at the power limit, where the
	// clock sits below what short matmul benchmarks (MAMF) and kernel papers
	// see; with kernel-launch gaps this costs compute about 10 %. One constant for
	// every GPU, calibrated on the A100 rows (Megatron 2021-22), where the other
	// efficiencies are measured ones.
	sustainedClock = 0.90
)

// kern holds a GPU's derived rates and some figures for the Why lines.
type kern struct {
	p16, p8    float64 // asymptotic GEMM FLOP/s
	hbm, hbmE  float64 // raw and achievable HBM bytes/s
	attn       float64 // flash attention FLOP/s at long sequence
	gemmFlops  float64 // for the Why line: FLOPs and time of the layer GEMMs
	gemmTime   float64
	gemmEffAvg float64
	bigN, bigK float64
	cpHidden   float64
	cpTotal    float64
	dpTotal    float64
}

// asymptoticEff removes the memory term from a measured efficiency: mamf-finder
// reports the best of large square GEMMs (8192³ here); their bytes are
// e·3·8192² (16-bit) or (2+2)·8192² (FP8 in, 16-bit out).
func asymptoticEff(measured, peak, hbm, inBytes float64) float64 {
	if measured <= 0 || peak <= 0 {
		return 0
	}
	const n = 8192.0
	flops := 2 * n * n * n
	bytes := (2*inBytes + 2) * n * n
	tMem := bytes / hbm
	tMeas := flops / (peak * measured)
	if tMeas <= tMem {
		return measured
	}
	return math.Min(flops/(peak*(tMeas-tMem)), 1)
}

// fa2HopperEff: FlashAttention-2-class kernels on Hopper reach ~35 % of peak
// (FlashAttention-3 paper, Shah et al. 2024, §1); NeMo 24.x ran them.
const fa2HopperEff = 0.35

func newKern(g GPU, stack Stack) kern {
	var k kern
	k.hbm = g.HBMBandwidth
	k.hbmE = g.HBMBandwidth * hbmEff
	k.p16 = sustainedClock * g.PeakBF16 * asymptoticEff(g.MatmulEff, g.PeakBF16, g.HBMBandwidth, 2)
	k.p8 = sustainedClock * g.PeakFP8 * asymptoticEff(g.FP8MatmulEff, g.PeakFP8, g.HBMBandwidth, 1)
	attn := g.AttentionEff
	if stackOf(stack).fa2 && g.Arch == "hopper" {
		attn = math.Min(attn, fa2HopperEff)
	}
	k.attn = sustainedClock * g.PeakBF16 * attn
	return k
}

// tileQ is the share of tensor-core work that is useful when a dimension is
// padded to 128-wide tiles.
func tileQ(d float64) float64 {
	if d <= 0 {
		return 1
	}
	return d / (128 * math.Ceil(d/128))
}

// gemm times one m×k · k×n GEMM.
func (k *kern) gemm(m, n, kk float64, fp8 bool, outBytes float64) float64 {
	peak, in := k.p16, 2.0
	if fp8 && k.p8 > 0 {
		peak, in = k.p8, 1.0
	}
	flops := 2 * m * n * kk
	bytes := in*(m*kk+kk*n) + outBytes*m*n
	return flops/(peak*tileQ(m)*tileQ(n)) + bytes/k.hbm
}

// linear times a linear layer y = x·W with x m×kk and W kk×n: forward, and
// backward (dgrad, plus wgrad into FP32 main grads unless frozen).
func (k *kern) linear(m, kk, n float64, fp8, frozen bool) (fwd, bwd float64) {
	fwd = k.gemm(m, n, kk, fp8, 2)
	bwd = k.gemm(m, kk, n, fp8, 2)
	if !frozen {
		bwd += k.gemm(kk, n, m, fp8, 2*gradBytesFP32)
	}
	// The FLOPs these GEMMs do: forward and dgrad, and wgrad unless frozen
	// (LoRA). Counting 6 for a frozen layer put LoRA's GEMMs at 6/4 of their
	// efficiency: "110 % of the 16-bit peak".
	flops := 4 * m * kk * n
	if !frozen {
		flops += 2 * m * kk * n
	}
	k.gemmFlops += flops
	k.gemmTime += fwd + bwd
	return fwd, bwd
}

// link is a bandwidth (bytes/s, achievable) and a per-call latency.
type link struct{ bw, lat float64 }

func (x *shape) nvlink() link {
	g := x.c.GPU
	if g.NVLinkBandwidth > 0 {
		return link{g.NVLinkBandwidth * nvlinkEff, nvlLatency}
	}
	return link{g.PCIeBandwidth * pcieEff, nvlLatency}
}

func (x *shape) net() link { return link{x.c.InterNode * netEff, netLatency} }

// groupLink returns the link a group of size n whose members are `stride`
// ranks apart uses (Megatron rank order tp-cp-ep-dp-pp), and how many members
// share one fast domain.
func (x *shape) groupLink(n, stride float64) (link, float64) {
	dom := float64(tpDomain(x.c))
	if n*stride <= dom {
		return x.nvlink(), n
	}
	k := math.Max(1, math.Floor(dom/stride))
	return x.net(), math.Min(k, n)
}

// collective times a ring collective moving vol bytes per GPU in a group of n
// members, k of them per fast domain: inter-node traffic spreads over the k
// members' NICs (NCCL channels), intra-domain hops use NVLink.
func (x *shape) collective(vol, n, stride float64) float64 {
	if n <= 1 || vol <= 0 {
		return 0
	}
	l, k := x.groupLink(n, stride)
	if l.lat == nvlLatency {
		return vol/l.bw + l.lat
	}
	nv := x.nvlink()
	return math.Max(vol/(k*l.bw), vol/nv.bw) + l.lat
}

// stageT is one micro-batch's time on one pipeline stage, by part.
type stageT struct {
	compute, recompute, tp, cp, ep float64
	fwd, bwd                       float64 // forward and backward compute (overlap windows)
}

func (s stageT) total() float64 { return s.compute + s.recompute + s.tp + s.cp + s.ep }

// linearsTime times one layer's linear layers for one micro-batch: attention's
// (QKV and output, or MLA's projections), then the dense MLP or the MoE
// block (shared expert, grouped expert GEMMs, router).
func (x *shape) linearsTime(moe bool) (fwd, bwd float64) {
	m := &x.m
	k := &x.k
	T := x.tokens
	t := x.t
	h := float64(m.Hidden)
	frozen := x.j.frozenBase()
	fp8 := x.fp8
	add := func(f, b float64) { fwd += f; bwd += b }
	als, nal := m.attnLinears()
	for _, al := range als[:nal] {
		in, out := al.in, al.out
		switch {
		case al.colTP:
			out /= t
		case al.rowTP:
			in /= t
		}
		add(k.linear(T, in, out, fp8, frozen))
	}
	mats := m.FFNType.mlpMatrices()
	if moe {
		if m.SharedFFN > 0 {
			sf := float64(m.SharedFFN)
			add(k.linear(T, h, (mats-1)*sf/t, fp8, frozen))
			add(k.linear(T, sf/t, h, fp8, frozen))
		}
		// Grouped expert GEMMs: k·T·etp/t routed tokens per GPU over E/EP
		// local experts, each F/etp wide (ETP = TP: tokens gathered over TP;
		// ETP < TP: each TP rank dispatches its own SP shard).
		kt := float64(m.TopK) * T * x.etp / t
		local := float64(m.Experts) / x.ep
		me := kt / local * x.moeLoad() // the busiest rank sets the pace (moe.go)
		fe := float64(m.moeFFN())
		f1, b1 := k.linear(me, h, (mats-1)*fe/x.etp, fp8, frozen)
		f2, b2 := k.linear(me, fe/x.etp, h, fp8, frozen)
		add(local*(f1+f2), local*(b1+b2))
		add(k.linear(T, h, float64(m.Experts), false, frozen)) // router
	} else {
		f := float64(m.FFN)
		add(k.linear(T, h, (mats-1)*f/t, fp8, frozen))
		add(k.linear(T, f/t, h, fp8, frozen))
		k.bigN, k.bigK = (mats-1)*f/t, h
	}
	return fwd, bwd
}

// layerTime times one transformer layer for one micro-batch: its GEMMs,
// attention core and elementwise kernels at the stack's efficiency, the
// recompute, and the TP, CP and EP communication that shows.
func (x *shape) layerTime(moe bool) stageT {
	fwd, bwd := x.linearsTime(moe)
	add := func(f, b float64) { fwd += f; bwd += b }
	gemmF, gemmB := fwd, bwd
	add(x.dequantTime(moe)) // QLoRA (finetune.go)
	attF, attB := x.attentionCore()
	add(attF, attB)
	eltF := x.elementwiseFwd(moe)
	add(eltF, 2*eltF)
	// Gaps between dependent kernels (stacks.go: kernelGap, kernels).
	add(x.st.kernels*kernelGap, 2*x.st.kernels*kernelGap)
	// The stack's fitted kernel efficiency (stacks.go: stackEff).
	fwd /= x.st.eff
	bwd /= x.st.eff
	attF /= x.st.eff
	attB /= x.st.eff

	st := stageT{fwd: fwd, bwd: bwd, compute: fwd + bwd}
	switch x.l.Recompute {
	case "full":
		st.recompute = x.recomputeFraction() * fwd
	case "selective":
		st.recompute = attF
	}
	if x.l.TP > 1 {
		st.tp = x.tpComm(gemmF, gemmB)
	}
	if x.l.CP > 1 {
		st.cp = x.cpComm(attF, attB)
	}
	if moe && x.l.EP > 1 {
		st.ep = x.epShown(x.epComm(), st.compute+st.recompute)
	}
	return st
}

// attentionCore is the attention's forward and backward time for one
// micro-batch: flash attention, or the unfused score GEMMs and softmax.
func (x *shape) attentionCore() (attF, attB float64) {
	m, k := &x.m, &x.k
	T, t, s := x.tokens, x.t, float64(x.j.SeqLen)
	n, d := float64(m.Heads), float64(m.headDim())
	if x.flash {
		flopsF := 2 * T * (s/2 + x.j.prefixTokens()) * (n / t) * float64(m.qkDim()+m.vDim()) // causal: half the keys, and every prefix key
		eff := s / (s + flashSeqKnee)
		attF = flopsF / (k.attn * eff)
		attB = 2.5 * attF
	} else {
		heads := x.b * n / t
		qk := k.gemm(s, s, d, false, 2)
		av := k.gemm(s, d, s, false, 2)
		scores := heads * s * s
		attF = heads*(qk+av) + unfusedFwdB*scores/k.hbmE
		attB = heads*2*(qk+av) + unfusedBwdB*scores/k.hbmE
	}
	return attF, attB
}

// elementwiseFwd is the forward time of the elementwise kernels (norms,
// residual adds, activation, rotary, FP8 casts), from their bytes per token.
func (x *shape) elementwiseFwd(moe bool) float64 {
	m, k := &x.m, &x.k
	T, t, fp8 := x.tokens, x.t, x.fp8
	h, d := float64(m.Hidden), float64(m.headDim())
	n, g := float64(m.Heads), float64(m.kvHeads())
	repDiv := 1.0
	if x.sp {
		repDiv = t
	}
	rep := 22 * h // two norms (read+write), two bias-dropout-residual adds (read 2, write 1, mask)
	var tpE float64
	act := func(f float64) float64 { // activation function read+write
		if m.FFNType.gated() {
			return 6 * f
		}
		return 4 * f
	}
	if moe {
		tpE = act(float64(m.SharedFFN)) + float64(m.TopK)*(act(float64(m.moeFFN()))+8*h) // +permute/unpermute copies
	} else {
		tpE = act(float64(m.FFN))
	}
	if m.FFNType.gated() {
		tpE += 4 * (n + g) * d // rotary embedding on q and k
	}
	if fp8 {
		r, p := x.fp8Casts(moe) // the recipe's casts (fp8.go)
		rep += r
		tpE += p
	}
	return x.st.eltBytes * T * (rep/repDiv + tpE/t) / k.hbmE
}

// tpComm is the time that shows of the TP collectives: 2 all-reduce-
// equivalents forward, 2 backward, 2 more for a fully recomputed forward
// (Shoeybi 2019; Korthikanti §4.2.2 with SP).
func (x *shape) tpComm(gemmF, gemmB float64) float64 {
	T, t, h := x.tokens, x.t, float64(x.m.Hidden)
	S := T * h * 2
	vol := 2 * (t - 1) / t * S
	l, _ := x.groupLink(t, 1)
	one := vol/l.bw + 2*l.lat
	if l.lat != nvlLatency {
		one = vol/(l.bw) + 2*l.lat
	}
	commF, commB := 2*one, 2*one
	commF *= 1 + x.recomputeFraction()
	if x.sp && !x.legacy && (x.c.GPU.Arch == "hopper" || x.c.GPU.Arch == "blackwell") {
		// TE userbuffers (Hopper and later; not on Ampere or ROCm):
		// all-gather/reduce-scatter pipelined with the GEMMs that consume or
		// produce them; what exceeds the GEMMs shows, plus interference.
		return math.Max(commF-gemmF, 0) + math.Max(commB-gemmB, 0) + tpInterfere*(commF+commB)
	}
	return commF + commB
}

// cpComm is the time that shows of the CP ring exchange of K and V
// (Megatron CP): cp−1 steps forward, K,V and dK,dV backward, each hidden
// behind one block of attention.
func (x *shape) cpComm(attF, attB float64) float64 {
	T, t := x.tokens, x.t
	g, d := float64(x.m.kvHeads()), float64(x.m.headDim())
	kv := 2 * T * (g / t) * d * 2
	l, _ := x.groupLink(x.cp, t)
	stepF := kv/l.bw + l.lat
	stepB := 2*kv/l.bw + l.lat
	steps := x.cp - 1
	shown := steps * (math.Max(stepF-attF/x.cp, 0) + math.Max(stepB-attB/x.cp, 0))
	x.k.cpTotal = steps * (stepF + stepB)
	x.k.cpHidden = x.k.cpTotal - shown
	return shown
}

// epComm is the time of the EP all-to-all: dispatch and combine, forward
// and backward (+ recompute), over EP ranks etp apart (cp as well when ETP = TP, Megatron's order).
// Each rank sends the k copies of its own sequence-parallel shard (T/t
// tokens); with ETP > 1 the received tokens are then all-gathered (and
// their outputs reduce-scattered) inside the ETP group, over NVLink
// (Megatron-Core MoEAlltoAllTokenDispatcher: all-to-all over EP, then
// gather_from_sequence_parallel_region over the expert TP group).
func (x *shape) epComm() float64 {
	m := &x.m
	T, t, h := x.tokens, x.t, float64(m.Hidden)
	kh2 := float64(m.TopK) * h * 2
	vol := T / t * kh2 * (x.ep - 1) / x.ep * x.moeLoad()
	one := x.a2aTime(vol, x.ep, x.epStride())
	if x.etp > 1 {
		nv := x.nvlink()
		one += T*x.etp/t*kh2*(x.etp-1)/x.etp/nv.bw + nv.lat
	}
	calls := 4 + 2*x.recomputeFraction()
	return calls * one
}

// expStride is how many ranks apart the members of an expert-data-parallel
// group are (Megatron order tp-cp-ep-dp, or etp-ep-edp with folding).
func (x *shape) expStride() float64 {
	if x.etp == x.t {
		return x.t * x.cp * x.ep
	}
	return x.etp * x.ep
}

// epStride is how many ranks apart the members of an EP group are.
func (x *shape) epStride() float64 {
	if x.etp == x.t {
		return x.t * x.cp
	}
	return x.etp
}

// stageTime times one micro-batch on one pipeline stage.
func (x *shape) stageTime(kind stageKind) stageT {
	m := &x.m
	nDense, nMoE := x.stageLayers(kind)
	var st stageT
	addL := func(lt stageT, c float64) {
		if c == 0 {
			return
		}
		st.compute += c * lt.compute
		st.recompute += c * lt.recompute
		st.tp += c * lt.tp
		st.cp += c * lt.cp
		st.ep += c * lt.ep
		st.fwd += c * lt.fwd
		st.bwd += c * lt.bwd
	}
	if nDense > 0 {
		addL(x.layerTime(false), nDense)
	}
	if nMoE > 0 {
		addL(x.layerTime(true), nMoE)
	}
	if x.hasOutput(kind) {
		// Output layer (16-bit) and vocab-parallel cross-entropy.
		V := float64(m.Vocab)
		f, b := x.k.linear(x.tokens, float64(m.Hidden), V/x.t, false, x.j.frozenBase())
		f, b = f/x.st.eff, b/x.st.eff
		ce := x.st.eltBytes * ceBytes * x.tokens * V / x.t / x.k.hbmE / x.st.eff
		st.compute += f + b + ce
		st.fwd += f
		st.bwd += b
		addL(x.mtpTime(), 1)
	}
	return st
}

// timeOf fills e.Time and e.Traffic.
func (x *shape) timeOf(e *Evaluation) {
	st := x.slowestStage()
	mb := x.mb
	tm := &e.Time
	tm.Compute = mb * st.compute
	tm.Recompute = mb * st.recompute
	tm.TPComm = mb * st.tp
	tm.CPComm = mb * st.cp
	tm.EPComm = mb * st.ep
	perMB := st.total()
	// Pipeline bubble: (p−1)/(v·m) of the m micro-batches' work (Narayanan 2021 §2.2).
	tm.PPBubble = (x.p - 1) / x.v * perMB

	x.layerTraffic(&e.Traffic)
	x.pipelineComm(tm, &e.Traffic)
	sp, dense, expert, n, ne := x.dpComm(tm, &e.Traffic, st, perMB)

	x.optimizerTime(tm, sp, dense, expert, n, ne, perMB)
	// Stragglers: every step waits for the slowest GPU (stacks.go: jitterSigma).
	if n := float64(x.c.GPUs); n > 1 {
		tm.Straggler = jitterSigma * math.Sqrt(2*math.Log(n)) * (tm.Compute + tm.Recompute)
	}
	tm.Step = tm.Compute + tm.Recompute + tm.TPComm + tm.PPBubble + tm.PPComm + tm.DPCommExposed + tm.CPComm + tm.EPComm + tm.Optimizer + tm.Offload + tm.Straggler
}

// slowestStage is the per-micro-batch time of the slowest pipeline stage
// (first, last or a middle one), and records the GEMMs' average efficiency.
func (x *shape) slowestStage() stageT {
	x.k.gemmFlops, x.k.gemmTime = 0, 0
	st := x.stageTime(stFirst)
	if x.p > 1 {
		if last := x.stageTime(stLast); last.total() > st.total() {
			st = last
		}
	}
	if x.layersMid > 0 {
		if mid := x.stageTime(stMid); mid.total() > st.total() {
			st = mid
		}
	}
	if x.k.gemmTime > 0 {
		// At the stack's efficiency, as the step time counts them.
		t := x.k.gemmTime / x.st.eff
		x.k.gemmEffAvg = x.k.gemmFlops / t / x.c.GPU.PeakBF16
		if x.fp8 {
			x.k.gemmEffAvg = x.k.gemmFlops / t / x.c.GPU.PeakFP8
		}
	}
	return st
}

// layerTraffic fills the bytes per step of the collectives inside the
// layers: tensor, context and expert parallelism.
func (x *shape) layerTraffic(tr *Traffic) {
	mb := x.mb
	m := &x.m
	h := float64(m.Hidden)
	// TP traffic: 4 (6 with full recompute) all-reduce-equivalents per layer.
	if x.l.TP > 1 {
		calls := 4 + 2*x.recomputeFraction()
		tr.TP = mb * x.layersPerStage * calls * 2 * (x.t - 1) / x.t * x.tokens * h * 2
	}
	if x.l.CP > 1 {
		kv := 2 * x.tokens * (float64(m.kvHeads()) / x.t) * float64(m.headDim()) * 2
		tr.CP = mb * x.layersPerStage * 3 * (x.cp - 1) * kv
	}
	if x.l.EP > 1 {
		moeOnStage := math.Min(float64(m.moeLayers()), x.layersPerStage)
		tr.EP = mb * moeOnStage * 4 * x.tokens / x.t * float64(m.TopK) * h * 2 * (x.ep - 1) / x.ep
	}
}

// pipelineComm fills the exposed time and bytes of the pipeline's p2p:
// activations forward, gradients backward, per virtual stage, b·s·h/t bytes
// each (scatter/gather optimisation or SP shards them).
func (x *shape) pipelineComm(tm *Time, tr *Traffic) {
	mb := x.mb
	if x.p > 1 {
		bytes := x.tokens * float64(x.m.Hidden) * 2 / x.t
		// Adjacent stages are t·cp·dp ranks apart: inside one fast domain
		// (NVL72, or a node's NVLink) when that stride is smaller than it.
		l := x.nvlink()
		if x.t*x.cp*x.dp >= float64(tpDomain(x.c)) {
			l = x.net()
		}
		perMBp2p := 2 * x.v * (bytes/l.bw + l.lat)
		exposed := perMBp2p
		if !x.legacy && x.v > 1 {
			exposed = 0.1 * perMBp2p // overlap_p2p_comm with the interleaved schedule
		}
		tm.PPComm = mb * exposed
		tr.PP = mb * 2 * x.v * bytes
	}
}

// dpComm fills the data-parallel gradient reduction and parameter gathers
// (time, exposed time, bytes) and returns what the optimizer step needs:
// the first stage's parameters, the dense and expert parameters reduced,
// and the two group sizes.
func (x *shape) dpComm(tm *Time, tr *Traffic, st stageT, perMB float64) (sp stageParams, dense, expert, n, ne float64) {
	mb := x.mb
	// Data-parallel gradient reduction and parameter gathers, over DP×CP
	// (members t ranks apart in Megatron's tp-cp-ep-dp-pp order); expert
	// weights over the expert-data-parallel group DP·CP/EP (members t·cp·ep apart).
	sp = x.stage(stFirst)
	dense, expert = sp.dense, sp.expert
	if x.j.frozenBase() {
		dense, expert = sp.adapters, 0
	}
	gB := x.gradBytes()
	if x.legacy && x.j.Precision == FP16 {
		gB = 2 // 2021 Megatron all-reduced FP16 gradients
	}
	n = x.dp * x.cp
	ne = x.edp
	var dpTime, dpExposed float64
	coll := func(vol, frac float64) float64 {
		return x.collective(frac*dense*vol*(n-1)/n, n, x.t) + x.collective(frac*expert*vol*(ne-1)/math.Max(ne, 1), ne, x.expStride())
	}
	switch x.l.Zero {
	case 0:
		ar := coll(2*gB, 1)
		dpTime = ar
		tr.DP = 2 * gB * (dense*(n-1)/n + expert*(ne-1)/math.Max(ne, 1))
		if x.legacy {
			// 2021-22 Megatron's "local" DDP all-reduced after the backward.
			dpExposed = ar
		} else {
			// Bucketed reduction overlaps the last micro-batch's backward.
			dpExposed = math.Max(ar-dpHide*st.bwd, 0)
		}
	case 1, 2:
		rs := coll(gB, 1)
		ag := coll(2, 1)
		dpTime = rs + ag
		tr.DP = (gB + 2) * (dense*(n-1)/n + expert*(ne-1)/math.Max(ne, 1))
		if x.legacy {
			dpExposed = rs + ag
		} else {
			dpExposed = math.Max(rs-dpHide*st.bwd, 0) + math.Max(ag-dpHide*st.fwd, 0)
		}
	case 3:
		// Per micro-batch: gather weights for the forward, again for the backward,
		// and once more for a fully recomputed forward (DeepSpeed's pre-forward
		// hook fires again inside the checkpointed backward); reduce-scatter grads.
		gathers := 2 + x.recomputeFraction()
		w := x.stage(stFirst)
		wd, we := w.dense, w.expert
		vol := x.collective((gathers*2+gB)*wd*(n-1)/n, n, x.t) + x.collective((gathers*2+gB)*we*(ne-1)/math.Max(ne, 1), ne, x.expStride())
		if x.legacy {
			// DeepSpeed 2021 gathered parameter by parameter: messages too small
			// for NCCL to spread one GPU's traffic over the node's NICs, so each
			// GPU gets one NIC (the published ZeRO-3 rows show exactly this floor).
			nl := x.net()
			vol = ((gathers*2+gB)*wd*(n-1)/n + (gathers*2+gB)*we*(ne-1)/math.Max(ne, 1)) / nl.bw
		}
		dpTime = mb * vol
		tr.DP = mb * (gathers*2 + gB) * (wd*(n-1)/n + we*(ne-1)/math.Max(ne, 1))
		// Prefetching hides the gathers behind the micro-batch's compute; what
		// is hidden still slows it (SMs and HBM shared), as for TP overlap.
		dpExposed = mb * (math.Max(vol-perMB, 0) + tpInterfere*math.Min(vol, perMB))
	}
	x.k.dpTotal = dpTime
	tm.DPCommExposed = dpExposed
	return sp, dense, expert, n, ne
}

// optimizerTime fills the optimizer step and the offload transfers:
// HBM-bound Adam over the local (sharded) parameters, or CPU Adam with PCIe
// transfers when the optimizer (and the parameters) live on the host.
func (x *shape) optimizerTime(tm *Time, sp stageParams, dense, expert, n, ne, perMB float64) {
	mb := x.mb
	local := dense + expert
	if x.l.Zero >= 1 {
		local = dense/n + expert/math.Max(ne, 1)
	}
	if x.j.frozenBase() && x.l.Offload == "params" {
		// The adapters' optimizer stays on the GPU; the base streams in.
		tm.Optimizer = adamBytes * local / x.k.hbmE
		tm.Offload = x.paramsOffloadTime(sp, perMB)
		return
	}
	switch x.l.Offload {
	case "none":
		tm.Optimizer = adamBytes * local / x.k.hbmE
	case "optimizer", "params":
		pcie := x.c.GPU.PCIeBandwidth * pcieEff
		gpn := float64(max(x.c.GPUsPerNode, 1))
		tm.Offload = adamBytes*local/(hostAdamBW/gpn) + (gradBytesFP32+2)*local/pcie
		if x.l.Offload == "params" {
			// Weights stream in from the host for the forward and the backward of
			// every micro-batch, prefetched behind compute.
			xfer := 2 * 2 * (sp.dense + sp.expert) / pcie
			tm.Offload += mb * math.Max(xfer-perMB, 0)
		}
	case "nvme":
		// ZeRO-Infinity: per step, read and write the FP32 master weights, the
		// Adam moments and the gradients (12 + 12 + 4 + 4 bytes per local
		// parameter) on the node's NVMe, shared by its GPUs, with the CPU Adam
		// of optimizer offload; per micro-batch, read this GPU's parameter
		// shard for the forward and the backward (2 × 2 bytes), prefetched
		// behind compute like the gathers it feeds.
		gpn := float64(max(min(x.c.GPUsPerNode, x.c.GPUs), 1))
		nvme := x.c.NVMeBW / gpn
		pcie := x.c.GPU.PCIeBandwidth * pcieEff
		tm.Offload = adamBytes*local/(hostAdamBW/gpn) + 32*local/nvme + (gradBytesFP32+2)*local/pcie
		xfer := 2 * 2 * local / math.Min(nvme, pcie)
		tm.Offload += mb * math.Max(xfer-perMB, 0)
	}
}
