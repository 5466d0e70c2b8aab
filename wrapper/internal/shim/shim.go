// Package shim is `trainrun exec-task`, the process srun starts once per
// task of a `trainrun run` step: it probes its node when asked (probe.go),
// waits for the controller's go in a step started before its plan, sets the
// rank's environment from the launch files, starts the training command
// (bound to its GPU's NUMA CPUs), relays the controller's checkpoint and
// stack-dump requests to that one process, reports the signals that reach
// the step, the trainer's heartbeats (beat.go) and its exit, and drains
// node-local checkpoints into the store (drain.go). Everything it says to
// the controller goes over internal/launch.
//
// It imports neither the planner nor the metrics: it runs once per GPU of
// every job, so its start-up is kept to what a task needs. The lean
// trainrun-shim binary (./trainrun-shim) is this package alone, built
// without cgo (no dynamic loader, no libc threads); where a node has NVIDIA
// GPUs, its probe has trainrun, which loads NVML, probe instead (probe.go).
package shim

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
)

// Env is what the shim reads and writes of its process: the environment
// (Slurm's task variables, the trainer's), standard output and error.
type Env struct {
	Getenv         func(string) string
	Stdout, Stderr io.Writer
}

// Synopsis is the shim's command line after `trainrun exec-task`.
const Synopsis = "exec-task --launch DIR [--wait [--probe-node DIR]] -- CMD [ARGS...] | exec-task --probe DIR"

func newFlags(w io.Writer) *pflag.FlagSet {
	fs := pflag.NewFlagSet("exec-task", pflag.ContinueOnError)
	fs.SetOutput(w)
	fs.SortFlags = false
	fs.Usage = func() {
		fmt.Fprintf(w, "Usage: trainrun %s\n\nFlags:\n", Synopsis)
		fs.PrintDefaults()
	}
	return fs
}

func parseFlags(fs *pflag.FlagSet, args []string) error {
	err := fs.Parse(args)
	if errors.Is(err, pflag.ErrHelp) {
		return exitcode.ErrHelpShown
	}
	if err != nil {
		return usageErrorf("%v (run 'trainrun exec-task --help')", err)
	}
	return nil
}

func usageErrorf(format string, a ...any) error {
	return exitcode.With(exitcode.Usage, fmt.Errorf(format, a...))
}

// Main runs the shim as a command: the error, if any, is printed as
// trainrun prints a subcommand's, and becomes the exit code.
func Main(ctx context.Context, env Env, args []string) int {
	err := Run(ctx, env, args)
	if err != nil && !errors.Is(err, exitcode.ErrHelpShown) && !errors.Is(err, exitcode.ErrSilent) {
		fmt.Fprintf(env.Stderr, "trainrun: exec-task: %v\n", err)
	}
	return exitcode.Of(err)
}

// Binary is the lean shim's file name, next to the trainrun binary.
const Binary = "trainrun-shim"
