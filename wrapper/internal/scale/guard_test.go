package scale

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/trainrun/trainrun/checkpoint"
)

// slack is how far two counts of the same work may differ: a run now and
// then counts one openat more (a call the Go runtime retries after its
// preemption signal interrupted it, or one of its own), never a call per
// file or per marker.
const slack = 2

func abs(n int) int { return max(n, -n) }

// perFileOps is what a commit costs per file of the checkpoint, in
// metadata calls: openat, fstat (its size), newfstatat (the listing's
// Lstat), fsync.
const perFileOps = 4

// TestCommitMetadataOpsLinear guards the commit's metadata calls, counted
// with strace, not timed: beyond reading the directories (getdents64, a few
// hundred names a call), a commit issues perFileOps per checkpoint file and
// a constant, and nothing per done marker. So 1,024 ranks writing one shard
// each cost perFileOps × 1,016 more than 8 ranks do (give or take slack), and 1,024
// ranks whose nodes write one shard each (8 files) cost what 8 ranks do.
// A commit that stats or opens each marker (as CompletedAt does) fails it.
func TestCommitMetadataOpsLinear(t *testing.T) {
	if why := straceAvailable(); why != "" {
		t.Skip(why)
	}
	count := func(ranks, files int) sysCounts {
		t.Helper()
		store := t.TempDir()
		d := filepath.Join(store, "step-1")
		if err := os.MkdirAll(filepath.Join(d, ".trainrun"), 0o755); err != nil {
			t.Fatal(err)
		}
		for r := 0; r < ranks; r++ {
			if r < files {
				if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("__%d_0.distcp", r)), []byte("shard"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile(checkpoint.DoneMarkerPath(d, r), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		c, err := countCommit(store, "step-1", ranks, "commit")
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	small, wide, perRank := count(8, 8), count(1024, 8), count(1024, 1024)
	noDir := func(c sysCounts) int { return c.meta() - c["getdents64"] }
	if got, want := noDir(wide), noDir(small); abs(got-want) > slack {
		t.Errorf("commit of 8 files: %d metadata calls besides directory reads with 1,024 done markers, %d with 8: the markers cost calls each (want none beyond the directory read)\n8 ranks:     %s\n1024 ranks:  %s", got, want, small, wide)
	}
	if got, want := noDir(perRank)-noDir(small), perFileOps*(1024-8); abs(got-want) > slack {
		t.Errorf("commit of 1,024 files: %d metadata calls more than of 8, want %d (%d per file)\n8 files:     %s\n1024 files:  %s", got, want, perFileOps, small, perRank)
	}
	// 2,048 names (shards and markers) in 8 KiB reads of ~32-byte entries,
	// each directory read a few times: tens of calls, not thousands.
	if g := perRank["getdents64"]; g > 100 {
		t.Errorf("commit of 1,024 ranks: %d getdents64 calls: the directories are read per rank, not per listing\n%s", g, perRank)
	}
}
