package plan

import (
	"strings"
	"testing"
)

func pinInt(v int) *int       { return &v }
func pinStr(v string) *string { return &v }
func pinBool(v bool) *bool    { return &v }
func fitsAll(r Result) []Evaluation {
	var out []Evaluation
	if r.Plan != nil {
		out = append(out, *r.Plan)
	}
	return append(out, r.Alternatives...)
}

func TestSearchChosenLayoutsFit(t *testing.T) {
	tests := []struct {
		name string
		m    Model
		j    Job
		gpu  string
		n    int
		o    SearchOptions
	}{
		{"llama3-70b 64 H100 8K", llama3_70b, Job{SeqLen: 8192, GlobalBatch: 512, Precision: BF16}, "h100-sxm", 64, SearchOptions{}},
		{"llama3-70b 64 H100 8K fp8 cp", llama3_70b, Job{SeqLen: 8192, GlobalBatch: 512, Precision: FP8}, "h100-sxm", 64, SearchOptions{AllowCP: true}},
		{"gpt3-175b 128 A100", gpt3_175b, Job{SeqLen: 2048, GlobalBatch: 1536, Precision: BF16}, "a100-80gb", 128, SearchOptions{}},
		{"mixtral 64 H100", mixtral8x7b, Job{SeqLen: 4096, GlobalBatch: 256, Precision: BF16}, "h100-sxm", 64, SearchOptions{}},
		{"llama2-7b one L40S LoRA", llama2_7b, Job{SeqLen: 4096, GlobalBatch: 16, Precision: BF16, LoRARank: 16}, "l40s", 1, SearchOptions{}},
		{"llama3-70b 72 GB200", llama3_70b, Job{SeqLen: 8192, GlobalBatch: 576, Precision: BF16}, "gb200", 72, SearchOptions{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := ClusterOf(mustGPU(t, tc.gpu), tc.n)
			r := Search(tc.m, tc.j, c, tc.o)
			if r.Plan == nil {
				t.Fatalf("no plan; rejected: %v", r.Rejected)
			}
			for _, e := range fitsAll(r) {
				if !e.Memory.Fits || e.Memory.PerGPU > e.Memory.Capacity || e.Reason != "" {
					t.Errorf("%s: returned but needs %.1f of %.1f GiB (%s)", e.Layout.Config(), e.Memory.PerGPU/gib, e.Memory.Capacity/gib, e.Reason)
				}
				if e.TP*e.PP*e.CP*e.DP != tc.n {
					t.Errorf("%s: degrees multiply to %d, not %d", e.Layout.Config(), e.TP*e.PP*e.CP*e.DP, tc.n)
				}
				if e.TP > tpDomain(c) {
					t.Errorf("%s: TP outside the %d-GPU domain", e.Layout.Config(), tpDomain(c))
				}
				if e.TokensPerSPerGPU > r.Plan.TokensPerSPerGPU*1.002 {
					t.Errorf("alternative %s (%.0f tok/s) beats the plan (%.0f)", e.Layout.Config(), e.TokensPerSPerGPU, r.Plan.TokensPerSPerGPU)
				}
			}
			for _, rej := range r.Rejected {
				if !strings.Contains(rej.Reason, "GiB") {
					t.Errorf("rejection %s without the figure: %q", rej.Config, rej.Reason)
				}
			}
		})
	}
}

func TestSearchHonoursPins(t *testing.T) {
	c := ClusterOf(mustGPU(t, "h100-sxm"), 64)
	j := Job{SeqLen: 8192, GlobalBatch: 512, Precision: BF16}
	o := SearchOptions{Pins: Pins{TP: pinInt(4), PP: pinInt(4), Recompute: pinStr("full"), SP: pinBool(true)}, TopK: 10}
	r := Search(llama3_70b, j, c, o)
	if r.Plan == nil {
		t.Fatal("no plan")
	}
	for _, e := range fitsAll(r) {
		if e.TP != 4 || e.PP != 4 || e.Recompute != "full" || !e.SP {
			t.Errorf("pins not honoured: %s", e.Layout.Config())
		}
	}
}

func TestFullyPinnedLayoutReportedEvenIfItDoesNotFit(t *testing.T) {
	c := ClusterOf(mustGPU(t, "h100-sxm"), 8)
	j := Job{SeqLen: 8192, GlobalBatch: 64, Precision: BF16}
	o := SearchOptions{Pins: Pins{TP: pinInt(8), PP: pinInt(1), MicroBatch: pinInt(1), Recompute: pinStr("none"), Zero: pinInt(0), Offload: pinStr("none")}}
	r := Search(llama3_70b, j, c, o)
	if r.Plan == nil {
		t.Fatal("a fully pinned layout must be evaluated and returned")
	}
	if r.Plan.Memory.Fits || !strings.Contains(r.Plan.Reason, "needs") || !strings.Contains(r.Plan.Reason, "GiB per GPU, capacity 79.6 GiB") {
		t.Errorf("fits=%v reason %q, want the figure that does not fit", r.Plan.Memory.Fits, r.Plan.Reason)
	}
}

func TestNothingFitsSuggests(t *testing.T) {
	c := ClusterOf(mustGPU(t, "a100-40gb"), 4)
	j := Job{SeqLen: 4096, GlobalBatch: 32, Precision: BF16}
	o := SearchOptions{Pins: Pins{Offload: pinStr("none")}}
	r := Search(llama3_70b, j, c, o)
	if r.Plan != nil {
		t.Fatalf("70B on 4×40 GB should not fit, got %s", r.Plan.Layout.Config())
	}
	if len(r.Rejected) == 0 {
		t.Fatal("no rejected layouts listed")
	}
	s := Suggest(llama3_70b, j, c, o)
	if !strings.Contains(s, "fits with") || !strings.Contains(s, "GPUs") {
		t.Errorf("suggestion %q, want more GPUs among the options", s)
	}
	// Every suggestion it makes must be true.
	if strings.Contains(s, "LoRA r=16") {
		jj := j
		jj.LoRARank = 16
		if Search(llama3_70b, jj, c, o).Plan == nil {
			t.Error("suggested LoRA r=16 but it does not fit")
		}
	}
}

func TestOffloadOnlyAsLastResort(t *testing.T) {
	c := ClusterOf(mustGPU(t, "h100-sxm"), 8)
	j := Job{SeqLen: 4096, GlobalBatch: 64, Precision: BF16}
	r := Search(llama2_7b, j, c, SearchOptions{})
	if r.Plan == nil || r.Plan.Offload != "none" {
		t.Fatalf("7B on 8 H100 must fit without offload: %+v", r.Plan)
	}
	// Llama-3-70B full training on one 8-GPU A100-40GB node fits only by offload.
	c = ClusterOf(mustGPU(t, "a100-40gb"), 8)
	r = Search(llama3_70b, j, c, SearchOptions{})
	if r.Plan != nil && r.Plan.Offload == "none" {
		t.Errorf("70B on 8×40 GB without offload? %s %.1f GiB", r.Plan.Layout.Config(), r.Plan.Memory.PerGPU/gib)
	}
}

func TestPinnedInvalidLayoutSaysWhy(t *testing.T) {
	c := ClusterOf(mustGPU(t, "h100-sxm"), 64)
	j := Job{SeqLen: 8192, GlobalBatch: 512, Precision: BF16}
	r := Search(llama3_70b, j, c, SearchOptions{Pins: Pins{TP: pinInt(3), PP: pinInt(1), MicroBatch: pinInt(1)}})
	if r.Plan != nil {
		t.Fatalf("tp=3 cannot split 64 heads, got a plan %s", r.Plan.Layout.Config())
	}
	if len(r.Rejected) == 0 {
		t.Fatal("no reason given")
	}
}

func TestSuggestNearestGPUCount(t *testing.T) {
	// 1000 GPUs: no split of 1000 = 8·125 divides a global batch of 1536.
	c := ClusterOf(mustGPU(t, "h100-sxm"), 1000)
	j := Job{SeqLen: 8192, GlobalBatch: 1536, Precision: BF16}
	if r := Search(llama3_70b, j, c, SearchOptions{}); r.Plan != nil {
		t.Fatalf("unexpected plan %s", r.Plan.Layout.Config())
	}
	s := Suggest(llama3_70b, j, c, SearchOptions{})
	if !strings.HasPrefix(s, "fits with 1008 GPUs") && !strings.HasPrefix(s, "fits with 992 GPUs") {
		t.Errorf("suggestion %q, want the nearest whole-node count (992 or 1008)", s)
	}
}
