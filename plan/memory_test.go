package plan

import (
	"strings"
	"testing"
)

func mustGPU(t testing.TB, name string) GPU {
	t.Helper()
	g, err := LookupGPU(name)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// shapeFor evaluates l and returns the evaluation state for white-box checks.
func shapeFor(t testing.TB, m Model, j Job, c Cluster, l Layout) (*shape, Evaluation) {
	t.Helper()
	var x shape
	var e Evaluation
	evaluate(&x, m, j, c, l, &e)
	if e.Reason != "" && e.Memory.PerGPU == 0 {
		t.Fatalf("invalid layout %s: %s", l.Config(), e.Reason)
	}
	return &x, e
}

// Korthikanti et al. 2022 Table 2, per layer, 16-bit activations, the 2022
// kernels (unfused attention): checked term for term on GPT-22B dimensions.
func TestKorthikantiActivationFormula(t *testing.T) {
	m := gpt22b
	s, b, h, a := 2048.0, 4.0, 6144.0, 64.0
	j := Job{SeqLen: 2048, GlobalBatch: 4, Precision: FP16, Stack: StackMegatron2022}
	tests := []struct {
		name string
		tp   int
		sp   bool
		rc   string
		want float64
	}{
		{"no parallelism", 1, false, "none", s * b * h * (34 + 5*a*s/h)},
		{"TP8", 8, false, "none", s * b * h * (10 + 24.0/8 + 5*a*s/(h*8))},
		{"TP8+SP", 8, true, "none", s * b * h * (34.0/8 + 5*a*s/(h*8))},
		{"TP8 selective", 8, false, "selective", s * b * h * (10 + 24.0/8)},
		{"TP8+SP selective", 8, true, "selective", s * b * h * 34.0 / 8},
		{"full recompute", 8, false, "full", 2 * s * b * h},
		{"full recompute SP", 8, true, "full", 2 * s * b * h / 8},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := ClusterOf(mustGPU(t, "a100-80gb"), tc.tp)
			l := Layout{TP: tc.tp, PP: 1, DP: 1, MicroBatch: 4, SP: tc.sp, Recompute: tc.rc}
			x, _ := shapeFor(t, m, j, c, l)
			if got := x.layerActivationBytes(false, tc.rc); relErr(got, tc.want) > 1e-12 {
				t.Errorf("per-layer activations %.6g, want %.6g", got, tc.want)
			}
		})
	}
}

func TestPipelineActivationFactors(t *testing.T) {
	m := gpt3_175b
	c := ClusterOf(mustGPU(t, "a100-80gb"), 64)
	j := Job{SeqLen: 2048, GlobalBatch: 64, Precision: FP16, Stack: StackMegatron2022}
	base := Layout{TP: 8, PP: 8, DP: 1, MicroBatch: 1, SP: true, Recompute: "selective"}
	x, _ := shapeFor(t, m, j, c, base)
	perLayer := x.layerActivationBytes(false, "selective")
	// 1F1B, m ≥ p: p in-flight micro-batches × L/p layers = L layers.
	if got, want := x.layerAct, perLayer*96; relErr(got, want) > 1e-12 {
		t.Errorf("1F1B: %.6g, want L·per-layer %.6g", got, want)
	}
	// Interleaved: × (1 + (p−1)/(p·v)).
	il := base
	il.VPP = 3
	x, _ = shapeFor(t, m, j, c, il)
	if got, want := x.layerAct, perLayer*96*(1+7.0/24); relErr(got, want) > 1e-12 {
		t.Errorf("interleaved: %.6g, want %.6g", got, want)
	}
	// Fewer micro-batches than stages: m/p of it.
	few := base
	j4 := j
	j4.GlobalBatch = 4
	x, _ = shapeFor(t, m, j4, c, few)
	if got, want := x.layerAct, perLayer*96*4/8; relErr(got, want) > 1e-12 {
		t.Errorf("m<p: %.6g, want %.6g", got, want)
	}
	// CP divides the sequence: half the activations per GPU (flash stack).
	jc := Job{SeqLen: 8192, GlobalBatch: 8, Precision: BF16}
	cc := ClusterOf(mustGPU(t, "h100-sxm"), 16)
	l1 := Layout{TP: 8, PP: 1, CP: 1, DP: 2, MicroBatch: 1, SP: true}
	l2 := Layout{TP: 8, PP: 1, CP: 2, DP: 1, MicroBatch: 1, SP: true}
	x1, _ := shapeFor(t, llama3_70b, jc, cc, l1)
	x2, _ := shapeFor(t, llama3_70b, jc, cc, l2)
	if got, want := x2.layerAct, x1.layerAct/2; relErr(got, want) > 1e-12 {
		t.Errorf("CP=2: %.6g, want half of %.6g", got, x1.layerAct)
	}
}

func TestStateBytesPerParameter(t *testing.T) {
	// Korthikanti/Megatron: 18 bytes per parameter without sharding, and the
	// distributed optimizer's 6 + 12/d (FP32 main grads), on a PP=1 model whose
	// stage is the whole model.
	m := llama2_7b
	c := ClusterOf(mustGPU(t, "h100-sxm"), 8)
	n := m.Params()
	tests := []struct {
		name  string
		stack Stack
		prec  Precision
		lora  int
		zero  int
		want  float64 // bytes per parameter of weights+grads+optimizer
	}{
		{"zero0 fp32 grads", StackMegatronCore, BF16, 0, 0, 18},
		{"dist-opt d=8", StackMegatronCore, BF16, 0, 1, 6 + 12.0/8},
		{"zero2 d=8", StackMegatronCore, BF16, 0, 2, 2 + 16.0/8},
		{"zero3 d=8", StackMegatronCore, BF16, 0, 3, 18.0 / 8},
		{"NeMo bf16 grads", StackNeMo, BF16, 0, 1, 4 + 12.0/8},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			j := Job{SeqLen: 4096, GlobalBatch: 8, Precision: tc.prec, Stack: tc.stack, LoRARank: tc.lora}
			_, e := shapeFor(t, m, j, c, Layout{TP: 1, PP: 1, DP: 8, MicroBatch: 1, Zero: tc.zero, Recompute: "full"})
			got := (e.Memory.Weights + e.Memory.Grads + e.Memory.Optimizer) / n
			if relErr(got, tc.want) > 1e-9 {
				t.Errorf("%.4f bytes/param, want %.4f", got, tc.want)
			}
		})
	}
	// FP8 adds the cached FP8 weight and its transpose for linear layers only.
	j := Job{SeqLen: 4096, GlobalBatch: 8, Precision: FP8}
	_, e := shapeFor(t, m, j, c, Layout{TP: 1, PP: 1, DP: 8, MicroBatch: 1, Zero: 1, Recompute: "full"})
	linear := float64(m.Layers) * (m.attnParams() + m.denseMLPParams())
	if got, want := e.Memory.Weights, 2*n+2*linear; relErr(got, want) > 1e-9 {
		t.Errorf("FP8 weights %.6g, want %.6g", got, want)
	}
	// LoRA: the frozen base costs 2 bytes per parameter, no gradients or states.
	jl := Job{SeqLen: 4096, GlobalBatch: 8, Precision: BF16, LoRARank: 16}
	_, el := shapeFor(t, m, jl, c, Layout{TP: 1, PP: 1, DP: 8, MicroBatch: 1, Zero: 0, Recompute: "none"})
	if el.Memory.Weights < 2*n || el.Memory.Weights > 2*n*1.01 {
		t.Errorf("LoRA weights %.4g, want just over 2·%.4g", el.Memory.Weights, n)
	}
	// Adapters (r=16 on every linear layer) are ~0.5 % of the model, with 4
	// bytes of gradient and 12 of optimizer state each.
	if adapters := el.Memory.Grads / 4; adapters > 0.01*n || relErr(el.Memory.Optimizer, 12*adapters) > 1e-9 {
		t.Errorf("LoRA grads %.3g / optimizer %.3g bytes should be the adapters' only", el.Memory.Grads, el.Memory.Optimizer)
	}
}

func TestExpertsShardByEP(t *testing.T) {
	m := mixtral8x7b
	c := ClusterOf(mustGPU(t, "h100-sxm"), 8)
	j := Job{SeqLen: 4096, GlobalBatch: 64, Precision: BF16}
	x1, _ := shapeFor(t, m, j, c, Layout{TP: 1, PP: 1, DP: 8, EP: 1, MicroBatch: 1, Zero: 1, Recompute: "full"})
	x8, _ := shapeFor(t, m, j, c, Layout{TP: 1, PP: 1, DP: 8, EP: 8, MicroBatch: 1, Zero: 1, Recompute: "full"})
	if got, want := x8.stage(stFirst).expert, x1.stage(stFirst).expert/8; relErr(got, want) > 1e-12 {
		t.Errorf("EP=8 expert params per GPU %.4g, want %.4g", got, want)
	}
}

func TestOffloadChecksHostMemory(t *testing.T) {
	c := ClusterOf(mustGPU(t, "h100-sxm"), 8)
	j := Job{SeqLen: 4096, GlobalBatch: 8, Precision: BF16}
	l := Layout{TP: 1, PP: 1, DP: 8, MicroBatch: 1, Zero: 1, Recompute: "full", Offload: "optimizer"}
	e := Evaluate(llama3_70b, j, c, l)
	if e.Memory.Optimizer != 0 {
		t.Errorf("optimizer offloaded but %.3g bytes on the GPU", e.Memory.Optimizer)
	}
	c.HostMemory = 64 * gib
	e = Evaluate(llama3_70b, j, c, l)
	if e.Memory.Fits || !strings.Contains(e.Reason, "host memory per node") {
		t.Errorf("64 GiB host: fits=%v reason %q, want a host-memory rejection", e.Memory.Fits, e.Reason)
	}
}
