package checkpointtest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/trainrun/trainrun/checkpoint"
)

// What the fixture builds is what the store reads: committed, complete,
// incomplete and staged saves are listed as such, and a committed save holds
// each rank's Weights.
func TestFixtureStates(t *testing.T) {
	f := NewFixture(t, checkpoint.Options{WorldSize: 2})
	f.Commit(2, "step-100")
	f.Save("step-200", 0, 1)
	f.Save("step-300", 1)
	f.Stage("step-400", 0, Weights("step-400", 0))
	list, err := f.Store.List()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]checkpoint.State{}
	for _, in := range list {
		got[in.Tag] = in.State
	}
	want := map[string]checkpoint.State{"step-100": checkpoint.Committed, "step-200": checkpoint.Complete, "step-300": checkpoint.Incomplete}
	for tag, st := range want {
		if got[tag] != st {
			t.Errorf("%s: %q, want %q (all: %v)", tag, got[tag], st, got)
		}
	}
	if st := got["step-400"]; st != checkpoint.Staged && st != checkpoint.Draining {
		t.Errorf("step-400 in staging: %q, want staged or draining (all: %v)", st, got)
	}
	b, err := os.ReadFile(filepath.Join(f.Dir(), "step-100", "rank1.pt"))
	if err != nil || string(b) != "weights of rank 1 at step-100" {
		t.Errorf("rank 1's file: %q, %v", b, err)
	}
	if ranks, err := checkpoint.DoneRanks(f.Store.TagDir("step-300")); err != nil || len(ranks) != 1 || ranks[0] != 1 {
		t.Errorf("step-300 marked by %v (%v), want rank 1 only", ranks, err)
	}
}

func TestMarkDoneAlone(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "step-9")
	MarkDone(t, dir, 3)
	if tags, err := checkpoint.MarkedTags(filepath.Dir(dir)); err != nil || len(tags) != 1 || tags[0] != "step-9" {
		t.Errorf("MarkedTags = %q, %v", tags, err)
	}
}
