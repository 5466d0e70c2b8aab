//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Two differently named `trainrun run` steps in one batch script both run
// (before run names, the second found the first's "finished" marker in the
// shared default store and did nothing); the script requeues itself between
// them, and the rerun skips only the run that finished.
func TestRunTwoNamedRunsOneJob(t *testing.T) {
	requireTorch(t)
	t.Parallel()
	bin := trainrun(t)
	trainer := exampleTrainer()
	script := fmt.Sprintf(`#!/bin/bash
#SBATCH --nodes=1 --ntasks-per-node=1 --gpus-per-node=1 --time=5 --requeue --open-mode=append
export GLOO_SOCKET_IFNAME=lo
echo "script restart ${SLURM_RESTART_COUNT:-0}"
%[1]s run --name prep --fix tp=1 -- /usr/bin/python3 %[2]s --steps 2 || exit $?
if [ "${SLURM_RESTART_COUNT:-0}" = 0 ]; then scontrol requeue "$SLURM_JOB_ID"; sleep 60; exit 1; fi
exec %[1]s run --name main --fix tp=1 -- /usr/bin/python3 %[2]s --steps 3
`, bin, trainer)
	start := time.Now()
	state, code, out, id := runJob(t, script, 2*time.Minute)
	t.Logf("two named runs with a requeue between them: %v", time.Since(start).Round(time.Second))
	if state != "COMPLETED" || code != 0 {
		t.Fatalf("job ended %s exit %d:\n%s", state, code, out)
	}
	for want, n := range map[string]int{
		"script restart 0":                 1,
		"script restart 1":                 1,
		"train_example: steps 0..2 of 2":   1, // prep ran once
		"train_example: steps 0..3 of 3":   1, // main ran once, after the requeue
		`run "prep" already finished (job`: 1,
		`trainrun run --name prep-2`:       1,
		`run "main" already finished`:      0,
	} {
		if got := strings.Count(out, want); got != n {
			t.Errorf("job log has %q %d times, want %d:\n%s", want, got, n, out)
		}
	}
	for _, run := range []string{"prep", "main"} {
		p := filepath.Join(cluster.JobsDir(), fmt.Sprintf("trainrun-%d", id), "runs", run, "checkpoints", ".trainrun", "finished")
		b, err := os.ReadFile(p)
		if err != nil {
			t.Errorf("run %s has no finished marker in its own store: %v", run, err)
			continue
		}
		var f struct {
			Run     string `json:"run"`
			Restart int    `json:"restart"`
		}
		if err := json.Unmarshal(b, &f); err != nil || f.Run != run {
			t.Errorf("%s: %s (%v), want run %q", p, b, err, run)
		}
	}
	_ = context.Background
}
