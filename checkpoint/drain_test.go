package checkpoint

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Two nodes, two ranks each, files spanning several 4 KiB chunks.
func TestDrainTwoNodesThenCommit(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	local := t.TempDir()
	nodeA, nodeB := filepath.Join(local, "a", "step-50"), filepath.Join(local, "b", "step-50")
	saveRanks(t, nodeA, "step-50", []int{0, 1}, 3)
	saveRanks(t, nodeB, "step-50", []int{2, 3}, 3)

	ra, err := Drain(context.Background(), nodeA, s, "step-50", DrainOptions{Node: "gpu-a"})
	must(t, err)
	if ra.Copied != ra.Bytes || ra.Files != 2*3+1 {
		t.Fatalf("drain A = %+v", ra)
	}
	if ok, _ := s.Complete("step-50", 4); ok {
		t.Fatal("complete after one node of two drained")
	}
	if _, err := s.Commit(t.Context(), "step-50", 4); err == nil || !strings.Contains(err.Error(), "ranks 2,3 of 4") {
		t.Fatalf("Commit after half the drains = %v", err)
	}
	_, err = Drain(context.Background(), nodeB, s, "step-50", DrainOptions{Node: "gpu-b"})
	must(t, err)
	if ok, _ := s.Complete("step-50", 4); !ok {
		t.Fatal("not complete after both drains")
	}
	m, err := s.Commit(t.Context(), "step-50", 4)
	must(t, err)
	if exists(s.stagingDir("step-50")) {
		t.Fatal("staging left behind after commit")
	}
	if _, err := s.Verify(t.Context(), "step-50", Checksums); err != nil {
		t.Fatal(err)
	}
	must(t, checkContent(s.tagDir("step-50"), "step-50", 4, 3))
	// The drain's hashes (taken while copying) equal a fresh hash of the result.
	files, err := listFiles(s.tagDir("step-50"))
	must(t, err)
	must(t, hashFiles(context.Background(), s.tagDir("step-50"), files, s.opts.ChunkBytes, 2, false))
	for i := range files {
		if files[i] != m.Files[i] {
			t.Fatalf("manifest %+v, fresh hash %+v", m.Files[i], files[i])
		}
	}
	// Draining a committed tag again is a no-op.
	r, err := Drain(context.Background(), nodeA, s, "step-50", DrainOptions{Node: "gpu-a"})
	must(t, err)
	if !r.Committed {
		t.Fatal("redrain of a committed tag did work")
	}
}

func TestDrainResumesAfterInterruption(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	src := filepath.Join(t.TempDir(), "step-9")
	saveRanks(t, src, "step-9", []int{0, 1, 2}, 4)
	ctx, cancel := context.WithCancel(context.Background())
	renamed := 0
	s.hook = func(step string) {
		if step == "drain:file-renamed" {
			renamed++
			if renamed == 3 {
				cancel()
			}
		}
	}
	_, err := Drain(ctx, src, s, "step-9", DrainOptions{Node: "n1", Workers: 1})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted drain = %v", err)
	}
	if ranks, _ := doneRanks(s.stagingDir("step-9")); len(ranks) != 0 {
		t.Fatalf("markers %v in staging after an interrupted drain", ranks)
	}
	if _, err := s.Commit(t.Context(), "step-9", 3); err == nil {
		t.Fatal("committed a partial drain")
	}
	s.hook = nil
	r, err := Drain(context.Background(), src, s, "step-9", DrainOptions{Node: "n1"})
	must(t, err)
	if r.Copied >= r.Bytes || r.Copied == 0 {
		t.Fatalf("resumed drain copied %d of %d bytes; want only the rest", r.Copied, r.Bytes)
	}
	_, err = s.Commit(t.Context(), "step-9", 3)
	must(t, err)
	must(t, checkContent(s.tagDir("step-9"), "step-9", 3, 4))
	if _, err := s.Verify(t.Context(), "step-9", Checksums); err != nil {
		t.Fatal(err)
	}
}

func TestDrainConflictingFileNames(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	local := t.TempDir()
	a, b := filepath.Join(local, "a"), filepath.Join(local, "b")
	saveRanks(t, a, "x-1", []int{0}, 1)
	saveRanks(t, b, "x-1", []int{1}, 1)
	// Both nodes write the same name with different bytes of the same size.
	must(t, os.WriteFile(filepath.Join(a, "meta.bin"), []byte("aaaa"), 0o644))
	must(t, os.WriteFile(filepath.Join(b, "meta.bin"), []byte("bbbb"), 0o644))
	_, err := Drain(context.Background(), a, s, "x-1", DrainOptions{Node: "a"})
	must(t, err)
	_, err = Drain(context.Background(), b, s, "x-1", DrainOptions{Node: "b"})
	must(t, err)
	_, err = s.Commit(t.Context(), "x-1", 2)
	if err == nil || !strings.Contains(err.Error(), "meta.bin") || !strings.Contains(err.Error(), "different contents") {
		t.Fatalf("Commit = %v, want a conflict on meta.bin", err)
	}
}

func TestDrainRefusesUnmarkedSource(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	src := t.TempDir()
	must(t, os.WriteFile(filepath.Join(src, "a.bin"), []byte("x"), 0o644))
	if _, err := Drain(context.Background(), src, s, "step-1", DrainOptions{Node: "n"}); err == nil || !strings.Contains(err.Error(), "no rank has marked") {
		t.Fatalf("Drain = %v", err)
	}
	if _, err := Drain(context.Background(), src, s, "step-1", DrainOptions{}); err == nil || !strings.Contains(err.Error(), "SLURMD_NODENAME") {
		t.Fatalf("Drain without node = %v", err)
	}
}

func TestDrainAll(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	local := t.TempDir()
	saveRanks(t, filepath.Join(local, "step-10"), "step-10", []int{0, 1}, 2)
	saveRanks(t, filepath.Join(local, "step-20"), "step-20", []int{0}, 2) // rank 1 still saving
	o := DrainAllOptions{DrainOptions: DrainOptions{Node: "n1"}, Ranks: []int{0, 1}, RemoveLocal: true}
	got, err := DrainAll(context.Background(), local, s, o)
	must(t, err)
	if len(got) != 1 || got[0] != "step-10" {
		t.Fatalf("DrainAll = %v, want [step-10]", got)
	}
	if exists(filepath.Join(local, "step-10")) || !exists(filepath.Join(local, "step-20")) {
		t.Fatal("local copies: want step-10 removed after its drain, step-20 kept")
	}
	saveRanks(t, filepath.Join(local, "step-20"), "step-20", []int{1}, 2)
	o.RemoveLocal = false
	got, err = DrainAll(context.Background(), local, s, o)
	must(t, err)
	if len(got) != 1 || got[0] != "step-20" {
		t.Fatalf("second DrainAll = %v", got)
	}
	got, err = DrainAll(context.Background(), local, s, o)
	must(t, err)
	if len(got) != 0 {
		t.Fatalf("third DrainAll redrained %v", got)
	}
	latest, _, err := s.CommitComplete(t.Context(), 2)
	must(t, err)
	if latest != "step-20" {
		t.Fatalf("latest = %q", latest)
	}
	must(t, checkContent(s.tagDir("step-10"), "step-10", 2, 2))
}
