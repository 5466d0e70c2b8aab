//go:build e2e

package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Failure classes take their policy's action (issue 31): the example
// trainer fails at step 5 as a real one would (TRAINRUN_EXAMPLE_FAIL), with
// restarts and failures to spare (--max-restarts 2, --max-failures 3).
//   - user: a plain ValueError ends the job in ONE run with exit 13 and the
//     traceback in the log, not after the restarts and requeues;
//   - oom: torch's CUDA out-of-memory error stops it the same way, exit 3;
//   - nccl: the NCCL watchdog's timeout restarts the step inside the job
//     without the failing rank's node: the spare takes its place and the run
//     finishes.
//
// Each names its class in the log, the history and the report.
func TestRunFailureClasses(t *testing.T) {
	requireTorch(t)
	bin := trainrun(t)
	trainer := exampleTrainer()
	script := func(dir, fail string, nodes, spare int) string {
		return fmt.Sprintf(`#!/bin/bash
#SBATCH --nodes=%d --ntasks-per-node=1 --gpus-per-node=1 --time=5 --requeue --no-kill --open-mode=append
export GLOO_SOCKET_IFNAME=lo TRAINRUN_EXAMPLE_FAIL=%s TRAINRUN_EXAMPLE_FAIL_MARK=%s/injected
exec %s run --fix tp=1 --probe none --job-dir %s/job --max-restarts 2 --max-failures 3 --spare-nodes %d -- /usr/bin/python3 %s --steps 12 --sleep 0.1 --save-every 4
`, nodes, fail, dir, bin, dir, spare, trainer)
	}
	report := func(t *testing.T, dir string) string {
		out, _ := exec.Command(bin, "report", filepath.Join(dir, "job")).CombinedOutput()
		return string(out)
	}
	history := func(dir string) string {
		b, _ := os.ReadFile(filepath.Join(dir, "job", "checkpoints", ".trainrun", "history.jsonl"))
		return string(b)
	}
	for _, tc := range []struct {
		class, fail string
		exit        int
		log         []string
	}{
		{"user", "value:5", 13, []string{"Traceback (most recent call last)", "ValueError: bad learning-rate schedule at step 5",
			"failure class user from rank 1 (node n2, GPU", "stopped: rank 1 (node n2, GPU", "failed with the trainer's own error"}},
		{"oom", "oom:5", 3, []string{"OutOfMemoryError: CUDA out of memory", "failure class oom from rank 1", "ran out of memory"}},
	} {
		t.Run(tc.class, func(t *testing.T) {
			dir := t.TempDir()
			start := time.Now()
			state, exit, log, _ := runJob(t, script(dir, tc.fail, 2, 0), 3*time.Minute)
			if state != "FAILED" || exit != tc.exit {
				t.Fatalf("job %s with exit %d, want FAILED with %d:\n%s", state, exit, tc.exit, log)
			}
			for _, want := range tc.log {
				if !strings.Contains(log, want) {
					t.Errorf("the log lacks %q:\n%s", want, log)
				}
			}
			if strings.Contains(log, "restarting the step") || strings.Contains(log, "requeued") {
				t.Errorf("a %s failure was retried:\n%s", tc.class, log)
			}
			h := history(dir)
			if n := strings.Count(h, `"type":"start"`); n != 1 || !strings.Contains(h, `"failure_class":"`+tc.class+`"`) {
				t.Errorf("history: %d starts (want 1) and failure_class %s wanted:\n%s", n, tc.class, h)
			}
			if rep := report(t, dir); !strings.Contains(rep, "failed steps: 1 ("+tc.class+" 1)") {
				t.Errorf("the report does not show the %s failure:\n%s", tc.class, rep)
			}
			t.Logf("%s: stopped %.1f s after submission", tc.class, time.Since(start).Seconds())
		})
	}
	t.Run("nccl", func(t *testing.T) {
		dir := t.TempDir()
		state, exit, log, _ := runJob(t, script(dir, "nccl:5", 3, 1), 3*time.Minute, "--nodelist=n[1-3]")
		if state != "COMPLETED" || exit != 0 {
			t.Fatalf("job %s with exit %d, want COMPLETED:\n%s", state, exit, log)
		}
		for _, want := range []string{"Watchdog caught collective operation timeout", "failure class nccl from rank 1 (node n2, GPU", "RestartOn: exclude",
			"spare node(s) n3 take the place of the lost n2: the step runs on n[1,3] (2 ranks)", "training finished",
			"restart 1 badput ", "restarts inside the job: 1, badput "} {
			if !strings.Contains(log, want) {
				t.Errorf("the log lacks %q:\n%s", want, log)
			}
		}
		h := history(dir)
		if !strings.Contains(h, `"failure_class":"nccl"`) || !strings.Contains(h, `"cause":"node-fault"`) {
			t.Errorf("history lacks the nccl class and n2's node-fault:\n%s", h)
		}
		rep := report(t, dir)
		if !strings.Contains(rep, "failed steps: 1 (nccl 1)") || !strings.Contains(rep, "failed node: n2 (node-fault") {
			t.Errorf("the report does not show the nccl failure and n2:\n%s", rep)
		}
		if b, _ := os.ReadFile(filepath.Join(dir, "injected")); !bytes.Contains(b, []byte("nccl at step 5")) {
			t.Errorf("the trainer did not record its injected failure: %q", b)
		}
	})
}
