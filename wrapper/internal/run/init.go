package run

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/trainrun/trainrun/checkpoint"
	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
)

// InitialCheckpoint is --init-from: a committed checkpoint (STORE/TAG) that
// a run starts from while its own store has none (a branch of `trainrun
// branches`, a fine-tune of another run's result). It must verify: a run
// that silently started from scratch instead would waste its allocation.
func InitialCheckpoint(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	st, err := checkpoint.Open(filepath.Dir(abs))
	if err != nil {
		return "", usageErrorf("--init-from %s: %v", dir, err)
	}
	m, err := st.Verify(context.Background(), filepath.Base(abs), checkpoint.Checksums)
	if err != nil {
		return "", withCode(exitcode.Checkpoint, fmt.Errorf("--init-from %s: %w (it must be a committed checkpoint: see 'trainrun ckpt verify %s --ckpt-dir %s')",
			dir, err, filepath.Base(abs), filepath.Dir(abs)))
	}
	if err := m.NotRaw(filepath.Dir(abs)); err != nil { // another run's store: refused, not restored in it
		return "", withCode(exitcode.Checkpoint, fmt.Errorf("--init-from %s: %w", dir, err))
	}
	return abs, nil
}

// resumeOrInit keeps the store's latest checkpoint as the resume point, or,
// when the store has none and --init-from was given, starts from that.
func (r *runner) resumeOrInit() error {
	if r.ckpt.resume != "" || r.cfg.initFrom == "" {
		return nil
	}
	d, err := InitialCheckpoint(r.cfg.initFrom)
	if err != nil {
		return err
	}
	r.ckpt.resume = d
	r.logf("starting from %s (--init-from; this run's store %s has no checkpoint yet)", d, r.dirs.ckptDir)
	return nil
}
