package plan

import (
	"math"
	"strings"
	"testing"
)

// DeepSeek-V3 (HF config.json of deepseek-ai/DeepSeek-V3): MLA, 3 dense
// leading layers, 256 routed experts top-8 plus one shared, no MTP module.
var deepseekV3 = Model{Name: "deepseek-v3", Layers: 61, Hidden: 7168, Heads: 128, KVHeads: 128, HeadDim: 128,
	FFN: 18432, FFNType: FFNSwiGLU, Vocab: 129280, Experts: 256, TopK: 8, MoEFFN: 2048, SharedFFN: 2048, DenseLayers: 3,
	QLoRA: 1536, KVLoRA: 512, QKRopeDim: 64, VHeadDim: 128}

// Grok-1 (xai-org/grok-1): every layer MoE, 8 experts top-2, GeGLU, 314B.
var grok1 = Model{Name: "grok-1", Layers: 64, Hidden: 6144, Heads: 48, KVHeads: 8, HeadDim: 128,
	FFNType: FFNGeGLU, Vocab: 131072, Experts: 8, TopK: 2, MoEFFN: 32768}

func TestMLAAndAllMoEParams(t *testing.T) {
	// DeepSeek-V3 report (arXiv 2412.19437): 671B total of which the MTP
	// module is 14B with its shared embedding and output (11.5B unique), 37B
	// activated per token.
	if p := deepseekV3.Params(); math.Abs(p-(671e9-11.5e9))/(671e9-11.5e9) > 0.02 {
		t.Errorf("DeepSeek-V3 parameters %.4g, want ≈ %.4g (671B less the MTP module)", p, 671e9-11.5e9)
	}
	if a := deepseekV3.ActiveParams(); math.Abs(a-37e9)/37e9 > 0.05 {
		t.Errorf("DeepSeek-V3 active parameters %.4g, want ≈ 37e9", a)
	}
	if err := ValidateModel(grok1); err != nil {
		t.Fatalf("Grok-1 (all MoE, no dense FFN): %v", err)
	}
	if p := grok1.Params(); math.Abs(p-314e9)/314e9 > 0.02 {
		t.Errorf("Grok-1 parameters %.4g, want ≈ 314e9", p)
	}
	// MLA's attention core: q·k over 192 dims, a·v over 128 per head.
	_, att := deepseekV3.forwardFlopsPerToken(4096, false)
	if want := 2.0 * 4096 * 128 * (192 + 128) * 61; att != want {
		t.Errorf("MLA attention FLOPs per token %.6g, want %.6g", att, want)
	}
}

func TestDeepSeekV3EP64Fits(t *testing.T) {
	// NeMo 25.04 on 512 H100: TP2 PP8 EP64 ETP1 DP32, MBS1, GBS 4096, seq 4096.
	c := ClusterOf(mustGPU(t, "h100-sxm"), 512)
	j := Job{SeqLen: 4096, GlobalBatch: 4096, Precision: BF16, Stack: StackNeMo}
	l := Layout{TP: 2, PP: 8, DP: 32, EP: 64, ETP: 1, SP: true, MicroBatch: 1, Zero: 1, Recompute: "selective"}
	e := Evaluate(deepseekV3, j, c, l)
	if e.Reason != "" || !e.Memory.Fits {
		t.Fatalf("published DeepSeek-V3 layout: %s (%.1f GiB)", e.Reason, e.Memory.PerGPU/gib)
	}
	l.ETP = 0 // experts sharded by TP inside DP×CP: ep 64 does not divide dp·cp 32
	if e := Evaluate(deepseekV3, j, c, l); !strings.Contains(e.Reason, "ep=64 must divide dp·cp = 32") {
		t.Errorf("ETP = TP: reason %q", e.Reason)
	}
}

func TestUnevenPipelineAccounting(t *testing.T) {
	m := Model{Name: "llama3.1-405b", Layers: 126, Hidden: 16384, Heads: 128, KVHeads: 8, HeadDim: 128,
		FFN: 53248, FFNType: FFNSwiGLU, Vocab: 128256}
	c := ClusterOf(mustGPU(t, "h100-sxm"), 512)
	j := Job{SeqLen: 8192, GlobalBatch: 256, Precision: BF16, Stack: StackNeMo} // NeMo 25.02, as published
	l := Layout{TP: 8, PP: 8, VPP: 8, CP: 2, DP: 4, SP: true, MicroBatch: 1, Zero: 1}
	var x shape
	var e Evaluation
	evaluate(&x, m, j, c, l, &e)
	if e.Reason != "" {
		t.Fatalf("126 layers on PP 8 × VPP 8: %s", e.Reason)
	}
	if x.layersPerStage != 15 || x.layersLast != 15 || x.layersMid != 16 {
		t.Errorf("stages first/last/mid = %v/%v/%v layers, want 15/15/16 ((126+2)/8 − 1 and (126+2)/8)", x.layersPerStage, x.layersLast, x.layersMid)
	}
	// 126 and 128 are both indivisible by 40: an explicit pipeline layout
	// (render_megatron.go: pipelineLayout) puts ⌈126/8⌉ = 16 layers on the
	// first rank and 15 on the last (issue 29: DeepSeek-V3's 61 layers).
	l.VPP = 5
	evaluate(&x, m, j, c, l, &e)
	if e.Reason != "" || x.layersPerStage != 16 || x.layersLast != 15 || x.layersMid != 0 {
		t.Errorf("PP 8 × VPP 5: reason %q, stages first/last/mid = %v/%v/%v, want 16/15/0", e.Reason, x.layersPerStage, x.layersLast, x.layersMid)
	}
}

func TestParseStack(t *testing.T) {
	for in, want := range map[string]Stack{"": StackMegatronCore, "Megatron-Core": StackMegatronCore, "fsdp:eager": StackFSDP,
		"fsdp:compile": StackFSDPCompile, "deepspeed:zero3": StackDeepSpeed + ":zero3", "jax": StackJAX, "nemo": StackNeMo} {
		if got, err := ParseStack(in); err != nil || got != want {
			t.Errorf("ParseStack(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseStack("lightning"); err == nil || !strings.Contains(err.Error(), `stack "lightning": accepted: megatron-core`) {
		t.Errorf("ParseStack(lightning): %v", err)
	}
	if StackZero(StackDeepSpeed+":zero2") != 2 || StackZero(StackFSDP) != -1 {
		t.Error("StackZero: deepspeed:zero2 pins 2, fsdp nothing")
	}
	// Eager FSDP moves more elementwise bytes than compiled: slower, same layout.
	c := ClusterOf(mustGPU(t, "h100-sxm"), 64)
	l := Layout{TP: 1, PP: 1, DP: 64, MicroBatch: 2, Zero: 3, Recompute: "full"}
	eager := Evaluate(llama3_70b, Job{SeqLen: 4096, GlobalBatch: 128, Precision: BF16, Stack: StackFSDP}, c, l)
	comp := Evaluate(llama3_70b, Job{SeqLen: 4096, GlobalBatch: 128, Precision: BF16, Stack: StackFSDPCompile}, c, l)
	if eager.Reason != "" || !(eager.Time.Compute > comp.Time.Compute) {
		t.Errorf("fsdp eager compute %.3f s not above fsdp:compile %.3f s (%s)", eager.Time.Compute, comp.Time.Compute, eager.Reason)
	}
}

func TestStepRange(t *testing.T) {
	c := ClusterOf(mustGPU(t, "h100-sxm"), 64)
	j := Job{SeqLen: 8192, GlobalBatch: 512, Precision: BF16}
	e := Evaluate(llama3_70b, j, c, Layout{TP: 8, PP: 2, VPP: 4, DP: 4, SP: true, MicroBatch: 1, Zero: 1})
	r := e.Time.StepRange
	if !(r[0] < e.Time.Step && e.Time.Step < r[1]) || r[0] < 0.5*e.Time.Step || r[1] > 2*e.Time.Step {
		t.Errorf("step %.3f s, range %v: must bracket the step within a factor 2", e.Time.Step, r)
	}
	if got := stepRange(10, StackJAX, "hopper", 70e9); got[0] > 9.5 || got[1] < 10.5 {
		t.Errorf("stepRange floor ±5 %%: %v", got)
	}
}

// A model larger than the node's GPU and host memory trains only with
// ZeRO-Infinity's NVMe offload, and its step pays for the disk's bandwidth.
func TestNVMeOffload(t *testing.T) {
	m := Model{Name: "llama3.1-405b", Layers: 126, Hidden: 16384, Heads: 128, KVHeads: 8, HeadDim: 128,
		FFN: 53248, FFNType: FFNSwiGLU, Vocab: 128256}
	c := ClusterOf(mustGPU(t, "h100-sxm"), 8)
	c.HostMemory = 1024 * gib // 405B × 16 bytes ≈ 6.5 TB does not fit in host memory either
	if r := Search(m, Job{SeqLen: 4096, GlobalBatch: 64, Precision: BF16}, c, SearchOptions{}); r.Plan != nil {
		t.Fatalf("without an NVMe bandwidth the search must not fall back to NVMe: %+v", r.Plan.Layout)
	}
	c.NVMeBW = 25e9
	j := Job{SeqLen: 4096, GlobalBatch: 64, Precision: BF16, Stack: StackDeepSpeed + ":zero3"}
	r := Search(m, j, c, SearchOptions{})
	if r.Plan == nil || r.Plan.Offload != "nvme" || !r.Plan.Memory.Fits {
		t.Fatalf("plan %+v, want one with offload=nvme", r.Plan)
	}
	slow, fast := c, c
	slow.NVMeBW, fast.NVMeBW = 10e9, 40e9
	es, ef := Evaluate(m, j, slow, r.Plan.Layout), Evaluate(m, j, fast, r.Plan.Layout)
	// Per step the optimizer moves 32 bytes per local parameter over the NVMe.
	local := m.Params() / 8
	if d := es.Time.Offload - ef.Time.Offload; d < 32*local*8*(1/10e9-1/40e9)*0.99 {
		t.Errorf("offload time %.1f s at 10 GB/s vs %.1f s at 40 GB/s: the difference must be at least the optimizer's NVMe traffic", es.Time.Offload, ef.Time.Offload)
	}
	l := r.Plan.Layout
	l.Zero = 1
	if e := Evaluate(m, j, c, l); !strings.Contains(e.Reason, "offload=nvme needs zero=3") {
		t.Errorf("nvme with zero=1: %q", e.Reason)
	}
}
