//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// Issue 30: under salloc (an interactive allocation, BatchFlag=0) a crashing
// step is not requeued: no `scontrol requeue` ("Only batch jobs ..."), the
// step's failure code (5) rather than 7 "stopped", and the reason the user
// reads; nor the log-truncation warning, which is about batch jobs.
func TestRunSallocNoRequeue(t *testing.T) {
	bin := trainrun(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := cluster.Command(ctx, "salloc", "--immediate=60", "-N1", "--ntasks-per-node=2", "--gpus-per-node=2", "--time=5",
		bin, "run", "--probe", "none", "--max-restarts", "0", "--fix", "tp=2", "--", "/bin/sh", "-c", "exit 3")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 5 {
		t.Fatalf("salloc ... trainrun run: %v, want exit 5 (step failed):\n%s", err, out)
	}
	log := string(out)
	if !strings.Contains(log, "not requeueing: an interactive allocation (salloc, srun) cannot be requeued") {
		t.Errorf("the output lacks why there is no requeue:\n%s", log)
	}
	for _, bad := range []string{"Only batch jobs", "scontrol requeue", "; requeued", "Slurm truncates"} {
		if strings.Contains(log, bad) {
			t.Errorf("the output has %q:\n%s", bad, log)
		}
	}
}

// Issue 30: a requeueable batch job whose script does not append to its
// output file is warned once at start that a requeue would truncate
// slurm-J.out (naming it and the fix); with --open-mode=append it is not.
func TestRunWarnsOutputTruncation(t *testing.T) {
	bin := trainrun(t)
	for _, c := range []struct {
		name, sbatch string
		warned       bool
	}{
		{"truncate", "#SBATCH --nodes=1 --ntasks-per-node=1 --gpus-per-node=1 --time=5 --requeue", true},
		{"append", "#SBATCH --nodes=1 --ntasks-per-node=1 --gpus-per-node=1 --time=5 --requeue --open-mode=append", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			script := fmt.Sprintf("#!/bin/bash\n%s\nexec %s run --probe none --fix tp=1 -- /bin/sh -c 'true'\n", c.sbatch, bin)
			state, exit, log, id := runJob(t, script, 2*time.Minute)
			if state != "COMPLETED" || exit != 0 {
				t.Fatalf("job %d: %s exit %d:\n%s", id, state, exit, log)
			}
			n := strings.Count(log, "Slurm truncates "+cluster.OutputPath(id))
			if c.warned && (n != 1 || !strings.Contains(log, "add '#SBATCH --open-mode=append'")) {
				t.Errorf("job %d: the warning appears %d times, want once with the fix:\n%s", id, n, log)
			}
			if !c.warned && strings.Contains(log, "Slurm truncates") {
				t.Errorf("job %d appends, yet was warned:\n%s", id, log)
			}
		})
	}
}
