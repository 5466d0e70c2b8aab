package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ckptStore is what the controller needs of the checkpoint store: the latest
// committed checkpoint to resume from, and committing the checkpoints the
// trainer completed (all WORLD_SIZE done markers present).
type ckptStore interface {
	// Latest returns the directory of the latest committed checkpoint, "" if none.
	Latest() (string, error)
	// CommitComplete commits every checkpoint under the store whose
	// handshake is complete for world ranks and that is newer than the
	// latest; it returns the tag now latest ("" if none) and whether it changed.
	CommitComplete(world int) (latest string, changed bool, err error)
}

// markerStore is the handshake of PRODUCT.md without the verifying store of
// the checkpoint package: a checkpoint TAG under dir is complete when
// TAG/.trainrun/done.<r> exists for every rank r; `latest` names the newest
// complete one, written atomically (temporary file, fsync, rename, directory
// fsync). It is what this build uses until checkpoint.Store is wired in.
type markerStore struct{ dir string }

const latestFile = "latest"

func (m markerStore) Latest() (string, error) {
	b, err := os.ReadFile(filepath.Join(m.dir, latestFile))
	if os.IsNotExist(err) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	tag := strings.TrimSpace(string(b))
	if tag == "" {
		return "", nil
	}
	return filepath.Join(m.dir, tag), nil
}

// complete reports when the last done marker of tag was written, if all are there.
func (m markerStore) complete(tag string, world int) (time.Time, bool) {
	var last time.Time
	for r := range world {
		st, err := os.Stat(filepath.Join(m.dir, tag, ".trainrun", "done."+strconv.Itoa(r)))
		if err != nil {
			return time.Time{}, false
		}
		if st.ModTime().After(last) {
			last = st.ModTime()
		}
	}
	return last, true
}

func (m markerStore) CommitComplete(world int) (string, bool, error) {
	cur, err := m.Latest()
	if err != nil {
		return "", false, err
	}
	curTag := filepath.Base(cur)
	var curAt time.Time
	if cur != "" {
		curAt, _ = m.complete(curTag, world)
	}
	ents, err := os.ReadDir(m.dir)
	if os.IsNotExist(err) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	best, bestAt := "", curAt
	for _, e := range ents {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		if at, ok := m.complete(e.Name(), world); ok && at.After(bestAt) {
			best, bestAt = e.Name(), at
		}
	}
	if best == "" {
		if cur == "" {
			return "", false, nil
		}
		return curTag, false, nil
	}
	if err := writeFileAtomic(filepath.Join(m.dir, latestFile), []byte(best+"\n"), 0o644); err != nil {
		return "", false, fmt.Errorf("checkpoint store %s: writing latest: %w", m.dir, err)
	}
	return best, true, nil
}
