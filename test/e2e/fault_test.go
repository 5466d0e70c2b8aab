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
// kill the step and restart it inside the allocation from the latest
// checkpoint (same job, Slurm's Restarts=0) while --max-restarts allows, and
// requeue once it does not (--max-restarts 0: Restarts=1). Both runs finish
// by themselves, with at most one checkpoint interval redone.
func TestFaultHungRankRestart(t *testing.T) {
	requireTorch(t)
	t.Parallel()
	bin := trainrun(t)
	trainer := exampleTrainer()
	dir := t.TempDir()
	const every = 10
	job := func(name string, maxRestarts int) string {
		return fmt.Sprintf(`#!/bin/bash
#SBATCH --nodes=2 --ntasks-per-node=1 --gpus-per-node=1 --time=5 --requeue --open-mode=append
export GLOO_SOCKET_IFNAME=lo
exec %s run --fix tp=1 --job-dir %s/%s --hang-timeout 4s --max-restarts %d -- /usr/bin/python3 %s --steps 70 --sleep 0.2 --save-every %d --collective-timeout 1800 --out %s/%s.weights
`, bin, dir, name, maxRestarts, trainer, every, dir, name)
	}
	ctx := context.Background()
	inJob, err := cluster.SubmitBatch(ctx, job("injob", 1))
	if err != nil {
		t.Fatal(err)
	}
	requeue, err := cluster.SubmitBatch(ctx, job("requeue", 0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cluster.Run(context.Background(), "scancel", strconv.Itoa(inJob), strconv.Itoa(requeue)) })

	type fault struct {
		id      int
		name    string
		stopped time.Time
	}
	var faults []fault
	for _, j := range []struct {
		id   int
		name string
	}{{inJob, "injob"}, {requeue, "requeue"}} {
		progress := filepath.Join(dir, j.name, "launch", "progress")
		if err := harness.WaitFor(ctx, 90*time.Second, j.name+": step 15", func() bool { s, _ := readProgress(progress); return s >= 15 }); err != nil {
			t.Fatalf("%v\n%s", err, cluster.JobOutput(j.id))
		}
		pid := trainerPID(t, j.id, 1)
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		faults = append(faults, fault{j.id, j.name, time.Now()})
	}

	for _, f := range faults {
		// Steps resume: the progress file shows a step of the new run.
		progress := filepath.Join(dir, f.name, "launch", "progress")
		var resumed time.Duration
		err := harness.WaitFor(ctx, 90*time.Second, f.name+": a step after the restart", func() bool {
			_, at := readProgress(progress)
			resumed = at.Sub(f.stopped)
			return strings.Count(cluster.JobOutput(f.id), "all 2 ranks started") >= 2 && at.After(f.stopped.Add(2*time.Second))
		})
		if err != nil {
			t.Fatalf("%v\n%s", err, cluster.JobOutput(f.id))
		}
		t.Logf("%s: steps resumed %.1f s after the SIGSTOP", f.name, resumed.Seconds())
		if resumed > 90*time.Second {
			t.Errorf("%s: steps resumed %.0f s after the fault, want within 90 s", f.name, resumed.Seconds())
		}
	}
	for _, f := range faults {
		if _, err := cluster.WaitJob(ctx, f.id, 3*time.Minute, "COMPLETED"); err != nil {
			t.Fatalf("%v\n%s", err, cluster.JobOutput(f.id))
		}
		info, err := cluster.JobInfo(ctx, f.id)
		if err != nil {
			t.Fatal(err)
		}
		log := cluster.JobOutput(f.id)
		wantRestarts := map[string]string{"injob": "0", "requeue": "1"}[f.name]
		if info["Restarts"] != wantRestarts {
			t.Errorf("%s: Restarts=%s, want %s:\n%s", f.name, info["Restarts"], wantRestarts, log)
		}
		hung := regexp.MustCompile(`hang: 2 of 2 ranks made no progress; the hang points to rank 1 \(node (n\d), GPU (-?\d+)\) stopped at step (\d+), .*process stopped \(T\)`).FindStringSubmatch(log)
		if hung == nil {
			t.Fatalf("%s: the log does not name rank 1, its node and GPU, stopped (T):\n%s", f.name, log)
		}
		want := map[string]string{"injob": "restarting the step inside the allocation", "requeue": "requeued"}[f.name]
		for _, s := range []string{want, "stack dump", "training finished"} {
			if !strings.Contains(log, s) {
				t.Errorf("%s: the log lacks %q:\n%s", f.name, s, log)
			}
		}
		stepAt, _ := strconv.Atoi(hung[3])
		resumedFrom := resumeStep(t, filepath.Join(dir, f.name), log)
		t.Logf("%s: hung at step %d, resumed from step %d", f.name, stepAt, resumedFrom)
		if redo := stepAt - resumedFrom; redo < 0 || redo > every {
			t.Errorf("%s: hung at step %d, resumed from %d: %d steps redone, want at most one interval (%d)", f.name, stepAt, resumedFrom, redo, every)
		}
		if b, err := os.ReadFile(filepath.Join(dir, f.name+".weights")); err != nil || len(bytes.TrimSpace(b)) != 64 {
			t.Errorf("%s: no final weights (%v)", f.name, err)
		}
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
