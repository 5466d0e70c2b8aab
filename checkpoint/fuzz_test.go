package checkpoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/trainrun/trainrun/internal/safefs"
)

// Fuzz targets for the store's parsers of files a user writes (issue 12):
// manifests, the latest pointer and drain handoff records. Their seeds run
// in plain `go test`; `make fuzz` runs each for a minute.

// fuzzStore is a store with one committed checkpoint, step-1.
func fuzzStore(t testing.TB) (*Store, Manifest) {
	s := newStore(t)
	saveCkpt(t, s, "step-1", 2, 2)
	m, err := s.Commit(t.Context(), "step-1", 2)
	must(t, err)
	return s, m
}

func manifestSeeds(t testing.TB) [][]byte {
	_, m := fuzzStore(t)
	good, _ := json.Marshal(m)
	var seeds [][]byte
	seeds = append(seeds, good)
	for _, edit := range []func(*Manifest){
		func(m *Manifest) { m.ChunkBytes = 1 },
		func(m *Manifest) { m.ChunkBytes = 1 << 62 },
		func(m *Manifest) { m.WorldSize = 1 << 40 },
		func(m *Manifest) { m.Files = append(m.Files, File{Path: "../../private/key", Size: 1}) },
		func(m *Manifest) { m.Files = append(m.Files, File{Path: "/etc/shadow", Size: 1}) },
		func(m *Manifest) { m.Files[0].Size = -1 },
		func(m *Manifest) { m.Files[0].Size = 1 << 62 },
		func(m *Manifest) { m.Files[0].XXH64 = "zz" },
	} {
		c := m
		c.Files = append([]File(nil), m.Files...)
		edit(&c)
		b, _ := json.Marshal(c)
		seeds = append(seeds, b)
	}
	return append(seeds, []byte("{"), []byte("null"), []byte(`{"version":1,"hash":"xxh64-chunked","chunk_bytes":4096,"files":null}`))
}

func FuzzReadManifest(f *testing.F) {
	for _, s := range manifestSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, _ := fuzzStore(t)
		must(t, os.WriteFile(manifestPath(s.tagDir("step-1")), data, 0o644))
		m, err := readManifest(s.tagDir("step-1"))
		if err != nil {
			return
		}
		if m.ChunkBytes < minChunkBytes || m.ChunkBytes > maxChunkBytes || m.WorldSize > maxRank {
			t.Fatalf("accepted chunk_bytes %d, world_size %d", m.ChunkBytes, m.WorldSize)
		}
		for _, f := range m.Files {
			if checkEntryPath(f.Path) != nil {
				t.Fatalf("accepted entry %q", f.Path)
			}
		}
		for _, lvl := range []Level{Sizes, Checksums} {
			if _, err := s.Verify(context.Background(), "step-1", lvl); err != nil && strings.Contains(err.Error(), "..") {
				t.Fatalf("verify names a path outside the checkpoint: %v", err)
			}
		}
	})
}

func FuzzPointer(f *testing.F) {
	for _, s := range []string{"step-1\n", "step-1", "", "../etc", ".trainrun", "step-1\x00", strings.Repeat("a", 5000), "step-2\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, _ := fuzzStore(t)
		must(t, os.WriteFile(s.pointerPath(), data, 0o644))
		r, err := s.LatestCommitted(context.Background())
		if err != nil {
			return
		}
		if CheckTag(r.Tag) != nil || !s.hasManifest(r.Tag) {
			t.Fatalf("resolved %q from pointer %q", r.Tag, data)
		}
	})
}

func FuzzReadHandoff(f *testing.F) {
	good, _ := json.Marshal(DrainHandoff{Version: HandoffVersion, JobID: 7, Node: "n1", LocalDir: "/dev/shm/t-7", CkptDir: "/lustre/u/run", Ranks: []int{0, 1}})
	for _, s := range []string{string(good), "{", `{"version":1,"node":"../x","local_dir":"/a","ckpt_dir":"/b"}`,
		`{"version":1,"node":"n1","local_dir":"/a/../b","ckpt_dir":"/b"}`, `{"version":1,"node":"n1","local_dir":"/a","ckpt_dir":"/b","ranks":[1,1]}`,
		`{"version":1,"node":"n1","local_dir":"/a","ckpt_dir":"/b","ranks":[-1]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(t.TempDir(), HandoffFile("n1"))
		must(t, os.WriteFile(p, data, 0o600))
		h, err := ReadHandoff(p)
		if err != nil {
			return
		}
		if h.Check() != nil || h.Node != "n1" || len(h.Ranks) > maxNodeRanks {
			t.Fatalf("accepted %+v", h)
		}
		for _, a := range h.RanksArgs() {
			if strings.ContainsAny(a, " \n\x00") {
				t.Fatalf("ranks argument %q", a)
			}
		}
	})
}

// The worst manifest of its class: at the size cap, as many entries as fit
// (each a distinct clean path). Reading and verifying it is bounded by the
// cap: the test states the bound as bytes allocated (256 MiB), not time;
// BenchmarkWorstManifest prints the time.
func worstManifest(t testing.TB, s *Store) int {
	var b strings.Builder
	b.WriteString(`{"version":1,"tag":"step-1","kind":"trainrun","world_size":2,"hash":"xxh64-chunked","chunk_bytes":4096,"files":[`)
	n := 0
	for b.Len() < maxManifestBytes-100 {
		if n > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"path":"f%d","size":0}`, n)
		n++
	}
	b.WriteString("]}")
	must(t, os.WriteFile(manifestPath(s.tagDir("step-1")), []byte(b.String()), 0o644))
	return n
}

func TestSecWorstManifestBounded(t *testing.T) {
	s, _ := fuzzStore(t)
	n := worstManifest(t, s)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := s.Verify(context.Background(), "step-1", Sizes)
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("verify of %d absent entries = %v", n, err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 256<<20 {
		t.Fatalf("verifying a %d-entry manifest at the %d-byte cap allocated %d MiB, more than 256", n, maxManifestBytes, got>>20)
	}
	// One byte over the cap is refused without being parsed.
	p := manifestPath(s.tagDir("step-1"))
	big := make([]byte, maxManifestBytes+1)
	for i := range big {
		big[i] = ' '
	}
	must(t, os.WriteFile(p, big, 0o644))
	if _, err := readManifest(s.tagDir("step-1")); !errors.Is(err, safefs.ErrTooLarge) {
		t.Fatalf("manifest over the cap: %v", err)
	}
}

func BenchmarkWorstManifest(b *testing.B) {
	s, _ := fuzzStore(b)
	n := worstManifest(b, s)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s.Verify(context.Background(), "step-1", Sizes)
	}
	b.ReportMetric(float64(n), "entries")
}

// LatestCommitted's fallback (no usable pointer) parses at most
// resolveBudget bytes of manifests in all, however many large ones a user
// leaves in the store: slurmstepd runs it on every node at every step.
func TestSecResolveBudget(t *testing.T) {
	s := newStore(t)
	var big strings.Builder
	big.WriteString(`{"version":1,"kind":"trainrun","world_size":0,"hash":"xxh64-chunked","chunk_bytes":4096,"files":[`)
	for i := 0; big.Len() < maxManifestBytes-100; i++ {
		if i > 0 {
			big.WriteByte(',')
		}
		fmt.Fprintf(&big, `{"path":"f%d","size":0}`, i)
	}
	big.WriteString("]}")
	n := resolveBudget/maxManifestBytes + 2
	for i := 0; i < n; i++ {
		dir := s.tagDir(fmt.Sprintf("step-%d", i))
		must(t, os.MkdirAll(ckptMeta(dir), 0o755))
		must(t, os.WriteFile(manifestPath(dir), []byte(big.String()), 0o644))
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := s.LatestCommitted(context.Background())
	runtime.ReadMemStats(&after)
	if !errors.Is(err, errBudget) {
		t.Fatalf("%d manifests of %d bytes: LatestCommitted = %v, want the budget's error", n, maxManifestBytes, err)
	}
	// The bound: the budget's bytes parsed, ~13 bytes allocated per byte.
	got := after.TotalAlloc - before.TotalAlloc
	t.Logf("%d manifests of %d bytes: refused after parsing the budget (%d bytes), %d MiB allocated in all", n, maxManifestBytes, resolveBudget, got>>20)
	if got > 20*resolveBudget {
		t.Fatalf("allocated %d MiB", got>>20)
	}
}

// FuzzMarkerNames: the names a trainer creates in a checkpoint directory
// (done.<RANK>, failed.<RANK>.<CAUSE>) and Megatron's iter_NNNNNNN
// directories. No panic; an accepted marker is the canonical name
// DoneMarkerPath or FailedMarkerPath builds for its rank (two spellings of
// one rank would count twice), within maxRank, with a known cause (an
// unknown or missing one reads as io-error).
func FuzzMarkerNames(f *testing.F) {
	for _, s := range []string{"done.0", "done.01", "done.+1", "done.1048576", "failed.3.ENOSPC", "failed.3.weird", "iter_0000100", "iter_-000001", "release"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if r, ok := parseDoneMarker(name); ok {
			if r < 0 || r > maxRank || filepath.Base(DoneMarkerPath("/c", r)) != name {
				t.Fatalf("%q accepted as rank %d", name, r)
			}
		}
		if r, cause, ok := parseFailedMarker(name); ok {
			known := false
			for _, c := range DiskCauses {
				known = known || c == cause
			}
			canon := filepath.Base(FailedMarkerPath("/c", r, "")) // failed.<RANK>.
			if r < 0 || r > maxRank || !known || name != strings.TrimSuffix(canon, ".") && !strings.HasPrefix(name, canon) {
				t.Fatalf("%q accepted as rank %d cause %q", name, r, cause)
			}
		}
		if it, ok := megatronIter(name); ok && name != "release" && it < 0 {
			t.Fatalf("%q accepted as iteration %d", name, it)
		}
	})
}
