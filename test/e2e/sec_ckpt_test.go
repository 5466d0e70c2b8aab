//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trainrun/trainrun/internal/safefs/safefstest"
)

// Issue 12, findings 2 and 3, on the real Slurm: another uid (nobody)
// pre-creates the directories a job of root's would use. The job
// directory: trainrun run refuses it (exit 2) before launching anything, so
// nobody's launch files never reach the trainer's environment. The
// node-local checkpoint directory, with a planted checkpoint whose every
// rank is marked done: the rank's shim refuses it before its trainer starts,
// and the planted checkpoint never reaches the store.
func TestSecPrecreatedDirsRefused(t *testing.T) {
	bin := trainrun(t)
	t.Run("job dir", func(t *testing.T) {
		base := t.TempDir()
		job := filepath.Join(base, "job")
		if err := os.MkdirAll(filepath.Join(job, "launch", "node"), 0o755); err != nil {
			t.Fatal(err)
		}
		safefstest.AsNobody(t, job)
		marker := filepath.Join(base, "launched")
		script := fmt.Sprintf(`#!/bin/bash
#SBATCH --nodes=1 --ntasks-per-node=1 --gpus-per-node=1 --time=2
exec %s run --probe none --fix tp=1 --job-dir %s -- touch %s
`, bin, job, marker)
		state, exit, log, id := runJob(t, script, 60*time.Second)
		if state != "FAILED" || exit != 2 {
			t.Errorf("job %d: %s exit %d, want FAILED exit 2\n%s", id, state, exit, log)
		}
		if want := job + " already exists and belongs to uid 65534"; !strings.Contains(log, want) {
			t.Errorf("job log lacks %q:\n%s", want, log)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Error("the training command ran in a job directory another uid created")
		}
	})
	t.Run("node-local dir", func(t *testing.T) {
		base := t.TempDir()
		local := filepath.Join(base, "shm-trainrun")
		planted := filepath.Join(local, "step-999", ".trainrun")
		if err := os.MkdirAll(planted, 0o755); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(local, "step-999", "model.pt"), []byte("pickle"), 0o644)
		os.WriteFile(filepath.Join(planted, "done.0"), nil, 0o644)
		for _, p := range []string{local, filepath.Join(local, "step-999"), planted, filepath.Join(local, "step-999", "model.pt"), filepath.Join(planted, "done.0")} {
			safefstest.AsNobody(t, p)
		}
		store := filepath.Join(base, "store")
		marker := filepath.Join(base, "launched")
		script := fmt.Sprintf(`#!/bin/bash
#SBATCH --nodes=1 --ntasks-per-node=1 --gpus-per-node=1 --time=2
exec %s run --probe none --fix tp=1 --max-failures 0 --job-dir %s --ckpt-dir %s --ckpt-local-dir %s -- touch %s
`, bin, filepath.Join(base, "job"), store, local, marker)
		os.Mkdir(store, 0o700)
		state, _, log, id := runJob(t, script, 90*time.Second)
		if state != "FAILED" {
			t.Errorf("job %d: %s, want FAILED\n%s", id, state, log)
		}
		if want := local + " already exists and belongs to uid 65534"; !strings.Contains(log, want) {
			t.Errorf("job log lacks %q:\n%s", want, log)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Error("the trainer ran with a node-local directory another uid created")
		}
		for _, p := range []string{filepath.Join(store, "step-999"), filepath.Join(store, ".trainrun", "staging", "step-999"), filepath.Join(store, ".trainrun", "latest")} {
			if _, err := os.Stat(p); err == nil {
				t.Errorf("the planted checkpoint reached the store: %s exists", p)
			}
		}
	})
}
