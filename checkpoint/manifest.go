package checkpoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Manifest is the commit record of one checkpoint, stored in
// <tag>/.trainrun/manifest.json. Its presence in a checkpoint directory outside
// staging means the checkpoint is committed.
type Manifest struct {
	Version     int       `json:"version"`
	Tag         string    `json:"tag"`
	Kind        Kind      `json:"kind"`       // trainrun (the handshake) or the native layout it was committed from
	WorldSize   int       `json:"world_size"` // done markers expected; 0 for native kinds
	Step        int64     `json:"step"`       // StepOf(tag)
	Seq         int64     `json:"seq"`        // commit order in this store, 1, 2, ...
	CommittedAt time.Time `json:"committed_at"`
	Hash        string    `json:"hash"`        // "xxh64-chunked"
	ChunkBytes  int64     `json:"chunk_bytes"` // see combineChunks
	Bytes       int64     `json:"bytes"`       // sum of the files' sizes
	Files       []File    `json:"files"`       // sorted by Path
}

// File is one file of a checkpoint.
type File struct {
	Path  string `json:"path"` // slash-separated, relative to the checkpoint directory
	Size  int64  `json:"size"`
	XXH64 string `json:"xxh64,omitempty"` // 16 hex digits; "" until Seal when committed with DeferHash
	// Codec is "" for a file stored as the trainer wrote it, CodecTRZ for one
	// stored compressed as Path+TRZSuffix (Size and XXH64 stay the
	// original's), CodecNone for one tried and kept raw (it does not compress).
	Codec       string `json:"codec,omitempty"`
	StoredSize  int64  `json:"stored_size,omitempty"`  // of Path+TRZSuffix, when compressed
	StoredXXH64 string `json:"stored_xxh64,omitempty"` // of Path+TRZSuffix, when compressed
}

const manifestVersion = 1
const hashName = "xxh64-chunked"

func hex64(v uint64) string { return fmt.Sprintf("%016x", v) }

// VerifyError says which file of which checkpoint failed and how.
type VerifyError struct {
	Tag  string
	Path string // the failing file (or marker), absolute
	What string
}

func (e *VerifyError) Error() string {
	return fmt.Sprintf("checkpoint %s: %s: %s", e.Tag, e.Path, e.What)
}

// listFiles returns the trainer's files under dir (relative, slash-separated,
// sorted), leaving out the store's own .trainrun/ and temporary files.
func listFiles(dir string) ([]File, error) {
	var out []File
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			if rel == metaDir {
				return filepath.SkipDir
			}
			return nil
		}
		if isTempName(d.Name()) {
			return nil
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s is not a regular file (a symlink or device); a checkpoint holds plain files only", p)
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		out = append(out, File{Path: filepath.ToSlash(rel), Size: fi.Size()})
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, err
}

// hashFiles fills in XXH64 of files under dir with workers goroutines over
// chunks, and fsyncs each file first when fsync is set.
func hashFiles(ctx context.Context, dir string, files []File, chunk int64, workers int, fsync bool) error {
	type unit struct{ file, chunk int }
	sums := make([][]uint64, len(files))
	var units []unit
	total := 0
	for _, f := range files {
		total += numChunks(f.Size, chunk)
		if total > maxChunks {
			return fmt.Errorf("more than %d chunks of %d bytes to hash in %s: use a larger chunk size", maxChunks, chunk, dir)
		}
	}
	for i, f := range files {
		n := numChunks(f.Size, chunk)
		sums[i] = make([]uint64, n)
		for c := 0; c < n; c++ {
			units = append(units, unit{i, c})
		}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	var next atomic.Int64
	var once sync.Once
	var firstErr error
	var wg sync.WaitGroup
	if workers < 1 {
		workers = 1
	}
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(units) || ctx.Err() != nil {
					return
				}
				u := units[i]
				f := files[u.file]
				p := filepath.Join(dir, filepath.FromSlash(f.Path))
				err := func() error {
					fh, err := openInTag(root, dir, filepath.FromSlash(f.Path))
					if err != nil {
						return err
					}
					defer fh.Close()
					if fsync && u.chunk == 0 {
						if err := fh.Sync(); err != nil {
							return fmt.Errorf("fsync: %w", err)
						}
					}
					off := int64(u.chunk) * chunk
					n := min(chunk, f.Size-off)
					if n < 0 {
						n = 0
					}
					v, err := hashRange(fh, off, n)
					sums[u.file][u.chunk] = v
					return err
				}()
				if err != nil {
					once.Do(func() { firstErr = fmt.Errorf("hash %s: %w", p, err) })
					next.Store(int64(len(units)))
					return
				}
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	for i := range files {
		files[i].XXH64 = hex64(combineChunks(sums[i]))
	}
	return nil
}

func readManifest(ckptDir string) (Manifest, error) {
	m, _, err := readManifestMax(ckptDir, maxManifestBytes)
	return m, err
}

// readManifestMax is readManifest reading at most max bytes; n is how many
// it read.
func readManifestMax(ckptDir string, max int64) (m Manifest, n int, err error) {
	p := manifestPath(ckptDir)
	b, err := readInTag(ckptDir, filepath.Join(metaDir, manifestName), max)
	if err != nil {
		return m, 0, err
	}
	m, err = parseManifest(p, b)
	return m, len(b), err
}

func parseManifest(p string, b []byte) (Manifest, error) {
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("manifest %s is not valid JSON (%v); the checkpoint cannot be trusted: quarantine it (trainrun ckpt verify names it) or delete it", p, err)
	}
	if m.Version != manifestVersion || m.Hash != hashName {
		return m, fmt.Errorf("manifest %s: version %d, hash %q: this trainrun reads version %d with %q; use the trainrun that wrote it",
			p, m.Version, m.Hash, manifestVersion, hashName)
	}
	return m, checkManifest(p, &m)
}

// Level is how deeply Verify checks a committed checkpoint.
type Level int

const (
	// Sizes checks the markers and that every file exists with its size.
	Sizes Level = iota
	// Checksums also rereads every file and compares its xxh64.
	Checksums
)

// verifyDir checks a committed checkpoint directory against its manifest.
func verifyDir(ctx context.Context, dir string, level Level, workers int) (Manifest, error) {
	m, err := readManifest(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return m, &VerifyError{Tag: filepath.Base(dir), Path: manifestPath(dir),
			What: "no manifest: the checkpoint was never committed (trainrun commits it once every rank has marked done)"}
	}
	if err != nil {
		return m, &VerifyError{Tag: filepath.Base(dir), Path: manifestPath(dir), What: err.Error()}
	}
	// One listing, not a stat per rank: world_size comes from the file.
	if m.WorldSize > 0 {
		ranks, err := doneRanks(dir)
		if err != nil || !allDone(ranks, m.WorldSize) {
			miss := missingRanks(ranks, m.WorldSize)
			p := DoneMarkerPath(dir, 0)
			if miss != "" {
				p = filepath.Join(ckptMeta(dir), doneMarker+strings.Split(miss, ",")[0])
			}
			return m, &VerifyError{Tag: m.Tag, Path: p, What: fmt.Sprintf("rank %s's done marker is missing though the manifest expects %d ranks", miss, m.WorldSize)}
		}
	}
	root, err := openTag(dir)
	if err != nil {
		return m, &VerifyError{Tag: m.Tag, Path: dir, What: errString(err)}
	}
	defer root.Close()
	got := make([]File, len(m.Files))
	for i, f := range m.Files {
		// Entry paths were checked (clean, relative) when the manifest was
		// read; the root keeps links from leading out of the checkpoint.
		rel := filepath.FromSlash(f.storedRel())
		p := filepath.Join(dir, rel)
		fi, err := root.Lstat(rel)
		if err != nil {
			return m, &VerifyError{Tag: m.Tag, Path: p, What: "missing: " + errString(err)}
		}
		if !fi.Mode().IsRegular() {
			return m, &VerifyError{Tag: m.Tag, Path: p, What: "not a regular file"}
		}
		if fi.Size() != f.storedSize() {
			return m, &VerifyError{Tag: m.Tag, Path: p, What: fmt.Sprintf("size %d bytes, the manifest says %d: the file changed after commit", fi.Size(), f.storedSize())}
		}
		got[i] = File{Path: f.storedRel(), Size: f.storedSize()}
	}
	if level < Checksums {
		return m, nil
	}
	var hashed []File // files with a recorded checksum (all, once sealed)
	var want []File
	for i, f := range m.Files {
		if f.Compressed() {
			f.Path, f.XXH64 = f.storedRel(), f.StoredXXH64
		}
		if f.XXH64 != "" {
			hashed = append(hashed, got[i])
			want = append(want, f)
		}
	}
	if err := hashFiles(ctx, dir, hashed, m.ChunkBytes, workers, false); err != nil {
		return m, &VerifyError{Tag: m.Tag, Path: dir, What: err.Error()}
	}
	for i, f := range want {
		if hashed[i].XXH64 != f.XXH64 {
			return m, &VerifyError{Tag: m.Tag, Path: filepath.Join(dir, filepath.FromSlash(f.Path)),
				What: fmt.Sprintf("xxh64 %s, the manifest says %s: the content changed after commit (bit rot, an overwrite or a partial copy)", hashed[i].XXH64, f.XXH64)}
		}
	}
	return m, verifyCompressed(ctx, dir, m, workers)
}

func errString(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// DoneRanks lists, sorted, the ranks whose done markers exist in the
// checkpoint directory ckptDir (in the store, in staging or node-local).
func DoneRanks(ckptDir string) ([]int, error) { return doneRanks(ckptDir) }

func doneRanks(ckptDir string) ([]int, error) {
	ents, err := os.ReadDir(ckptMeta(ckptDir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var ranks []int
	for _, e := range ents {
		if r, ok := parseDoneMarker(e.Name()); ok {
			ranks = append(ranks, r)
		}
	}
	sort.Ints(ranks)
	return ranks, nil
}

// parseDoneMarker accepts only the canonical name done.<rank> that
// DoneMarkerPath builds (decimal, no sign, no leading zero, at most
// maxRank): done.01 or done.+1 is not rank 1, so two names can never count
// as two ranks when they are one (issue 12, finding 7). Names in a
// directory are unique, so canonical names are distinct ranks.
func parseDoneMarker(name string) (int, bool) {
	if !strings.HasPrefix(name, doneMarker) {
		return 0, false
	}
	num := name[len(doneMarker):]
	if num == "" || len(num) > 7 || (num[0] == '0' && len(num) > 1) {
		return 0, false
	}
	r := 0
	for i := 0; i < len(num); i++ {
		if num[i] < '0' || num[i] > '9' {
			return 0, false
		}
		r = r*10 + int(num[i]-'0')
	}
	if r > maxRank {
		return 0, false
	}
	return r, true
}

// maxRank bounds a rank in a marker name: well above any job (a million
// ranks), and what keeps a world size read from a manifest sane.
const maxRank = 1 << 20

// allDone says whether every rank 0..world-1 has a marker; ranks may hold
// duplicates (a caller's list), which count once.
func allDone(ranks []int, world int) bool {
	if world <= 0 {
		return false
	}
	seen := make(map[int]struct{}, len(ranks))
	for _, r := range ranks {
		if r >= 0 && r < world {
			seen[r] = struct{}{}
		}
	}
	return len(seen) == world
}

// syncFiles fsyncs files under dir with workers goroutines, reading nothing.
func syncFiles(ctx context.Context, dir string, files []File, workers int) error {
	var next atomic.Int64
	var once sync.Once
	var firstErr error
	var wg sync.WaitGroup
	for w := 0; w < max(workers, 1); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= len(files) {
					return
				}
				p := filepath.Join(dir, filepath.FromSlash(files[i].Path))
				err := func() error {
					f, err := os.Open(p)
					if err != nil {
						return err
					}
					defer f.Close()
					return f.Sync()
				}()
				if err != nil {
					once.Do(func() { firstErr = fmt.Errorf("fsync %s: %w", p, err) })
					next.Store(int64(len(files)))
					return
				}
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	return ctx.Err()
}
