package plan

import "testing"

// BenchmarkEvaluate: one layout, Why lines included (the public call).
func BenchmarkEvaluate(b *testing.B) {
	c := ClusterOf(mustGPU(b, "h100-sxm"), 64)
	j := Job{SeqLen: 8192, GlobalBatch: 512, Precision: BF16}
	l := Layout{TP: 8, PP: 2, VPP: 4, CP: 1, DP: 4, MicroBatch: 1, SP: true, Zero: 1, Recompute: "none"}
	b.ReportAllocs()
	for b.Loop() {
		_ = Evaluate(llama3_70b, j, c, l)
	}
}

// BenchmarkEvaluateHot: the search's inner call, without Why lines.
func BenchmarkEvaluateHot(b *testing.B) {
	c := ClusterOf(mustGPU(b, "h100-sxm"), 64)
	j := Job{SeqLen: 8192, GlobalBatch: 512, Precision: BF16}
	l := Layout{TP: 8, PP: 2, VPP: 4, CP: 1, DP: 4, MicroBatch: 1, SP: true, Zero: 1, Recompute: "none"}
	var x shape
	var e Evaluation
	b.ReportAllocs()
	for b.Loop() {
		e = Evaluation{}
		evaluate(&x, llama3_70b, j, c, l, &e)
	}
}

// BenchmarkSearch405B16K: a 405B-class model (Llama 3.1 405B) on 16,384
// H100s at 8K sequence with CP allowed: the whole search.
func BenchmarkSearch405B16K(b *testing.B) {
	m := Model{Name: "llama3.1-405b", Layers: 126, Hidden: 16384, Heads: 128, KVHeads: 8, HeadDim: 128,
		FFN: 53248, FFNType: FFNSwiGLU, Vocab: 128256}
	c := ClusterOf(mustGPU(b, "h100-sxm"), 16384)
	j := Job{SeqLen: 8192, GlobalBatch: 2048, Precision: BF16}
	o := SearchOptions{AllowCP: true}
	var evals int
	b.ReportAllocs()
	for b.Loop() {
		r := Search(m, j, c, o)
		if r.Plan == nil {
			b.Fatal("no plan")
		}
	}
	evals = countEvaluations(m, j, c, o)
	b.ReportMetric(float64(evals), "layouts/op")
}

// countEvaluations runs one search and returns how many layouts it evaluated.
func countEvaluations(m Model, j Job, c Cluster, o SearchOptions) int {
	if o.TopK == 0 {
		o.TopK = 5
	}
	s := &searcher{m: m, j: j, c: c, o: o, keep: o.TopK + 1, maxRej: 20}
	s.run([]string{"none"})
	return s.count
}
