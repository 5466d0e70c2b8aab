package run

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"time"

	"github.com/trainrun/trainrun/wrapper/internal/runname"

	"github.com/trainrun/trainrun/checkpoint"
	"github.com/trainrun/trainrun/internal/atomicfile"
	"github.com/trainrun/trainrun/internal/safefs"
	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
	"github.com/trainrun/trainrun/wrapper/internal/jobdir"
)

// A run's identity inside a job: `trainrun run --name NAME`, or a name
// derived from the command line. The "already finished" rule is per run,
// so two different runs in one batch script both run, and a rerun after a
// requeue skips only those that finished.

// runDirOf is the run's own directory under the job directory base. A run
// given --name always lives in base/runs/NAME. An unnamed run keeps
// today's layout, base itself, when base is free or already its own (the
// name in base/run.name); otherwise it is a second, different command in
// the same job and gets base/runs/DERIVED. primary says the run owns base.
func runDirOf(base, name string, named, dry bool) (dir string, primary bool, err error) {
	if named {
		return filepath.Join(base, jobdir.Runs, name), false, nil
	}
	p := filepath.Join(base, jobdir.RunName)
	b, err := safefs.ReadFile(p, 256)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if !dry {
			if err := atomicfile.WriteFile(p, []byte(name+"\n"), 0o644); err != nil {
				return "", false, fmt.Errorf("record the run's name in %s: %w", p, err)
			}
		}
		return base, true, nil
	case err != nil:
		return "", false, fmt.Errorf("read the run's name from %s: %w", p, err)
	case strings.TrimSpace(string(b)) == name:
		return base, true, nil
	}
	return filepath.Join(base, jobdir.Runs, name), false, nil
}

// alreadyFinishedMsg names the run that finished and says how to start
// another, and how to train on from its final checkpoint (store: its
// checkpoint directory).
func alreadyFinishedMsg(name, job string, restart int, when, tag, store string) string {
	msg := fmt.Sprintf("run %q already finished (job %s, restart %d, %s, final checkpoint %s); not starting it again. "+
		"To start another run in this job, give it another name: trainrun run --name %s-2 ...", name, job, restart, when, tag, name)
	if tag != "none" {
		msg += fmt.Sprintf("; to train on from its final checkpoint, start a new run from it in a new, empty store: trainrun run --init-from %s --ckpt-dir NEW_DIR ...", filepath.Join(store, tag))
	}
	return msg
}

// resolveRun sets the run's name and directory under the job directory base.
func (r *runner) resolveRun(base string) (primary bool, err error) {
	named := r.cfg.name != ""
	r.dirs.runName = r.cfg.name
	if named {
		if err := runname.Check(r.dirs.runName); err != nil {
			return false, err
		}
	} else {
		r.dirs.runName = runname.Derive(r.cfg.argv)
	}
	if r.dirs.jobDir, primary, err = runDirOf(base, r.dirs.runName, named, r.cfg.dryRun); err != nil {
		return false, withCode(exitcode.Usage, err)
	}
	if !primary {
		if err := mkdirOwnUnlessDry(r.cfg.dryRun, r.dirs.jobDir); err != nil {
			return false, withCode(exitcode.Usage, fmt.Errorf("run directory of %q: %w", r.dirs.runName, err))
		}
	}
	return primary, nil
}

// finishedBefore says whether this run already finished (its store's
// marker), and refuses a store that another, finished run left behind.
func (r *runner) finishedBefore() (bool, error) {
	st, err := checkpoint.Open(r.dirs.ckptDir)
	if err != nil {
		return false, nil // the run's setup reports a broken store later
	}
	f, ok, _ := st.Finished()
	if !ok {
		return false, nil
	}
	if f.Run != "" && f.Run != r.dirs.runName {
		return false, usageErrorf("--ckpt-dir %s holds run %q, which finished; this run is %q: give it its own --ckpt-dir (or leave --ckpt-dir unset: each run then gets JOBDIR/runs/NAME/checkpoints); to train on from its final checkpoint: --init-from %s --ckpt-dir NEW_DIR", r.dirs.ckptDir, f.Run, r.dirs.runName, filepath.Join(r.dirs.ckptDir, cmp.Or(f.Tag, "TAG")))
	}
	r.logf("%s", alreadyFinishedMsg(r.dirs.runName, f.JobID, f.Restart, f.Time.Format(time.RFC3339), cmp.Or(f.Tag, "none"), r.dirs.ckptDir))
	return true, nil
}
