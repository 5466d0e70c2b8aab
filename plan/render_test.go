package plan

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/trainrun/trainrun/internal/golden"
)

// rdGolden compares got with testdata/render/name (internal/golden).
func rdGolden(t *testing.T, name, got string) {
	t.Helper()
	golden.CheckString(t, filepath.Join("testdata", "render", name), got)
}

// Hand-built inputs: the renderers' tests must not depend on the model's
// predictions, so these figures are test inputs, not predictions.
var (
	rdH100 = GPU{Name: "h100-sxm", PeakBF16: 989.4e12, PeakFP8: 1978.9e12, MemoryBytes: 80e9, HBMBandwidth: 3.35e12,
		NVLinkBandwidth: 450e9, PCIeBandwidth: 64e9, InterNode: 50e9, NVLinkDomain: 8, GPUsPerNode: 8}
	rdA100 = GPU{Name: "a100-80gb", PeakBF16: 312e12, MemoryBytes: 80e9, HBMBandwidth: 2.039e12,
		NVLinkBandwidth: 300e9, PCIeBandwidth: 32e9, InterNode: 25e9, NVLinkDomain: 8, GPUsPerNode: 8}
	rdH100x64  = Cluster{GPU: rdH100, GPUs: 64, GPUsPerNode: 8, NVLinkDomain: 8, InterNode: 50e9}
	rdA100x128 = Cluster{GPU: rdA100, GPUs: 128, GPUsPerNode: 8, NVLinkDomain: 8, InterNode: 25e9}
	rdJobL70   = Job{SeqLen: 8192, GlobalBatch: 512, Precision: BF16, Tokens: 1e12}
)

func rdHandEval() Evaluation {
	return Evaluation{
		Layout: Layout{TP: 8, PP: 4, VPP: 5, CP: 1, EP: 1, DP: 2, SP: true, MicroBatch: 1, GradAccum: 256, Recompute: "selective", Zero: 1, Offload: "none"},
		Memory: Memory{PerGPU: 60.5 * bytesPerGiB, Capacity: 79.6 * bytesPerGiB, Fits: true, Weights: 4.4 * bytesPerGiB, Grads: 8.8 * bytesPerGiB, Optimizer: 13.2 * bytesPerGiB, Activations: 31.1 * bytesPerGiB, Other: 3.0 * bytesPerGiB},
		Time: Time{Step: 20.25, Compute: 17.2, Recompute: 0.5, Optimizer: 0.2, TPComm: 1.1, PPBubble: 0.85, PPComm: 0.1,
			DPCommExposed: 0.3, CPComm: 0, EPComm: 0, Offload: 0},
		TokensPerSPerGPU: 3236.5, ModelFlopsPerToken: 4.65e11, ModelTFLOPSPerGPU: 450.1, MFU: 0.455,
		Why: []string{"TP=8 stays inside the 8-GPU NVLink domain", "PP=4 with VPP=5 keeps the bubble at 3 % of the step"},
	}
}

func rdHandResult() Result {
	e := rdHandEval()
	alt := e
	alt.Layout.PP, alt.Layout.VPP, alt.Layout.DP, alt.Layout.GradAccum = 8, 5, 1, 512
	alt.TokensPerSPerGPU, alt.MFU, alt.Time.Step, alt.Memory.PerGPU = 3100.2, 0.436, 21.14, 40.2*bytesPerGiB
	return Result{Plan: &e, Alternatives: []Evaluation{alt},
		Rejected: []Rejection{{Config: "tp=4,pp=2,vpp=1,cp=1,ep=1,dp=8,sp=true,mbs=1,recompute=selective,zero=1,offload=none", Reason: "needs 93.1 GiB per GPU, capacity 79.6 GiB"}}}
}

func TestRenderTableGolden(t *testing.T) {
	m, _ := LookupModel("llama3-70b")
	cases := []struct {
		name string
		j    Job
		r    Result
	}{
		{"table-llama3-70b-hand.golden", rdJobL70, rdHandResult()},
		{"table-nofit-hand.golden", Job{SeqLen: 8192, GlobalBatch: 512, Precision: BF16}, Result{Rejected: []Rejection{
			{Config: "tp=8,pp=1,vpp=1,cp=1,ep=1,dp=1,sp=true,mbs=1,recompute=full,zero=1,offload=none", Reason: "needs 201.7 GiB per GPU, capacity 79.6 GiB"}}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := RenderTable(&b, m, c.j, rdH100x64, c.r); err != nil {
				t.Fatal(err)
			}
			rdGolden(t, c.name, b.String())
		})
	}
}

// The contract's key set, copied from PRODUCT.md ("`trainrun plan`").
var (
	contractTop    = []string{"plan", "alternatives", "rejected"}
	contractPlan   = []string{"tp", "pp", "vpp", "cp", "ep", "dp", "sp", "micro_batch", "grad_accum", "recompute", "zero", "offload", "memory", "time", "tokens_per_s_per_gpu", "model_flops_per_token", "model_tflops_per_gpu", "mfu", "why"}
	contractMemory = []string{"per_gpu_bytes", "capacity_bytes", "fits", "weights_bytes", "grads_bytes", "optimizer_bytes", "activations_bytes", "other_bytes"}
	contractTime   = []string{"step_s", "compute_s", "tp_comm_s", "pp_bubble_s", "dp_comm_exposed_s", "cp_comm_s", "ep_comm_s", "offload_s"}
	contractReject = []string{"config", "reason"}
)

func rdKeysOf(t *testing.T, v any) []string {
	t.Helper()
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("want an object, got %T", v)
	}
	k := make([]string, 0, len(m))
	for key := range m {
		k = append(k, key)
	}
	sort.Strings(k)
	return k
}

func rdSorted(s []string) []string { c := slices.Clone(s); sort.Strings(c); return c }

// CheckContractJSON fails unless out is exactly the contract's object.
func rdCheckContractJSON(t *testing.T, out []byte, wantPlan bool) map[string]any {
	t.Helper()
	var top map[string]any
	if err := json.Unmarshal(out, &top); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	eq := func(what string, got, want []string) {
		t.Helper()
		if !reflect.DeepEqual(got, rdSorted(want)) {
			t.Errorf("%s keys %v, contract %v", what, got, rdSorted(want))
		}
	}
	eq("top", rdKeysOf(t, top), contractTop)
	plans := []any{}
	if wantPlan {
		plans = append(plans, top["plan"])
	} else if top["plan"] != nil {
		t.Errorf("plan = %v, want null", top["plan"])
	}
	alts, ok := top["alternatives"].([]any)
	if !ok {
		t.Fatalf("alternatives is %T, want an array", top["alternatives"])
	}
	plans = append(plans, alts...)
	for _, p := range plans {
		pm := p.(map[string]any)
		eq("plan", rdKeysOf(t, pm), contractPlan)
		eq("memory", rdKeysOf(t, pm["memory"]), contractMemory)
		// step_s_range was added by issue 13 (a band, not a part of step_s).
		eq("time", rdKeysOf(t, pm["time"]), append(append([]string(nil), contractTime...), "step_s_range"))
		if _, ok := pm["why"].([]any); !ok {
			t.Errorf("why is %T, want an array", pm["why"])
		}
	}
	rej, ok := top["rejected"].([]any)
	if !ok {
		t.Fatalf("rejected is %T, want an array", top["rejected"])
	}
	for _, r := range rej {
		eq("rejected", rdKeysOf(t, r), contractReject)
	}
	return top
}

func TestRenderJSONContract(t *testing.T) {
	t.Run("plan", func(t *testing.T) {
		var b bytes.Buffer
		r := rdHandResult()
		r.Plan.Why = nil // must still be an array
		if err := RenderJSON(&b, r); err != nil {
			t.Fatal(err)
		}
		top := rdCheckContractJSON(t, b.Bytes(), true)
		p := top["plan"].(map[string]any)
		// The planner's ten step parts fold into the contract's seven and
		// still add up to step_s: 17.2+0.5+0.2 compute, 0.85+0.1 pipeline.
		tm := p["time"].(map[string]any)
		sum := 0.0
		for _, k := range contractTime[1:] {
			sum += tm[k].(float64)
		}
		if d := sum - tm["step_s"].(float64); d > 1e-9 || d < -1e-9 || tm["compute_s"] != 17.9 || tm["pp_bubble_s"] != 0.95 {
			t.Errorf("time parts %v sum to %g, step_s %v", tm, sum, tm["step_s"])
		}
		if p["tp"] != 8.0 || p["vpp"] != 5.0 || p["recompute"] != "selective" || p["memory"].(map[string]any)["fits"] != true {
			t.Errorf("values not carried: %v", p)
		}
	})
	t.Run("nothing fits", func(t *testing.T) {
		var b bytes.Buffer
		if err := RenderJSON(&b, Result{}); err != nil {
			t.Fatal(err)
		}
		rdCheckContractJSON(t, b.Bytes(), false)
		if !strings.Contains(b.String(), `"plan": null`) || !strings.Contains(b.String(), `"alternatives": []`) {
			t.Errorf("want plan null and empty arrays:\n%s", b.String())
		}
	})
	t.Run("non-finite is an error", func(t *testing.T) {
		r := rdHandResult()
		r.Plan.MFU = rdPosInf()
		if err := RenderJSON(&bytes.Buffer{}, r); err == nil {
			t.Error("want an error for +Inf")
		}
	})
}

func rdPosInf() float64 { var z float64; return 1 / z }

func TestMegatronArgs(t *testing.T) {
	l70, _ := LookupModel("llama3-70b")
	mix, _ := LookupModel("mixtral-8x7b")
	gpt, _ := LookupModel("gpt3-175b")
	nem, _ := LookupModel("nemotron4-340b")
	moe := Model{Name: "moe", Layers: 24, Hidden: 2048, Heads: 16, KVHeads: 16, HeadDim: 128, FFN: 5632, FFNType: FFNSwiGLU,
		Vocab: 151936, Experts: 60, TopK: 4, MoEFFN: 1408, SharedFFN: 5632, DenseLayers: 2}
	qwen, _ := LookupModel("qwen2.5-7b")
	l31, _ := LookupModel("llama3.1-70b")
	dsv3, _ := LookupModel("deepseek-v3")
	qe := rdHandEval() // 28 layers over pp 4: even
	qe.PP, qe.VPP = 4, 1
	full := rdHandEval()
	full.Recompute, full.Zero, full.VPP, full.DP, full.CP = "full", 3, 1, 1, 1
	ep := rdHandEval()
	ep.EP, ep.Offload, ep.VPP = 8, "optimizer", 1
	pp := func(p, v int) Evaluation { e := rdHandEval(); e.PP, e.VPP = p, v; return e }
	cases := []struct {
		name      string
		m         Model
		j         Job
		e         Evaluation
		has, nots []string
	}{
		{"llama3-70b plan", l70, rdJobL70, rdHandEval(), []string{
			"--tensor-model-parallel-size 8", "--pipeline-model-parallel-size 4",
			"--num-virtual-stages-per-pipeline-rank 5", // 80 = 4·5·4 layers
			"--context-parallel-size 1", "--sequence-parallel", "--micro-batch-size 1", "--global-batch-size 512",
			"--recompute-granularity selective", "--use-distributed-optimizer", "--overlap-grad-reduce", "--overlap-param-gather",
			"--bf16", "--seq-length 8192", "--max-position-embeddings 8192", "--num-layers 80", "--hidden-size 8192",
			"--num-attention-heads 64", "--group-query-attention", "--num-query-groups 8", "--ffn-hidden-size 28672",
			"--swiglu", "--untie-embeddings-and-output-weights", "--vocab-size 128256",
			"--normalization RMSNorm", "--norm-epsilon 1e-05", "--disable-bias-linear", "--position-embedding-type rope", "--rotary-base 500000"},
			[]string{"--expert-model-parallel-size", "--kv-channels", "--recompute-method", "--fp8-format", "--num-layers-per-virtual-pipeline-stage",
				"--account-for-embedding-in-pipeline-split", "--use-rope-scaling", "--add-qkv-bias"}},
		{"full recompute, fsdp, fp8, no dp", gpt, Job{SeqLen: 2048, GlobalBatch: 1536, Precision: FP8}, full, []string{
			"--recompute-granularity full", "--recompute-method uniform", "--recompute-num-layers 1",
			"--use-distributed-optimizer", "--use-megatron-fsdp", "--data-parallel-sharding-strategy optim_grads_params", "--ckpt-format fsdp_dtensor",
			"--bf16", "--fp8-format hybrid", "--fp8-recipe delayed",
			"--normalization LayerNorm", "--position-embedding-type learned_absolute"},
			[]string{"--swiglu", "--untie-embeddings-and-output-weights", "--group-query-attention", "--overlap-grad-reduce", "--disable-bias-linear",
				"--num-layers-per-virtual-pipeline-stage", "--recompute-granularity selective"}},
		{"mixtral ep", mix, Job{SeqLen: 4096, GlobalBatch: 256, Precision: FP16}, ep, []string{
			"--expert-model-parallel-size 8", "--num-experts 8", "--moe-router-topk 2", "--moe-ffn-hidden-size 14336",
			"--moe-token-dispatcher-type alltoall", "--fp16", "--optimizer-cpu-offload", "--optimizer-offload-fraction 1.0",
			"--use-precision-aware-optimizer", "--moe-grouped-gemm", "--rotary-base 1000000"},
			[]string{"--moe-layer-freq", "--moe-shared-expert-intermediate-size", "--bf16", "--moe-router-score-function"}},
		{"shared experts, dense prefix", moe, rdJobL70, pp(4, 2), []string{
			"--moe-shared-expert-intermediate-size 5632", "--moe-layer-freq ([0]*2+[1]*22)", "--expert-model-parallel-size 1"},
			nil},
		{"nemotron kv-channels and squared relu", nem, rdJobL70, pp(4, 4), []string{
			"--squared-relu", "--num-query-groups 8", "--normalization LayerNorm", "--apply-layernorm-1p", "--rotary-percent 0.5"},
			[]string{"--swiglu", "--kv-channels"}},
		{"deepseek-v3: MLA and its router", dsv3, Job{SeqLen: 4096, GlobalBatch: 4096, Precision: BF16}, pp(7, 1), []string{
			"--multi-latent-attention", "--q-lora-rank 1536", "--kv-lora-rank 512", "--qk-head-dim 128", "--qk-pos-emb-head-dim 64",
			"--v-head-dim 128", "--rotary-scaling-factor 40", "--moe-router-score-function sigmoid", "--moe-router-enable-expert-bias",
			"--moe-router-num-groups 8", "--moe-router-group-topk 4", "--moe-router-topk-scaling-factor 2.5",
			"--moe-shared-expert-intermediate-size 2048", "--moe-layer-freq ([0]*3+[1]*58)", "--account-for-embedding-in-pipeline-split",
			"--account-for-loss-in-pipeline-split", "--normalization RMSNorm", "--norm-epsilon 1e-06"},
			[]string{"--group-query-attention", "--use-rope-scaling", "--kv-channels"}},
		{"qwen2.5: Q/K/V biases", qwen, rdJobL70, qe, []string{"--disable-bias-linear", "--add-qkv-bias", "--rotary-base 1000000",
			"--norm-epsilon 1e-06"},
			[]string{"--num-virtual-stages-per-pipeline-rank", "--decoder-first-pipeline-num-layers", "--account-for-loss-in-pipeline-split"}},
		{"llama3.1: RoPE scaling", l31, rdJobL70, rdHandEval(), []string{"--use-rope-scaling", "--rope-scaling-factor 8", "--rotary-base 500000"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args, err := MegatronArgs(c.m, c.j, c.e)
			if err != nil {
				t.Fatal(err)
			}
			got := " " + strings.Join(args, " ") + " "
			for _, h := range c.has {
				if !strings.Contains(got, " "+h+" ") {
					t.Errorf("missing %q in%s", h, got)
				}
			}
			for _, n := range c.nots {
				if strings.Contains(got, " "+n+" ") {
					t.Errorf("unexpected %q in%s", n, got)
				}
			}
		})
	}
	// Block recompute: the planner's least number of layers per chunk.
	blk := rdHandEval()
	blk.Recompute, blk.RecomputeLayers = "full", 6
	got := " " + strings.Join(mustMegatron(t, l70, rdJobL70, blk), " ") + " "
	if !strings.Contains(got, " --recompute-granularity full --recompute-method block --recompute-num-layers 6 ") {
		t.Errorf("block recompute flags: %s", got)
	}
	var jb bytes.Buffer
	if err := RenderJSON(&jb, Result{Plan: &blk, Alternatives: []Evaluation{}}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(jb.String(), `"recompute": "full"`) || strings.Contains(jb.String(), "recompute_layers") {
		t.Errorf("JSON must say full (the safe reading) and keep the contract's keys:\n%s", jb.String())
	}
	env := map[string]string{}
	for _, kv := range PlanEnv(blk) {
		env[kv[0]] = kv[1]
	}
	if env["TRAINRUN_RECOMPUTE"] != "full" || env["TRAINRUN_RECOMPUTE_LAYERS"] != "6" {
		t.Errorf("env %v", env)
	}
	// Qwen3-style head_dim·heads != hidden needs --kv-channels.
	q := l70
	q.HeadDim = 96
	if got := strings.Join(mustMegatron(t, q, rdJobL70, rdHandEval()), " "); !strings.Contains(got, "--kv-channels 96") {
		t.Errorf("want --kv-channels 96: %s", got)
	}
}

func mustMegatron(t *testing.T, m Model, j Job, e Evaluation) []string {
	t.Helper()
	a, err := MegatronArgs(m, j, e)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestRenderMegatronEnvGolden(t *testing.T) {
	m, _ := LookupModel("llama3-70b")
	var b bytes.Buffer
	if err := RenderMegatron(&b, m, Job{SeqLen: 8192, GlobalBatch: 512, Precision: BF16}, rdHandEval()); err != nil {
		t.Fatal(err)
	}
	rdGolden(t, "megatron-llama3-70b-hand.golden", b.String())
	b.Reset()
	if err := RenderEnv(&b, rdHandEval()); err != nil {
		t.Fatal(err)
	}
	rdGolden(t, "env-hand.golden", b.String())
}

func TestPlanEnvHasContractVariables(t *testing.T) {
	got := map[string]string{}
	for _, kv := range PlanEnv(rdHandEval()) {
		got[kv[0]] = kv[1]
	}
	want := map[string]string{"TRAINRUN_TP": "8", "TRAINRUN_PP": "4", "TRAINRUN_VPP": "5", "TRAINRUN_CP": "1", "TRAINRUN_EP": "1",
		"TRAINRUN_DP": "2", "TRAINRUN_MICRO_BATCH": "1", "TRAINRUN_GRAD_ACCUM": "256", "TRAINRUN_RECOMPUTE": "selective"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
}

func TestSbatch(t *testing.T) {
	m, _ := LookupModel("llama3-70b")
	e := rdHandEval()
	e.Time.Step = 10
	// 1e9 tokens / (128·4096 per step) = 1907.35 → 1908 steps · 10 s = 19080 s;
	// ·1.10 = 20988 s; + 600 s lead = 21588 s → rounded up to 21600 s = 6 h.
	j := Job{SeqLen: 4096, GlobalBatch: 128, Precision: BF16, Tokens: 1e9}
	if got := SbatchTimeLimit(j, e, DefaultSbatchOptions()); got != 6*time.Hour {
		t.Errorf("time limit %v, want 6h0m0s", got)
	}
	cases := []struct {
		name string
		d    time.Duration
		want string
	}{{"minutes", 90 * time.Minute, "01:30:00"}, {"days", 49*time.Hour + 61*time.Second, "2-01:01:01"}}
	for _, c := range cases {
		if got := slurmDuration(c.d); got != c.want {
			t.Errorf("%s: slurmDuration(%v) = %s, want %s", c.name, c.d, got, c.want)
		}
	}
	var b bytes.Buffer
	if err := RenderSbatch(&b, m, rdJobL70, rdH100x64, rdHandEval(), DefaultSbatchOptions()); err != nil {
		t.Fatal(err)
	}
	rdGolden(t, "sbatch-llama3-70b-hand.golden", b.String())

	// A job smaller than a node asks for the GPUs it needs, not the node.
	small := rdHandEval()
	small.TP, small.PP, small.DP = 2, 1, 2
	b.Reset()
	if err := RenderSbatch(&b, m, Job{SeqLen: 4096, GlobalBatch: 8, Precision: BF16}, rdH100x64, small, DefaultSbatchOptions()); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"#SBATCH --nodes=1\n", "#SBATCH --gpus-per-node=4\n", "#SBATCH --ntasks-per-node=4\n", "no --tokens given", "#SBATCH --requeue\n", "#SBATCH --signal=USR2@600\n"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("missing %q in\n%s", want, b.String())
		}
	}
	if strings.Contains(b.String(), "--time=") {
		t.Errorf("no --tokens: want no --time line\n%s", b.String())
	}
}

func TestComparison(t *testing.T) {
	m, _ := LookupModel("llama3-70b")
	fast := rdHandEval()
	slow := rdHandEval()
	slow.Layout.DP, slow.Recompute = 4, "full"
	slow.TokensPerSPerGPU, slow.MFU, slow.Time.Step = 1000, 0.40, 32.8
	rs := []GPUResult{{rdH100x64, Result{Plan: &fast}}, {rdA100x128, Result{Plan: &slow}}}
	var b bytes.Buffer
	if err := RenderComparison(&b, m, rdJobL70, rs); err != nil {
		t.Fatal(err)
	}
	rdGolden(t, "compare-hand.golden", b.String())
	out := b.String()
	// 3236.5·64 / (1000·128) = 1.62x; GPU-hours per 1e9 tokens: 1e9/3236.5/3600 = 85.8.
	for _, want := range []string{"faster: h100-sxm x 64, 1.62x the tokens/s of a100-80gb x 128; a100-80gb is memory-bound (recomputes every layer to fit, a second forward pass), h100-sxm is not", "cheaper per token: h100-sxm x 64, 85.8 GPU-hours",
		"a100-80gb x 128: memory-bound: recomputes every layer to fit, a second forward pass", "h100-sxm x 64: compute-bound: 88 % of the step is compute"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q", want)
		}
	}
	b.Reset()
	if err := RenderComparisonJSON(&b, rs); err != nil {
		t.Fatal(err)
	}
	var top struct {
		Comparison []struct {
			GPU    string          `json:"gpu"`
			GPUs   int             `json:"gpus"`
			Result json.RawMessage `json:"result"`
		} `json:"comparison"`
	}
	if err := json.Unmarshal(b.Bytes(), &top); err != nil || len(top.Comparison) != 2 || top.Comparison[1].GPU != "a100-80gb" || top.Comparison[1].GPUs != 128 {
		t.Fatalf("comparison JSON %v: %s", err, b.String())
	}
	rdCheckContractJSON(t, top.Comparison[0].Result, true)
}

func TestBoundBy(t *testing.T) {
	e := rdHandEval()
	cases := []struct {
		name string
		mod  func(*Evaluation)
		want string
	}{
		{"compute", func(*Evaluation) {}, "compute"},
		{"full recompute", func(e *Evaluation) { e.Recompute = "full" }, "memory"},
		{"offload", func(e *Evaluation) { e.Offload = "optimizer"; e.Time.Offload = 1 }, "memory"},
		{"comm", func(e *Evaluation) { e.Time.TPComm = 8 }, "communication"},
	}
	for _, c := range cases {
		x := e
		c.mod(&x)
		if k, _ := BoundBy(x); k != c.want {
			t.Errorf("%s: Bound = %s, want %s", c.name, k, c.want)
		}
	}
}

func TestFormatters(t *testing.T) {
	cases := []struct{ got, want string }{
		{fmtCount(1234567.4), "1,234,567"}, {fmtCount(999), "999"}, {fmtCount(-1000), "-1,000"},
		{fmtMillis(51.8426), "51,842.6"}, {fmtMillis(0.0116), "11.6"}, {fmtMillis(0), "0.0"}, {fmtMillis(1.99996), "2,000.0"},
		{fmtTokens(1e12), "1T"}, {fmtTokens(3e11), "300B"}, {fmtTokens(2.5e12), "2.5T"},
		{shellQuote("([0]*2+[1]*22)"), "'([0]*2+[1]*22)'"}, {shellQuote("llama3-70b"), "llama3-70b"}, {shellQuote("a'b"), `'a'\''b'`},
	}
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

func TestUnevenSplit(t *testing.T) {
	cases := []struct {
		name                string
		layers, pp          int
		first, middle, last int
		ok                  bool
	}{
		{"405B over 8: 15+6x16+15", 126, 8, 15, 16, 15, true},
		{"405B over 16: 7+14x8+7", 126, 16, 7, 8, 7, true},
		{"80 over 3: 27+27+26", 80, 3, 27, 27, 26, true},
		{"pp 2", 81, 2, 41, 0, 40, true},
		{"126 over 60: not expressible", 126, 60, 0, 0, 0, false},
	}
	for _, c := range cases {
		f, m, l, ok := unevenSplit(c.layers, c.pp)
		if f != c.first || m != c.middle || l != c.last || ok != c.ok {
			t.Errorf("%s: got %d+%d·m+%d ok=%v, want %d,%d,%d ok=%v", c.name, f, m, l, ok, c.first, c.middle, c.last, c.ok)
		}
	}
	// Every split it returns adds up and respects the heaviest-stage bound.
	for layers := 3; layers <= 200; layers++ {
		for pp := 2; pp <= layers/2; pp++ {
			f, m, l, ok := unevenSplit(layers, pp)
			if !ok {
				continue
			}
			c := (layers + pp - 1) / pp
			if f+l+(pp-2)*m != layers || f > c || m > c || l > c || f < 1 || l < 1 || (pp > 2 && m < 1) {
				t.Fatalf("unevenSplit(%d,%d) = %d,%d,%d", layers, pp, f, m, l)
			}
		}
	}
	l405, _ := LookupModel("llama3.1-405b")
	e := rdHandEval()
	e.PP, e.VPP = 8, 1
	got := strings.Join(mustMegatron(t, l405, rdJobL70, e), " ")
	// 126+2 = 128 = 8·16: the embedding and the loss count as layers, as
	// the planner's memory model splits them (shape.splitLayers).
	if !strings.Contains(got, "--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split") || strings.Contains(got, "--decoder-first") {
		t.Errorf("uneven flags: %s", got)
	}
	e.PP = 5 // 126 over 5 (128 neither): 24+3·26+24 with --decoder-first/last
	got = strings.Join(mustMegatron(t, l405, rdJobL70, e), " ")
	if !strings.Contains(got, "--decoder-first-pipeline-num-layers 24 --decoder-last-pipeline-num-layers 24") {
		t.Errorf("uneven flags: %s", got)
	}
}

// The table's headline without a plan says why there is none: "fits" is a
// memory verdict (exit 3), not what a divisibility rule (exit 10) or a
// missing capability (exit 11) means (issue 30).
func TestRenderTableNoPlanHeadline(t *testing.T) {
	m, err := LookupModel("llama3-8b")
	if err != nil {
		t.Fatal(err)
	}
	j := Job{SeqLen: 4096, GlobalBatch: 64, Precision: BF16}
	c := Cluster{GPU: mustGPU(t, "h100-sxm"), GPUs: 8, GPUsPerNode: 8}
	for invalid, want := range map[string]string{
		"":                "No layout fits.",
		InvalidLayout:     "No valid layout: the degrees or the batch cannot be split",
		InvalidCapability: "No layout: these GPUs lack what the job asks for.",
	} {
		var b strings.Builder
		if err := RenderTable(&b, m, j, c, Result{Invalid: invalid}); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), want) {
			t.Errorf("Invalid %q: table lacks %q:\n%s", invalid, want, b.String())
		}
		if invalid != "" && strings.Contains(b.String(), "No layout fits.") {
			t.Errorf("Invalid %q: the table still says no layout fits", invalid)
		}
	}
}
