package checkpoint

import (
	"os"
	"path/filepath"
	"sort"
	"time"
)

// Callers outside the package ask these instead of spelling the layout's
// names (.trainrun/done.<RANK>) themselves.

// CompletedAt is when the checkpoint in ckptDir became complete as far as its
// markers tell: the modification time of its newest done marker (the last
// rank to finish), or the zero time when no rank has marked it.
func CompletedAt(ckptDir string) time.Time {
	ranks, _ := doneRanks(ckptDir)
	var t time.Time
	for _, r := range ranks {
		if fi, err := os.Lstat(DoneMarkerPath(ckptDir, r)); err == nil && fi.ModTime().After(t) {
			t = fi.ModTime()
		}
	}
	return t
}

// MarkedTags lists, sorted, the checkpoint directories directly under root
// (a store, or a node-local directory that tiered checkpoints are saved to)
// that at least one rank has marked done. A root that does not exist holds
// none.
func MarkedTags(root string) ([]string, error) {
	ents, err := os.ReadDir(root)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if !e.IsDir() || CheckTag(e.Name()) != nil {
			continue
		}
		if ranks, _ := doneRanks(filepath.Join(root, e.Name())); len(ranks) > 0 {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out, nil
}

// StagingDir is where the drain stages tag before its commit renames it to
// TagDir(tag) (tests build half-drained stores with it).
func (s *Store) StagingDir(tag string) string { return s.stagingDir(tag) }
