package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"github.com/trainrun/trainrun/internal/safefs"
)

// Retention: pruning through the trash.

// Retention is the pruning policy.
type Retention struct {
	// KeepLast keeps the newest N committed checkpoints (at least 1).
	KeepLast int
	// KeepEvery, when > 0, also keeps one checkpoint per KeepEvery steps:
	// the lowest-step committed checkpoint whose step is in
	// [m*KeepEvery, (m+1)*KeepEvery), for loss-curve and scaling-law
	// analysis. This choice is stable: a kept one stays kept as newer
	// checkpoints arrive and others are pruned. Tags without a step number
	// are kept only by KeepLast.
	KeepEvery int64
}

// PrunePlan lists the committed checkpoints Prune would delete, oldest first.
// It never includes the pointer's tag, the newest committed checkpoint whose
// files have their recorded sizes (the resume point), or anything not
// committed (in progress, staged, native): only committed checkpoints are
// candidates.
func (s *Store) PrunePlan(r Retention) ([]string, error) {
	if r.KeepLast < 1 {
		return nil, fmt.Errorf("retention keeps %d checkpoints; keep at least 1 (2 or more survives a corrupt newest one)", r.KeepLast)
	}
	if r.KeepEvery < 0 {
		return nil, fmt.Errorf("keep-every %d is negative; use 0 (off) or a step interval", r.KeepEvery)
	}
	if err := s.checkMeta(); err != nil {
		return nil, err
	}
	ms, _, err := s.committed()
	if err != nil {
		return nil, err
	}
	keep := keepSet(ms, r)
	if p, _ := s.pointer(); p != "" {
		keep[p] = true
	}
	for i := len(ms) - 1; i >= 0; i-- {
		if _, err := verifyDir(context.Background(), s.tagDir(ms[i].Tag), Sizes, s.opts.Workers); err == nil {
			keep[ms[i].Tag] = true
			break
		}
	}
	var del []string
	for _, m := range ms {
		if !keep[m.Tag] {
			del = append(del, m.Tag)
		}
	}
	return del, nil
}

// keepSet is the pure retention rule over committed manifests, oldest first.
func keepSet(ms []Manifest, r Retention) map[string]bool {
	keep := map[string]bool{}
	for i := len(ms) - 1; i >= 0 && i >= len(ms)-r.KeepLast; i-- {
		keep[ms[i].Tag] = true
	}
	if r.KeepEvery > 0 {
		seen := map[int64]bool{}
		for _, m := range ms { // oldest first: the first in a bucket is its lowest step
			if m.Step < 0 {
				continue
			}
			b := m.Step / r.KeepEvery
			if !seen[b] {
				seen[b] = true
				keep[m.Tag] = true
			}
		}
	}
	return keep
}

// Prune deletes what PrunePlan lists: each checkpoint is first renamed into
// .trainrun/trash/ (atomic: it is either whole in place or gone from the
// store), the directory fsynced, and then removed. Leftovers of a killed prune
// are only ever in the trash, which the next Prune or Recover empties.
func (s *Store) Prune(r Retention) ([]string, error) {
	del, err := s.PrunePlan(r)
	if err != nil {
		return nil, err
	}
	for i, tag := range del {
		if err := s.trash(s.tagDir(tag), tag); err != nil {
			return del[:i], fmt.Errorf("prune %s: %w", tag, err)
		}
		s.step("prune:trashed")
	}
	return del, s.emptyTrash()
}

func (s *Store) trash(path, tag string) error {
	return s.renameInto(path, "trash", fmt.Sprintf("%s.%d", tag, s.opts.Now().UnixNano()))
}

// emptyTrash removes everything in .trainrun/trash relative to its verified
// descriptor: a link planted as the trash (or as .trainrun) is refused, and
// a link inside it is removed itself, never followed.
func (s *Store) emptyTrash() error {
	d, err := s.openMeta("trash", false)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("empty the trash: %w", err)
	}
	defer d.Close()
	ents, err := d.ReadDir(-1)
	if err != nil {
		return fmt.Errorf("empty %s: %w", d.Name(), err)
	}
	for _, e := range ents {
		if err := safefs.RemoveAllAt(d, e.Name()); err != nil {
			return fmt.Errorf("empty %s: %w", d.Name(), err)
		}
		s.step("prune:removed")
	}
	return nil
}
