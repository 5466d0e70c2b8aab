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
	ExitNotFound     = exitcode.NotFound
	ExitInterrupted  = exitcode.Interrupted
)

var exitCodeDocs = []struct {
	code int
	name string
	doc  string
}{
	{ExitOK, "ok", "success (a run: the training finished)"},
	{ExitFailure, "failure", "internal error (please report it)"},
	{ExitUsage, "usage", "bad flag, value or input file; the message names it and what to do"},
	{ExitNoFit, "no-fit", "no layout fits the GPUs' memory; the message says what would fit"},
	{ExitSlurm, "slurm", "the Slurm allocation is unusable (bad SLURM_* values, no srun, no GPUs, inconsistent request)"},
	{ExitStepFailed, "step-failed", "the training step failed (a task exited non-zero or was killed)"},
	{ExitRequeued, "requeued", "checkpointed and requeued; the job runs again, the script should exit"},
	{ExitStopped, "stopped", "checkpointed and stopped without requeue (policy, --no-requeue, cancelled)"},
	{ExitRequeueLimit, "requeue-limit", "gave up: requeue limit reached or repeated failures without progress"},
	{ExitCheckpoint, "checkpoint", "a checkpoint could not be verified or committed"},
	{ExitNotFound, "not-found", "the training command was not found on a node"},
	{ExitInterrupted, "interrupted", "interrupted (Ctrl-C, scancel) before or while starting"},
}

func exitCodeTable() string {
	var b strings.Builder
	b.WriteString("Exit codes:\n")
	for _, e := range exitCodeDocs {
		fmt.Fprintf(&b, "  %3d  %-14s %s\n", e.code, e.name, e.doc)
	}
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
