package run

import (
	"context"
	"errors"
	"fmt"

	"github.com/trainrun/trainrun/checkpoint"
)

// ckptStore is what the controller needs of the checkpoint store: the latest
// committed checkpoint to resume from, and committing what the trainers
// completed (all WORLD_SIZE done markers present).
type ckptStore interface {
	// Latest returns the directory of the latest committed checkpoint that
	// verifies, "" if none, and notes to print (checkpoints skipped).
	Latest() (dir string, notes []string, err error)
	// CommitComplete commits every checkpoint whose handshake is complete and
	// returns the tag now latest ("" if none) and whether it changed.
	CommitComplete(world int) (latest string, changed bool, err error)
	// TakeRequest returns a pending `trainrun ckpt request`, nil if none.
	TakeRequest() (*checkpoint.Request, error)
}

// storeAdapter is the controller's view of checkpoint.Store.
type storeAdapter struct{ s *checkpoint.Store }

var _ ckptStore = storeAdapter{}

func openStore(dir string) (storeAdapter, error) {
	s, err := checkpoint.Open(dir)
	if err != nil {
		return storeAdapter{}, err
	}
	return storeAdapter{s}, nil
}

func (a storeAdapter) Latest() (string, []string, error) {
	r, err := a.s.Latest(context.Background(), checkpoint.Checksums)
	var notes []string
	if errors.Is(err, checkpoint.ErrNoCheckpoint) {
		if len(r.Skipped) > 0 {
			// Starting over would silently throw the run's progress away.
			return "", nil, fmt.Errorf("%w; check the store with 'trainrun ckpt verify', or move it aside to start from scratch", err)
		}
		return "", nil, nil
	}
	if err != nil {
		return "", nil, err
	}
	for _, e := range r.Skipped {
		notes = append(notes, fmt.Sprintf("skipped a newer checkpoint that does not verify: %v", e))
	}
	if err := a.s.EnsureRaw(context.Background(), r.Tag); err != nil { // the trainer reads raw files
		return "", notes, fmt.Errorf("decompress the resume checkpoint %s: %w", r.Tag, err)
	}
	return r.Dir, notes, nil
}

// CommitComplete commits every complete checkpoint, oldest first (a slow
// node's older checkpoint is not left in staging behind a newer one), and
// reads the latest pointer rather than re-verifying checksums on every poll.
func (a storeAdapter) CommitComplete(world int) (string, bool, error) {
	return a.s.CommitComplete(context.Background(), world)
}

func (a storeAdapter) TakeRequest() (*checkpoint.Request, error) { return a.s.TakeRequest() }
