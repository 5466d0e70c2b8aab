package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Resolving the checkpoint to resume from, verification and quarantine.

// Verify checks the committed checkpoint tag to the given depth: the
// expected ranks' markers, every file's presence and size, and at Checksums
// its xxh64 against the manifest. The error is a *VerifyError naming the
// first failing file.
func (s *Store) Verify(ctx context.Context, tag string, level Level) (Manifest, error) {
	if err := CheckTag(tag); err != nil {
		return Manifest{}, err
	}
	dir := s.tagDir(tag)
	if !exists(dir) {
		if exists(s.stagingDir(tag)) {
			return Manifest{}, &VerifyError{Tag: tag, Path: s.stagingDir(tag), What: "still in staging (being drained): not committed"}
		}
		return Manifest{}, &VerifyError{Tag: tag, Path: dir, What: "no such checkpoint; trainrun ckpt list shows what there is"}
	}
	return verifyDir(ctx, dir, level, s.opts.Workers)
}

// Resolved is the checkpoint to resume from.
type Resolved struct {
	Tag      string
	Dir      string // absolute: the value of TRAINRUN_RESUME_DIR
	Manifest Manifest
	// Skipped holds, newest first, committed checkpoints newer than Tag that
	// failed verification: say so, and Quarantine(Skipped[i].Tag) before
	// the trainer saves under the same tag again.
	Skipped []*VerifyError
	// Pointer is the tag .trainrun/latest names ("" if none). It differs from
	// Tag when a newer one failed verification or a commit was cut short
	// between its manifest and the pointer (the manifest is the commit).
	Pointer string
}

// Latest is the newest committed checkpoint that verifies at level
// (Checksums rereads every byte; Sizes avoids rereading terabytes at every
// restart, at the cost of not detecting bit rot); it falls back past corrupt
// ones and lists them in Skipped. With none, the error wraps ErrNoCheckpoint.
func (s *Store) Latest(ctx context.Context, level Level) (Resolved, error) {
	p, _ := s.pointer()
	return s.latestLevel(ctx, level, p)
}

// latestLevel is Latest with the pointer already read (it is read once:
// a FIFO or a file swapped between two reads cannot give two answers).
func (s *Store) latestLevel(ctx context.Context, level Level, pointer string) (Resolved, error) {
	r := Resolved{Pointer: pointer}
	ms, bad, err := s.committed()
	if err != nil {
		return r, err
	}
	for _, b := range bad {
		_, err := readManifest(s.tagDir(b)) // unreadable ones fail fast: at the first bad byte or the cap
		r.Skipped = append(r.Skipped, &VerifyError{Tag: b, Path: manifestPath(s.tagDir(b)), What: err.Error()})
	}
	for i := len(ms) - 1; i >= 0; i-- {
		if err := s.chargeVerify(s.tagDir(ms[i].Tag)); err != nil {
			return r, err
		}
		m, err := verifyDir(ctx, s.tagDir(ms[i].Tag), level, s.opts.Workers)
		if err != nil {
			if ctx.Err() != nil {
				return r, ctx.Err()
			}
			var ve *VerifyError
			if !errors.As(err, &ve) {
				ve = &VerifyError{Tag: ms[i].Tag, Path: s.tagDir(ms[i].Tag), What: err.Error()}
			}
			r.Skipped = append(r.Skipped, ve)
			continue
		}
		r.Tag, r.Dir, r.Manifest = ms[i].Tag, s.tagDir(ms[i].Tag), m
		return r, nil
	}
	if len(r.Skipped) > 0 {
		return r, fmt.Errorf("%w in %s verifies: all %d fail (newest: %v)", ErrNoCheckpoint, s.dir, len(ms)+len(bad), r.Skipped[0])
	}
	return r, fmt.Errorf("%w in %s", ErrNoCheckpoint, s.dir)
}

// LatestCommitted is Latest for a caller that runs on every node at every
// job step (the SPANK plugin's TRAINRUN_RESUME_DIR): when the pointer names a
// checkpoint whose manifest is there and no other checkpoint of the same or
// a later step has a manifest, that checkpoint is the answer, found with one
// small read, one directory listing and a stat per newer tag. It reads no
// manifest and checks no file: on a parallel file system, reading every
// manifest and stat'ing every file of the newest checkpoint from every node
// at every step is a metadata storm. Otherwise (no pointer, a dangling one,
// or a commit cut short between its manifest and the pointer) it is
// Latest(ctx, Sizes). A manifest present means committed: the commit
// writes it only after every file is durable, so a half-written checkpoint
// is never returned; damage after the commit is for the full verification
// of trainrun run's controller and `trainrun ckpt verify` to find. The
// fast answer's Manifest is empty.
func (s *Store) LatestCommitted(ctx context.Context) (Resolved, error) {
	tag, err := s.pointer()
	if err == nil && tag != "" && s.hasManifest(tag) && !s.committedSince(tag) {
		return Resolved{Tag: tag, Dir: s.tagDir(tag), Pointer: tag}, nil
	}
	b := &Store{dir: s.dir, opts: s.opts, hook: s.hook, budget: newReadBudget()}
	return b.latestLevel(ctx, Sizes, tag)
}

// committedSince says whether a checkpoint other than tag, of the same or a
// later step, has a manifest (or whether the store cannot be listed).
func (s *Store) committedSince(tag string) bool {
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return true
	}
	step := StepOf(tag)
	for _, e := range ents {
		name := e.Name()
		if !e.IsDir() || name == tag || CheckTag(name) != nil || StepOf(name) < step {
			continue
		}
		if _, err := os.Lstat(manifestPath(s.tagDir(name))); err == nil {
			return true
		}
	}
	return false
}

// Quarantine moves a committed checkpoint that failed verification out of the
// way, to .trainrun/corrupt/, so that it is never resumed from and the trainer
// can save under its tag again; then it repairs the pointer.
func (s *Store) Quarantine(tag string) (string, error) {
	if err := CheckTag(tag); err != nil {
		return "", err
	}
	name := fmt.Sprintf("%s.%d", tag, s.opts.Now().UnixNano())
	dst := filepath.Join(s.corruptRoot(), name)
	if err := s.renameInto(s.tagDir(tag), "corrupt", name); err != nil {
		return "", fmt.Errorf("quarantine %s: %w", tag, err)
	}
	return dst, s.updatePointer()
}
