//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The time limit strikes while a checkpoint is in flight (issue 21): the own
// clock asks the trainers for a checkpoint before the limit, they hold it
// until Slurm's time-limit SIGTERM has reached them (and trainrun, the batch
// step), then save and exit. trainrun must read that SIGTERM from the job's
// record as the time limit, not as a cancellation: the checkpoint is
// committed, the job requeued, and the next run resumes and finishes.
//
// Timing: the limit is one minute and the clock asks 20 s before it, so
// each incarnation trains for 40 s less its start-up s. The first must not
// finish (110 steps of 0.4 s = 44 s > 40 s); the second must, before its own
// clock: it has 10 + 2.5 s steps left, 4 + 2 s seconds, under 40 s while
// start-up takes less than 18 s (with 120 steps of 0.5 s, 20 + 2 s seconds:
// a start-up over 10 s on a loaded machine left the second incarnation
// finishing just as its clock asked for a checkpoint).
func TestRunTimeLimitDuringCheckpoint(t *testing.T) {
	requireTorch(t)
	t.Parallel()
	cluster := ownCluster(t)
	bin := trainrun(t)
	trainer := exampleTrainer()
	dir := t.TempDir()
	script := fmt.Sprintf(`#!/bin/bash
#SBATCH --nodes=2 --ntasks-per-node=1 --gpus-per-node=1 --time=1 --requeue --open-mode=append
export GLOO_SOCKET_IFNAME=lo
exec %s run --fix tp=1 --ckpt-lead 20s -- /usr/bin/python3 %s --steps 110 --sleep 0.4 --save-wait-term 60 --out %s/lim.weights
`, bin, trainer, dir)
	ctx := context.Background()
	id, err := cluster.SubmitBatch(ctx, script, "--nodelist=n1,n2")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cluster.Run(context.Background(), "scancel", strconv.Itoa(id)) })
	if _, err := cluster.WaitJob(ctx, id, 6*time.Minute, "COMPLETED"); err != nil {
		t.Fatal(err)
	}
	info, err := cluster.JobInfo(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	log := cluster.JobOutput(id)
	if n, _ := strconv.Atoi(info["Restarts"]); n < 1 {
		t.Errorf("the job was not requeued (Restarts=%q):\n%s", info["Restarts"], log)
	}
	for _, want := range []string{"time-limit checkpoint", "committed as latest", "checkpointed; requeued"} {
		if !strings.Contains(log, want) {
			t.Errorf("job log lacks %q:\n%s", want, log)
		}
	}
	if strings.Contains(log, "run: cancelled") {
		t.Errorf("the time limit was reported as a cancellation:\n%s", log)
	}
}
