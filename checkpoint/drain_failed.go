package checkpoint

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
)

// Failed node-local saves (--ckpt-local-dir): a rank whose local save the
// disk refused marks failed.<RANK>.<CAUSE> in its node-local checkpoint, not
// done. The drain carries those markers into staging (carryFailed), where
// the controller's DiscardFailed sees them: once every rank of the world
// has marked the staged checkpoint done or failed, it is discarded and
// reported, instead of waiting in staging for the missing rank for good.

// localFailed reads the failed markers of a node-local save, restricted to
// mine (all when empty): rank → cause.
func localFailed(src string, mine []int) map[int]string {
	ents, err := os.ReadDir(ckptMeta(src))
	if err != nil {
		return nil
	}
	out := map[int]string{}
	for _, e := range ents {
		if r, c, ok := parseFailedMarker(e.Name()); ok && (len(mine) == 0 || slices.Contains(mine, r)) {
			if _, seen := out[r]; !seen {
				out[r] = c
			}
		}
	}
	return out
}

// carryFailed creates the failed markers in tag's staging area durably;
// nothing for a tag already committed.
func carryFailed(dst *Store, tag string, failed map[int]string) error {
	if len(failed) == 0 || exists(manifestPath(dst.tagDir(tag))) {
		return nil
	}
	meta := ckptMeta(dst.stagingDir(tag))
	if err := os.MkdirAll(meta, 0o755); err != nil {
		return fmt.Errorf("drain %s: create %s: %w; the store must be writable", tag, meta, err)
	}
	for r, c := range failed {
		p := FailedMarkerPath(dst.stagingDir(tag), r, c)
		if exists(p) {
			continue
		}
		if err := createMarker(p); err != nil {
			return fmt.Errorf("drain %s: %w", tag, err)
		}
	}
	if err := syncDir(meta); err != nil {
		return err
	}
	return syncDir(dst.stagingRoot())
}

// stagedFailed lists the staged tags (not committed) with a failed marker,
// for DiscardFailed: dir by tag (never nil).
func (s *Store) stagedFailed() map[string]string {
	out := map[string]string{}
	ents, err := os.ReadDir(s.stagingRoot())
	if err != nil {
		return out
	}
	for _, e := range ents {
		tag := e.Name()
		if !e.IsDir() || CheckTag(tag) != nil || exists(manifestPath(s.tagDir(tag))) {
			continue
		}
		if ranks, _ := failedRanks(s.stagingDir(tag)); len(ranks) > 0 {
			out[tag] = filepath.Join(s.stagingRoot(), tag)
		}
	}
	return out
}

// withFailed is the done ranks and the failed ones: the ranks settled.
func withFailed(done []int, failed map[int]string) []int {
	out := append([]int(nil), done...)
	for r := range failed {
		out = append(out, r)
	}
	return out
}

func sortedTags(dirs map[string]string) []string {
	tags := make([]string, 0, len(dirs))
	for t := range dirs {
		tags = append(tags, t)
	}
	slices.Sort(tags)
	return tags
}
