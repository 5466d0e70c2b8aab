package run

import (
	"context"
	"time"

	"github.com/trainrun/trainrun/internal/slurm"
)

// outputTruncationWarning is the warning `trainrun run` logs once at
// start when a requeue of this batch job would truncate its output file:
// Slurm opens slurm-J.out afresh (--open-mode=truncate, the default) when a
// requeued job starts again, so the log of every earlier incarnation,
// tracebacks included, is lost. "" when the job appends, cannot be
// requeued, is interactive, or its script cannot be read.
func outputTruncationWarning(ctx context.Context, sc slurm.Client, job slurm.Job, getenv func(string) string) string {
	if job.ID == "" || !job.Requeue || !job.IsBatch() {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	script, err := sc.BatchScript(ctx, job.ID)
	if err != nil {
		return ""
	}
	if appends, _ := slurm.OpenModeAppend(script, getenv); appends {
		return ""
	}
	out := job.Record["StdOut"]
	if out == "" {
		out = "the job's output file"
	}
	return "Slurm truncates " + out + " when a requeued job starts again, so the log of this incarnation will be lost at a requeue: add '#SBATCH --open-mode=append' to the batch script (ignore this if sbatch was given --open-mode=append on its command line, or slurm.conf sets JobFileAppend=1)"
}
