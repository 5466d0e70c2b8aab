package checkpoint

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/trainrun/trainrun/internal/safefs/safefstest"
)

// Crafted trz files (review t4, F3): whoever writes a checkpoint that
// someone else verifies, restores or starts from controls its chunk index
// and its manifest, and every checksum in them, since xxh64 is not keyed.

// trzChunkSpec is one chunk of a crafted file: it declares rawLen bytes and
// stores a zstd frame of frameLen zero bytes (frameLen == rawLen: an honest
// chunk).
type trzChunkSpec struct{ rawLen, frameLen int }

func craftTRZ(t testing.TB, chunkSize int, chunks []trzChunkSpec) []byte {
	t.Helper()
	enc, _ := zstdCoders()
	h := &trzHeader{ChunkSize: chunkSize}
	var body []byte
	for _, c := range chunks {
		stored := enc.EncodeAll(make([]byte, c.frameLen), nil)
		h.Chunks = append(h.Chunks, trzChunk{StoredLen: len(stored), RawLen: c.rawLen, Elem: 1, Mode: modeZstd,
			RawXXH: xxhash.Sum64(make([]byte, c.rawLen)), StoredXXH: xxhash.Sum64(stored)})
		h.RawSize += int64(c.rawLen)
		body = append(body, stored...)
	}
	return append(h.marshal(), body...)
}

// plantTRZ replaces the first file of committed checkpoint tag by trz,
// with a manifest that agrees with it everywhere except, when size >= 0,
// the original's size (size < 0: the header's).
func plantTRZ(t testing.TB, s *Store, tag string, trz []byte, size int64) {
	t.Helper()
	dir := s.tagDir(tag)
	m, err := readManifest(dir)
	must(t, err)
	h, err := parseTRZIndex(trz[:trzHeaderLen+trzEntryLen*int(le32(trz[20:]))])
	if err != nil {
		t.Fatalf("crafted index: %v", err)
	}
	if size < 0 {
		size = h.RawSize
	}
	f := &m.Files[0]
	must(t, os.Remove(filepath.Join(dir, filepath.FromSlash(f.Path))))
	hs := newSpanHasher(m.ChunkBytes)
	zero := make([]byte, 1<<20)
	for left := size; left > 0; left -= int64(len(zero)) {
		hs.Write(zero[:min(left, int64(len(zero)))])
	}
	m.Bytes += size - f.Size
	f.Size, f.XXH64, f.Codec, f.StoredSize = size, hs.Sum(), CodecTRZ, int64(len(trz))
	must(t, os.WriteFile(filepath.Join(dir, filepath.FromSlash(f.storedRel())), trz, 0o644))
	sf := []File{{Path: f.storedRel(), Size: f.StoredSize}}
	must(t, hashFiles(context.Background(), dir, sf, m.ChunkBytes, 1, false))
	f.StoredXXH64 = sf[0].XXH64
	must(t, s.writeManifest(dir, m))
}

func le32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

// peakHeap runs f and returns the most heap (live objects and garbage not
// yet collected) it reached above what was there before.
func peakHeap(f func()) uint64 {
	runtime.GC()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 { metrics.Read(sample); return sample[0].Value.Uint64() }
	base := read()
	var peak uint64
	var mu sync.Mutex
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			v := read()
			mu.Lock()
			peak = max(peak, v)
			mu.Unlock()
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Microsecond):
			}
		}
	}()
	f()
	close(stop)
	<-done
	peak = max(peak, read())
	if peak < base {
		return 0
	}
	return peak - base
}

func TestCraftedTRZBounded(t *testing.T) {
	const limit = 64 << 20 // the acceptance bound: no crafted file under 1 MiB takes verify above it
	for _, tc := range []struct {
		name      string
		chunkSize int
		chunks    []trzChunkSpec
		size      int64  // the manifest's (-1: the header's)
		refused   string // "" the file is valid and verifies
	}{
		// What the review planted: chunks far above the codec's chunk.
		{"64 MiB chunks, manifest says 16 bytes", 64 << 20, repeatSpec(6, 64<<20, 64<<20), 16, "limit"},
		{"chunk larger than the header's chunk size", 1 << 20, []trzChunkSpec{{8 << 20, 8 << 20}}, -1, "chunk 0 declares"},
		{"header and manifest disagree", 1 << 20, repeatSpec(200, 1<<20, 1<<20), 16, "manifest says 16"},
		// A frame that decodes to far more than its chunk declares.
		{"zstd frame larger than its chunk", 1 << 20, []trzChunkSpec{{1 << 20, 512 << 20}}, -1, "zstd"},
		// Within every limit and consistent: it verifies, in bounded memory.
		{"96 chunks of 4 MiB", MaxCodecChunk, repeatSpec(96, MaxCodecChunk, MaxCodecChunk), -1, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			saveCkpt(t, s, "step-1", 1, 1)
			_, err := s.Commit(t.Context(), "step-1", 1)
			must(t, err)
			trz := craftTRZ(t, tc.chunkSize, tc.chunks)
			if len(trz) >= 1<<20 {
				t.Fatalf("crafted file is %d bytes, the bound is for files under 1 MiB", len(trz))
			}
			if tc.refused == "limit" || tc.refused == "chunk 0 declares" {
				// the index itself is refused: plant it with a manifest by hand
				plantUnchecked(t, s, "step-1", trz, tc.size)
			} else {
				plantTRZ(t, s, "step-1", trz, tc.size)
			}
			m, _ := readManifest(s.tagDir("step-1"))
			var verr error
			heap := peakHeap(func() { verr = verifyCompressed(t.Context(), s.tagDir("step-1"), m, 8) })
			t.Logf("%d-byte file: verify peak heap +%.1f MiB: %v", len(trz), float64(heap)/(1<<20), verr)
			if heap > limit {
				t.Errorf("verify reached +%d MiB of heap, the bound is %d MiB", heap>>20, limit>>20)
			}
			if tc.refused == "" && verr != nil || tc.refused != "" && (verr == nil || !strings.Contains(verr.Error(), tc.refused)) {
				t.Errorf("verify: %v, want refused=%q", verr, tc.refused)
			}
			to := filepath.Join(t.TempDir(), "out")
			var rerr error
			written := peakDisk(t, to, func() { _, rerr = s.Restore(t.Context(), "step-1", to, 8) })
			if written > m.Bytes {
				t.Errorf("restore wrote up to %d bytes, the manifest says %d (%v)", written, m.Bytes, rerr)
			}
			if (rerr == nil) != (tc.refused == "") {
				t.Errorf("restore: %v", rerr)
			}
		})
	}
}

func repeatSpec(n, rawLen, frameLen int) []trzChunkSpec {
	out := make([]trzChunkSpec, n)
	for i := range out {
		out[i] = trzChunkSpec{rawLen, frameLen}
	}
	return out
}

// plantUnchecked is plantTRZ for an index this code refuses to parse: the
// header's raw size is read by hand.
func plantUnchecked(t testing.TB, s *Store, tag string, trz []byte, size int64) {
	t.Helper()
	dir := s.tagDir(tag)
	m, err := readManifest(dir)
	must(t, err)
	if size < 0 {
		size = int64(le32(trz[8:])) | int64(le32(trz[12:]))<<32
	}
	f := &m.Files[0]
	must(t, os.Remove(filepath.Join(dir, filepath.FromSlash(f.Path))))
	m.Bytes += size - f.Size
	f.Size, f.XXH64, f.Codec, f.StoredSize = size, "", CodecTRZ, int64(len(trz))
	must(t, os.WriteFile(filepath.Join(dir, filepath.FromSlash(f.storedRel())), trz, 0o644))
	sf := []File{{Path: f.storedRel(), Size: f.StoredSize}}
	must(t, hashFiles(context.Background(), dir, sf, m.ChunkBytes, 1, false))
	f.StoredXXH64 = sf[0].XXH64
	must(t, s.writeManifest(dir, m))
}

// peakDisk runs f and returns the most bytes the files under dir held
// meanwhile (sampled: a lower bound on the true peak).
func peakDisk(t testing.TB, dir string, f func()) int64 {
	var peak int64
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			peak = max(peak, dirBytes(t, dir))
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	f()
	close(stop)
	<-done
	return max(peak, dirBytes(t, dir))
}

// dirBytes is the size of every regular file under dir, temporary ones too.
func dirBytes(t testing.TB, dir string) int64 {
	var n int64
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
		return nil
	})
	return n
}

// FuzzTRZIndex: any bytes given as a trz file are refused or decoded
// without a panic; an accepted index keeps the codec's limits, and what
// decodes is what the header declares.
func FuzzTRZIndex(f *testing.F) {
	raw := make([]byte, 3<<20)
	for i := range raw {
		raw[i] = byte(i * 7 % 251)
	}
	var w memWriterAt
	_, n, err := encodeFile(context.Background(), "x.bin", bytes.NewReader(raw), int64(len(raw)), &w, codecOpts{Workers: 2, Chunk: 1 << 20})
	must(f, err)
	f.Add(w.b[:n])
	f.Add(craftTRZ(f, 1<<20, []trzChunkSpec{{1 << 20, 1 << 20}, {100, 100}}))
	f.Add(craftTRZ(f, 64<<20, []trzChunkSpec{{64 << 20, 64 << 20}}))
	f.Add(craftTRZ(f, 1<<20, []trzChunkSpec{{1 << 20, 8 << 20}}))
	f.Add(craftTRZ(f, 1<<20, nil))
	f.Add([]byte("TRZ\x01"))
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := readTRZIndex(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return
		}
		if h.ChunkSize > MaxCodecChunk {
			t.Fatalf("accepted chunk size %d", h.ChunkSize)
		}
		for i, c := range h.Chunks {
			if c.RawLen > h.ChunkSize || c.StoredLen > c.RawLen || c.StoredLen < 0 {
				t.Fatalf("accepted chunk %d: %+v (chunk size %d)", i, c, h.ChunkSize)
			}
		}
		if h.RawSize > 32<<20 {
			return // valid, but long to decode: the fuzzer looks for crashes
		}
		var out memWriterAt
		_, got, err := decodeFile(context.Background(), bytes.NewReader(data), int64(len(data)), h.RawSize, &out, codecOpts{Workers: 2})
		if err == nil && (got != h.RawSize || int64(len(out.b)) > h.RawSize) {
			t.Fatalf("decoded %d bytes (wrote %d), the header says %d", got, len(out.b), h.RawSize)
		}
	})
}

// Review t4, F4: restore --to accepted a DIR another user made (mode 0777)
// and followed DIR/model, a link they planted, out of it.
func TestRestoreToRefusesForeignDirAndLinks(t *testing.T) {
	s := newStore(t)
	saveTensorCkpt(t, s, "step-10", 1, 2)
	_, err := s.Commit(t.Context(), "step-10", 1)
	must(t, err)
	_, err = s.Compress(t.Context(), "step-10", CompressOptions{})
	must(t, err)

	// The user's own DIR, where a link leads out: refused, nothing written there.
	elsewhere := t.TempDir()
	own := filepath.Join(t.TempDir(), "to")
	must(t, os.Mkdir(own, 0o700))
	must(t, os.Symlink(elsewhere, filepath.Join(own, "model")))
	if _, err := s.Restore(t.Context(), "step-10", own, 2); err == nil {
		t.Error("restore followed DIR/model out of DIR")
	}
	if entries, _ := os.ReadDir(elsewhere); len(entries) != 0 {
		t.Errorf("files written through the link: %v", entries)
	}

	// A DIR another user made, open to all.
	foreign := filepath.Join(t.TempDir(), "to")
	must(t, os.Mkdir(foreign, 0o777))
	must(t, os.Chmod(foreign, 0o777))
	safefstest.AsNobody(t, foreign)
	if _, err := s.Restore(t.Context(), "step-10", foreign, 2); err == nil || !strings.Contains(err.Error(), "uid 65534") {
		t.Errorf("restore into nobody's 0777 DIR: %v", err)
	}

	// A fresh DIR works, and holds the checkpoint.
	fresh := filepath.Join(t.TempDir(), "new", "to")
	if _, err := s.Restore(t.Context(), "step-10", fresh, 2); err != nil {
		t.Fatal(err)
	}
	m, _ := readManifest(s.tagDir("step-10"))
	if got := dirBytes(t, fresh); got != m.Bytes {
		t.Errorf("restored %d bytes, the manifest says %d", got, m.Bytes)
	}
}
