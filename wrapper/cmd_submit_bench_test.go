package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/trainrun/trainrun/internal/slurm"
	"github.com/trainrun/trainrun/plan"
	"github.com/trainrun/trainrun/wrapper/internal/submit"
)

// BenchmarkSubmitChoice8x4 is trainrun submit's work for 8 partitions × 4
// sizes, with each sbatch --test-only answering after 30 ms (about what
// the harness's slurmctld takes; the e2e TestSubmitDryRunManyPartitions
// measures the real one): planning, 32 bounded-parallel --test-only calls
// and the choice. Serial calls alone would take 32 × 30 ms ≈ 1 s.
func BenchmarkSubmitChoice8x4(b *testing.B) {
	m, _ := plan.LookupModel("llama3-8b")
	h100, _ := plan.LookupGPU("h100")
	var parts []submit.Partition
	for i := 0; i < 8; i++ {
		parts = append(parts, submit.Partition{Name: fmt.Sprintf("p%d", i), GPU: h100, GPUsPerNode: 8, Nodes: 2, Cost: -1})
	}
	req := submit.Request{Model: m, Job: plan.Job{SeqLen: 4096, GlobalBatch: 64, Precision: plan.BF16, Tokens: 1e9},
		Search: plan.SearchOptions{TopK: 1}, MinGPUs: 2, Sbatch: plan.SbatchOptions{Margin: 0.1, Lead: 10 * time.Minute}}
	start := time.Now().UTC().Format("2006-01-02T15:04:05")
	c := slurm.Client{RunStderr: func(ctx context.Context, name string, args ...string) ([]byte, []byte, error) {
		time.Sleep(30 * time.Millisecond)
		return nil, []byte("sbatch: Job 1 to start at " + start + " using 16 processors on nodes n1 in partition p0"), nil
	}, Location: time.UTC}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		cands := submit.Candidates(parts, req)
		if len(cands) != 32 {
			b.Fatalf("%d candidates", len(cands))
		}
		testOnly(context.Background(), c, cands, nil, []string{"job.sh"}, 8)
		if _, err := submit.Choose(cands, submit.Finish, time.Now()); err != nil {
			b.Fatal(err)
		}
	}
}
