package plan

import (
	"fmt"
	"strings"
)

// Training software stacks beyond Megatron (types.go holds the Megatron
// ones). A stack decides mechanisms, each stated with its source in
// stackConsts below, and owns one fitted constant, its kernel efficiency
// (stackEff): the share of the modelled kernel time that the stack's own
// kernels reach, fitted only on calibration rows run with that stack
// (calibration_test.go refits it and fails when this table is stale).
const (
	// StackFSDP is PyTorch FSDP/FSDP2 in eager mode on a Hugging Face-style
	// model (fms-fsdp, torchtitan without compile): FlashAttention-2 through
	// SDPA, unfused norms, rotary and activation functions, each transformer
	// block one FSDP unit (gathered whole, prefetched one block ahead),
	// gradients reduced in BF16 (MixedPrecision reduce_dtype).
	StackFSDP Stack = "fsdp"
	// StackFSDPCompile is the same under torch.compile (Inductor fuses the
	// elementwise chains between GEMMs), or PyTorch code with hand-fused
	// kernels (flash-attn's fused LayerNorm/rotary/cross-entropy, Lit-GPT,
	// InternEvo).
	StackFSDPCompile Stack = "fsdp:compile"
	// StackDeepSpeed is DeepSpeed ZeRO on PyTorch model code (eager kernels);
	// StackDeepSpeed + ":zero1".. ":zero3" pins the ZeRO stage, ":pipe" is
	// its pipeline engine (ZeRO-1 at most).
	StackDeepSpeed Stack = "deepspeed"
	// StackJAX is JAX/XLA (MaxText, PaxML): XLA fuses elementwise work into
	// the GEMM epilogues, FSDP-style sharding over the mesh, cuDNN flash
	// attention (FlashAttention-2 class on Hopper).
	StackJAX Stack = "jax"
	// StackHF is Hugging Face Transformers with PEFT/TRL and accelerate
	// (issue 37), where QLoRA, prefix, prompt and IA³ tuning run: eager
	// PyTorch kernels and FlashAttention-2 as under FSDP eager (whose fitted
	// efficiency it takes), DDP or FSDP full sharding, and the loss on FP32
	// logits: LlamaForCausalLM upcasts them (logits.float()) and
	// cross_entropy keeps FP32 log-probabilities, so the backward's peak
	// holds 4 (FP32 logits) + 4 (log-softmax) + 4 (its gradient) + 2 (the
	// BF16 gradient into lm_head) = 14 bytes per logit, where Megatron's
	// fused vocab-parallel loss keeps 6 (memory.go logitBytes).
	StackHF Stack = "hf"
	// StackTorchtune is torchtune's recipes (issue 37): FSDP2 with each
	// transformer block one unit and tok_embeddings and output sharded as
	// their own units (custom_sharded_layers), torch.compile of the blocks
	// and the loss, and CEWithChunkedOutputLoss: the output projection runs
	// in 8 token chunks whose BF16 logits are kept, and the loss upcasts one
	// chunk at a time to FP32 ("upcasting only one chunk at a time saves
	// considerable memory", torchtune/modules/loss/ce_chunked_output_loss.py):
	// 2 bytes per logit plus one chunk's FP32 copy and log-softmax (8/8),
	// 3 where the unchunked loss keeps 6. Kernels as fsdp:compile, whose
	// fitted efficiency it takes.
	StackTorchtune Stack = "torchtune"
)

// torchtuneLogitBytes is StackTorchtune's loss memory per logit (see
// StackTorchtune): BF16 logits plus 8 bytes of FP32 work on one of
// torchtuneLossChunks chunks.
const (
	torchtuneLossChunks = 8
	torchtuneLogitBytes = 2 + 8.0/torchtuneLossChunks
)

// hfLogitBytes is StackHF's loss memory per logit (see StackHF).
const hfLogitBytes = 14.0

// StackNames lists the accepted --stack values, for help texts and errors.
func StackNames() []string {
	return []string{"megatron-core", "nemo", "megatron-2022", "fsdp", "fsdp:eager", "fsdp:compile",
		"deepspeed", "deepspeed:zero1", "deepspeed:zero2", "deepspeed:zero3", "deepspeed:pipe", "jax", "hf", "torchtune"}
}

// ParseStack reads a --stack value (case-insensitive). "megatron-core" is the
// planner's default stack, the empty Stack; "fsdp:eager" is "fsdp".
func ParseStack(s string) (Stack, error) {
	v := strings.ToLower(strings.TrimSpace(s))
	switch v {
	case "", "megatron-core", "megatron", "mcore":
		return StackMegatronCore, nil
	case "fsdp:eager", "fsdp2", "fsdp2:eager":
		return StackFSDP, nil
	case "fsdp2:compile":
		return StackFSDPCompile, nil
	}
	for _, n := range StackNames() {
		if v == n {
			return Stack(v), nil
		}
	}
	return "", fmt.Errorf("stack %q: accepted: %s", s, strings.Join(StackNames(), ", "))
}

// StackZero is the ZeRO stage a stack pins (deepspeed:zero3 → 3), or -1.
func StackZero(s Stack) int {
	switch s {
	case StackDeepSpeed + ":zero1", StackDeepSpeed + ":pipe":
		return 1
	case StackDeepSpeed + ":zero2":
		return 2
	case StackDeepSpeed + ":zero3":
		return 3
	}
	return -1
}

// stackBase strips a stack's variant (deepspeed:zero3 → deepspeed).
func stackBase(s Stack) Stack {
	if strings.HasPrefix(string(s), string(StackDeepSpeed)) {
		return StackDeepSpeed
	}
	return s
}

// stackConsts are one stack's mechanisms.
type stackConsts struct {
	// eltBytes multiplies the fused elementwise bytes of time.go (norms,
	// residual adds, activation functions, rotary). Megatron-Core + TE, NeMo: 1
	// (the fused kernels time.go counts). PyTorch eager: Hugging Face's
	// LlamaRMSNorm is 6 kernels in FP32 (to(float32), pow, mean, rsqrt, mul,
	// to(dtype)) and a weight multiply, SwiGLU's silu(x)·y is 2, rotary's
	// rotate_half and two products 5: about 3× the bytes of the fused
	// kernels (counted from transformers' modeling_llama.py). Inductor and
	// XLA fuse each chain into one or two kernels but keep FP32 upcasts: 1.3×
	// (assumption).
	eltBytes float64
	// kernels is the kernel launches per transformer layer and micro-batch,
	// forward (backward twice); each costs kernelGap of idle GPU between
	// dependent kernels. Counted from the same model code: TE fused ~25,
	// Inductor/XLA ~30, eager ~70.
	kernels float64
	// fa2 selects FlashAttention-2-class attention on Hopper (fa2HopperEff).
	fa2 bool
	// fsdpUnits: ZeRO-3 gathers whole transformer blocks (memory.go).
	fsdpUnits bool
	// bf16Grads: gradients kept and reduced in BF16 (NeMo's grad_sync_dtype,
	// FSDP MixedPrecision reduce_dtype, XLA's bf16 gradients).
	bf16Grads bool
	// eff is the fitted kernel efficiency (stackEff).
	eff float64
	// logit is the loss's bytes per logit; 0 = logitBytes.
	logit float64
}

// kernelGap is the idle time between two dependent kernels when the host
// keeps ahead (launch latency plus tail of the previous kernel; ~2-4 µs on
// Hopper without CUDA graphs, NVIDIA's CUDA Graphs blog "Getting Started with
// CUDA Graphs", 2019, and Nsight traces; 2 µs taken).
const kernelGap = 2e-6

// jitterSigma is the relative spread of one GPU's step time from run to
// run (clock and power management, OS noise, network contention). Every
// synchronous step waits for the slowest of N GPUs, whose expected excess
// over the mean is σ·√(2 ln N) for N independent normal draws (extreme-value
// statistics, e.g. Gumbel 1958). σ = 1 % (assumption, of the order of the
// 1-2 % per-GPU spread reported in Meta's Llama 3 paper §3.3.4 on stragglers).
const jitterSigma = 0.01

func stackOf(s Stack) stackConsts {
	var c stackConsts
	switch stackBase(s) {
	case StackMegatronCore, StackMegatron2022:
		c = stackConsts{eltBytes: 1, kernels: 25}
	case StackNeMo:
		c = stackConsts{eltBytes: 1, kernels: 25, fa2: true, bf16Grads: true}
	case StackFSDP:
		c = stackConsts{eltBytes: 3, kernels: 70, fa2: true, fsdpUnits: true, bf16Grads: true}
	case StackFSDPCompile:
		c = stackConsts{eltBytes: 1.3, kernels: 30, fa2: true, fsdpUnits: true, bf16Grads: true}
	case StackDeepSpeed:
		c = stackConsts{eltBytes: 3, kernels: 70, fa2: true}
	case StackJAX:
		c = stackConsts{eltBytes: 1.3, kernels: 30, fa2: true, fsdpUnits: true, bf16Grads: true}
	case StackHF:
		c = stackConsts{eltBytes: 3, kernels: 70, fa2: true, fsdpUnits: true, bf16Grads: true, logit: hfLogitBytes}
		c.eff = stackEffOf(StackFSDP)
		return c
	case StackTorchtune:
		c = stackConsts{eltBytes: 1.3, kernels: 30, fa2: true, fsdpUnits: true, bf16Grads: true, logit: torchtuneLogitBytes}
		c.eff = stackEffOf(StackFSDPCompile)
		return c
	default:
		c = stackConsts{eltBytes: 1, kernels: 25}
	}
	c.eff = stackEffOf(stackBase(s))
	return c
}

// stackEffOf returns the fitted kernel efficiency of a stack, the pooled
// value when the calibration has no rows of it.
func stackEffOf(s Stack) float64 {
	if e, ok := stackEff[s]; ok {
		return e
	}
	if stackEffPooled > 0 {
		return stackEffPooled
	}
	return 1
}

// stackLayout is which layouts a stack can run, so that Search offers only
// those (pins are honoured as given). Megatron-Core, NeMo and Megatron-2022
// run every layout: pipeline stages with interleaving (VPP) and ZeRO-1 as
// the distributed optimizer.
type stackLayout struct {
	pp, vpp bool  // pipeline stages; interleaved chunks per stage
	zeros   []int // the ZeRO stages it offers with data parallelism (nil: 1 and 3)
}

// stackLayoutOf is s's stackLayout.
//   - FSDP/FSDP2 (fsdp, fsdp:compile) shards parameters, gradients and
//     optimizer state together (FULL_SHARD, ZeRO-3) over a Hugging
//     Face-style model with no pipeline schedule: no PP, no VPP, no ZeRO-1
//     "distributed optimizer" (PyTorch FSDP docs, ShardingStrategy).
//   - JAX (MaxText, PaxML) shards the same way over its mesh ("fsdp" axis).
//   - DeepSpeed without its pipeline engine has no PP; deepspeed:pipe has
//     PP without interleaving and ZeRO-1 at most (DeepSpeed pipeline docs).
func stackLayoutOf(s Stack) stackLayout {
	switch {
	case s == StackFSDP || s == StackFSDPCompile || s == StackJAX || s == StackTorchtune:
		return stackLayout{zeros: []int{3}}
	case s == StackHF:
		return stackLayout{zeros: []int{0, 3}} // DDP, or accelerate FSDP FULL_SHARD
	case s == StackDeepSpeed+":pipe":
		return stackLayout{pp: true, zeros: []int{1}}
	case stackBase(s) == StackDeepSpeed:
		return stackLayout{}
	}
	return stackLayout{pp: true, vpp: true}
}

// cmpOr is a unless it is 0, else b.
func cmpOr(a, b float64) float64 {
	if a != 0 {
		return a
	}
	return b
}
