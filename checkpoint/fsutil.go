package checkpoint

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/cespare/xxhash/v2"

	"github.com/trainrun/trainrun/internal/atomicfile"
)

// syncDir makes the entries of dir (creations, renames, removals) durable
// (atomicfile.SyncDir says how on each file system).
func syncDir(dir string) error { return atomicfile.SyncDir(dir) }

// writeFileAtomic replaces path with data durably (atomicfile.Durable: a
// temporary file in the same directory, fsynced, renamed, then the directory
// fsynced), mode 0600 as before. The temporary name carries tmpInfix, so
// Recover and the listing know it; the store's hook runs at every step as
// "what:step" so the crash test can die there.
func (s *Store) writeFileAtomic(path string, data []byte, what string) error {
	if s.fault != nil {
		if err := s.fault(what); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
	}
	return atomicfile.WriteFile(path, data, 0o600, atomicfile.Durable(), atomicfile.TempInfix(tmpInfix),
		atomicfile.Hook(func(step string) { s.step(what + ":" + step) }))
}

// createMarker creates an empty file durably (the file and its directory entry).
func createMarker(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("create marker %s: %w", path, err)
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("fsync marker %s: %w", path, err)
	}
	return nil
}

// The file digest is chunked so that one big file can be hashed (and drained)
// by several workers: a file of at most one chunk has digest xxh64(content),
// the value `xxhsum -H64` prints; a longer file has
// xxh64(xxh64(chunk0) || xxh64(chunk1) || ...), each chunk hash little-endian.
// The chunk size is recorded in the manifest.
const DefaultChunkBytes = 64 << 20

func combineChunks(sums []uint64) uint64 {
	if len(sums) == 1 {
		return sums[0]
	}
	if len(sums) == 0 {
		return xxhash.Sum64(nil)
	}
	buf := make([]byte, 8*len(sums))
	for i, v := range sums {
		binary.LittleEndian.PutUint64(buf[8*i:], v)
	}
	return xxhash.Sum64(buf)
}

func numChunks(size, chunk int64) int {
	if size <= 0 {
		return 1
	}
	return int((size + chunk - 1) / chunk)
}

// bufPool holds the I/O buffers of hashing and draining (1 MiB: large enough
// that syscalls are not the cost, small enough for many workers).
const ioBuf = 1 << 20

var bufPool = sync.Pool{New: func() any { b := make([]byte, ioBuf); return &b }}

// hashRange hashes bytes [off, off+n) of f.
func hashRange(f *os.File, off, n int64) (uint64, error) {
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	buf := *bp
	d := xxhash.New()
	for n > 0 {
		m := int64(len(buf))
		if n < m {
			m = n
		}
		k, err := f.ReadAt(buf[:m], off)
		d.Write(buf[:k])
		off += int64(k)
		n -= int64(k)
		if err != nil {
			if errors.Is(err, io.EOF) && n > 0 {
				return 0, fmt.Errorf("%s: file ended %d bytes early (it shrank while being read)", f.Name(), n)
			}
			if !errors.Is(err, io.EOF) {
				return 0, err
			}
		}
	}
	return d.Sum64(), nil
}
