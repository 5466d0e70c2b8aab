//go:build e2e

package e2e

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/trainrun/trainrun/test/harness"
)

// BenchmarkSrunTrue is `srun true` as a job of its own: allocation, step
// launch on one node, completion.
func BenchmarkSrunTrue(b *testing.B) {
	ctx := context.Background()
	for b.Loop() {
		if _, err := cluster.Run(ctx, "srun", "--immediate=30", "-N1", "true"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSrunTrueInAllocation is a step in an existing allocation (what a
// batch script's srun costs), on 1 and on 4 nodes.
func BenchmarkSrunTrueInAllocation(b *testing.B) {
	ctx := context.Background()
	id, err := cluster.SubmitBatch(ctx, "#!/bin/bash\nsleep 600\n", "-N4", "-J", "bench-holder")
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		_, _ = cluster.Run(ctx, "scancel", "--signal=KILL", "--full", strconv.Itoa(id))
		_, _ = cluster.Run(ctx, "scancel", strconv.Itoa(id))
	}()
	if _, err := cluster.WaitJob(ctx, id, 30*time.Second, "RUNNING"); err != nil {
		b.Fatal(err)
	}
	for _, nodes := range []string{"1", "4"} {
		b.Run("N"+nodes, func(b *testing.B) {
			for b.Loop() {
				if _, err := cluster.Run(ctx, "srun", "--jobid="+strconv.Itoa(id), "--overlap", "-N"+nodes, "true"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkBatchStart submits a job that records when it starts and reports
// the time from calling sbatch to the script's first line (start-s), besides
// the full round trip to COMPLETED as seen by polling scontrol (ns/op).
func BenchmarkBatchStart(b *testing.B) {
	ctx := context.Background()
	var total time.Duration
	for b.Loop() {
		t0 := time.Now()
		id, err := cluster.SubmitBatch(ctx, "#!/bin/bash\ndate +start=%s.%N\n", "-J", "bench-batch")
		if err != nil {
			b.Fatal(err)
		}
		if _, err := cluster.WaitJob(ctx, id, 60*time.Second, "COMPLETED"); err != nil {
			b.Fatal(err)
		}
		out := cluster.JobOutput(id)
		_, v, ok := strings.Cut(strings.TrimSpace(out), "start=")
		f, err := strconv.ParseFloat(v, 64)
		if !ok || err != nil {
			b.Fatalf("job %d printed %q, want start=<epoch seconds>", id, out)
		}
		total += time.Unix(0, int64(f*1e9)).Sub(t0)
	}
	b.ReportMetric(total.Seconds()/float64(b.N), "start-s")
}

// BenchmarkClusterStartStop starts and stops a second 4-node cluster beside
// the package's one, reporting Start (until every node is idle) and Stop
// (until nothing of it runs and its directory is gone) separately.
func BenchmarkClusterStartStop(b *testing.B) {
	var start, stop time.Duration
	for b.Loop() {
		c, err := harness.Start(harness.Options{})
		if err != nil {
			b.Fatal(err)
		}
		if err := c.Stop(); err != nil {
			b.Fatal(err)
		}
		start += c.Timings().Start
		stop += c.Timings().Stop
	}
	b.ReportMetric(start.Seconds()/float64(b.N), "start-s")
	b.ReportMetric(stop.Seconds()/float64(b.N), "stop-s")
}
