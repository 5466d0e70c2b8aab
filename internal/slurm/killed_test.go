package slurm

import (
	"context"
	"fmt"
	"os/exec"
	"testing"
)

// A command SIGTERM ended (as scancel ends every process of the job) is
// told apart from other failures, through slurm.Error's wrapping too.
func TestKilledByTERM(t *testing.T) {
	run := func(script string) error {
		_, _, err := ExecStderr(context.Background(), "/bin/sh", "-c", script)
		return err
	}
	if err := run("kill -TERM $$"); !KilledByTERM(err) {
		t.Errorf("SIGTERM: %v not recognised", err)
	}
	for _, script := range []string{"exit 1", "kill -KILL $$"} {
		if err := run(script); err == nil || KilledByTERM(err) {
			t.Errorf("%s: %v taken for SIGTERM", script, err)
		}
	}
	if KilledByTERM(fmt.Errorf("x: %w", exec.ErrNotFound)) || KilledByTERM(nil) {
		t.Error("not an exit taken for SIGTERM")
	}
}
