package main

import (
	"fmt"
	"strings"

	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
)

var exitCodeDocs = []struct {
	code int
	name string
	doc  string
}{
	{exitcode.OK, "ok", "success (a run: the training finished)"},
	{exitcode.Failure, "failure", "internal error (please report it)"},
	{exitcode.Usage, "usage", "bad flag, value or input file; the message names it and what to do"},
	{exitcode.NoFit, "no-fit", "no layout fits the GPUs' memory; the message says what would fit"},
	{exitcode.Slurm, "slurm", "the Slurm allocation is unusable (bad SLURM_* values, no srun, no GPUs, inconsistent request)"},
	{exitcode.StepFailed, "step-failed", "the training step failed (a task exited non-zero or was killed)"},
	{exitcode.Requeued, "requeued", "checkpointed and requeued; the job runs again, the script should exit"},
	{exitcode.Stopped, "stopped", "checkpointed and stopped without requeue (policy, --no-requeue, cancelled)"},
	{exitcode.RequeueLimit, "requeue-limit", "gave up: requeue limit reached or repeated failures without progress"},
	{exitcode.Checkpoint, "checkpoint", "a checkpoint could not be verified or committed"},
	{exitcode.NotFound, "not-found", "the training command was not found on a node"},
	{exitcode.Interrupted, "interrupted", "interrupted (Ctrl-C, scancel) before or while starting"},
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
	return withCode(exitcode.Usage, fmt.Errorf(format, a...))
}

func exitCodeOf(err error) int {
	if err == nil {
		return exitcode.Failure // callers ask only for errors
	}
	return exitcode.Of(err)
}
