package checkpoint

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

func TestCompletedAtIsTheLastRanksMarker(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "step-120")
	if got := CompletedAt(dir); !got.IsZero() {
		t.Errorf("no checkpoint: %v, want the zero time", got)
	}
	saveRanks(t, dir, "step-120", []int{0, 1, 2}, 1)
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, r := range []int{0, 2, 1} {
		at := t0.Add(time.Duration(r) * time.Minute)
		must(t, os.Chtimes(DoneMarkerPath(dir, r), at, at))
	}
	if got, want := CompletedAt(dir), t0.Add(2*time.Minute); !got.Equal(want) {
		t.Errorf("CompletedAt = %v, want %v (rank 2's marker)", got, want)
	}
}

func TestMarkedTags(t *testing.T) {
	root := t.TempDir()
	if got, err := MarkedTags(filepath.Join(root, "none")); err != nil || got != nil {
		t.Errorf("missing root: %q, %v", got, err)
	}
	saveRanks(t, filepath.Join(root, "step-9"), "step-9", []int{3}, 1)
	saveRanks(t, filepath.Join(root, "step-10"), "step-10", []int{0, 1}, 1)
	must(t, os.MkdirAll(filepath.Join(root, "step-11", "model"), 0o755)) // being written: no marker
	must(t, os.MkdirAll(filepath.Join(root, metaDir), 0o755))            // the store's own directory
	must(t, os.WriteFile(filepath.Join(root, "notes.txt"), nil, 0o644))
	got, err := MarkedTags(root)
	if err != nil || !slices.Equal(got, []string{"step-10", "step-9"}) {
		t.Errorf("MarkedTags = %q, %v; want step-10 and step-9", got, err)
	}
}
