//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Tiered checkpoints under preemption: a job on 2 nodes
// saves into node-local directories (--ckpt-local-dir DIR/%n: every "node"
// is this machine, so each gets a directory of its own) every 20 steps and
// when Slurm preempts it. Local rank 0's shim on each node drains the node's
// part into the store in the background; Slurm's SIGTERM reaches the shims
// too, and they must finish the drain of the preemption's checkpoint before
// exiting so that the controller can commit it, requeue, and the job resume
// and finish with the weights of an uninterrupted run (which saves directly
// into the store).
func TestRunTieredPreemptedResume(t *testing.T) {
	tieredPreempted(t, 1, "")
}

// tieredPreempted runs the test with perNode ranks on each of the two nodes;
// localFlag "" means --ckpt-local-dir DIR/local/%n, "-" none (a control run).
func tieredPreempted(t *testing.T, perNode int, localFlag string) {
	requireTorch(t)
	t.Parallel()
	cluster := ownCluster(t)
	bin := trainrun(t)
	trainer := exampleTrainer()
	dir := t.TempDir()
	local := filepath.Join(dir, "local")
	job := func(name, flags string) string {
		return fmt.Sprintf(`#!/bin/bash
#SBATCH --nodes=2 --ntasks-per-node=%d --gpus-per-node=%d --time=10 --requeue --open-mode=append -p low
export GLOO_SOCKET_IFNAME=lo
exec %s run --fix tp=1 %s -- /usr/bin/python3 %s --steps 80 --save-every 20 --sleep 0.4 --out %s/%s.weights
`, perNode, perNode, bin, flags, trainer, dir, name)
	}
	flag := "--ckpt-local-dir " + local + "/%n"
	if localFlag == "-" {
		flag = ""
	}
	ref, low := refAndRun(t, cluster, job("ref", ""), job("tiered", flag))
	preempt(t, cluster, low, "restart 0", 2*perNode, 18*time.Second, "n1") // past the first periodic save (step 20)
	waitCompleted(t, cluster, 6*time.Minute, ref, low)
	log := cluster.JobOutput(low)
	info, _ := cluster.JobInfo(context.Background(), low)
	if n, _ := strconv.Atoi(info["Restarts"]); n < 1 {
		t.Errorf("the job was preempted but requeued %q times:\n%s", info["Restarts"], log)
	}
	store := filepath.Join(cluster.JobsDir(), fmt.Sprintf("trainrun-%d", low), "checkpoints")
	wants := []string{
		"preempted (SIGTERM from Slurm to the step",
		"checkpointed; requeued",
		"resume      " + filepath.Join(store, "step-"),
	}
	if flag != "" {
		wants = append(wants, "tiered      trainers save into "+local+"/%n",
			"n1: drained checkpoint step-20 from "+local+"/n1",
			"n2: drained checkpoint step-20 from "+local+"/n2")
	}
	for _, want := range wants {
		if !strings.Contains(log, want) {
			t.Errorf("job log lacks %q:\n%s", want, log)
		}
	}
	if strings.Contains(log, "not drained") {
		t.Errorf("a drain was left unfinished:\n%s", log)
	}
	// Every drained local copy is gone, and no drain is left half done.
	for _, n := range []string{"n1", "n2"} {
		ents, _ := os.ReadDir(filepath.Join(local, n))
		if len(ents) != 0 {
			t.Errorf("%s's local directory still holds %d entries (first %s)", n, len(ents), ents[0].Name())
		}
	}
	if ents, _ := os.ReadDir(filepath.Join(store, ".trainrun", "staging")); len(ents) != 0 {
		t.Errorf("staging still holds %d entries (first %s)", len(ents), ents[0].Name())
	}
	out, err := exec.Command(bin, "ckpt", "verify", "--all", "--ckpt-dir", store).CombinedOutput()
	if err != nil {
		t.Errorf("trainrun ckpt verify: %v\n%s", err, out)
	}
	sameWeights(t, dir, "tiered", log)
}
