package run

import (
	"context"
	"io"
	"time"

	"github.com/trainrun/trainrun/internal/slurm"
)

// Deps are the run's outside world: where it writes, the environment it
// reads (Slurm's SLURM_*, the TRAINRUN_* twins), the Slurm client it asks
// and runs steps with, and when trainrun started.
type Deps struct {
	Stdout, Stderr io.Writer
	Getenv         func(string) string
	// Slurm asks Slurm. The zero value runs nothing: every query fails,
	// as on a machine without Slurm.
	Slurm   slurm.Client
	Version string    // trainrun's version, recorded in the run's observation
	Start   time.Time // when trainrun started: the run's start-up time counts from here (zero: when Run is called)
}

// Setup is the setup phase: it checks srun, reads the allocation from
// Slurm's environment and resolves the options o (parsed from the command
// line, given the flags set on it) and the training command argv into the
// run's configuration: each option from its flag, else its TRAINRUN_* twin,
// else the partition's policy, else the flag's default. Its errors carry
// the exit code (exitcode.Slurm outside an allocation, exitcode.Usage for
// what the policy refuses).
func Setup(o Options, given map[string]bool, argv []string, d Deps) (Config, error) {
	return setup(o, given, argv, &d)
}

// Run runs the training command of cfg (from Setup) in the allocation:
// it plans, places, launches and watches the step, and when it ends
// finishes, restarts it inside the allocation, or requeues the job. The
// error carries trainrun's exit code (exitcode.Of); nil is success.
func Run(ctx context.Context, cfg Config, d Deps) error {
	if d.Start.IsZero() {
		d.Start = time.Now()
	}
	r := &runner{cfg: cfg, env: &d, t0: d.Start, alloc: cfg.alloc}
	return r.run(ctx)
}
