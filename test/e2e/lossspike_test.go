//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A NaN at step 57 with --loss-spike-action rollback (issue 31): the
// example trainer's inputs of step 57 are NaN (--nan-at-step), so its loss
// and then its weights are. trainrun sees the NaN, kills the step, resumes
// inside the job from the newest checkpoint before the spike's window
// (moving the later, poisoned ones aside) and tells the trainer
// TRAINRUN_SKIP_STEPS; the run finishes, and its final weights equal,
// bit for bit, those of a reference run told to skip the same steps from
// the start.
func TestLossSpikeRollbackNaN(t *testing.T) {
	requireTorch(t)
	t.Parallel()
	bin := trainrun(t)
	dir := t.TempDir()
	job := func(name, extra string) string {
		return fmt.Sprintf(`#!/bin/bash
#SBATCH --nodes=2 --ntasks-per-node=1 --gpus-per-node=1 --time=5 --requeue --open-mode=append
export GLOO_SOCKET_IFNAME=lo
%s
exec %s run --fix tp=1 --probe all --job-dir %s/%s --loss-spike-action rollback:2 -- /usr/bin/python3 %s --steps 80 --sleep 0.1 --save-every 10 --report-loss --nan-at-step 57 --out %s/%s.weights
`, extra, bin, dir, name, exampleTrainer(), dir, name)
	}
	ctx := context.Background()
	id, err := cluster.SubmitBatch(ctx, job("spiked", ""))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cluster.Run(context.Background(), "scancel", strconv.Itoa(id)) })
	if _, err := cluster.WaitJob(ctx, id, 3*time.Minute, "COMPLETED"); err != nil {
		t.Fatalf("%v\n%s", err, cluster.JobOutput(id))
	}
	log := cluster.JobOutput(id)
	m := regexp.MustCompile(`loss spike rollback 1 of 2: resuming from step-(\d+) \(step \d+\) and skipping steps (\d+)-(\d+) \(spike at step (\d+)\); TRAINRUN_SKIP_STEPS=(\S+)`).FindStringSubmatch(log)
	if m == nil {
		t.Fatalf("no rollback in the log:\n%s", log)
	}
	from, lo, hi, at, skip := atoi(t, m[1]), atoi(t, m[2]), atoi(t, m[3]), atoi(t, m[4]), m[5]
	t.Logf("NaN seen at step %d; resumed from step-%d, skipping %d-%d (TRAINRUN_SKIP_STEPS=%s)", at, from, lo, hi, skip)
	defer func() { t.Logf("final weights of both runs: %s", readTrim(filepath.Join(dir, "spiked.weights"))) }()
	if !(from < lo && lo <= 57 && 57 <= hi && hi == at) {
		t.Errorf("resumed from step-%d skipping %d-%d for the NaN at step 57 (seen at %d): want the checkpoint before the window, and 57 inside it", from, lo, hi, at)
	}
	for _, s := range []string{"loss spike: loss NaN at step " + m[4], "training finished"} {
		if !strings.Contains(log, s) {
			t.Errorf("the log lacks %q:\n%s", s, log)
		}
	}
	if strings.Count(log, "(--loss-spike ") != 1 {
		t.Errorf("want one spike (the skipped steps draw no NaN again):\n%s", log)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "spiked", "checkpoints", ".trainrun", "skip-steps")); err != nil || strings.TrimSpace(string(b)) != skip {
		t.Errorf("the store's skip-steps = %q (%v), want %s", b, err, skip)
	}

	// The reference: the same steps skipped from the start.
	ref, err := cluster.SubmitBatch(ctx, job("reference", "export TRAINRUN_SKIP_STEPS="+skip))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cluster.Run(context.Background(), "scancel", strconv.Itoa(ref)) })
	if _, err := cluster.WaitJob(ctx, ref, 3*time.Minute, "COMPLETED"); err != nil {
		t.Fatalf("%v\n%s", err, cluster.JobOutput(ref))
	}
	if rl := cluster.JobOutput(ref); strings.Contains(rl, "loss spike") || strings.Contains(rl, "restart 1") {
		t.Errorf("the reference run saw a spike or restarted:\n%s", rl)
	}
	a, errA := os.ReadFile(filepath.Join(dir, "spiked.weights"))
	b, errB := os.ReadFile(filepath.Join(dir, "reference.weights"))
	if errA != nil || errB != nil || len(bytes.TrimSpace(a)) != 64 {
		t.Fatalf("final weights: %v, %v", errA, errB)
	}
	if !bytes.Equal(a, b) {
		t.Errorf("the rolled-back run's weights %s differ from the reference's %s", bytes.TrimSpace(a), bytes.TrimSpace(b))
	}
}

func readTrim(path string) string {
	b, _ := os.ReadFile(path)
	return string(bytes.TrimSpace(b))
}
