package plan

import (
	"math"
	"strings"
	"testing"
)

func TestValidationRules(t *testing.T) {
	h100 := mustGPU(t, "h100-sxm")
	a100 := mustGPU(t, "a100-80gb")
	j := Job{SeqLen: 8192, GlobalBatch: 512, Precision: BF16}
	ok := Layout{TP: 8, PP: 2, VPP: 4, CP: 1, DP: 4, MicroBatch: 1, SP: true, Zero: 1}
	tests := []struct {
		name string
		m    Model
		j    Job
		g    GPU
		n    int
		edit func(*Layout)
		want string // substring of Reason; "" = valid
	}{
		{"valid", llama3_70b, j, h100, 64, func(*Layout) {}, ""},
		{"degrees do not multiply to GPUs", llama3_70b, j, h100, 64, func(l *Layout) { l.DP = 2 }, "not the 64 GPUs"},
		{"heads % tp", llama3_70b, j, h100, 48, func(l *Layout) { l.TP = 3; l.PP = 2; l.DP = 8 }, "attention heads are not divisible by tp=3"},
		{"kv heads % tp", llama3_70b, j, h100, 128, func(l *Layout) { l.TP = 16; l.DP = 4 }, "8 KV heads are not divisible by tp=16"},
		{"uneven vpp chunks are a pipeline layout", llama3_70b, j, h100, 64, func(l *Layout) { l.VPP = 3 }, ""},
		{"more virtual stages than layers", llama3_70b, j, h100, 64, func(l *Layout) { l.VPP = 41 }, "fewer than the pp·vpp = 82 virtual stages"},
		{"uneven pp without vpp is allowed", llama3_70b, j, h100, 96, func(l *Layout) { l.PP = 3; l.VPP = 1 }, ""},
		{"gbs % mbs·dp", llama3_70b, Job{SeqLen: 8192, GlobalBatch: 102, Precision: BF16}, h100, 64, func(l *Layout) { l.VPP = 1 }, "global batch 102 is not divisible"},
		{"interleaving needs m % pp", llama3_70b, Job{SeqLen: 8192, GlobalBatch: 12, Precision: BF16}, h100, 64, func(l *Layout) {}, "multiple of pp=2"},
		{"cp seq rule", llama3_70b, Job{SeqLen: 8190, GlobalBatch: 512, Precision: BF16}, h100, 128, func(l *Layout) { l.CP = 2 }, "not divisible by 2·cp"},
		{"cp needs flash", llama3_70b, Job{SeqLen: 8192, GlobalBatch: 512, Precision: BF16, Stack: StackMegatron2022}, h100, 128, func(l *Layout) { l.CP = 2 }, "fused (flash) attention"},
		{"ep on dense model", llama3_70b, j, h100, 64, func(l *Layout) { l.EP = 2 }, "needs a MoE model"},
		{"ep divides dp·cp", mixtral8x7b, j, h100, 64, func(l *Layout) {
			l.PP = 1
			l.VPP = 1
			l.DP = 8
			l.EP = 8
			l.TP = 8
			l.DP = 8
		}, ""},
		{"ep not dividing dp·cp", mixtral8x7b, j, h100, 32, func(l *Layout) { l.PP = 1; l.VPP = 1; l.TP = 8; l.DP = 4; l.EP = 8 }, "must divide dp·cp = 4"},
		{"fp8 on A100", llama3_70b, Job{SeqLen: 8192, GlobalBatch: 512, Precision: FP8}, a100, 64, func(*Layout) {}, "no FP8"},
		{"params offload needs zero3", llama3_70b, j, h100, 64, func(l *Layout) { l.Offload = "params" }, "needs zero=3"},
		{"bad recompute", llama3_70b, j, h100, 64, func(l *Layout) { l.Recompute = "some" }, "accepted none, selective, full"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := ok
			tc.edit(&l)
			e := Evaluate(tc.m, tc.j, ClusterOf(tc.g, tc.n), l)
			invalid := e.Reason != "" && e.Memory.PerGPU == 0
			switch {
			case tc.want == "" && invalid:
				t.Errorf("want valid, got %q", e.Reason)
			case tc.want != "" && !strings.Contains(e.Reason, tc.want):
				t.Errorf("reason %q, want it to contain %q", e.Reason, tc.want)
			}
		})
	}
}

func TestStepParts(t *testing.T) {
	c := ClusterOf(mustGPU(t, "h100-sxm"), 64)
	j := Job{SeqLen: 8192, GlobalBatch: 512, Precision: BF16}
	for _, l := range []Layout{
		{TP: 8, PP: 2, VPP: 4, DP: 4, MicroBatch: 1, SP: true, Zero: 1},
		{TP: 4, PP: 4, VPP: 1, DP: 4, MicroBatch: 1, SP: true, Zero: 1, Recompute: "full"},
		{TP: 8, PP: 1, CP: 2, DP: 4, MicroBatch: 1, SP: true, Zero: 1, Recompute: "full", RecomputeLayers: 10},
	} {
		e := Evaluate(llama3_70b, j, c, l)
		tm := e.Time
		perMB := (tm.Compute + tm.Recompute + tm.TPComm + tm.CPComm + tm.EPComm) / float64(e.GradAccum)
		// Narayanan 2021 §2.2: bubble = (p−1)/v micro-batch slots.
		if got, want := tm.PPBubble, float64(l.PP-1)/float64(max(l.VPP, 1))*perMB; relErr(got+1e-30, want+1e-30) > 1e-9 {
			t.Errorf("%s: bubble %.6g, want (p−1)/(v·m) of compute = %.6g", l.Config(), got, want)
		}
		sum := tm.Compute + tm.Recompute + tm.TPComm + tm.PPBubble + tm.PPComm + tm.DPCommExposed + tm.CPComm + tm.EPComm + tm.Optimizer + tm.Offload + tm.Straggler
		if relErr(sum, tm.Step) > 1e-12 {
			t.Errorf("%s: parts sum to %.6g, step %.6g", l.Config(), sum, tm.Step)
		}
		tok := float64(j.GlobalBatch*j.SeqLen) / tm.Step / 64
		if relErr(e.TokensPerSPerGPU, tok) > 1e-12 || relErr(e.MFU, tok*e.ModelFlopsPerToken/989.4e12) > 1e-12 {
			t.Errorf("%s: throughput/MFU inconsistent with the step time", l.Config())
		}
		if len(e.Why) < 4 {
			t.Errorf("%s: only %d Why lines", l.Config(), len(e.Why))
		}
	}
}

// The GEMM model by hand: a soft roofline with the asymptotic efficiency that
// reproduces the measured MAMF at 8192³.
func TestGEMMModel(t *testing.T) {
	g := mustGPU(t, "a100-80gb")
	k := newKern(g, StackMegatronCore)
	n := 8192.0
	got := k.gemm(n, n, n, false, 2)
	// The memory term was removed from the measured efficiency, so at the
	// sustained clock (compute term only) the benchmark shape gives back
	// t = (flops/(P·MAMF) − mem)/sustainedClock + mem.
	flops, mem := 2*n*n*n, 6*n*n/g.HBMBandwidth
	want := (flops/(g.PeakBF16*g.MatmulEff)-mem)/sustainedClock + mem
	if relErr(got, want) > 1e-9 {
		t.Errorf("8192³ GEMM %.6g s, want %.6g s", got, want)
	}
	// A skinny GEMM (k = 128, attention-like) is memory-bound: far below MAMF.
	skinny := k.gemm(2048, 2048, 128, false, 2)
	eff := 2 * 2048 * 2048 * 128 / skinny / g.PeakBF16
	if eff > 0.5 {
		t.Errorf("2048×2048×128 GEMM at %.0f%% of peak; its ridge point says memory-bound", 100*eff)
	}
	// Tile quantisation: 130 wide costs as much as 256.
	if a, b := k.gemm(4096, 130, 4096, false, 2), k.gemm(4096, 256, 4096, false, 2); a < 0.9*b {
		t.Errorf("n=130 GEMM %.3g s should cost about n=256's %.3g s", a, b)
	}
	// FP8 is faster than BF16 for a large GEMM but less than 2×.
	h := newKern(mustGPU(t, "h100-sxm"), StackMegatronCore)
	r := h.gemm(8192, 8192, 8192, false, 2) / h.gemm(8192, 8192, 8192, true, 2)
	if r <= 1.2 || r >= 2 {
		t.Errorf("FP8 speed-up %.2f, want between 1.2 and 2", r)
	}
	if math.IsNaN(r) {
		t.Fatal("NaN")
	}
}

func TestTPCommLegacyByHand(t *testing.T) {
	// GPT-22B, TP=8 without SP on A100 NVLink, 2022 stack: per layer 4
	// blocking all-reduces of s·b·h·2 bytes, ring 2(t−1)/t, at 80 % of 300 GB/s.
	c := ClusterOf(mustGPU(t, "a100-80gb"), 8)
	j := Job{SeqLen: 2048, GlobalBatch: 4, Precision: FP16, Stack: StackMegatron2022}
	e := Evaluate(gpt22b, j, c, Layout{TP: 8, PP: 1, DP: 1, MicroBatch: 4, Recompute: "selective"})
	S := 2048.0 * 4 * 6144 * 2
	one := 2*7.0/8*S/(300e9*nvlinkEff) + 2*nvlLatency
	want := 48 * 4 * one
	if relErr(e.Time.TPComm, want) > 1e-9 {
		t.Errorf("TP comm %.6g s, want %.6g s", e.Time.TPComm, want)
	}
	wantTraffic := 48 * 4 * 2 * 7.0 / 8 * S
	if relErr(e.Traffic.TP, wantTraffic) > 1e-9 {
		t.Errorf("TP traffic %.6g bytes, want %.6g", e.Traffic.TP, wantTraffic)
	}
}

func TestEvaluateHotPathDoesNotAllocate(t *testing.T) {
	c := ClusterOf(mustGPU(t, "h100-sxm"), 64)
	j := Job{SeqLen: 8192, GlobalBatch: 512, Precision: BF16}
	l := Layout{TP: 8, PP: 2, VPP: 4, DP: 4, MicroBatch: 1, SP: true, Zero: 1, Recompute: "none"}
	var x shape
	var e Evaluation
	if n := testing.AllocsPerRun(100, func() { e = Evaluation{}; evaluate(&x, llama3_70b, j, c, l, &e) }); n != 0 {
		t.Errorf("evaluate allocates %.0f times per layout; the search's hot path must not", n)
	}
}

func TestDPTrafficByHand(t *testing.T) {
	// Llama-2-7B, TP=1, PP=1, DP=8, distributed optimizer: reduce-scatter of
	// FP32 gradients and all-gather of 16-bit weights, (n−1)/n of each.
	c := ClusterOf(mustGPU(t, "h100-sxm"), 8)
	j := Job{SeqLen: 4096, GlobalBatch: 64, Precision: BF16}
	e := Evaluate(llama2_7b, j, c, Layout{TP: 1, PP: 1, DP: 8, MicroBatch: 1, Zero: 1, Recompute: "full"})
	want := (4 + 2) * llama2_7b.Params() * 7 / 8
	if relErr(e.Traffic.DP, want) > 1e-9 {
		t.Errorf("DP traffic %.6g bytes per step, want %.6g", e.Traffic.DP, want)
	}
	if e.Traffic.TP != 0 || e.Traffic.PP != 0 || e.Traffic.CP != 0 || e.Traffic.EP != 0 {
		t.Errorf("no TP/PP/CP/EP groups, yet traffic %+v", e.Traffic)
	}
}
