//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A job whose time limit (1 minute) is shorter than its training: trainrun's
// own clock asks the trainers for a checkpoint before the limit, commits it,
// requeues the job, and the next run resumes from it and finishes with
// weights bit-identical to an uninterrupted run of the same job.
func TestRunTimeLimitRequeueResume(t *testing.T) {
	requireTorch(t)
	// Minutes of waiting on Slurm's clocks: run beside the other long tests,
	// on a cluster of its own so their nodes and preemptions do not mix.
	t.Parallel()
	cluster := ownCluster(t)
	bin := trainrun(t)
	trainer := exampleTrainer()
	dir := t.TempDir()
	job := func(name, limit string) string {
		return fmt.Sprintf(`#!/bin/bash
#SBATCH --nodes=2 --ntasks-per-node=1 --gpus-per-node=1 --time=%s --requeue --open-mode=append
export GLOO_SOCKET_IFNAME=lo
exec %s run --fix tp=1 -- /usr/bin/python3 %s --steps 100 --sleep 0.5 --out %s/%s.weights
`, limit, bin, trainer, dir, name)
	}
	ref, lim := refAndRun(t, cluster, job("ref", "10"), job("lim", "1"))
	waitCompleted(t, cluster, 5*time.Minute, ref, lim)
	info, err := cluster.JobInfo(context.Background(), lim)
	if err != nil {
		t.Fatal(err)
	}
	log := cluster.JobOutput(lim)
	if n, _ := strconv.Atoi(info["Restarts"]); n < 1 {
		t.Errorf("the time-limited job was not requeued (Restarts=%q):\n%s", info["Restarts"], log)
	}
	for _, want := range []string{"time-limit: asked 2 of 2 training processes for a checkpoint", "checkpointed; requeued", "committed as latest", "resume      " + filepath.Join(cluster.JobsDir(), fmt.Sprintf("trainrun-%d", lim), "checkpoints", "step-")} {
		if !strings.Contains(log, want) {
			t.Errorf("job log lacks %q:\n%s", want, log)
		}
	}
	sameWeights(t, dir, "lim", log)
}

// A trainer that finishes after trainrun's own clock asked for a checkpoint,
// but before the request reached it (it never catches the signal, so its
// shim holds it): the run finished, it is not a failed checkpoint. Before,
// it exited with the checkpoint error and left no finished marker.
func TestRunTimeLimitRequestUnheardFinishes(t *testing.T) {
	bin := trainrun(t)
	script := fmt.Sprintf(`#!/bin/bash
#SBATCH --nodes=1 --ntasks-per-node=2 --gpus-per-node=2 --time=1
exec %s run --fix tp=1 --ckpt-lead 55s -- bash -c 'sleep 9'
`, bin)
	state, exit, out, id := runJob(t, script, 2*time.Minute)
	if state != "COMPLETED" || exit != 0 {
		t.Fatalf("job %d: %s exit %d, want COMPLETED 0:\n%s", id, state, exit, out)
	}
	for _, want := range []string{"time-limit: asked 2 of 2 training processes for a checkpoint", "holding the checkpoint request",
		"training finished (all 2 ranks exited 0)", "the trainers ended before the time-limit checkpoint request reached one"} {
		if !strings.Contains(out, want) {
			t.Errorf("job %d log lacks %q:\n%s", id, want, out)
		}
	}
}
