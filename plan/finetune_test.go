package plan

import (
	"encoding/json"
	"math"
	"os"
	"strings"
	"testing"
)

func TestParseFinetuneSpec(t *testing.T) {
	cases := []struct {
		in, canon, err string
	}{
		{"", "full", ""}, {"FULL", "full", ""}, {"lora", "lora:16", ""}, {"lora:8:q_proj,v_proj", "lora:8:q,v", ""},
		{"lora:8:attn,mlp", "lora:8", ""}, {"lora:8:adamw8", "lora:8:adamw8", ""}, {"qlora", "qlora:16", ""},
		{"qlora:64:adamw32", "qlora:64:adamw32", ""}, {"qlora:16:q,k,v,o:adamw8", "qlora:16:q,k,v,o", ""},
		{"prefix", "prefix:20", ""}, {"prompt:8", "prompt:8", ""}, {"ia3", "ia3", ""},
		{"lora:8:q,v:dropout=0.1", "lora:8:q,v:dropout=0.1", ""}, {"qlora:8:dropout=0.05:adamw32", "qlora:8:adamw32:dropout=0.05", ""},
		{"lora:8:dropout=0", "lora:8", ""},
		{"lora:8:dropout=1", "", "the LoRA dropout must be a probability"}, {"qlora:8:dropout=x", "", "the LoRA dropout must be"},
		{"lora:9223372036854775807", "", "the LoRA rank 9223372036854775807 is past 65536"},
		{"lora:99999999999999999999999", "", "is past 65536"},
		{"lora:65537", "", "the LoRA rank 65537 is past 65536"},
		{"lora:0", "", "the LoRA rank must be a positive integer"},
		{"qlora:-3", "", "the QLoRA rank must be a positive integer"},
		{"lora:8:qq", "", `LoRA target "qq"`},
		{"lora:8:q:v", "", "two target lists"},
		{"qlora:8:adamw", "", "paged AdamW"},
		{"prefix:0", "", "virtual tokens must be an integer from 1"},
		{"prompt:2:3", "", "takes one parameter"},
		{"ia3:2", "", "takes no parameters"},
		{"adapter", "", "accepted: full, lora"},
	}
	for _, c := range cases {
		f, err := ParseFinetuneSpec(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), c.in) {
				t.Errorf("%q: err %v, want one naming the value and %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || f.String() != c.canon {
			t.Errorf("%q: %q, %v; want %q", c.in, f.String(), err, c.canon)
			continue
		}
		if back, err := ParseFinetuneSpec(f.String()); err != nil || back != f {
			t.Errorf("%q: canonical %q reads back as %+v, %v", c.in, f.String(), back, err)
		}
	}
}

// TestTrainableParams counts from the architecture what Hugging Face PEFT's
// print_trainable_parameters reports for Llama-2-7B (h 4096, 32 layers, MHA,
// FFN 11008): LoRA r=8 on q and v 32·2·8·(4096+4096) = 4,194,304; IA3 on k,
// v and down 32·(4096+4096+11008) = 614,400; 20 prompt tokens 20·4096; 20
// prefix tokens 20·32·2·4096.
func TestTrainableParams(t *testing.T) {
	m := mustModel(t, "llama2-7b")
	for spec, want := range map[string]float64{
		"lora:8:q,v": 4194304, "ia3": 614400, "prompt:20": 81920, "prefix:20": 5242880,
		"lora:8": 32 * 8 * (4096 + 3*4096 + 4096 + 4096 + 4096 + 2*11008 + 11008 + 4096), // fused qkv and gate+up
	} {
		f, err := ParseFinetuneSpec(spec)
		if err != nil {
			t.Fatal(err)
		}
		if got := TrainableParams(m, Job{}.WithFinetune(f)); got != want {
			t.Errorf("%s: %.0f trainable, want %.0f", spec, got, want)
		}
	}
	if got := TrainableParams(m, Job{}); got != m.Params() {
		t.Errorf("full: %.0f, want every parameter %.0f", got, m.Params())
	}
}

func finetuneEval(t *testing.T, model, gpu string, gpus int, j Job, spec string, l Layout) Evaluation {
	t.Helper()
	f, err := ParseFinetuneSpec(spec)
	if err != nil {
		t.Fatal(err)
	}
	g, err := LookupGPU(gpu)
	if err != nil {
		t.Fatal(err)
	}
	e := Evaluate(mustModel(t, model), j.WithFinetune(f), ClusterOf(g, gpus), l)
	if e.Reason != "" && e.Memory.PerGPU == 0 {
		t.Fatalf("%s %s: %s", model, spec, e.Reason)
	}
	return e
}

// TestFinetuneMemory: QLoRA stores the base's linear layers at 4.127 bits and
// the rest in BF16; a frozen base keeps fewer activations when fewer layers
// carry adapters; prompt tuning runs longer sequences; offload=params moves
// the frozen base to the host for every PEFT kind, and only for those
// without ZeRO-3.
func TestFinetuneMemory(t *testing.T) {
	j := Job{SeqLen: 4096, GlobalBatch: 8, Stack: StackHF}
	one := Layout{TP: 1, PP: 1, DP: 1, MicroBatch: 1, Recompute: "none"}
	m := mustModel(t, "llama2-7b")
	q := finetuneEval(t, "llama2-7b", "a100-80gb", 1, j, "qlora:8", one)
	linear := float64(m.Layers) * (m.attnParams() + m.denseMLPParams())
	adapters := TrainableParams(m, Job{}.WithFinetune(Finetune{Kind: FinetuneQLoRA, Rank: 8, Optim: "adamw8"}))
	wantW := linear*(4+8.0/64+32.0/(64*256))/8 + 2*(m.Params()-linear) + 2*adapters
	if relErr(q.Memory.Weights, wantW) > 1e-9 {
		t.Errorf("QLoRA weights %.4g, want %.4g (NF4 linear layers, BF16 rest and adapters)", q.Memory.Weights, wantW)
	}
	if q.Memory.Optimizer != 2*adapters || q.Memory.Grads != 2*adapters {
		t.Errorf("QLoRA paged 8-bit AdamW: optimizer %.4g, grads %.4g, want %.4g each", q.Memory.Optimizer, q.Memory.Grads, 2*adapters)
	}
	all := finetuneEval(t, "llama2-7b", "a100-80gb", 1, j, "lora:8", one)
	qv := finetuneEval(t, "llama2-7b", "a100-80gb", 1, j, "lora:8:q,v", one)
	ia3 := finetuneEval(t, "llama2-7b", "a100-80gb", 1, j, "ia3", one)
	full := finetuneEval(t, "llama2-7b", "a100-80gb", 1, j, "full", one)
	// LoRA on every linear layer keeps what full training keeps (plus x·A).
	if !(qv.Memory.Activations < all.Memory.Activations && ia3.Memory.Activations < all.Memory.Activations && relErr(all.Memory.Activations, full.Memory.Activations) < 0.01) {
		t.Errorf("activations: lora q,v %.3g, ia3 %.3g, lora all %.3g, full %.3g: want the first two below lora all, lora all within 1 %% of full",
			qv.Memory.Activations, ia3.Memory.Activations, all.Memory.Activations, full.Memory.Activations)
	}
	// LoRA dropout: each adapted linear keeps its dropped input and mask,
	// 3 bytes per input feature: q, k, v, gate, up (h each), o (h), down (F).
	drop := finetuneEval(t, "llama2-7b", "a100-80gb", 1, j, "lora:8:dropout=0.1", one)
	if want := 32 * 4096 * 3 * (6*4096 + 11008.0); relErr(drop.Memory.Activations-all.Memory.Activations, want) > 1e-9 {
		t.Errorf("lora:8:dropout=0.1 keeps %.4g more activation bytes than lora:8, want %.4g", drop.Memory.Activations-all.Memory.Activations, want)
	}
	pr := finetuneEval(t, "llama2-7b", "a100-80gb", 1, j, "prompt:512", one)
	pr1 := finetuneEval(t, "llama2-7b", "a100-80gb", 1, j, "prompt:1", one)
	if got := pr.Memory.Activations / pr1.Memory.Activations; got < 1.12 || got > 1.13 {
		t.Errorf("prompt:512 activations are %.4f× prompt:1's, want (4096+512)/(4096+1) = 1.125 (the model runs the virtual tokens)", got)
	}
	off := one
	off.Offload = "params"
	for _, spec := range []string{"lora:16", "qlora:16", "prefix:20", "prompt:20", "ia3"} {
		e := finetuneEval(t, "llama2-7b", "a100-80gb", 1, j, spec, off)
		if e.Reason != "" || e.Memory.Weights > 0.1*gib {
			t.Errorf("%s offload=params: reason %q, %.2f GiB of weights on the GPU (want the adapters only)", spec, e.Reason, e.Memory.Weights/gib)
		}
	}
	if e := Evaluate(m, j, ClusterOf(mustGPU(t, "a100-80gb"), 1), off); !strings.Contains(e.Reason, "needs zero=3") {
		t.Errorf("full training offload=params without ZeRO-3: %q, want the zero=3 rule", e.Reason)
	}
}

// TestFinetuneCompute: QLoRA's dequantisation and prefix tuning's extra keys
// cost time; prompt tuning counts its virtual tokens' work per user token;
// offload=params is priced by PCIe when it cannot hide behind compute.
func TestFinetuneCompute(t *testing.T) {
	j := Job{SeqLen: 2048, GlobalBatch: 8, Stack: StackHF}
	one := Layout{TP: 1, PP: 1, DP: 1, MicroBatch: 1, Recompute: "full"}
	lora := finetuneEval(t, "llama3-8b", "h100-sxm", 1, j, "lora:16", one)
	qlora := finetuneEval(t, "llama3-8b", "h100-sxm", 1, j, "qlora:16", one)
	if qlora.Time.Compute <= lora.Time.Compute {
		t.Errorf("QLoRA compute %.3f s should exceed LoRA's %.3f s (dequantisation)", qlora.Time.Compute, lora.Time.Compute)
	}
	ia3 := finetuneEval(t, "llama3-8b", "h100-sxm", 1, j, "ia3", one)
	prefix := finetuneEval(t, "llama3-8b", "h100-sxm", 1, j, "prefix:512", one)
	if prefix.Time.Compute <= ia3.Time.Compute || prefix.ModelFlopsPerToken <= ia3.ModelFlopsPerToken {
		t.Errorf("prefix:512 compute %.3f s / %.4g FLOPs per token should exceed IA3's %.3f / %.4g", prefix.Time.Compute, prefix.ModelFlopsPerToken, ia3.Time.Compute, ia3.ModelFlopsPerToken)
	}
	m := mustModel(t, "llama3-8b")
	pj := j.WithFinetune(Finetune{Kind: FinetunePrompt, Tokens: 2048})
	lin, att := m.forwardFlopsPerToken(4096, true)
	if want := 2 * (2*lin + 3*att); relErr(JobFlopsPerToken(m, pj), want) > 1e-12 {
		t.Errorf("prompt:2048 on 2048 tokens: %.6g FLOPs per user token, want twice a 4096-token frozen pass %.6g", JobFlopsPerToken(m, pj), want)
	}
	slow := mustGPU(t, "h100-sxm")
	slow.PCIeBandwidth = 1e9 // 1 GB/s: streaming 16 GB cannot hide
	off := one
	off.Offload = "params"
	e := Evaluate(m, j.WithFinetune(Finetune{Kind: FinetuneLoRA, Rank: 16, Optim: "adamw"}), ClusterOf(slow, 1), off)
	if e.Time.Offload < 8*10 || !strings.Contains(strings.Join(e.Why, "\n"), "host-to-device streaming") {
		t.Errorf("LoRA offload=params over 1 GB/s: offload %.1f s per step (want > 80: 8 micro-batches × 2-3 passes of 16 GB), why %q", e.Time.Offload, e.Why)
	}
}

// TestFinetuneIssueExample: the issue's workstation question, Llama-3-70B on
// one L40S with QLoRA r=16, fits and says what limits it.
func TestFinetuneIssueExample(t *testing.T) {
	m := mustModel(t, "llama3-70b")
	j := Job{SeqLen: 4096, GlobalBatch: 8}.WithFinetune(Finetune{Kind: FinetuneQLoRA, Rank: 16, Optim: "adamw8"})
	r := Search(m, j, ClusterOf(mustGPU(t, "l40s"), 1), SearchOptions{})
	if r.Plan == nil || !r.Plan.Memory.Fits {
		t.Fatalf("llama3-70b qlora:16 on 1 L40S does not fit: %s", NoFit(m, j, ClusterOf(mustGPU(t, "l40s"), 1), SearchOptions{}, r))
	}
	why := strings.Join(r.Plan.Why, "\n")
	for _, w := range []string{"QLoRA r=16", "4.127 bits", "limits: memory by"} {
		if !strings.Contains(why, w) {
			t.Errorf("why lacks %q:\n%s", w, why)
		}
	}
	if n := r.Plan.Finetune; n == nil || n.Spec != "qlora:16" || math.Abs(n.BaseBits-4.127) > 0.001 || n.TrainableParams != TrainableParams(m, j) || n.Limits == "" ||
		(r.Plan.Offload == "params") != (n.BaseOnHost && n.HostBytesPerGPU > 30*gib) {
		t.Errorf("plan JSON's finetune note %+v (offload %s)", n, r.Plan.Offload)
	}
	// Without the adapters the BF16 base alone (141 GB) cannot fit one card
	// even streamed: full training says so.
	if r := Search(m, Job{SeqLen: 4096, GlobalBatch: 8}, ClusterOf(mustGPU(t, "l40s"), 1), SearchOptions{}); r.Plan != nil && r.Plan.Memory.Fits {
		t.Errorf("full training of a 70B model fits one L40S: %+v", r.Plan.Memory)
	}
}

type finetuneRow struct {
	ID         string  `json:"id"`
	Source     string  `json:"source"`
	Model      string  `json:"model"`
	GPU        string  `json:"gpu"`
	GPUs       int     `json:"gpus"`
	SeqLen     int     `json:"seq_len"`
	MicroBatch int     `json:"micro_batch"`
	GradAccum  int     `json:"grad_accum"`
	Finetune   string  `json:"finetune"`
	Stack      string  `json:"stack"`
	Recompute  string  `json:"recompute"`
	Zero       int     `json:"zero"`
	Offload    string  `json:"offload"`
	MemoryGB   float64 `json:"memory_gb"`
	TokensPerS float64 `json:"tokens_per_s_per_gpu"`
	Miss       string  `json:"throughput_miss"`
	MemMiss    string  `json:"memory_miss"`
	Seen       bool    `json:"seen_while_modelling"` // in view while mechanisms were modelled: in-sample
}

// TestFinetunePublished predicts the published PEFT runs of
// testdata/finetune-rows.json (nothing was fitted on them; the rows marked
// seen_while_modelling were in view while mechanisms were modelled, the
// others are held out):
// memory within 10 %, throughput within 20 % except the rows marked as known
// misses (throughput_miss, memory_miss), which must stay outside (else the
// mark is stale).
func TestFinetunePublished(t *testing.T) {
	b, err := os.ReadFile("testdata/finetune-rows.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct{ Rows []finetuneRow }
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Rows) < 6 {
		t.Fatalf("%d rows, want at least 6", len(doc.Rows))
	}
	for _, r := range doc.Rows {
		if !strings.HasPrefix(r.Source, "https://") {
			t.Errorf("%s: no source URL", r.ID)
		}
		st, err := ParseStack(r.Stack)
		if err != nil {
			t.Fatal(err)
		}
		j := Job{SeqLen: r.SeqLen, GlobalBatch: r.MicroBatch * r.GradAccum * r.GPUs, Stack: st}
		e := finetuneEval(t, r.Model, r.GPU, r.GPUs, j, r.Finetune, Layout{TP: 1, PP: 1, DP: r.GPUs, MicroBatch: r.MicroBatch, Recompute: r.Recompute, Zero: r.Zero, Offload: r.Offload})
		memErr := e.Memory.PerGPU/1e9/r.MemoryGB - 1
		tpErr := 0.0
		if r.TokensPerS > 0 {
			tpErr = e.TokensPerSPerGPU/r.TokensPerS - 1
		}
		sample := "held out"
		if r.Seen {
			sample = "in-sample (seen while modelling, nothing fitted)"
		}
		t.Logf("%-33s memory %5.1f GB vs %5.1f (%+5.1f%%)  tokens/s/GPU %5.0f vs %5.0f (%+5.1f%%) %s", r.ID, e.Memory.PerGPU/1e9, r.MemoryGB, 100*memErr, e.TokensPerSPerGPU, r.TokensPerS, 100*tpErr, sample)
		switch {
		case r.MemMiss == "" && math.Abs(memErr) > 0.10:
			t.Errorf("%s: memory %.2f GB, published %.0f: %+.1f%% (want within 10%%)", r.ID, e.Memory.PerGPU/1e9, r.MemoryGB, 100*memErr)
		case r.MemMiss != "" && math.Abs(memErr) <= 0.10:
			t.Errorf("%s: marked a memory miss but now within 10%% (%+.1f%%): drop the mark", r.ID, 100*memErr)
		}
		switch {
		case r.Miss == "" && math.Abs(tpErr) > 0.20:
			t.Errorf("%s: %.0f tokens/s/GPU, published %.0f: %+.1f%% (want within 20%%)", r.ID, e.TokensPerSPerGPU, r.TokensPerS, 100*tpErr)
		case r.Miss != "" && r.TokensPerS > 0 && math.Abs(tpErr) <= 0.20:
			t.Errorf("%s: marked a throughput miss but now within 20%% (%+.1f%%): drop the mark", r.ID, 100*tpErr)
		}
	}
}

// TestFinetuneFSDPAllowance: under accelerate's FSDP (--stack hf, zero=3)
// the root unit (embeddings, final norm, lm_head) stays gathered whole on
// every GPU, and QLoRA's transient BF16 copy is one dequantised matrix (the
// MLP's h×F), not the FSDP unit of a whole layer.
func TestFinetuneFSDPAllowance(t *testing.T) {
	m := mustModel(t, "llama2-70b")
	j := Job{SeqLen: 2048, GlobalBatch: 8, Stack: StackHF}
	l := Layout{TP: 1, PP: 1, DP: 2, MicroBatch: 2, Recompute: "full", Zero: 3}
	e := finetuneEval(t, "llama2-70b", "a100-80gb", 2, j, "qlora:8:adamw32", l)
	h, f, v := float64(m.Hidden), float64(m.FFN), float64(m.Vocab)
	layer := m.attnParamsTP(1) + m.denseMLPParams()
	root := 2 * (2*v*h + h)
	want := cudaContextBytes + ncclGroupBytes + fragmentation*e.Memory.Activations + 2*nf4Bytes*layer + 2*h*f + root
	if relErr(e.Memory.Other, want) > 1e-9 {
		t.Errorf("hf zero=3 QLoRA allowance %.4g GB, want %.4g (root unit %.3g GB whole, one %gx%g BF16 matrix)", e.Memory.Other/1e9, want/1e9, root/1e9, h, f)
	}
	j.Stack = StackFSDP
	if e2 := finetuneEval(t, "llama2-70b", "a100-80gb", 2, j, "qlora:8:adamw32", l); e2.Memory.Other >= e.Memory.Other-0.9*root {
		t.Errorf("fsdp stack (embeddings sharded as their own units) allowance %.4g GB, want the hf one less the root unit (%.4g - %.3g)", e2.Memory.Other/1e9, e.Memory.Other/1e9, root/1e9)
	}
}
