package checkpoint

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/cespare/xxhash/v2"
)

func TestCommitVerifyLatest(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	saveCkpt(t, s, "step-100", 4, 3)
	ok, err := s.Complete("step-100", 4)
	must(t, err)
	if !ok {
		t.Fatal("Complete = false with all 4 markers")
	}
	if ok, _ := s.Complete("step-100", 5); ok {
		t.Fatal("Complete = true for world size 5 with 4 markers")
	}
	m, err := s.Commit(t.Context(), "step-100", 4)
	must(t, err)
	if m.Seq != 1 || m.WorldSize != 4 || m.Step != 100 || len(m.Files) != 4*3+1 || m.Kind != KindTrainrun {
		t.Fatalf("manifest = seq %d world %d step %d files %d kind %s", m.Seq, m.WorldSize, m.Step, len(m.Files), m.Kind)
	}
	if _, err := s.Verify(t.Context(), "step-100", Checksums); err != nil {
		t.Fatal(err)
	}
	r, err := s.Latest(t.Context(), Checksums)
	must(t, err)
	if r.Tag != "step-100" || r.Dir != filepath.Join(s.Dir(), "step-100") || r.Pointer != "step-100" || len(r.Skipped) != 0 {
		t.Fatalf("Latest = %+v", r)
	}
	b, err := os.ReadFile(filepath.Join(s.Dir(), ".trainrun", "latest"))
	must(t, err)
	if string(b) != "step-100\n" {
		t.Fatalf("pointer file = %q", b)
	}
	// A second commit of a committed tag changes nothing.
	m2, err := s.Commit(t.Context(), "step-100", 4)
	must(t, err)
	if m2.Seq != 1 || !m2.CommittedAt.Equal(m.CommittedAt) {
		t.Fatalf("recommit rewrote the manifest: seq %d", m2.Seq)
	}
}

func TestCommitRefusesIncomplete(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	saveRanks(t, s.tagDir("step-7"), "step-7", []int{0, 1, 3}, 1)
	if ok, _ := s.Complete("step-7", 4); ok {
		t.Fatal("complete with rank 2 missing")
	}
	_, err := s.Commit(t.Context(), "step-7", 4)
	if err == nil || !strings.Contains(err.Error(), "ranks 2 of 4") {
		t.Fatalf("Commit error = %v, want it to name rank 2", err)
	}
	if _, err := s.Latest(t.Context(), Checksums); !errors.Is(err, ErrNoCheckpoint) {
		t.Fatalf("Latest error = %v, want ErrNoCheckpoint", err)
	}
	if exists(manifestPath(s.tagDir("step-7"))) {
		t.Fatal("manifest written for an incomplete checkpoint")
	}
}

func TestVerifyDetectsDamageAndLatestFallsBack(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		damage func(dir string) error
		want   string // in the error
	}{
		{"truncated file", func(d string) error { return os.Truncate(filepath.Join(d, shardName(1, 0)), 5) }, "size 5 bytes"},
		{"flipped byte", func(d string) error {
			p := filepath.Join(d, shardName(1, 0))
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			b[len(b)/2] ^= 1
			return os.WriteFile(p, b, 0o644)
		}, "xxh64"},
		{"deleted file", func(d string) error { return os.Remove(filepath.Join(d, shardName(0, 0))) }, "missing"},
		{"deleted marker", func(d string) error { return os.Remove(DoneMarkerPath(d, 2)) }, "rank 2's done marker"},
		{"garbage manifest", func(d string) error { return os.WriteFile(manifestPath(d), []byte("{"), 0o644) }, "not valid JSON"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := newStore(t)
			saveCkpt(t, s, "step-10", 3, 2)
			saveCkpt(t, s, "step-20", 3, 2)
			_, err := s.Commit(t.Context(), "step-10", 3)
			must(t, err)
			_, err = s.Commit(t.Context(), "step-20", 3)
			must(t, err)
			must(t, c.damage(s.tagDir("step-20")))
			_, err = s.Verify(t.Context(), "step-20", Checksums)
			var ve *VerifyError
			if !errors.As(err, &ve) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Verify error = %v, want a VerifyError containing %q", err, c.want)
			}
			r, err := s.Latest(t.Context(), Checksums)
			must(t, err)
			if r.Tag != "step-10" || len(r.Skipped) != 1 || !strings.Contains(r.Skipped[0].Error(), "step-20") {
				t.Fatalf("Latest = %s skipped %v, want step-10 skipping step-20", r.Tag, r.Skipped)
			}
			// Quarantine moves it away; the pointer follows.
			_, err = s.Quarantine("step-20")
			must(t, err)
			if p, _ := s.pointer(); p != "step-10" {
				t.Fatalf("pointer after quarantine = %q", p)
			}
		})
	}
}

func TestOrderIsByStepNotCommitTime(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	saveCkpt(t, s, "step-300", 2, 1)
	saveCkpt(t, s, "step-200", 2, 1)
	_, err := s.Commit(t.Context(), "step-300", 2)
	must(t, err)
	m, err := s.Commit(t.Context(), "step-200", 2) // a slower drain commits it later
	must(t, err)
	if m.Seq != 2 {
		t.Fatalf("seq = %d", m.Seq)
	}
	r, err := s.Latest(t.Context(), Checksums)
	must(t, err)
	if r.Tag != "step-300" || r.Pointer != "step-300" {
		t.Fatalf("Latest = %s pointer %s, want step-300", r.Tag, r.Pointer)
	}
}

func TestSingleChunkDigestIsPlainXXH64(t *testing.T) {
	t.Parallel()
	s := newStore(t) // 4 KiB chunks
	saveCkpt(t, s, "step-1", 1, 2)
	m, err := s.Commit(t.Context(), "step-1", 1)
	must(t, err)
	for _, f := range m.Files {
		b, err := os.ReadFile(filepath.Join(s.tagDir("step-1"), f.Path))
		must(t, err)
		if f.Size <= 4096 && f.XXH64 != hex64(xxhash.Sum64(b)) {
			t.Errorf("%s: manifest %s, xxh64 %016x", f.Path, f.XXH64, xxhash.Sum64(b))
		}
	}
}

func TestPrune(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		keep      Retention
		committed []string
		other     []string // written but left uncommitted
		want      []string // deleted
	}{
		{"last 2", Retention{KeepLast: 2}, []string{"step-100", "step-200", "step-300", "step-400"}, nil,
			[]string{"step-100", "step-200"}},
		{"last 1 and every 250 steps", Retention{KeepLast: 1, KeepEvery: 250},
			[]string{"step-100", "step-200", "step-300", "step-400", "step-500", "step-600"}, nil,
			// buckets [0,250): step-100, [250,500): step-300, [500,750): step-500
			[]string{"step-200", "step-400"}},
		{"uncommitted never pruned", Retention{KeepLast: 1}, []string{"step-1", "step-2"}, []string{"step-0", "step-3"},
			[]string{"step-1"}},
		{"keep more than there is", Retention{KeepLast: 9}, []string{"a-1", "a-2"}, nil, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := newStore(t)
			for _, tag := range c.committed {
				saveCkpt(t, s, tag, 1, 1)
				_, err := s.Commit(t.Context(), tag, 1)
				must(t, err)
			}
			for _, tag := range c.other {
				saveRanks(t, s.tagDir(tag), tag, []int{0}, 1) // complete for world 1, not committed
			}
			plan, err := s.PrunePlan(c.keep)
			must(t, err)
			if !reflect.DeepEqual(plan, c.want) {
				t.Fatalf("PrunePlan = %v, want %v", plan, c.want)
			}
			got, err := s.Prune(c.keep)
			must(t, err)
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("Prune = %v, want %v", got, c.want)
			}
			for _, tag := range append(append([]string{}, c.committed...), c.other...) {
				gone := !exists(s.tagDir(tag))
				if gone != contains(c.want, tag) {
					t.Errorf("%s: gone=%v", tag, gone)
				}
			}
			if ents, _ := os.ReadDir(s.trashRoot()); len(ents) != 0 {
				t.Errorf("trash not emptied: %d entries", len(ents))
			}
		})
	}
}

func TestPruneKeepsTheResumePointWhenNewerIsDamaged(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	for _, tag := range []string{"step-1", "step-2", "step-3"} {
		saveCkpt(t, s, tag, 1, 1)
		_, err := s.Commit(t.Context(), tag, 1)
		must(t, err)
	}
	must(t, os.Remove(filepath.Join(s.tagDir("step-3"), "common.json")))
	del, err := s.Prune(Retention{KeepLast: 1})
	must(t, err)
	if !reflect.DeepEqual(del, []string{"step-1"}) {
		t.Fatalf("Prune deleted %v, want only step-1 (step-2 is the resume point)", del)
	}
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if x == y {
			return true
		}
	}
	return false
}

func TestRecover(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	saveCkpt(t, s, "step-1", 2, 1)
	_, err := s.Commit(t.Context(), "step-1", 2)
	must(t, err)
	saveCkpt(t, s, "step-2", 2, 1)                                     // complete, commit never ran
	saveRanks(t, s.tagDir("step-3"), "step-3", []int{1}, 1)            // rank 0 never finished
	must(t, os.MkdirAll(filepath.Join(s.Dir(), "tensorboard"), 0o755)) // not a checkpoint
	saveRanks(t, s.stagingDir("step-4"), "step-4", []int{0}, 1)        // half drained
	rep, err := s.Recover(t.Context(), 2, true)
	must(t, err)
	if !reflect.DeepEqual(rep.Committed, []string{"step-2"}) || !reflect.DeepEqual(rep.Discarded, []string{"step-3", "step-4"}) {
		t.Fatalf("Recover = %+v", rep)
	}
	r, err := s.Latest(t.Context(), Checksums)
	must(t, err)
	if r.Tag != "step-2" {
		t.Fatalf("Latest = %s", r.Tag)
	}
	if !exists(filepath.Join(s.Dir(), "tensorboard")) || exists(s.tagDir("step-3")) || exists(s.stagingDir("step-4")) {
		t.Fatal("Recover touched the wrong directories")
	}
	if _, err := s.Recover(t.Context(), 0, false); err == nil {
		t.Fatal("Recover without a world size must refuse")
	}
}

func TestListStates(t *testing.T) {
	t.Parallel()
	s, err := OpenWith(t.TempDir(), Options{WorldSize: 2, ChunkBytes: 4096})
	must(t, err)
	saveCkpt(t, s, "step-1", 2, 1)
	_, err = s.Commit(t.Context(), "step-1", 2)
	must(t, err)
	saveCkpt(t, s, "step-2", 2, 1)
	saveRanks(t, s.tagDir("step-3"), "step-3", []int{0}, 1)
	saveRanks(t, s.stagingDir("step-4"), "step-4", []int{0, 1}, 1)
	saveRanks(t, s.stagingDir("step-5"), "step-5", []int{1}, 1)
	list, err := s.List()
	must(t, err)
	got := map[string]State{}
	for _, in := range list {
		got[in.Tag] = in.State
		if in.Latest != (in.Tag == "step-1") {
			t.Errorf("%s: Latest=%v", in.Tag, in.Latest)
		}
	}
	want := map[string]State{"step-1": Committed, "step-2": Complete, "step-3": Incomplete, "step-4": Staged, "step-5": Draining}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("states = %v, want %v", got, want)
	}
	tag, ok, err := s.NewestComplete(2)
	must(t, err)
	if !ok || tag != "step-4" {
		t.Fatalf("NewestComplete = %q %v", tag, ok)
	}
}

func TestCheckTag(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"", ".trainrun", "a/b", "x" + tmpInfix + "1", "y" + partSuffix} {
		if CheckTag(bad) == nil {
			t.Errorf("CheckTag(%q) accepted", bad)
		}
	}
	for tag, step := range map[string]int64{"step-1200": 1200, "iter_0001200": 1200, "checkpoint-7": 7, "epoch=3-step=99": 99, "final": -1} {
		if CheckTag(tag) != nil || StepOf(tag) != step {
			t.Errorf("%q: CheckTag %v StepOf %d, want %d", tag, CheckTag(tag), StepOf(tag), step)
		}
	}
}

func TestOpenErrors(t *testing.T) {
	t.Parallel()
	if _, err := Open(filepath.Join(t.TempDir(), "nope")); err == nil || !strings.Contains(err.Error(), "mkdir -p") {
		t.Fatalf("Open(missing) = %v", err)
	}
	if _, err := Open(""); err == nil || !strings.Contains(err.Error(), "TRAINRUN_CKPT_DIR") {
		t.Fatalf("Open(\"\") = %v", err)
	}
}

func TestCommitComplete(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	saveCkpt(t, s, "step-1", 2, 1)
	saveCkpt(t, s, "step-2", 2, 1)
	saveRanks(t, s.tagDir("step-3"), "step-3", []int{0}, 1)
	latest, changed, err := s.CommitComplete(t.Context(), 2)
	must(t, err)
	if latest != "step-2" || !changed {
		t.Fatalf("CommitComplete = %q %v", latest, changed)
	}
	latest, changed, err = s.CommitComplete(t.Context(), 2)
	must(t, err)
	if latest != "step-2" || changed {
		t.Fatalf("second CommitComplete = %q %v", latest, changed)
	}
	if ok, _ := s.Complete("step-3", 2); ok {
		t.Fatal("step-3 complete")
	}
}

// A commit cut short between its manifest and the pointer: the manifest is the
// commit, so Latest returns the newer checkpoint and the next commit repairs
// the pointer. A complete but uncommitted checkpoint is never latest.
func TestLatestAfterCommitCutBeforePointer(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	saveCkpt(t, s, "step-1", 1, 1)
	_, err := s.Commit(t.Context(), "step-1", 1)
	must(t, err)
	saveCkpt(t, s, "step-2", 1, 1)
	s.hook = func(step string) {
		if step == "commit:committed" {
			panic("killed")
		}
	}
	func() {
		defer func() { recover() }()
		s.Commit(t.Context(), "step-2", 1)
	}()
	s.hook = nil
	saveCkpt(t, s, "step-3", 1, 1) // complete, not committed
	r, err := s.Latest(t.Context(), Checksums)
	must(t, err)
	if r.Tag != "step-2" || r.Pointer != "step-1" {
		t.Fatalf("Latest = %s, pointer %s; want step-2 with the stale pointer step-1", r.Tag, r.Pointer)
	}
	_, err = s.Commit(t.Context(), "step-2", 1)
	must(t, err)
	if p, _ := s.pointer(); p != "step-2" {
		t.Fatalf("pointer after recommit = %q", p)
	}
}

func TestDeferredHashThenSeal(t *testing.T) {
	t.Parallel()
	s, err := OpenWith(t.TempDir(), Options{ChunkBytes: 4096, DeferHash: true})
	must(t, err)
	saveCkpt(t, s, "step-5", 2, 2)
	m, err := s.Commit(t.Context(), "step-5", 2)
	must(t, err)
	if m.Sealed() {
		t.Fatal("deferred commit recorded checksums")
	}
	if r, err := s.Latest(t.Context(), Checksums); err != nil || r.Tag != "step-5" {
		t.Fatalf("Latest before sealing = %v, %v", r.Tag, err)
	}
	list, err := s.List()
	must(t, err)
	if !strings.Contains(list[0].Note, "Seal") {
		t.Fatalf("List note = %q", list[0].Note)
	}
	m, err = s.Seal(context.Background(), "step-5")
	must(t, err)
	if !m.Sealed() || m.Seq != 1 {
		t.Fatalf("sealed manifest = %+v", m)
	}
	// Sealed checksums equal a hashing commit's.
	s2 := newStore(t)
	saveCkpt(t, s2, "step-5", 2, 2)
	m2, err := s2.Commit(t.Context(), "step-5", 2)
	must(t, err)
	if !reflect.DeepEqual(m.Files, m2.Files) {
		t.Fatalf("sealed files %+v\nhashed files %+v", m.Files, m2.Files)
	}
	// Now a same-size change is caught.
	p := filepath.Join(s.tagDir("step-5"), shardName(1, 0))
	b, err := os.ReadFile(p)
	must(t, err)
	b[0] ^= 0xff
	must(t, os.WriteFile(p, b, 0o644))
	if _, err := s.Verify(t.Context(), "step-5", Checksums); err == nil || !strings.Contains(err.Error(), "xxh64") {
		t.Fatalf("Verify after a flip = %v", err)
	}
}

// TestLatestCommitted: the per-step answer follows the pointer without
// reading a manifest, and falls back to the full scan whenever the pointer
// is missing, dangling or behind a newer commit; a half-written checkpoint
// is never the answer.
func TestLatestCommitted(t *testing.T) {
	ctx := context.Background()
	build := func(t *testing.T) *Store {
		s := newStore(t)
		for _, tag := range []string{"step-100", "step-200"} {
			saveCkpt(t, s, tag, 2, 2)
			if _, err := s.Commit(t.Context(), tag, 2); err != nil {
				t.Fatal(err)
			}
		}
		saveRanks(t, s.Dir(), "step-300", []int{0}, 2) // half-written: rank 1 never marked done
		return s
	}
	check := func(t *testing.T, s *Store, want string, fast bool) {
		t.Helper()
		r, err := s.LatestCommitted(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if r.Tag != want || r.Dir != s.TagDir(want) {
			t.Errorf("LatestCommitted = %s (%s), want %s", r.Tag, r.Dir, want)
		}
		// The fast answer reads no manifest; the full scan returns it.
		if got := r.Manifest.Tag == ""; got != fast {
			t.Errorf("fast path %v (manifest %q), want %v", got, r.Manifest.Tag, fast)
		}
	}
	t.Run("pointer", func(t *testing.T) { check(t, build(t), "step-200", true) })
	t.Run("no manifest read on the fast path", func(t *testing.T) {
		// A manifest that no longer parses is not looked at per step (the
		// controller's full verification finds it); Latest skips it.
		s := build(t)
		must(t, os.WriteFile(filepath.Join(s.TagDir("step-200"), ".trainrun", "manifest.json"), []byte("{garbage"), 0o644))
		check(t, s, "step-200", true)
		if r, err := s.Latest(t.Context(), Checksums); err != nil || r.Tag != "step-100" {
			t.Errorf("Latest = %s, %v; want step-100", r.Tag, err)
		}
	})
	t.Run("no pointer: full scan", func(t *testing.T) {
		s := build(t)
		must(t, os.Remove(filepath.Join(s.Dir(), ".trainrun", "latest")))
		check(t, s, "step-200", false)
	})
	t.Run("pointer behind a commit cut short: full scan", func(t *testing.T) {
		s := build(t)
		must(t, os.WriteFile(filepath.Join(s.Dir(), ".trainrun", "latest"), []byte("step-100\n"), 0o644))
		check(t, s, "step-200", false)
	})
	t.Run("dangling pointer: full scan", func(t *testing.T) {
		s := build(t)
		mp := filepath.Join(s.TagDir("step-200"), ".trainrun", "manifest.json")
		must(t, os.Remove(mp))
		must(t, os.Mkdir(mp, 0o755)) // not a regular file
		check(t, s, "step-100", false)
	})
	t.Run("nothing committed", func(t *testing.T) {
		s := newStore(t)
		saveRanks(t, s.Dir(), "step-1", []int{0}, 1)
		if _, err := s.LatestCommitted(ctx); !errors.Is(err, ErrNoCheckpoint) {
			t.Errorf("err = %v, want ErrNoCheckpoint", err)
		}
	})
}
