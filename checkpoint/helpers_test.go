package checkpoint

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/cespare/xxhash/v2"
)

// content is deterministic pseudo-random bytes for (tag, rank, file), so any
// process can regenerate what a checkpoint must hold and compare.
func content(tag string, rank, file, size int) []byte {
	x := xxhash.Sum64String(tag+"/"+strconv.Itoa(rank)+"/"+strconv.Itoa(file)) | 1
	b := make([]byte, size)
	for i := 0; i+8 <= size; i += 8 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		for k := 0; k < 8; k++ {
			b[i+k] = byte(x>>(8*k)) & 0x3f // 6 bits of noise a byte: compressible
		}
	}
	for i := size &^ 7; i < size; i++ {
		b[i] = byte(i)
	}
	return b
}

func shardName(rank, file int) string {
	return filepath.Join("model", "rank"+strconv.Itoa(rank), "shard"+strconv.Itoa(file)+".bin")
}

// sizeOf gives file sizes that vary (some empty, some multi-chunk with the
// tests' 4 KiB chunks).
func sizeOf(rank, file int) int { return ((rank*7 + file*13) % 5) * 3000 }

// saveRanks writes ranks' files of checkpoint tag under dir (the checkpoint
// directory) and their done markers, like a trainer following the handshake.
func saveRanks(t testing.TB, dir, tag string, ranks []int, filesPerRank int) {
	t.Helper()
	for _, r := range ranks {
		for f := 0; f < filesPerRank; f++ {
			p := filepath.Join(dir, shardName(r, f))
			must(t, os.MkdirAll(filepath.Dir(p), 0o755))
			must(t, os.WriteFile(p, content(tag, r, f, sizeOf(r, f)), 0o644))
		}
		if r == 0 {
			must(t, os.WriteFile(filepath.Join(dir, "common.json"), []byte(`{"tag":"`+tag+`"}`), 0o644))
		}
		must(t, os.MkdirAll(filepath.Join(dir, metaDir), 0o755))
		must(t, os.WriteFile(DoneMarkerPath(dir, r), nil, 0o644))
	}
}

func saveCkpt(t testing.TB, s *Store, tag string, world, filesPerRank int) {
	t.Helper()
	saveRanks(t, s.tagDir(tag), tag, seq(world), filesPerRank)
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// checkContent compares a checkpoint directory with what saveRanks wrote.
func checkContent(dir, tag string, world, filesPerRank int) error {
	for r := 0; r < world; r++ {
		for f := 0; f < filesPerRank; f++ {
			p := filepath.Join(dir, shardName(r, f))
			b, err := readMaybeCompressed(p)
			if err != nil {
				return err
			}
			if !bytes.Equal(b, content(tag, r, f, sizeOf(r, f))) {
				return &VerifyError{Tag: tag, Path: p, What: "content differs from what the trainer wrote"}
			}
		}
	}
	return nil
}

func newStore(t testing.TB) *Store {
	t.Helper()
	s, err := OpenWith(t.TempDir(), Options{ChunkBytes: 4096, Workers: 4})
	must(t, err)
	return s
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// safeBuffer is a bytes.Buffer safe for a child's stdout and stderr at once.
type safeBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *safeBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *safeBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// readMaybeCompressed reads p, or decodes p+TRZSuffix when only that exists.
func readMaybeCompressed(p string) ([]byte, error) {
	b, err := os.ReadFile(p)
	if err == nil || !os.IsNotExist(err) {
		return b, err
	}
	z, err := os.ReadFile(p + TRZSuffix)
	if err != nil {
		return nil, err
	}
	var w memWriterAt
	_, n, err := decodeFile(context.Background(), bytes.NewReader(z), int64(len(z)), -1, &w, codecOpts{Workers: 2})
	if err != nil {
		return nil, fmt.Errorf("%s%s: %w", p, TRZSuffix, err)
	}
	return w.b[:n], nil
}

type memWriterAt struct{ b []byte }

func (w *memWriterAt) WriteAt(p []byte, off int64) (int, error) {
	if end := off + int64(len(p)); end > int64(len(w.b)) {
		w.b = append(w.b, make([]byte, end-int64(len(w.b)))...)
	}
	return copy(w.b[off:], p), nil
}
