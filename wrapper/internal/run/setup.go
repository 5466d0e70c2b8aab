// The setup phase of trainrun run: srun, the allocation, the site's policy,
// the job and checkpoint directories.

package run

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/trainrun/trainrun/internal/safefs"
	"github.com/trainrun/trainrun/internal/slurm"
	"github.com/trainrun/trainrun/topo"
	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
	"github.com/trainrun/trainrun/wrapper/internal/jobdir"
)

// setup checks srun, reads the allocation and resolves the options (o, with
// the flags given on the command line) and the training command argv for it.
// Setup (run.go) is its name outside.
func setup(o Options, given map[string]bool, argv []string, d *Deps) (Config, error) {
	if !slurm.HaveSrun() {
		if !o.dryRun {
			return Config{}, withCode(exitcode.Slurm, errors.New("srun not found in PATH: run trainrun on a node with the Slurm client commands (srun, scontrol) installed"))
		}
		fmt.Fprintf(d.Stderr, "trainrun: warning: srun not found in PATH; a real launch would fail (exit %d)\n", exitcode.Slurm)
	}
	a, err := parseAllocation(d.Getenv, topo.ExpandHostlist)
	if err != nil {
		return Config{}, err
	}
	if a.InStep {
		return Config{}, withCode(exitcode.Slurm, fmt.Errorf("trainrun run is running inside a job step (SLURM_STEP_ID=%s): call it once from the batch script, not under srun; it starts the step itself", slurm.JobFromEnv(d.Getenv).StepID))
	}
	self, err := os.Executable()
	if err != nil {
		return Config{}, err
	}
	cfg, err := complete(o, given, d.Getenv, a, d.Stderr)
	cfg.alloc, cfg.argv, cfg.self, cfg.shim = a, argv, self, leanShim(self, d.Getenv("TRAINRUN_SHIM"))
	if err == nil {
		err = checkPyxis(context.Background(), &cfg, d.Slurm)
	}
	return cfg, err
}

// makeDirs makes the job and checkpoint directories; finished says that the
// run already finished (its store says so) and must not start again.
func (r *runner) makeDirs() (finished bool, err error) {
	a := r.alloc
	base := r.cfg.jobDir
	if base == "" {
		sub := a.SubmitDir
		if sub == "" {
			sub, _ = os.Getwd()
		}
		base = filepath.Join(sub, "trainrun-"+a.JobID)
	}
	if base, err = filepath.Abs(base); err != nil {
		return false, err
	}
	if err := mkdirOwnUnlessDry(r.cfg.dryRun, base); err != nil {
		return false, withCode(exitcode.Usage, fmt.Errorf("job directory %s: %w (set --job-dir or TRAINRUN_JOB_DIR to a writable directory all nodes share)", base, err))
	}
	primary, err := r.resolveRun(base)
	if err != nil {
		return false, err
	}
	r.dirs.ckptDir = r.cfg.ckptDir
	if r.dirs.ckptDir == "" {
		r.dirs.ckptDir = r.dirs.in(jobdir.Checkpoints)
		if err := mkdirOwnUnlessDry(r.cfg.dryRun, r.dirs.ckptDir); err != nil {
			return false, withCode(exitcode.Usage, fmt.Errorf("default --ckpt-dir: %w", err))
		}
	} else if !primary && !r.cfg.given["ckpt-dir"] {
		// TRAINRUN_CKPT_DIR or the policy's CkptDir is the job's, shared by
		// every run in it: each run but the first gets its own store below.
		r.dirs.ckptDir = filepath.Join(r.dirs.ckptDir, jobdir.Runs, r.dirs.runName)
	}
	if r.dirs.ckptDir, err = filepath.Abs(r.dirs.ckptDir); err != nil {
		return false, err
	}
	if err := mkdirUnlessDry(r.cfg.dryRun, r.dirs.ckptDir); err != nil {
		return false, withCode(exitcode.Usage, fmt.Errorf("--ckpt-dir %s: %w", r.dirs.ckptDir, err))
	}
	if !r.cfg.dryRun {
		return r.finishedBefore()
	}
	return false, nil
}

// mkdirOwnUnlessDry creates a directory trainrun makes for the user (the
// job directory, the default store under it) fresh with mode 0700, or
// accepts an existing one only when it is the user's own and not writable by
// others (issue 12, finding 3: a job directory another uid pre-created
// would let it plant launch files and checkpoints).
func mkdirOwnUnlessDry(dry bool, dir string) error {
	if dry {
		return nil
	}
	return safefs.MkdirOwn(dir, "directory")
}

func mkdirUnlessDry(dry bool, dir string) error {
	if dry {
		return nil
	}
	return os.MkdirAll(dir, 0o755)
}

// ckptSignalName is the checkpoint signal without "SIG", upper case.
func (r *runner) ckptSignalName() string {
	return strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(r.cfg.ckptSignal)), "SIG")
}
