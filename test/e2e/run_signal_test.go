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

// The two other ways the news arrives: SIGUSR1 to the batch shell (what
// #SBATCH --signal=B:USR1@T sends; the script execs trainrun, so trainrun
// gets it) and the checkpoint signal sent by Slurm to the step itself
// (--signal=USR2@T without B:, here scancel --signal=USR2). Each time the
// trainers checkpoint and the job is requeued and resumes; it then finishes.
func TestRunSlurmSignals(t *testing.T) {
	requireTorch(t)
	// Minutes of waiting on Slurm's clocks: run beside the other long tests,
	// on a cluster of its own so their nodes and preemptions do not mix.
	t.Parallel()
	cluster := ownCluster(t)
	bin := trainrun(t)
	trainer := exampleTrainer()
	script := fmt.Sprintf(`#!/bin/bash
#SBATCH --nodes=2 --ntasks-per-node=1 --gpus-per-node=1 --time=10 --requeue --open-mode=append
export GLOO_SOCKET_IFNAME=lo
exec %s run --fix tp=1 -- /usr/bin/python3 %s --steps 120 --sleep 0.3
`, bin, trainer)
	ctx := context.Background()
	id, err := cluster.SubmitBatch(ctx, script)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cluster.Run(context.Background(), "scancel", strconv.Itoa(id)) })
	signals := []struct {
		restart string
		args    []string
		want    string
	}{
		{"restart 0", []string{"--batch", "--signal=USR1"}, "signal: asked 2 of 2 training processes for a checkpoint"},
		{"restart 1", []string{"--signal=USR2"}, "SIGUSR2 from Slurm reached the step"},
	}
	for _, sg := range signals {
		waitStarted(t, cluster, id, sg.restart, 2, 2*time.Minute)
		time.Sleep(10 * time.Second)
		if _, err := cluster.Run(ctx, "scancel", append(sg.args, strconv.Itoa(id))...); err != nil {
			t.Fatal(err)
		}
		waitLog(t, cluster, id, sg.want, time.Minute)
	}
	if _, err := cluster.WaitJob(ctx, id, 3*time.Minute, "COMPLETED"); err != nil {
		t.Fatal(err)
	}
	log := cluster.JobOutput(id)
	if n := strings.Count(log, "checkpointed; requeued"); n != 2 || !strings.Contains(log, "training finished") {
		t.Errorf("want 2 requeues and a finished run:\n%s", log)
	}
}
