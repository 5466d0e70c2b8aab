package checkpoint

import (
	"context"
	"fmt"
	"os"
)

// Recovery at the start of an incarnation.

// RecoverReport says what Recover did.
type RecoverReport struct {
	Committed []string // complete checkpoints whose commit had not happened or was cut short
	Discarded []string // incomplete ones moved to the trash and deleted
}

// Recover brings the store to a clean state at the start of an incarnation,
// before any trainer runs (it must not run while trainers save): it commits
// every checkpoint that is complete but not committed (in place or staged),
// discards in-place checkpoints that some rank never marked done (their
// stale markers would make a re-save under the same tag look complete too
// early), discards unfinished drains when discardStaging is set (their
// node-local source is gone after a requeue), empties the trash and repairs
// the pointer. Directories without trainrun markers are left alone.
// Cancelling ctx stops a commit's hashing.
func (s *Store) Recover(ctx context.Context, worldSize int, discardStaging bool) (RecoverReport, error) {
	var rep RecoverReport
	world := s.worldSize(worldSize)
	if world <= 0 {
		return rep, fmt.Errorf("recover %s: world size unknown: pass the number of ranks, so that incomplete checkpoints can be told from complete ones", s.dir)
	}
	if err := s.checkMeta(); err != nil {
		return rep, fmt.Errorf("recover: %w", err)
	}
	if err := s.emptyTrash(); err != nil {
		return rep, err
	}
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return rep, fmt.Errorf("recover %s: %w", s.dir, err)
	}
	for _, e := range ents {
		if !e.IsDir() || CheckTag(e.Name()) != nil || exists(manifestPath(s.tagDir(e.Name()))) {
			continue
		}
		tag := e.Name()
		ranks, err := doneRanks(s.tagDir(tag))
		if failed, _ := failedRanks(s.tagDir(tag)); len(failed) > 0 {
			// A save some rank could not write (diskfault.go): never complete.
			if err := s.trash(s.tagDir(tag), tag); err != nil {
				return rep, fmt.Errorf("recover: discard failed %s: %w", tag, err)
			}
			rep.Discarded = append(rep.Discarded, tag)
			continue
		}
		if err != nil || len(ranks) == 0 {
			continue
		}
		if exists(s.stagingDir(tag)) {
			continue // Commit refuses both; the caller decides
		}
		if allDone(ranks, world) {
			if _, err := s.Commit(ctx, tag, world); err != nil {
				return rep, fmt.Errorf("recover: %w", err)
			}
			rep.Committed = append(rep.Committed, tag)
			continue
		}
		if err := s.trash(s.tagDir(tag), tag); err != nil {
			return rep, fmt.Errorf("recover: discard incomplete %s: %w", tag, err)
		}
		rep.Discarded = append(rep.Discarded, tag)
	}
	if ents, err := os.ReadDir(s.stagingRoot()); err == nil {
		for _, e := range ents {
			tag := e.Name()
			if !e.IsDir() || CheckTag(tag) != nil {
				continue
			}
			ranks, _ := doneRanks(s.stagingDir(tag))
			switch {
			case allDone(ranks, world) && !exists(s.tagDir(tag)):
				if _, err := s.Commit(ctx, tag, world); err != nil {
					return rep, fmt.Errorf("recover: %w", err)
				}
				rep.Committed = append(rep.Committed, tag)
			case discardStaging:
				if err := s.trash(s.stagingDir(tag), tag); err != nil {
					return rep, fmt.Errorf("recover: discard unfinished drain %s: %w", tag, err)
				}
				rep.Discarded = append(rep.Discarded, tag)
			}
		}
	}
	if err := s.emptyTrash(); err != nil {
		return rep, err
	}
	return rep, s.updatePointer()
}

// CommitComplete commits every checkpoint that is complete for world ranks
// (in place or staged) or complete by its native marker, oldest first, and
// returns the tag the latest pointer names afterwards ("" if none) and whether
// that changed. The controller calls it after the trainers saved (or exited).
func (s *Store) CommitComplete(ctx context.Context, world int) (latest string, changed bool, err error) {
	before, _ := s.pointer()
	if world > 0 {
		o := s.opts
		o.WorldSize = world
		s = &Store{dir: s.dir, opts: o, hook: s.hook, fault: s.fault}
	}
	list, err := s.List()
	if err != nil {
		return before, false, err
	}
	for _, in := range list {
		switch in.State {
		case Complete, Staged, Native:
			if in.Kind == KindLightning {
				continue
			}
			if _, err := s.Commit(ctx, in.Tag, world); err != nil {
				return before, false, err
			}
		}
	}
	if err := s.updatePointer(); err != nil {
		return before, false, err
	}
	after, err := s.pointer()
	return after, after != before, err
}
