package main

import (
	"fmt"
	"strings"

	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
)

// The exit codes, from the one table in internal/exitcode.
const (
	ExitOK           = exitcode.OK
	ExitFailure      = exitcode.Failure
	ExitUsage        = exitcode.Usage
	ExitNoFit        = exitcode.NoFit
	ExitSlurm        = exitcode.Slurm
	ExitStepFailed   = exitcode.StepFailed
	ExitRequeued     = exitcode.Requeued
	ExitStopped      = exitcode.Stopped
	ExitRequeueLimit = exitcode.RequeueLimit
	ExitCheckpoint   = exitcode.Checkpoint
	ExitLayout       = exitcode.Layout
	ExitCapability   = exitcode.Capability
	ExitNotFound     = exitcode.NotFound
	ExitInterrupted  = exitcode.Interrupted
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
	{ExitOK, "ok", "success (a run: the training finished)", "nothing; a finished run's store can start a new run: run --init-from STORE/TAG"},
	{ExitFailure, "failure", "internal error (please report it)", "report it with the message"},
	{ExitUsage, "usage", "bad flag, value or input file; the message names it and what to do", "fix the command line or the file the message names"},
	{ExitNoFit, "no-fit", "no layout fits the GPUs' memory; the message says what would fit", "more GPUs, recompute, LoRA or offload, as the message suggests"},
	{ExitSlurm, "slurm", "the Slurm allocation is unusable (bad SLURM_* values, no srun, no GPUs, inconsistent request)", "run inside sbatch/salloc with GPUs; check the #SBATCH lines"},
	{ExitStepFailed, "step-failed", "the training step failed (a task exited non-zero or was killed)", "read the trainer's log; under salloc no requeue is tried"},
	{ExitRequeued, "requeued", "checkpointed and requeued; the job runs again, the script should exit", "exit the batch script at once (exec trainrun run does)"},
	{ExitStopped, "stopped", "checkpointed and stopped without requeue (policy, sbatch --no-requeue, cancelled)", "resubmit to continue from the latest checkpoint"},
	{ExitRequeueLimit, "requeue-limit", "gave up: requeue limit reached or repeated failures without progress", "read the job history (trainrun report JOBDIR)"},
	{ExitCheckpoint, "checkpoint", "a checkpoint could not be verified or committed", "trainrun ckpt verify --all; check the store's file system"},
	{ExitLayout, "layout", "the layout or batch cannot be split over the GPUs (tp·pp·cp must divide them, batch divisible by mbs·dp, ...)", "change --fix, --global-batch or the GPU count as the message says"},
	{ExitCapability, "capability", "the GPU or cluster lacks what the job asks for (fp8 without FP8 tensor cores, offload=nvme without --nvme-bw)", "another --precision, GPU type or flag, as the message says"},
	{ExitNotFound, "not-found", "the training command was not found on a node", "install it on every node or give its full path"},
	{ExitInterrupted, "interrupted", "interrupted (Ctrl-C, scancel) before or while starting", "none"},
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
	return withCode(ExitUsage, fmt.Errorf(format, a...))
}

// errHelpShown is returned after printing --help: exit 0, print nothing more.
var errHelpShown = exitcode.HelpShown

// errSilent wraps an error already reported to the user.
var errSilent = exitcode.Silent

func exitCodeOf(err error) int {
	if err == nil {
		return ExitFailure // callers ask only for errors
	}
	return exitcode.Of(err)
}
