package plan

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

// dsv3Job is DeepSeek-V3 as NVIDIA's H100 recipe runs it (published-runs-3.json:
// mb2509-h100-dsv3-1024): TP2 PP8 VPP4 EP64 ETP1 on 1,024 GPUs, FP8.
func dsv3Job(t *testing.T) (Model, Job, Cluster, Layout) {
	m := mustModel(t, "deepseek-v3")
	j := Job{SeqLen: 4096, GlobalBatch: 8192, Precision: FP8, Stack: StackNeMo}
	c := ClusterOf(mustGPU(t, "h100-sxm"), 1024)
	l := Layout{TP: 2, PP: 8, VPP: 4, CP: 1, EP: 64, ETP: 1, DP: 64, SP: true, MicroBatch: 1, Zero: 1, Recompute: "full"}
	return m, j, c, l
}

func evalShape(t *testing.T, m Model, j Job, c Cluster, l Layout) (*shape, Evaluation) {
	t.Helper()
	var x shape
	var e Evaluation
	evaluate(&x, m, j, c, l, &e)
	if e.Reason != "" {
		t.Fatalf("%s", e.Reason)
	}
	return &x, e
}

// The EP all-to-all: peers inside the node are reached over NVLink while the
// others go over the network, so an EP group of 8 per node spanning 8 nodes
// moves 7/63 of its bytes off the network; inside one node it is NVLink only.
func TestA2ASplitsNVLinkAndNetwork(t *testing.T) {
	m, j, c, l := dsv3Job(t)
	x, _ := evalShape(t, m, j, c, l)
	vol := 1e9
	got := x.a2aTime(vol, 64, 1)
	want := math.Max(vol*56/63/(c.InterNode*a2aNetEff), vol*7/63/x.nvlink().bw) + netLatency
	if math.Abs(got-want) > 1e-12 {
		t.Errorf("EP64 over 8 nodes: %.6f s, want %.6f s (56/63 of the bytes on the network)", got, want)
	}
	if all := vol/(c.InterNode*a2aNetEff) + netLatency; got >= all {
		t.Errorf("EP64: %.6f s, not below all bytes on the network %.6f s", got, all)
	}
	if in := x.a2aTime(vol, 8, 1); in != vol/x.nvlink().bw+nvlLatency {
		t.Errorf("EP8 inside a node: %.6f s, want NVLink only", in)
	}
}

// A hierarchical dispatcher sends a token once per remote node holding one of
// its experts. DeepSeek-V3's top-8 of 256 experts over 8 nodes hits
// 8·(1 − C(224,8)/C(256,8)) ≈ 5.3 nodes (C(224,8)/C(256,8) = 0.3382) of which 7/8 remote, not 8·7/8 = 7
// copies; routing to 4 of 8 groups lined up with the nodes caps it at 3.5.
func TestFlexDispatchDeduplicatesByNode(t *testing.T) {
	m, j, c, l := dsv3Job(t)
	if p := missProb(256, 32, 8); math.Abs(p-0.3382) > 5e-5 {
		t.Errorf("C(224,8)/C(256,8) = %.4f, want 0.3382", p)
	}
	m.RouterGroups, m.RouterGroupTopK = 0, 0
	x, _ := evalShape(t, m, j, c, l)
	if s := x.dedupShare(8); math.Abs(s-(1-0.3382)) > 1e-4 {
		t.Errorf("ungrouped share %.4f, want %.4f (7·(1−miss) of 7 copies)", s, 1-0.3382)
	}
	m.RouterGroups, m.RouterGroupTopK = 8, 4
	x, _ = evalShape(t, m, j, c, l)
	if s := x.dedupShare(8); math.Abs(s-0.5) > 1e-9 {
		t.Errorf("4 of 8 node-aligned groups: share %.4f, want 0.5 (3.5 of 7 remote copies)", s)
	}
	plain := Evaluate(m, j, c, l)
	j.MoEDispatcher = "flex"
	flex := Evaluate(m, j, c, l)
	// Half the copies, at 0.86 instead of 0.60 of the NIC rate.
	if r, want := flex.Time.EPComm/plain.Time.EPComm, 0.5*a2aNetEff/flexNetEff; math.Abs(r-want) > 0.03 {
		t.Errorf("flex EP time %.1f s vs alltoall %.1f s: ratio %.3f, want about %.3f", flex.Time.EPComm, plain.Time.EPComm, r, want)
	}
	j.MoEDispatcher = "deepep"
	if e := Evaluate(m, j, c, l); !strings.Contains(e.Reason, "accepted alltoall, flex") {
		t.Errorf("unknown dispatcher: reason %q", e.Reason)
	}
}

// Overlap hides the all-to-all behind the layer's compute, leaving what
// exceeds it and the interference; without the option it all shows.
func TestEPOverlap(t *testing.T) {
	m, j, c, l := dsv3Job(t)
	plain := Evaluate(m, j, c, l)
	j.MoEA2AOverlap = true
	over := Evaluate(m, j, c, l)
	if over.Time.EPComm >= plain.Time.EPComm || over.Time.EPComm <= 0 {
		t.Errorf("overlapped EP %.2f s, plain %.2f s: want less but not zero", over.Time.EPComm, plain.Time.EPComm)
	}
	// The step gains the EP time and the share of it the pipeline bubble held.
	if d := plain.Time.Step - over.Time.Step; d < plain.Time.EPComm-over.Time.EPComm {
		t.Errorf("the step moved %.3f s, less than the EP time %.3f s", d, plain.Time.EPComm-over.Time.EPComm)
	}
}

// The busiest EP rank sets the pace: with a capacity factor every expert runs
// capacity = CF × mean tokens; dropless, balanced routing leaves only the
// multinomial spread, 1 + √(2 ln EP / N).
func TestRouterLoad(t *testing.T) {
	m, j, c, l := dsv3Job(t)
	x, e0 := evalShape(t, m, j, c, l)
	n := 8 * 4096.0 / 2 // top-8 of the TP rank's 2,048 tokens (ETP 1)
	if got, want := x.moeLoad(), 1+math.Sqrt(2*math.Log(64)/n); math.Abs(got-want) > 1e-12 {
		t.Errorf("dropless load %.5f, want %.5f", got, want)
	}
	j.MoECapacity = 1.5
	x, e1 := evalShape(t, m, j, c, l)
	if x.moeLoad() != 1.5 {
		t.Errorf("capacity 1.5: load %.3f", x.moeLoad())
	}
	if e1.Time.Compute <= e0.Time.Compute || e1.Time.EPComm <= e0.Time.EPComm {
		t.Errorf("capacity 1.5 should slow the experts and the all-to-all: compute %.2f→%.2f, EP %.2f→%.2f",
			e0.Time.Compute, e1.Time.Compute, e0.Time.EPComm, e1.Time.EPComm)
	}
	j.MoECapacity = -1
	if e := Evaluate(m, j, c, l); !strings.Contains(e.Reason, "must be ≥ 0") {
		t.Errorf("negative capacity: reason %q", e.Reason)
	}
}

// Small experts run below peak: the grouped GEMMs' FLOP rate falls with the
// tokens each expert gets (weights read once per expert; below the ridge
// point the GEMM is memory-bound).
func TestSmallExpertsRunBelowPeak(t *testing.T) {
	m, j, c, _ := dsv3Job(t)
	x, _ := evalShape(t, m, j, c, Layout{TP: 1, PP: 8, VPP: 1, EP: 64, DP: 128, MicroBatch: 1, Zero: 1, Recompute: "full"})
	h, f := float64(m.Hidden), float64(m.moeFFN())
	rate := func(tokens float64) float64 {
		fw, bw := x.k.linear(tokens, h, 2*f, true, false)
		return 6 * tokens * h * 2 * f / (fw + bw)
	}
	big, mid, small := rate(8192), rate(512), rate(64)
	if !(big > mid && mid > small) || small > 0.5*big {
		t.Errorf("FP8 expert GEMM rate at 8192/512/64 tokens: %.0f/%.0f/%.0f TFLOP/s: want falling, 64 tokens below half", big/1e12, mid/1e12, small/1e12)
	}
}

// MTP adds a layer, a projection and a second output pass to the last stage.
func TestMTPLayersCostTheLastStage(t *testing.T) {
	m, j, c, l := dsv3Job(t)
	e0 := Evaluate(m, j, c, l)
	m.MTPLayers = 1
	x, e1 := evalShape(t, m, j, c, l)
	if e1.Time.Step <= e0.Time.Step {
		t.Errorf("MTP: step %.2f s, without %.2f s", e1.Time.Step, e0.Time.Step)
	}
	if last, first := x.stageTime(stLast).total(), x.stageTime(stFirst).total(); last <= x.mtpTime().total() || x.mtpTime().total() <= 0 {
		t.Errorf("last stage %.3f s, first %.3f s, MTP %.3f s", last, first, x.mtpTime().total())
	}
	m.MTPLayers = -1
	if e := Evaluate(m, j, c, l); e.Reason == "" {
		t.Error("negative mtp_layers accepted")
	}
}

// FP8 recipes: current scaling reads each tensor once more for its amax;
// MXFP8 exists only on Blackwell (block scales in the tensor cores); the
// default is delayed scaling, what --format megatron passes.
func TestFP8Recipes(t *testing.T) {
	h100, b200 := mustGPU(t, "h100-sxm"), mustGPU(t, "b200")
	if fp8Recipe(Job{}, h100) != FP8Delayed || fp8Recipe(Job{}, b200) != FP8Delayed {
		t.Errorf("defaults: %s on H100, %s on B200", fp8Recipe(Job{}, h100), fp8Recipe(Job{}, b200))
	}
	if r := validFP8Recipe(FP8MX, b200); r != "" {
		t.Errorf("mxfp8 on B200: %s", r)
	}
	if !(fp8CastBytes(FP8Delayed) < fp8CastBytes(FP8MX) && fp8CastBytes(FP8MX) < fp8CastBytes(FP8Current)) {
		t.Errorf("cast bytes delayed %.3f, mxfp8 %.3f, current %.3f", fp8CastBytes(FP8Delayed), fp8CastBytes(FP8MX), fp8CastBytes(FP8Current))
	}
	m := mustModel(t, "llama3-70b")
	c := ClusterOf(h100, 64)
	l := Layout{TP: 4, PP: 2, VPP: 1, DP: 8, SP: true, MicroBatch: 1, Zero: 1, Recompute: "none"}
	step := func(r FP8Recipe) (float64, string) {
		e := Evaluate(m, Job{SeqLen: 8192, GlobalBatch: 128, Precision: FP8, FP8Recipe: r}, c, l)
		return e.Time.Step, e.Reason
	}
	d, _ := step("")
	del, _ := step(FP8Delayed)
	cur, _ := step(FP8Current)
	if d != del || cur <= del {
		t.Errorf("step default %.4f, delayed %.4f, current %.4f: want default = delayed < current", d, del, cur)
	}
	if _, r := step(FP8MX); !strings.Contains(r, "needs Blackwell") {
		t.Errorf("mxfp8 on H100: reason %q", r)
	}
	if _, r := step("nvfp4"); !strings.Contains(r, "accepted delayed, current, blockwise, mxfp8") {
		t.Errorf("unknown recipe: reason %q", r)
	}
}

// In a MoE layer the FP8 casts are of the routed copies: TopK·(h + F) per
// token, not the dense FFN's h + F.
func TestFP8CastsOfRoutedCopies(t *testing.T) {
	m, j, c, l := dsv3Job(t)
	x, _ := evalShape(t, m, j, c, l)
	_, tpMoE := x.fp8Casts(true)
	_, tpDense := x.fp8Casts(false)
	h, cb := float64(m.Hidden), fp8CastBytes(FP8Delayed)
	nd := cb * float64(m.Heads) * float64(m.headDim())
	want := nd + cb*(8*(h+2048)+2048)
	if math.Abs(tpMoE-want) > 1e-6 || tpDense != nd+cb*float64(m.FFN) {
		t.Errorf("casts per token: MoE %.0f (want %.0f), dense %.0f", tpMoE, want, tpDense)
	}
}

// --format megatron passes what the time model assumed: the FP8 recipe
// (Megatron's name for current scaling is tensorwise), the flex dispatcher,
// the EP overlap, the capacity factor with padding, and MTP.
func TestMegatronArgsForMoEOptions(t *testing.T) {
	m, j, c, l := dsv3Job(t)
	m.MTPLayers = 1
	j.FP8Recipe, j.MoEDispatcher, j.MoEA2AOverlap, j.MoECapacity = FP8Current, "flex", true, 1.25
	e := Evaluate(m, j, c, l)
	var b bytes.Buffer
	if err := RenderMegatron(&b, m, j, e); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"--fp8-recipe tensorwise", "--moe-token-dispatcher-type flex", "--moe-flex-dispatcher-backend deepep",
		"--overlap-moe-expert-parallel-comm", "--moe-expert-capacity-factor 1.25", "--moe-pad-expert-input-to-capacity", "--mtp-num-layers 1",
		"--pipeline-model-parallel-layout 'Ett|", "|tmL'"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("missing %q in\n%s", want, b.String())
		}
	}
}

// The plan JSON's inputs carry how the MoE and FP8 layers ran, so an
// observation of the run re-evaluates to the same plan; a bad value names
// its field.
func TestInputsCarryMoEOptions(t *testing.T) {
	m, j, c, _ := dsv3Job(t)
	m.MTPLayers = 1
	j.FP8Recipe, j.MoEDispatcher, j.MoEA2AOverlap, j.MoECapacity = FP8Blockwise, "flex", true, 1.25
	in := InputsOf(m, j, c, "")
	m2, j2, _, err := in.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	if j2.FP8Recipe != j.FP8Recipe || j2.MoEDispatcher != "flex" || !j2.MoEA2AOverlap || j2.MoECapacity != 1.25 || m2.MTPLayers != 1 {
		t.Errorf("round trip: job %+v, mtp %d", j2, m2.MTPLayers)
	}
	in.FP8Recipe = "mxfp8"
	if _, _, _, err := in.Resolve(); err == nil || !strings.Contains(err.Error(), "inputs.fp8_recipe") {
		t.Errorf("mxfp8 on H100: %v", err)
	}
	in.FP8Recipe, in.MoEDispatcher = "", "nccl"
	if _, _, _, err := in.Resolve(); err == nil || !strings.Contains(err.Error(), "inputs.moe_dispatcher") {
		t.Errorf("unknown dispatcher: %v", err)
	}
}
