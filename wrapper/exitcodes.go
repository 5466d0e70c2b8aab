package main

import (
	"fmt"
	"strings"

	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
)

// exitCodeDocs is the one table `trainrun --help`, `run --help`, `plan
// --help`, `trainrun help exit-codes` and the README print
// (TestREADMEExitCodeTable keeps the README's copy equal to it). advice is
// what a job script or its author does about it.
var exitCodeDocs = []struct {
	code      int
	name, doc string
	advice    string
}{
	{exitcode.OK, "ok", "success (a run: the training finished)", "nothing; a finished run's store can start a new run: run --init-from STORE/TAG"},
	{exitcode.Failure, "failure", "internal error (please report it)", "report it with the message"},
	{exitcode.Usage, "usage", "bad flag, value or input file; the message names it and what to do", "fix the command line or the file the message names"},
	{exitcode.NoFit, "no-fit", "no layout fits the GPUs' memory; the message says what would fit", "more GPUs, recompute, LoRA or offload, as the message suggests"},
	{exitcode.Slurm, "slurm", "the Slurm allocation is unusable (bad SLURM_* values, no srun, no GPUs, inconsistent request)", "run inside sbatch/salloc with GPUs; check the #SBATCH lines"},
	{exitcode.StepFailed, "step-failed", "the training step failed (a task exited non-zero or was killed)", "read the trainer's log; under salloc no requeue is tried"},
	{exitcode.Requeued, "requeued", "checkpointed and requeued; the job runs again, the script should exit", "exit the batch script at once (exec trainrun run does)"},
	{exitcode.Stopped, "stopped", "checkpointed and stopped without requeue (policy, sbatch --no-requeue, cancelled)", "resubmit to continue from the latest checkpoint"},
	{exitcode.RequeueLimit, "requeue-limit", "gave up: requeue limit reached or repeated failures without progress", "read the job history (trainrun report JOBDIR)"},
	{exitcode.Checkpoint, "checkpoint", "a checkpoint could not be verified or committed", "trainrun ckpt verify --all; check the store's file system"},
	{exitcode.Layout, "layout", "the layout or batch cannot be split over the GPUs (tp·pp·cp must divide them, batch divisible by mbs·dp, ...)", "change --fix, --global-batch or the GPU count as the message says"},
	{exitcode.Capability, "capability", "the GPU or cluster lacks what the job asks for (fp8 without FP8 tensor cores, offload=nvme without --nvme-bw)", "another --precision, GPU type or flag, as the message says"},
	{exitcode.OffTrack, "off-track", "checkpointed and stopped: the loss forecast will not reach --target-loss by --tokens (--stop-if-off-track)", "trainrun forecast CKPT_DIR --svg f.svg; change the data or learning rate and resume, or resubmit to continue as it is"},
	{exitcode.UserError, "user-error", "stopped at once: the step failed with the trainer's own error (a Python exception, bad arguments; failure class user), no restart or requeue", "fix the error the log's traceback shows and resubmit (policy RestartOn=user=restart retries such failures)"},
	{exitcode.NotFound, "not-found", "the training command was not found on a node", "install it on every node or give its full path"},
	{exitcode.Interrupted, "interrupted", "interrupted (Ctrl-C, scancel) before or while starting", "none"},
}

func exitCodeTable() string {
	var b strings.Builder
	b.WriteString("Exit codes:\n")
	for _, e := range exitCodeDocs {
		fmt.Fprintf(&b, "  %3d  %-14s %s\n", e.code, e.name, e.doc)
	}
	return b.String()
}

// exitCodeHelp is `trainrun help exit-codes`: the table with what to do.
func exitCodeHelp() string {
	var b strings.Builder
	b.WriteString("Exit codes of every trainrun command (job scripts branch on them; codes are never renumbered):\n\n")
	for _, e := range exitCodeDocs {
		fmt.Fprintf(&b, "  %3d  %-14s %s\n                      what to do: %s\n", e.code, e.name, e.doc, e.advice)
	}
	b.WriteString("\nIn a batch script:  exec trainrun run ... -- CMD   (then the job's exit status is trainrun's)\n")
	return b.String()
}

// withCode attaches an exit code to err (nil stays nil): internal/exitcode.With.
func withCode(code int, err error) error { return exitcode.With(code, err) }

// usageErrorf is the common case: bad user input.
func usageErrorf(format string, a ...any) error {
	return withCode(exitcode.Usage, fmt.Errorf(format, a...))
}

func exitCodeOf(err error) int {
	if err == nil {
		return exitcode.Failure // callers ask only for errors
	}
	return exitcode.Of(err)
}
