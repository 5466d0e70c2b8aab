package checkpoint

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/trainrun/trainrun/internal/units"
)

// Failed saves: a save or commit that a full or failing file system stopped
// never costs the latest checkpoint. The trainer that cannot write its part
// removes what it wrote and creates <tag>/.trainrun/failed.<RANK>.<CAUSE>
// (an empty file: it needs an inode, not a block, so it can be created on a
// full file system); once every rank has either marked the checkpoint done
// or failed, DiscardFailed removes it (its bytes are what filled the disk)
// and the previous latest stays the latest. A commit that fails the same way
// leaves the checkpoint uncommitted for the next commit to retry.

// Disk fault causes (DiskCause; the cause of a failed marker).
const (
	DiskFull    = "disk-full" // ENOSPC
	DiskQuota   = "quota"     // EDQUOT
	DiskIOError = "io-error"  // EIO
)

// DiskCauses lists the disk fault causes, for validation and the metrics.
var DiskCauses = []string{DiskFull, DiskQuota, DiskIOError}

// DiskCause names the disk fault behind err: DiskFull, DiskQuota or
// DiskIOError, "" for anything else.
func DiskCause(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, syscall.ENOSPC):
		return DiskFull
	case errors.Is(err, syscall.EDQUOT):
		return DiskQuota
	case errors.Is(err, syscall.EIO):
		return DiskIOError
	}
	return ""
}

const failedMarker = "failed."

// FailedMarkerPath is the marker rank creates in the checkpoint directory
// ckptDir when its save failed with cause (one of DiskCauses).
func FailedMarkerPath(ckptDir string, rank int, cause string) string {
	return filepath.Join(ckptDir, metaDir, failedMarker+strconv.Itoa(rank)+"."+cause)
}

// parseFailedMarker reads failed.<RANK>.<CAUSE>; a cause that is not one of
// DiskCauses reads as DiskIOError (a failure trainrun cannot name better).
func parseFailedMarker(name string) (rank int, cause string, ok bool) {
	rest, found := strings.CutPrefix(name, failedMarker)
	if !found {
		return 0, "", false
	}
	num, cause, _ := strings.Cut(rest, ".")
	rank, ok = parseDoneMarker(doneMarker + num) // the same canonical rank rule
	if !ok {
		return 0, "", false
	}
	known := false
	for _, c := range DiskCauses {
		known = known || c == cause
	}
	if !known {
		cause = DiskIOError
	}
	return rank, cause, true
}

// FailedSave is a checkpoint that could not be written.
type FailedSave struct {
	Tag   string
	Cause string // DiskFull, DiskQuota, DiskIOError: the first failed rank's
	Ranks []int  // the ranks that failed, sorted
	Bytes int64  // what its partial files held (freed by the discard)
	// Local: a node-local save (--ckpt-local-dir) whose failed markers the
	// drain carried into staging: the file system that failed is the
	// failed ranks' node-local one, not the store's.
	Local bool
}

// failedRanks reads the failed markers of ckptDir.
func failedRanks(ckptDir string) (ranks []int, cause string) {
	ents, err := os.ReadDir(ckptMeta(ckptDir))
	if err != nil {
		return nil, ""
	}
	for _, e := range ents {
		if r, c, ok := parseFailedMarker(e.Name()); ok {
			ranks = append(ranks, r)
			if cause == "" {
				cause = c
			}
		}
	}
	sort.Ints(ranks)
	return ranks, cause
}

// DiscardFailed removes every uncommitted checkpoint in the store that some
// rank marked failed, once each of its world ranks has marked it either done
// or failed (a rank still writing must not find its directory gone), and
// returns them. Committed checkpoints are never touched: the latest stays.
func (s *Store) DiscardFailed(world int) ([]FailedSave, error) {
	if world <= 0 {
		return nil, fmt.Errorf("discard failed saves in %s: world size %d; pass the number of ranks", s.dir, world)
	}
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("discard failed saves: list %s: %w", s.dir, err)
	}
	dirs := s.stagedFailed() // node-local saves: the drain carried their failed markers (drain_failed.go)
	for _, e := range ents {
		tag := e.Name()
		if e.IsDir() && CheckTag(tag) == nil && !exists(manifestPath(s.tagDir(tag))) && dirs[tag] == "" {
			dirs[tag] = s.tagDir(tag)
		}
	}
	var out []FailedSave
	for _, tag := range sortedTags(dirs) {
		dir := dirs[tag]
		failed, cause := failedRanks(dir)
		if len(failed) == 0 {
			continue
		}
		done, _ := doneRanks(dir)
		if !allDone(append(done, failed...), world) {
			continue // a rank is still saving
		}
		fs := FailedSave{Tag: tag, Cause: cause, Ranks: failed, Bytes: treeBytes(dir), Local: dir == s.stagingDir(tag)}
		if err := s.trash(dir, tag); err != nil {
			return out, fmt.Errorf("discard failed save %s: %w", tag, err)
		}
		out = append(out, fs)
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, s.emptyTrash()
}

// treeBytes sums the sizes of the regular files under dir (0 on errors).
func treeBytes(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// DiskAdvice is what to do about a disk fault of cause on the file system
// sp (SpaceOf), for the message that reports it.
func DiskAdvice(cause string, sp Space) string {
	switch cause {
	case DiskQuota:
		return fmt.Sprintf("your quota on %s is used up: free space in it (older checkpoints, other data) or ask for a larger quota (quota -s, lfs quota -u $USER %s)", sp.Mount, sp.Mount)
	case DiskIOError:
		return fmt.Sprintf("%s reported an I/O error: check the storage's health (dmesg, the file system's status) before trusting new checkpoints there", sp.Mount)
	}
	return fmt.Sprintf("free space on %s (lower --ckpt-keep, remove other data) or put --ckpt-dir on a larger file system", sp.Mount)
}

// DiskMessage says, for a person, that a save of tag in the store dir failed
// with cause: what filled (the mount point, its type, its free space), that
// the latest committed checkpoint stays, and what to do.
func DiskMessage(dir, tag, cause, latest string) string {
	what := map[string]string{DiskFull: "is full", DiskQuota: "is over quota", DiskIOError: "failed with an I/O error"}[cause]
	if what == "" {
		what = "failed"
	}
	sp, err := SpaceOf(dir)
	where := fmt.Sprintf("the file system of %s %s", dir, what)
	if err == nil {
		holds := ""
		if sp.Mount != filepath.Clean(dir) {
			holds = ", which holds " + dir + ","
		}
		where = fmt.Sprintf("file system %s (%s)%s %s (%s free of %s once the partial files are removed)",
			sp.Mount, cmp.Or(sp.FSType, "type unknown"), holds, what, units.Bytes(sp.Free), units.Bytes(sp.Total))
	} else {
		sp.Mount = dir
	}
	keep := "there is no committed checkpoint yet"
	if latest != "" {
		keep = "the latest committed checkpoint stays " + latest
	}
	return fmt.Sprintf("checkpoint %s was not saved: %s; %s, training goes on and the next save retries; %s",
		tag, where, keep, DiskAdvice(cause, sp))
}
