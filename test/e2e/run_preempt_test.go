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

// A low-priority training job preempted twice by high-priority ones: Slurm's
// SIGTERM reaches the trainers directly (GraceTime), the shims tell the
// controller, the trainers checkpoint and exit 0, trainrun commits and
// requeues, and the job resumes and finishes with the weights of an
// uninterrupted run.
func TestRunPreemptedRequeueResume(t *testing.T) {
	requireTorch(t)
	// Minutes of waiting on Slurm's clocks: run beside the other long tests,
	// on a cluster of its own so their nodes and preemptions do not mix.
	t.Parallel()
	cluster := ownCluster(t)
	bin := trainrun(t)
	trainer := exampleTrainer()
	dir := t.TempDir()
	job := func(name string) string {
		return fmt.Sprintf(`#!/bin/bash
#SBATCH --nodes=2 --ntasks-per-node=1 --gpus-per-node=1 --time=10 --requeue --open-mode=append -p low
export GLOO_SOCKET_IFNAME=lo
exec %s run --fix tp=1 -- /usr/bin/python3 %s --steps 100 --sleep 0.4 --out %s/%s.weights --report %s/%s
`, bin, trainer, dir, name, dir, name)
	}
	ref, low := refAndRun(t, cluster, job("ref"), job("low"))
	// Preempt twice, each time once the trainers are past their start (the
	// log says all ranks of that run started, plus torch's import).
	for _, restart := range []string{"restart 0", "restart 1"} {
		preempt(t, cluster, low, restart, 2, 12*time.Second, "n1")
	}
	waitCompleted(t, cluster, 5*time.Minute, ref, low)
	log := cluster.JobOutput(low)
	info, _ := cluster.JobInfo(context.Background(), low)
	if n, _ := strconv.Atoi(info["Restarts"]); n < 2 {
		t.Errorf("the job was preempted twice but requeued %q times:\n%s", info["Restarts"], log)
	}
	if n := strings.Count(log, "preempted (SIGTERM from Slurm to the step"); n != 2 {
		t.Errorf("%d preemptions in the job log, want 2:\n%s", n, log)
	}
	for _, want := range []string{"preempted (SIGTERM from Slurm to the step", "checkpointed; requeued", "resume      " + filepath.Join(cluster.JobsDir(), fmt.Sprintf("trainrun-%d", low), "checkpoints", "step-")} {
		if !strings.Contains(log, want) {
			t.Errorf("job log lacks %q:\n%s", want, log)
		}
	}
	sameWeights(t, dir, "low", log)
}
