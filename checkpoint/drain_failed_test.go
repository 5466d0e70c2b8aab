package checkpoint

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// A node-local save one rank could not write (failed.<RANK>.<CAUSE> on its
// node, no done marker): the drain carries the marker into staging, and
// once every rank is settled DiscardFailed discards the staged checkpoint
// and reports the rank and the cause; the latest stays. Two nodes, a rank
// each: node A saved step-20, node B's rank 1 hit a full /dev/shm.
func TestDrainCarriesFailedMarkers(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	local := t.TempDir()
	a, b := filepath.Join(local, "a"), filepath.Join(local, "b")
	saveRanks(t, filepath.Join(a, "step-10"), "step-10", []int{0}, 2)
	saveRanks(t, filepath.Join(b, "step-10"), "step-10", []int{1}, 2)
	saveRanks(t, filepath.Join(a, "step-20"), "step-20", []int{0}, 2)
	must(t, os.MkdirAll(ckptMeta(filepath.Join(b, "step-20")), 0o755))
	must(t, createMarker(FailedMarkerPath(filepath.Join(b, "step-20"), 1, DiskFull)))
	drain := func(root, node string, rank int) {
		t.Helper()
		_, err := DrainAll(context.Background(), root, s, DrainAllOptions{DrainOptions: DrainOptions{Node: node}, Ranks: []int{rank}, RemoveLocal: true})
		must(t, err)
	}
	drain(a, "a", 0)
	if got, err := s.DiscardFailed(2); err != nil || len(got) != 0 {
		t.Fatalf("before node B's drain DiscardFailed = %+v %v, want nothing (rank 1 unsettled)", got, err)
	}
	drain(b, "b", 1)
	if !exists(FailedMarkerPath(s.stagingDir("step-20"), 1, DiskFull)) {
		t.Fatal("the failed marker was not carried into staging")
	}
	if exists(filepath.Join(b, "step-20")) {
		t.Error("node B's failed local save was not removed (its space is what the next save needs)")
	}
	latest, _, err := s.CommitComplete(t.Context(), 2)
	must(t, err)
	if latest != "step-10" {
		t.Fatalf("latest %q, want step-10 (step-20 is not complete)", latest)
	}
	got, err := s.DiscardFailed(2)
	must(t, err)
	if len(got) != 1 || got[0].Tag != "step-20" || got[0].Cause != DiskFull || !slices.Equal(got[0].Ranks, []int{1}) || !got[0].Local {
		t.Fatalf("DiscardFailed = %+v, want step-20 (disk-full, rank 1, node-local)", got)
	}
	if exists(s.stagingDir("step-20")) {
		t.Error("the failed staged checkpoint is still in staging")
	}
	if _, err := s.Verify(t.Context(), "step-10", Checksums); err != nil {
		t.Errorf("the latest does not verify after the discard: %v", err)
	}
}
