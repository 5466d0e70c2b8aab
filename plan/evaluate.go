package plan

import (
	"fmt"
	"math"
)

// shape holds one evaluation's inputs and derived sizes; it lives on the
// stack of Evaluate so that evaluating a layout allocates nothing.
type shape struct {
	m Model
	j Job
	c Cluster
	l Layout

	t, p, v, cp, ep, dp float64
	etp, edp            float64 // expert tensor parallelism and expert data parallelism TP·CP·DP/(ETP·EP)
	mb                  float64 // micro-batches per pipeline per step
	b                   float64 // micro-batch size (sequences)
	tokens              float64 // tokens per micro-batch per GPU: b·s/cp
	layersPerStage      float64 // layers on the heaviest (first) stage
	layersLast          float64 // layers on the last stage
	layersMid           float64 // layers on a middle stage when it holds more than the first; 0 = none
	st                  stackConsts
	sp, flash, fp8      bool
	legacy              bool
	layerAct            float64 // activations of the transformer layers (first stage), for reports
	hostNeed            float64 // host memory per GPU the offload keeps (memoryOf)
	k                   kern
}

// Evaluate predicts memory, step time and throughput of one layout. An
// invalid layout comes back with Reason set (the rule it breaks) and zero
// predictions; a valid one that does not fit has Memory.Fits false and the
// figure in Reason.
func Evaluate(m Model, j Job, c Cluster, l Layout) Evaluation {
	var e Evaluation
	var x shape
	evaluate(&x, m, j, c, l, &e)
	if e.Reason == "" || e.Memory.PerGPU > 0 {
		e.Time.StepRange = stepRange(e.Time.Step, j.Stack, c.GPU.Arch, m.Params())
		e.Why = x.why(&e)
		e.Finetune = x.finetuneNote(&e)
	}
	return e
}

// normalizeLayout fills defaults: VPP 0 → 1, EP 0 → 1, CP 0 → 1, empty
// recompute/offload → none, SP off when TP = 1.
func normalizeLayout(l Layout) Layout {
	if l.VPP <= 0 {
		l.VPP = 1
	}
	if l.EP <= 0 {
		l.EP = 1
	}
	if l.CP <= 0 {
		l.CP = 1
	}
	if l.Recompute == "" {
		l.Recompute = "none"
	}
	if l.Offload == "" {
		l.Offload = "none"
	}
	if l.TP <= 1 {
		l.SP = false
	}
	return l
}

// validate returns why the layout cannot run, or "".
func validate(m Model, j Job, c Cluster, l Layout) string {
	switch {
	case m.Layers <= 0 || m.Hidden <= 0 || m.Heads <= 0 || m.Vocab <= 0 || m.FFN < 0:
		return "model needs layers, hidden, heads and vocab > 0"
	case j.SeqLen <= 0 || j.GlobalBatch <= 0:
		return "job needs seq_len and global_batch > 0"
	case c.GPUs <= 0 || c.GPU.PeakBF16 <= 0 || c.GPU.MemoryBytes <= 0:
		return "cluster needs GPUs > 0 and a GPU type with peak and memory"
	case l.TP <= 0 || l.PP <= 0 || l.DP <= 0 || l.MicroBatch <= 0:
		return "tp, pp, dp and micro_batch must be ≥ 1"
	case l.TP*l.PP*l.CP*l.DP != c.GPUs:
		return fmt.Sprintf("tp·pp·cp·dp = %d·%d·%d·%d = %d, not the %d GPUs", l.TP, l.PP, l.CP, l.DP, l.TP*l.PP*l.CP*l.DP, c.GPUs)
	case m.Heads%l.TP != 0:
		return fmt.Sprintf("%d attention heads are not divisible by tp=%d", m.Heads, l.TP)
	case m.kvHeads()%l.TP != 0:
		return fmt.Sprintf("%d KV heads are not divisible by tp=%d", m.kvHeads(), l.TP)
	case l.VPP > 1 && m.Layers < l.PP*l.VPP:
		// Uneven chunks are fine (Megatron-Core --pipeline-model-parallel-layout,
		// render_megatron.go: pipelineLayout); an empty one is not planned.
		return fmt.Sprintf("%d layers are fewer than the pp·vpp = %d virtual stages", m.Layers, l.PP*l.VPP)
	case l.PP > m.Layers/2 && l.PP > 1 && m.Layers%l.PP != 0:
		return fmt.Sprintf("%d layers cannot be split unevenly over pp=%d stages", m.Layers, l.PP)
	case l.PP > m.Layers:
		return fmt.Sprintf("pp=%d exceeds the %d layers", l.PP, m.Layers)
	case j.GlobalBatch%(l.MicroBatch*l.DP) != 0:
		return fmt.Sprintf("global batch %d is not divisible by micro_batch·dp = %d", j.GlobalBatch, l.MicroBatch*l.DP)
	case l.VPP > 1 && l.PP == 1:
		return "vpp > 1 needs pp > 1"
	case l.VPP > 1 && (j.GlobalBatch/(l.MicroBatch*l.DP))%l.PP != 0:
		return fmt.Sprintf("interleaving needs the %d micro-batches per pipeline to be a multiple of pp=%d", j.GlobalBatch/(l.MicroBatch*l.DP), l.PP)
	case l.CP > 1 && j.SeqLen%(2*l.CP) != 0:
		return fmt.Sprintf("seq_len %d is not divisible by 2·cp = %d (load-balanced causal CP)", j.SeqLen, 2*l.CP)
	case l.CP > 1 && (j.Stack == StackMegatron2022 || c.GPU.AttentionEff <= 0):
		return "cp > 1 needs a fused (flash) attention kernel"
	case l.EP > 1 && !m.isMoE():
		return "ep > 1 needs a MoE model"
	case l.EP > 1 && m.Experts%l.EP != 0:
		return fmt.Sprintf("%d experts are not divisible by ep=%d", m.Experts, l.EP)
	case l.ETP < 0 || (l.ETP > 0 && l.TP%l.ETP != 0):
		return fmt.Sprintf("etp=%d must divide tp=%d", l.ETP, l.TP)
	case l.EP > 1 && l.ETP == 0 && (l.DP*l.CP)%l.EP != 0:
		return fmt.Sprintf("ep=%d must divide dp·cp = %d (Megatron builds expert groups inside DP×CP; with etp < tp the TP ranks join them)", l.EP, l.DP*l.CP)
	case l.EP > 1 && l.ETP > 0 && (l.TP*l.DP*l.CP)%(l.EP*l.ETP) != 0:
		return fmt.Sprintf("ep·etp = %d must divide tp·dp·cp = %d (Megatron-Core MoE parallel folding)", l.EP*l.ETP, l.TP*l.DP*l.CP)
	case l.Recompute != "none" && l.Recompute != "selective" && l.Recompute != "full":
		return fmt.Sprintf("recompute %q: accepted none, selective, full", l.Recompute)
	case l.Zero < 0 || l.Zero > 3:
		return fmt.Sprintf("zero=%d: accepted 0-3", l.Zero)
	case l.Offload != "none" && l.Offload != "optimizer" && l.Offload != "params" && l.Offload != "nvme":
		return fmt.Sprintf("offload %q: accepted none, optimizer, params, nvme", l.Offload)
	case (l.Offload == "params" || l.Offload == "nvme") && l.Zero != 3 && !(l.Offload == "params" && j.frozenBase()):
		return fmt.Sprintf("offload=%s needs zero=3 (parameters are gathered from the %s per layer)", l.Offload, map[string]string{"params": "host", "nvme": "NVMe"}[l.Offload])
	case l.Offload == "nvme" && c.NVMeBW <= 0:
		return "offload=nvme needs the nodes' NVMe bandwidth (nvme_bandwidth, --nvme-bw)"
	case j.Precision == FP8 && c.GPU.PeakFP8 <= 0:
		return fmt.Sprintf("%s has no FP8 tensor cores", c.GPU.Name)
	case j.Precision == BF16 && !c.GPU.HasBF16():
		return fmt.Sprintf("%s has no BF16 (its tensor cores do FP16)", c.GPU.Name)
	case j.Precision != BF16 && j.Precision != FP16 && j.Precision != FP8 && j.Precision != "":
		return fmt.Sprintf("precision %q: accepted bf16, fp16, fp8", j.Precision)
	case j.Precision == FP8 && validFP8Recipe(j.FP8Recipe, c.GPU) != "":
		return validFP8Recipe(j.FP8Recipe, c.GPU)
	case j.MoEDispatcher != "" && j.MoEDispatcher != "alltoall" && j.MoEDispatcher != "flex":
		return fmt.Sprintf("moe_dispatcher %q: accepted alltoall, flex (DeepEP/HybridEP)", j.MoEDispatcher)
	case j.MoECapacity < 0 || m.MTPLayers < 0:
		return fmt.Sprintf("moe_capacity_factor %g and mtp_layers %d must be ≥ 0 (0 = dropless, no MTP)", j.MoECapacity, m.MTPLayers)
	case m.TopK > m.Experts:
		return fmt.Sprintf("topk %d exceeds %d experts", m.TopK, m.Experts)
	}
	return finetuneInvalid(m, FinetuneOf(j))
}

// splitLayers sets the layers of the first, last and middle stages.
//   - Even split: L/p each.
//   - L not divisible by p·v but L+2 is: Megatron's
//     --account-for-embedding-in-pipeline-split and
//     --account-for-loss-in-pipeline-split count the input embedding and the
//     loss as one layer each, so the first and last stages hold (L+2)/p − 1
//     transformer layers and the middle ones (L+2)/p (Llama-3.1-405B's 126
//     layers on PP 8 with VPP 8, or PP 16).
//   - Otherwise: with VPP 1 --decoder-first/last-pipeline-num-layers, with
//     VPP > 1 an explicit --pipeline-model-parallel-layout whose chunks hold
//     ⌊L/pv⌋ or ⌈L/pv⌉ layers (pipelineLayout: DeepSeek-V3's 61 layers on
//     PP 8 × VPP 4, as NVIDIA's recipes run it); either way the heaviest
//     (first) stage holds ceil(L/p), the last floor(L/p).
func (x *shape) splitLayers() {
	L := float64(x.m.Layers)
	x.layersMid = 0
	switch {
	case math.Mod(L, x.p*x.v) == 0 || x.p == 1:
		x.layersPerStage, x.layersLast = L/x.p, L/x.p
	case math.Mod(L+2, x.p*x.v) == 0:
		per := (L + 2) / x.p
		x.layersPerStage, x.layersLast = per-1, per-1
		if x.p > 2 {
			x.layersMid = per
		}
	default:
		x.layersPerStage = math.Ceil(L / x.p)
		x.layersLast = math.Floor(L / x.p)
	}
}

// evaluate is Evaluate without the Why lines: the search's hot path.
func evaluate(x *shape, m Model, j Job, c Cluster, l Layout, e *Evaluation) {
	l = normalizeLayout(l)
	if c.GPUsPerNode <= 0 {
		c.GPUsPerNode = max(c.GPU.GPUsPerNode, 1)
	}
	if c.NVLinkDomain <= 0 {
		c.NVLinkDomain = max(c.GPU.NVLinkDomain, 1)
	}
	if c.InterNode <= 0 {
		c.InterNode = c.GPU.InterNode
	}
	if c.HostMemory <= 0 {
		c.HostMemory = c.GPU.HostMemory
	}
	if c.NVMeBW <= 0 {
		c.NVMeBW = defaultNVMeBW
	}
	j.Precision = PrecisionFor(j.Precision, c.GPU)
	if l.MicroBatch > 0 && l.DP > 0 {
		l.GradAccum = j.GlobalBatch / (l.MicroBatch * l.DP)
	}
	e.Layout = l
	e.ModelFlopsPerToken = JobFlopsPerToken(m, j)
	if r := validate(m, j, c, l); r != "" {
		e.Reason = r
		return
	}
	tokensPerStep := float64(j.GlobalBatch) * float64(j.SeqLen)
	j.SeqLen += j.promptTokens() // prompt tuning: the model runs on the virtual tokens too
	*x = shape{m: m, j: j, c: c, l: l}
	x.t, x.p, x.v = float64(l.TP), float64(l.PP), float64(l.VPP)
	x.cp, x.ep, x.dp = float64(l.CP), float64(l.EP), float64(l.DP)
	x.b = float64(l.MicroBatch)
	x.mb = float64(l.GradAccum)
	x.tokens = x.b * float64(j.SeqLen) / x.cp
	x.etp = x.t
	if l.ETP > 0 {
		x.etp = float64(l.ETP)
	}
	x.edp = x.t * x.cp * x.dp / (x.etp * x.ep)
	x.splitLayers()
	x.sp = l.SP && l.TP > 1
	x.legacy = j.Stack == StackMegatron2022
	x.flash = !x.legacy && c.GPU.AttentionEff > 0
	x.fp8 = j.Precision == FP8
	x.st = stackOf(j.Stack)
	x.k = newKern(c.GPU, j.Stack)

	host := x.memoryOf(e)
	x.hostNeed = host
	e.Memory.Fits = e.Memory.PerGPU <= e.Memory.Capacity
	if !e.Memory.Fits {
		e.Reason = fmt.Sprintf("needs %.1f GiB per GPU, capacity %.1f GiB", e.Memory.PerGPU/gib, e.Memory.Capacity/gib)
	}
	if host > 0 {
		perNode := host * float64(min(c.GPUsPerNode, c.GPUs))
		if perNode > hostReserve*c.HostMemory {
			e.Memory.Fits = false
			e.Reason = fmt.Sprintf("offload needs %.0f GiB of host memory per node, %.0f GiB usable (%.0f%% of %.0f GiB)",
				perNode/gib, hostReserve*c.HostMemory/gib, hostReserve*100, c.HostMemory/gib)
		}
	}
	e.Tight = e.Memory.Fits && e.Memory.PerGPU > (1-MarginOf(c))*e.Memory.Capacity
	x.timeOf(e)
	if e.Time.Step > 0 {
		e.TokensPerSPerGPU = tokensPerStep / e.Time.Step / float64(c.GPUs)
	}
	e.ModelTFLOPSPerGPU = e.TokensPerSPerGPU * e.ModelFlopsPerToken / 1e12
	e.MFU = e.ModelTFLOPSPerGPU * 1e12 / c.GPU.PeakBF16
}

func pct(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return 100 * a / b
}

// why explains a valid evaluation in a few lines, each with its figure.
func (x *shape) why(e *Evaluation) []string {
	if e.Reason != "" && e.Memory.PerGPU == 0 {
		return nil
	}
	l, c := e.Layout, x.c
	var w []string
	dom := tpDomain(c)
	switch {
	case l.TP == 1:
		w = append(w, "TP=1: no tensor-parallel collectives")
	case l.TP <= dom && c.GPU.NVLinkBandwidth > 0:
		w = append(w, fmt.Sprintf("TP=%d stays inside the %d-GPU NVLink domain", l.TP, c.NVLinkDomain))
	case l.TP <= dom:
		w = append(w, fmt.Sprintf("TP=%d inside the node over PCIe (%s has no NVLink)", l.TP, c.GPU.Name))
	default:
		w = append(w, fmt.Sprintf("TP=%d spans NVLink domains of %d: TP collectives cross the inter-node fabric", l.TP, dom))
	}
	if l.SP {
		w = append(w, "sequence parallel shards norms and dropout by TP (Korthikanti 2022): less memory, reduce-scatter/all-gather instead of all-reduce")
	}
	ms := e.Memory
	w = append(w, fmt.Sprintf("memory %.1f of %.1f GiB per GPU: weights %.1f, grads %.1f, optimizer %.1f (zero=%d), activations %.1f, other %.1f",
		ms.PerGPU/gib, ms.Capacity/gib, ms.Weights/gib, ms.Grads/gib, ms.Optimizer/gib, l.Zero, ms.Activations/gib, ms.Other/gib))
	w = append(w, x.finetuneWhy(e)...)
	if e.Tight {
		w = append(w, tightWhy(e.Memory, x.c))
	}
	switch {
	case x.layersMid > 0:
		w = append(w, fmt.Sprintf("%d layers over PP=%d×VPP=%d with the embedding and the loss counted as layers: %.0f on the first and last stages, %.0f on the others (Megatron --account-for-embedding/loss-in-pipeline-split)", x.m.Layers, l.PP, l.VPP, x.layersPerStage, x.layersMid))
	case l.PP > 1 && l.VPP > 1 && x.m.Layers%(l.PP*l.VPP) != 0:
		w = append(w, fmt.Sprintf("%d layers over PP=%d×VPP=%d in uneven chunks: %.0f on the heaviest stage, %.0f on the last (Megatron --pipeline-model-parallel-layout)", x.m.Layers, l.PP, l.VPP, x.layersPerStage, x.layersLast))
	case l.PP > 1 && x.m.Layers%l.PP != 0:
		w = append(w, fmt.Sprintf("%d layers over PP=%d unevenly: %.0f on the heaviest stage, %.0f on the last (Megatron --decoder-first/last-pipeline-num-layers)", x.m.Layers, l.PP, x.layersPerStage, x.layersLast))
	}
	if s := x.moeWhy(e); s != "" {
		w = append(w, s)
	}
	if l.PP > 1 {
		if l.VPP > 1 {
			w = append(w, fmt.Sprintf("PP=%d interleaved by VPP=%d over %d micro-batches: bubble (p−1)/(v·m) = %.1f%% of compute", l.PP, l.VPP, l.GradAccum, 100*(x.p-1)/(x.v*x.mb)))
		} else {
			w = append(w, fmt.Sprintf("PP=%d over %d micro-batches: bubble (p−1)/m = %.1f%% of compute", l.PP, l.GradAccum, 100*(x.p-1)/x.mb))
		}
	}
	if l.CP > 1 {
		w = append(w, fmt.Sprintf("CP=%d splits the %d-token sequence into %d-token shards; ring KV exchange %.0f%% hidden behind attention", l.CP, x.j.SeqLen, x.j.SeqLen/l.CP, pct(x.k.cpHidden, x.k.cpTotal)))
	}
	switch l.Recompute {
	case "full":
		if l.RecomputeLayers > 0 && x.recomputeFraction() < 1 {
			w = append(w, fmt.Sprintf("block recompute of %d of each chunk's %.0f layers: the least that fits, costs %.1f%% of the step",
				l.RecomputeLayers, x.layersPerStage/x.v, pct(e.Time.Recompute, e.Time.Step)))
		} else {
			w = append(w, fmt.Sprintf("full recompute: keeps only layer inputs, costs %.1f%% of the step", pct(e.Time.Recompute, e.Time.Step)))
		}
	case "selective":
		w = append(w, fmt.Sprintf("selective recompute of attention: costs %.1f%% of the step", pct(e.Time.Recompute, e.Time.Step)))
	}
	if l.DP*l.CP > 1 {
		w = append(w, fmt.Sprintf("DP=%d gradient reduction %.2f s, %.2f s exposed after the last backward", l.DP, x.k.dpTotal, e.Time.DPCommExposed))
	}
	w = append(w, fmt.Sprintf("GEMMs at %.0f%% of the %s peak (largest per-GPU GEMM %.0f×%.0f×%.0f); %s attention",
		100*x.k.gemmEffAvg, precName(x.fp8), x.tokens, x.k.bigN, x.k.bigK, attnName(x.flash)))
	w = append(w, fmt.Sprintf("step %.3f s: compute %.3f, recompute %.3f, TP %.3f, bubble %.3f, PP p2p %.3f, DP %.3f, CP %.3f, EP %.3f, optimizer %.3f, offload %.3f",
		e.Time.Step, e.Time.Compute, e.Time.Recompute, e.Time.TPComm, e.Time.PPBubble, e.Time.PPComm, e.Time.DPCommExposed, e.Time.CPComm, e.Time.EPComm, e.Time.Optimizer, e.Time.Offload))
	if !math.IsNaN(e.MFU) {
		w = append(w, fmt.Sprintf("%.0f tokens/s/GPU, %.0f model TFLOP/s per GPU, MFU %.1f%% of dense %s peak", e.TokensPerSPerGPU, e.ModelTFLOPSPerGPU, 100*e.MFU, c.GPU.Peak16Name()))
	}
	return w
}

func precName(fp8 bool) string {
	if fp8 {
		return "FP8"
	}
	return "16-bit"
}

func attnName(flash bool) string {
	if flash {
		return "fused flash"
	}
	return "unfused (s×s scores in HBM)"
}

// tpDomain is the largest TP group on fast links: the NVLink domain, or the
// node when the GPU has no NVLink (PCIe inside the node).
func tpDomain(c Cluster) int {
	if c.GPU.NVLinkBandwidth > 0 {
		return max(c.NVLinkDomain, 1)
	}
	return max(c.GPUsPerNode, 1)
}
