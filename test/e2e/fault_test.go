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
	"syscall"
	"testing"
	"time"

	"github.com/trainrun/trainrun/test/harness"
)

// A hung rank (issue 21): one rank's trainer is stopped (SIGSTOP, as a dead
// GPU or an NCCL deadlock leaves it) while the trainer's collective timeout
// is 30 min, so the other rank waits in the all-reduce. trainrun must notice
// within --hang-timeout, name the rank, node and GPU and the process state,
// get a stack dump from the rank that waits, kill the step and restart it
// inside the allocation from the latest checkpoint (same job, Slurm's
// Restarts=0) while --max-restarts allows...
func TestFaultHungRankRestart(t *testing.T) {
	hungRank(t, "injob", 1, "0", "restarting the step inside the allocation")
}

// ... and requeue once it does not (--max-restarts 0: Restarts=1).
func TestFaultHungRankRequeue(t *testing.T) {
	hungRank(t, "requeue", 0, "1", "hang: rank 1")
}

// hungRank runs the example trainer on 2 ranks, stops rank 1 after step 12,
// and checks that steps resume within 90 s, the job finishes by itself with
// Restarts=wantRestarts and at most one checkpoint interval redone, and the
// log names the rank, node, GPU and state and says want.
func hungRank(t *testing.T, name string, maxRestarts int, wantRestarts, want string) {
	requireTorch(t)
	t.Parallel()
	bin := trainrun(t)
	trainer := exampleTrainer()
	dir := t.TempDir()
	const every = 10
	script := fmt.Sprintf(`#!/bin/bash
#SBATCH --nodes=2 --ntasks-per-node=1 --gpus-per-node=1 --time=5 --requeue --open-mode=append
export GLOO_SOCKET_IFNAME=lo
exec %s run --fix tp=1 --probe all --job-dir %s/job --hang-timeout 8s --max-restarts %d -- /usr/bin/python3 %s --steps 40 --sleep 0.15 --save-every %d --collective-timeout 1800 --out %s/weights
`, bin, dir, maxRestarts, trainer, every, dir)
	ctx := context.Background()
	id, err := cluster.SubmitBatch(ctx, script)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cluster.Run(context.Background(), "scancel", strconv.Itoa(id)) })

	progress := filepath.Join(dir, "job", "launch", "progress")
	waitStep(t, cluster, id, progress, 12)
	pid := trainerPID(t, id, 1)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// Should the test fail with the rank still stopped: kill it before the
	// job is cancelled (a run with the detection off left the job's
	// slurmstepd behind and the cluster's teardown waiting).
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	stopped := time.Now()

	// Steps resume: the second run's ranks started and rank 0 reported a step.
	resumed := waitResumed(t, cluster, id, progress, 2, stopped, stopped.Add(2*time.Second))
	t.Logf("steps resumed %.1f s after the SIGSTOP", resumed.Seconds())

	if _, err := cluster.WaitJob(ctx, id, 2*time.Minute, "COMPLETED"); err != nil {
		t.Fatalf("%v\n%s", err, cluster.JobOutput(id))
	}
	info, err := cluster.JobInfo(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	log := cluster.JobOutput(id)
	if info["Restarts"] != wantRestarts {
		t.Errorf("Restarts=%s, want %s:\n%s", info["Restarts"], wantRestarts, log)
	}
	hung := regexp.MustCompile(`hang: 2 of 2 ranks made no progress; the hang points to rank 1 \(node (n\d), GPU (-?\d+)\) stopped at step (\d+), .*process stopped \(T\)`).FindStringSubmatch(log)
	if hung == nil {
		t.Fatalf("the log does not name rank 1, its node and GPU, stopped (T):\n%s", log)
	}
	// "most recent call first": faulthandler's dump of the rank that waits.
	for _, s := range []string{want, "asked 2 rank(s) for a Python stack dump", "most recent call first", "training finished"} {
		if !strings.Contains(log, s) {
			t.Errorf("the log lacks %q:\n%s", s, log)
		}
	}
	stepAt, _ := strconv.Atoi(hung[3])
	from := resumeStep(t, filepath.Join(dir, "job"), log)
	t.Logf("hung at step %d on %s, resumed from step %d", stepAt, hung[1], from)
	checkRedone(t, "hung", stepAt, from, every)
	if b, err := os.ReadFile(filepath.Join(dir, "weights")); err != nil || len(bytes.TrimSpace(b)) != 64 {
		t.Errorf("no final weights (%v)", err)
	}
	if resumed > 90*time.Second {
		t.Errorf("steps resumed %.0f s after the fault, want within 90 s", resumed.Seconds())
	}
}

// waitStep waits until rank 0 reported step n in the progress file.
func waitStep(t *testing.T, c *harness.Cluster, id int, progress string, n int) {
	t.Helper()
	if err := harness.WaitFor(context.Background(), 90*time.Second, fmt.Sprintf("step %d", n), func() bool { s, _ := readProgress(progress); return s >= n }); err != nil {
		t.Fatalf("%v\n%s", err, c.JobOutput(id))
	}
}

// waitResumed waits until the restarted step's ranks started (the second
// "all N ranks started") and rank 0 reported a step after after; it
// returns how long after fault that step came.
func waitResumed(t *testing.T, c *harness.Cluster, id int, progress string, ranks int, fault, after time.Time) time.Duration {
	t.Helper()
	var resumed time.Duration
	started := fmt.Sprintf("all %d ranks started", ranks)
	if err := harness.WaitFor(context.Background(), 90*time.Second, "a step after the restart", func() bool {
		_, at := readProgress(progress)
		resumed = at.Sub(fault)
		return strings.Count(c.JobOutput(id), started) >= 2 && at.After(after)
	}); err != nil {
		t.Fatalf("%v\n%s", err, c.JobOutput(id))
	}
	return resumed
}

// checkRedone checks that the restart redid at most one checkpoint
// interval: the fault came at step at, the restart resumed from from.
func checkRedone(t *testing.T, what string, at, from, every int) {
	t.Helper()
	if redo := at - from; redo < 0 || redo > every {
		t.Errorf("%s at step %d, resumed from %d: %d steps redone, want at most one interval (%d)", what, at, from, redo, every)
	}
}

// readProgress reads launch/progress: "STEP TOKENS UNIX_TIME".
func readProgress(path string) (int, time.Time) {
	b, err := os.ReadFile(path)
	if err != nil {
		return -1, time.Time{}
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return -1, time.Time{}
	}
	step, _ := strconv.Atoi(f[0])
	sec, _ := strconv.ParseFloat(f[2], 64)
	return step, time.Unix(0, int64(sec*1e9))
}

// resumeStep is the step the restarted run resumed from: the start event
// after the first one in the store's history.
func resumeStep(t *testing.T, jobDir, log string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(jobDir, "checkpoints", ".trainrun", "history.jsonl"))
	if err != nil {
		t.Fatalf("history: %v\n%s", err, log)
	}
	starts := regexp.MustCompile(`"type":"start"[^\n]*?"resume_from":"step-(\d+)"`).FindAllStringSubmatch(string(b), -1)
	if len(starts) == 0 {
		t.Fatalf("no resumed start in the history:\n%s", b)
	}
	n, _ := strconv.Atoi(starts[0][1])
	return n
}

// trainerPID finds the training process (python3) of rank in job id.
func trainerPID(t *testing.T, id, rank int) int {
	t.Helper()
	job := []byte("SLURM_JOB_ID=" + strconv.Itoa(id) + "\x00")
	rk := []byte("\x00RANK=" + strconv.Itoa(rank) + "\x00")
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if !bytes.HasPrefix(cmdline, []byte("/usr/bin/python3\x00")) {
			continue
		}
		env, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if bytes.Contains(env, job) && bytes.Contains(append([]byte{0}, env...), rk) {
			return pid
		}
	}
	t.Fatalf("no trainer process of rank %d in job %d", rank, id)
	return 0
}
