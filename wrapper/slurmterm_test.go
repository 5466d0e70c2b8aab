package main

import (
	"context"
	"fmt"
	"os/exec"
	"testing"

	"github.com/trainrun/trainrun/internal/slurm"
)

// A command SIGTERM ended (as scancel ends every process of the job) is
// told apart from other failures, through slurm.Error's wrapping too.
func TestKilledByTERM(t *testing.T) {
	run := func(script string) error {
		_, _, err := slurm.ExecStderr(context.Background(), "/bin/sh", "-c", script)
		return err
	}
	if err := run("kill -TERM $$"); !killedByTERM(err) {
		t.Errorf("SIGTERM: %v not recognised", err)
	}
	for _, script := range []string{"exit 1", "kill -KILL $$"} {
		if err := run(script); err == nil || killedByTERM(err) {
			t.Errorf("%s: %v taken for SIGTERM", script, err)
		}
	}
	if killedByTERM(fmt.Errorf("x: %w", exec.ErrNotFound)) || killedByTERM(nil) {
		t.Error("not an exit taken for SIGTERM")
	}
}
