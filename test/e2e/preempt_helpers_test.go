//go:build e2e

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/trainrun/trainrun/test/harness"
)

// refAndRun submits the reference run of a job (script ref, on n3,n4:
// never interrupted) and the run under test (script run, on n1,n2, the
// nodes preempt interrupts), and cancels both when the test ends. The
// tests that compare an interrupted run's final weights with an
// uninterrupted one's start this way.
func refAndRun(t *testing.T, c *harness.Cluster, ref, run string) (refID, runID int) {
	t.Helper()
	ctx := context.Background()
	refID, err := c.SubmitBatch(ctx, ref, "--nodelist=n3,n4")
	if err != nil {
		t.Fatal(err)
	}
	runID, err = c.SubmitBatch(ctx, run, "--nodelist=n1,n2")
	if err != nil {
		c.Run(ctx, "scancel", strconv.Itoa(refID))
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Run(context.Background(), "scancel", strconv.Itoa(refID), strconv.Itoa(runID)) })
	return refID, runID
}

// preempt waits until the incarnation marker ("restart N") of job id has
// all its ranks started, lets it train for after, and preempts it: a
// high-partition job that holds node (exclusively) for a second.
func preempt(t *testing.T, c *harness.Cluster, id int, marker string, ranks int, after time.Duration, node string) {
	t.Helper()
	waitStarted(t, c, id, marker, ranks, 2*time.Minute)
	time.Sleep(after)
	ctx := context.Background()
	high, err := c.SubmitBatch(ctx, "#!/bin/bash\nsleep 1\n", "-p", "high", "--nodelist="+node, "--exclusive", "--time=2")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitJob(ctx, high, 2*time.Minute, "COMPLETED"); err != nil {
		t.Fatal(err)
	}
}

// waitCompleted waits for every job to be COMPLETED.
func waitCompleted(t *testing.T, c *harness.Cluster, timeout time.Duration, ids ...int) {
	t.Helper()
	for _, id := range ids {
		if _, err := c.WaitJob(context.Background(), id, timeout, "COMPLETED"); err != nil {
			t.Fatal(err)
		}
	}
}

// sameWeights checks that dir/name.weights, the final weights' hash the
// example trainer's rank 0 wrote, equals the reference run's
// (dir/ref.weights); log is shown when they differ.
func sameWeights(t *testing.T, dir, name, log string) {
	t.Helper()
	a, errA := os.ReadFile(filepath.Join(dir, "ref.weights"))
	b, errB := os.ReadFile(filepath.Join(dir, name+".weights"))
	if errA != nil || errB != nil || len(a) == 0 || string(a) != string(b) {
		t.Errorf("final weights differ: uninterrupted %q (%v), %s %q (%v)\n%s", a, errA, name, b, errB, log)
	}
}
