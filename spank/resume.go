package spank

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/trainrun/trainrun/checkpoint"
)

// ResumeDir is TRAINRUN_RESUME_DIR for a step whose checkpoint store is dir
// (expanded): the latest committed checkpoint's directory, or "" when the
// store has none or does not exist yet (a first start). It opens the store
// read-only and asks it with LatestCommitted: the pointer and a directory
// listing in the usual case, no manifest read and no checkpoint file
// touched, since this runs on every node at every step (a full scan at the
// Sizes level only when the pointer is missing or behind). ok is false when the
// store cannot be read: the variable must then stay unset, since unknown
// must never look like a first start; the notes say why, and name any newer
// checkpoint skipped because it does not verify.
func ResumeDir(dir string) (value string, ok bool, notes []string) {
	unknown := func(err error) (string, bool, []string) {
		return "", false, []string{fmt.Sprintf("TRAINRUN_RESUME_DIR not set: the checkpoint store %s cannot be read (%v); 'trainrun ckpt latest --ckpt-dir %s' shows what a restart would resume from", dir, err, dir)}
	}
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return "", true, nil // not created yet: the first start
	} else if err != nil {
		return unknown(err)
	}
	s, err := checkpoint.Open(dir)
	if err != nil {
		return unknown(err)
	}
	r, err := s.LatestCommitted(context.Background())
	for _, sk := range r.Skipped {
		notes = append(notes, fmt.Sprintf("skipped a newer checkpoint that does not verify: %v", sk))
	}
	switch {
	case errors.Is(err, checkpoint.ErrNoCheckpoint) && len(r.Skipped) == 0:
		return "", true, notes
	case err != nil:
		// Committed checkpoints exist but none verifies (or the store
		// cannot be listed): starting over would throw the run away.
		_, _, n := unknown(err)
		return "", false, append(n, notes...)
	}
	return r.Dir, true, notes
}
