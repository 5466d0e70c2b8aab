package plan

import "math"

// Memory model: bytes per GPU on the most loaded pipeline stage.
//
// Sources (planner-formulas.md §2.1, §2.2, §2.7):
//   - Bytes per parameter, mixed precision with Adam: 2 (16-bit weights) + 4
//     (FP32 main gradients) + 12 (FP32 master copy, momentum, variance) = 18,
//     Megatron-LM docs dist_optimizer.md; reproduces Korthikanti et al. 2022
//     Fig. 1 exactly. ZeRO stages (Rajbhandari et al. 2019, §3): 1 shards the 12,
//     2 also the gradients, 3 also the weights, over the data-parallel ranks;
//     Megatron's distributed optimizer is stage 1 and shards over DP×CP
//     (context_parallel.md). MoE expert weights shard over their own expert
//     data-parallel group DP·CP/EP (theoretical_memory_usage.py).
//   - FP8 (Transformer Engine): weights stay 16-bit; TE caches the FP8 copy and
//     its transpose of each linear layer's weight across micro-batches: +2 bytes
//     per linear-layer parameter.
//   - Activations per layer: Korthikanti et al. 2022 Table 2,
//     s·b·h·(10 + 24/t + 5·a·s/(h·t)) for F = 4h, generalised term by term to GQA,
//     any FFN width and gated MLPs (see layerActivationBytes); full recompute keeps
//     the layer input only (2·s·b·h, /t under SP); CP divides the sequence.
//   - Pipeline: 1F1B keeps min(m, p) micro-batches in flight on the first stage
//     (Narayanan et al. 2021 §2.2); interleaving costs 1 + (p−1)/(p·v)
//     (Megatron theoretical_memory_usage.py, interleaved_schedule_memory_penalty).
//   - LoRA (Hu et al. 2021): frozen 16-bit base (no gradients, no optimizer
//     states); adapters of rank r on every linear layer of attention and the dense
//     MLP, trained with the full 18 bytes per parameter.

// Allowance for what the formulas do not see (documented guesses, not fitted):
const (
	cudaContextBytes = 1.0 * gib  // CUDA context, cuBLAS/cuDNN workspaces (~0.5 GiB context on H100 + workspaces)
	ncclGroupBytes   = 0.25 * gib // NCCL buffers per communicator of size > 1 (NCCL_BUFFSIZE 4 MiB × channels × peers)
	fragmentation    = 0.05       // PyTorch caching-allocator fragmentation, as a share of activations
	logitBytes       = 6.0        // per vocabulary logit on the last stage: 16-bit logits + FP32 softmax for the loss
	hostReserve      = 0.8        // share of host memory usable for offload (OS, data loaders keep the rest)
)

// stageParams is the parameters one GPU of a pipeline stage holds.
type stageParams struct {
	dense    float64 // non-expert parameters (attention, dense/shared MLP, norms, embeddings)
	linear   float64 // of which in linear layers of the transformer blocks (FP8 caches)
	expert   float64 // routed-expert parameters
	adapters float64 // LoRA adapter parameters
	layerMax float64 // the largest layer's parameters on this GPU (ZeRO-3 gather buffers)
}

// stageKind names the pipeline stages the model evaluates: the first (input
// embedding, most micro-batches in flight), the last (output layer and loss)
// and, when an uneven split gives the middle stages more layers, a middle one.
type stageKind int

const (
	stFirst stageKind = iota
	stLast
	stMid
)

// hasOutput reports whether the stage holds the output layer and the loss.
func (x *shape) hasOutput(k stageKind) bool { return k == stLast || x.p == 1 }

// stage returns the parameters held per GPU by one pipeline stage.
func (x *shape) stage(kind stageKind) stageParams {
	m := &x.m
	nDense, nMoE := x.stageLayers(kind)
	ls := nDense + nMoE
	t := x.t
	var sp stageParams
	attn := m.attnParamsTP(t)
	sp.linear = nDense*(attn+m.denseMLPParams()/t) + nMoE*(attn+m.sharedParams()/t)
	sp.dense = sp.linear + ls*m.normParams() + nMoE*float64(m.Hidden)*float64(m.Experts)
	expPerLayer := 0.0
	if nMoE > 0 {
		expPerLayer = float64(m.Experts) * m.expertParams() / (x.ep * x.etp)
		sp.expert = nMoE * expPerLayer
	}
	emb := m.embeddingParams() / t
	if x.hasOutput(kind) {
		sp.dense += float64(m.Hidden) // final norm, with the output layer
	}
	switch {
	case kind == stMid:
	case x.p == 1 && m.TiedEmbeddings:
		sp.dense += emb
	case x.p == 1:
		sp.dense += 2 * emb
	default:
		// Megatron keeps a copy of tied embeddings on the last stage for the
		// output layer and all-reduces its gradient with the first stage.
		sp.dense += emb
	}
	// ZeRO-3 gathers one linear module at a time (DeepSpeed max_live_parameters,
	// FSDP units): the largest module's weights, full size.
	sp.layerMax = max(m.attnParamsTP(t), m.denseMLPParams()/m.FFNType.mlpMatrices()*(m.FFNType.mlpMatrices()-1)/t,
		float64(m.Experts)*m.expertParams()/(x.ep*x.etp)/m.FFNType.mlpMatrices())
	if x.st.fsdpUnits {
		// FSDP wraps each transformer block as one unit: the whole layer is
		// gathered at once (torch FSDP auto_wrap_policy on the block class).
		sp.layerMax = (attn + m.denseMLPParams()/t + m.sharedParams()/t) + float64(m.Experts)*m.expertParams()/(x.ep*x.etp)
	}
	if f := FinetuneOf(x.j); f.Frozen() {
		// Adapters per layer (finetune.go); prompt tuning's embeddings on the first stage.
		sp.adapters = ls * m.adapterParamsTP(f, t)
		if kind == stFirst {
			sp.adapters += m.promptParams(f)
		}
	}
	return sp
}

// layerActivationBytes is the activation memory one transformer layer keeps
// for one micro-batch until its backward, per GPU. Terms per token, in bytes
// (Korthikanti Table 2 for F = 4h, MHA: 10h unsharded + 24h sharded by t + 5as):
//
//	replicated (sharded by t only under SP): norm inputs 4h, QKV input 2h,
//	  MLP input 2h, two dropout masks 2h                                 = 10h
//	sharded by t: Q 2·n·d, K and V 4·g·d, attention output 2·n·d,
//	  MLP: GeLU input and fc2 input 2F + 2F, or SwiGLU gate+up 4F and fc2 input 2F
//	unfused attention only, no selective recompute: scores' softmax output 2,
//	  dropout mask 1, dropout output 2 per score → 5·a·s per token, sharded by t
//	flash attention: the log-sum-exp, 4 bytes per head per token
//
// MoE layers store the MLP terms for the k routed copies of each token
// (EP spreads them evenly: k·T per GPU) plus the shared expert.
func (x *shape) layerActivationBytes(moe bool, recompute string) float64 {
	m := &x.m
	T := x.tokens
	h, d := float64(m.Hidden), float64(m.headDim())
	n, g := float64(m.Heads), float64(m.kvHeads())
	repDiv := 1.0
	if x.sp {
		repDiv = x.t
	}
	if recompute == "full" {
		return 2 * h * T / repDiv
	}
	rep := 10 * h
	tp := 2*n*d + 4*g*d + 2*n*d
	if m.isMLA() {
		// Q and K of qkDim per head, V and the attention output of vDim; the
		// Q and KV latents are not sharded by TP.
		qk, v := float64(m.qkDim()), float64(m.vDim())
		tp = 4*n*qk + 4*n*v
		rep += 2 * float64(m.QLoRA+m.KVLoRA)
	}
	mlpAct := func(f float64) float64 {
		if m.FFNType.gated() {
			return 6 * f
		}
		return 4 * f
	}
	cutRep, cutTP := x.frozenActivationCut() // a frozen base keeps less (finetune.go)
	rep -= cutRep
	if moe {
		tp += mlpAct(float64(m.SharedFFN))
		// Each GPU's experts see k·T·etp/t routed tokens at width F/etp.
		tp += float64(m.TopK) * (2*h*x.etp + mlpAct(float64(m.moeFFN())))
	} else {
		tp += mlpAct(float64(m.FFN)) - cutTP
	}
	var score float64
	if x.flash {
		score = 4 * n / x.t
	} else if recompute == "none" {
		score = 5 * n * float64(x.j.SeqLen) / x.t
	}
	// Prefix tuning's keys and values, per sequence.
	prefixKV := x.b * x.j.prefixTokens() * 4 * g * d / x.t
	return T*(rep/repDiv+tp/x.t+score) + prefixKV
}

// stageLayers returns the dense and MoE layers of a stage (MoE models put
// their DenseLayers first; a middle stage is counted as MoE-only when the
// model has MoE layers after the first stage).
func (x *shape) stageLayers(kind stageKind) (nDense, nMoE float64) {
	m := &x.m
	denseL := float64(m.Layers - m.moeLayers())
	if kind == stMid {
		nDense = min(max(denseL-x.layersPerStage, 0), x.layersMid)
		return nDense, x.layersMid - nDense
	}
	if kind == stFirst {
		nDense = min(denseL, x.layersPerStage)
		return nDense, x.layersPerStage - nDense
	}
	start := float64(m.Layers) - x.layersLast
	nDense = min(max(denseL-start, 0), x.layersLast)
	return nDense, x.layersLast - nDense
}

// gradBytes is the gradient buffer's bytes per parameter: FP32 main gradients
// (Megatron-LM forces them for bf16; Korthikanti's 18 bytes), BF16 in NeMo,
// FSDP and JAX (stacks.go).
func (x *shape) gradBytes() float64 {
	if x.st.bf16Grads {
		return 2
	}
	return 4
}

// recomputeFraction is the share of layers fully recomputed.
func (x *shape) recomputeFraction() float64 {
	if x.l.Recompute != "full" {
		return 0
	}
	if x.l.RecomputeLayers <= 0 {
		return 1
	}
	chunk := x.layersPerStage / x.v
	return math.Min(float64(x.l.RecomputeLayers)/chunk, 1)
}

// unfusedScoreBytes is the s×s attention-score memory of one layer and one
// micro-batch that selective recompute rebuilds during the backward.
func (x *shape) unfusedScoreBytes() float64 {
	if x.flash {
		return 0
	}
	return x.tokens * 5 * float64(x.m.Heads) * float64(x.j.SeqLen) / x.t
}

// memoryOf fills e.Memory for the most loaded stage and returns the host
// memory per node the offload needs.
func (x *shape) memoryOf(e *Evaluation) (hostNeed float64) {
	var best Memory
	for _, kind := range [3]stageKind{stFirst, stLast, stMid} {
		if (kind == stLast && x.p == 1) || (kind == stMid && x.layersMid == 0) {
			continue
		}
		mem, host := x.stageMemory(kind)
		if mem.PerGPU > best.PerGPU {
			best = mem
			hostNeed = host
		}
	}
	best.Capacity = x.c.GPU.MemoryBytes
	e.Memory = best
	return hostNeed
}

// 16-bit weights, and Adam's FP32 master weights, momentum and variance,
// in bytes per parameter.
const wB, oB = 2.0, 12.0

// stageMemory is the memory of one GPU of a stage of the given kind, and
// what it keeps on the host (offload).
func (x *shape) stageMemory(kind stageKind) (Memory, float64) {
	sp := x.stage(kind)
	mem, hostPerGPU := x.modelStates(sp)
	mem.Activations = x.stageActivations(kind)
	mem.Other = x.allowance(sp, mem.Activations)
	mem.PerGPU = mem.Weights + mem.Grads + mem.Optimizer + mem.Activations + mem.Other
	return mem, hostPerGPU
}

// modelStates is the weights, gradients and optimizer states a GPU holds
// for a stage's parameters sp (LoRA: a frozen base; ZeRO shards; FP8
// copies; offload moves them to the host), and what it keeps on the host.
func (x *shape) modelStates(sp stageParams) (mem Memory, hostPerGPU float64) {
	shard := x.dp * x.cp
	expShard := max(x.edp, 1)
	gB := x.gradBytes()
	frozen := x.j.frozenBase()
	if frozen {
		// Frozen base (finetune.go): base weights only, NF4 for QLoRA; ZeRO-3
		// shards them; offload=optimizer and params placed there.
		mem, hostPerGPU = x.frozenStates(sp, shard, expShard)
	} else {
		w := wB * (sp.dense + sp.expert)
		g := gB * (sp.dense + sp.expert)
		o := oB * (sp.dense + sp.expert)
		switch x.l.Zero {
		case 1:
			o = oB * (sp.dense/shard + sp.expert/expShard)
		case 2:
			o = oB * (sp.dense/shard + sp.expert/expShard)
			g = gB * (sp.dense/shard + sp.expert/expShard)
		case 3:
			o = oB * (sp.dense/shard + sp.expert/expShard)
			g = gB * (sp.dense/shard + sp.expert/expShard)
			w = wB * (sp.dense/shard + sp.expert/expShard)
		}
		mem.Weights, mem.Grads, mem.Optimizer = w, g, o
	}
	if x.fp8 {
		mem.Weights += 2 * (sp.linear + sp.expert)
	}
	off := x.l.Offload
	if frozen && off != "nvme" {
		off = "none" // frozenStates placed them
	}
	switch off {
	case "optimizer":
		// States and FP32 master weights live on the host, with an FP32 copy of
		// the gradients to update them (ZeRO-Offload, Ren et al. 2021).
		hostPerGPU = mem.Optimizer + mem.Grads
		mem.Optimizer = 0
	case "params":
		// ZeRO-Infinity style: parameters too; the GPU keeps gathered layers only.
		hostPerGPU = mem.Optimizer + mem.Grads + mem.Weights
		mem.Optimizer = 0
		mem.Weights = 0
	case "nvme":
		// ZeRO-Infinity (Rajbhandari et al. 2021): parameters, gradients
		// and optimizer states on NVMe; the host keeps pinned staging buffers
		// only (a few layers, counted as 4 gathered modules).
		hostPerGPU = 4 * wB * sp.layerMax
		mem.Optimizer = 0
		mem.Weights = 0
		mem.Grads = 0
	}
	return mem, hostPerGPU
}

// stageActivations is the activations a stage keeps: the micro-batches in
// flight (the interleaved schedule's extra on the first stage), the working
// set of a recomputed layer, and the logits on the stage with the output.
func (x *shape) stageActivations(kind stageKind) float64 {
	first := kind == stFirst
	inflight := min(x.mb, x.p)
	switch kind {
	case stLast:
		inflight = 1
	case stMid:
		inflight = min(x.mb, x.p-1)
	}
	penalty := 1.0
	if x.v > 1 && first {
		penalty = 1 + (x.p-1)/(x.p*x.v)
	}
	m := &x.m
	nDense, nMoE := x.stageLayers(kind)
	rc := x.l.Recompute
	perLayer := func(moe bool) float64 {
		if rc == "full" && x.l.RecomputeLayers > 0 {
			// Block recompute: N of each chunk's layers keep only their input.
			f := x.recomputeFraction()
			return f*x.layerActivationBytes(moe, "full") + (1-f)*x.layerActivationBytes(moe, "none")
		}
		return x.layerActivationBytes(moe, rc)
	}
	act := (nDense*perLayer(false) + nMoE*perLayer(nMoE > 0)) * inflight * penalty
	if first {
		x.layerAct = act
	}
	// Working set of the layer being recomputed in the backward.
	switch rc {
	case "full":
		act += x.layerActivationBytes(nMoE > 0, "none")
	case "selective":
		act += x.unfusedScoreBytes()
	}
	if x.hasOutput(kind) {
		act += cmpOr(x.st.logit, logitBytes) * x.tokens * float64(m.Vocab) / x.t
	}
	return act
}

// allowance is what a GPU needs beyond states and activations: the CUDA
// context, NCCL's buffers per process group, fragmentation, and gathered
// weights under ZeRO-3 or parameter offload.
func (x *shape) allowance(sp stageParams, act float64) float64 {
	groups := 0.0
	for _, s := range [...]float64{x.t, x.cp, x.ep, x.dp, x.p} {
		if s > 1 {
			groups++
		}
	}
	other := cudaContextBytes + ncclGroupBytes*groups + fragmentation*act
	if x.l.Zero == 3 || (x.l.Offload == "params" && !x.j.frozenBase()) || x.l.Offload == "nvme" {
		// Gathered weights of the current and the prefetched module
		// (QLoRA gathers them in NF4, finetune.go).
		other += 2 * x.gatheredBytes() * sp.layerMax
	}
	return other + x.frozenAllowance(sp) + x.fsdpRootBytes()
}

// fsdpRootBytes is the unsharded copy of the FSDP root unit that accelerate
// (FSDP1) keeps on every GPU from the first forward until the backward ends:
// with TRANSFORMER_BASED_WRAP (and PEFT's fsdp_auto_wrap_policy) only the
// decoder layers (and the adapters) are units of their own, so the
// embeddings, the final norm and the output layer form the root, and FSDP
// does not free the root's gathered parameters after the forward ("Do not
// free the root's parameters in the post-forward for FULL_SHARD", PyTorch
// torch/distributed/fsdp/_runtime_utils.py _post_forward). They count whole,
// beside the shard (which offload=params moves to the host). Only the hf
// stack under ZeRO-3 (torchtune and torchtitan shard the embeddings and
// the output layer as units of their own).
func (x *shape) fsdpRootBytes() float64 {
	if x.j.Stack != StackHF || x.l.Zero != 3 || x.p != 1 {
		return 0
	}
	m := &x.m
	emb := m.embeddingParams()
	if !m.TiedEmbeddings {
		emb *= 2
	}
	return wB * (emb + float64(m.Hidden))
}
