package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/trainrun/trainrun/internal/safefs"
)

// Reading the store as anyone (the SPANK plugin resolves the resume point in
// slurmstepd; the epilog and controllers read what users wrote): every open
// of a store file is O_NOFOLLOW|O_NONBLOCK, of a regular file, through a
// size limit, and paths a manifest names stay inside their checkpoint
// (issue 12, finding 1).

const (
	// maxManifestBytes bounds one manifest: about 70,000 files at typical
	// path lengths (a 16k-rank DCP save is one file per rank), and at most
	// ~300,000 of the shortest entries, which parse within 256 MiB
	// (TestSecWorstManifestBounded; 16 MiB passed that bound once the
	// compression fields joined each entry).
	maxManifestBytes = 8 << 20
	// maxHistoryBytes bounds .trainrun/history.jsonl (two events of a few
	// hundred bytes per incarnation); maxSmallFile the finished marker, a
	// checkpoint request and Megatron's tracker.
	maxHistoryBytes = 16 << 20
	maxSmallFile    = 64 << 10
	// maxPointerBytes bounds .trainrun/latest: one tag and a newline.
	maxPointerBytes = 4096
	// minChunkBytes and maxChunkBytes bound a manifest's chunk_bytes: a
	// 1-byte chunk would make verify allocate a hash per byte.
	minChunkBytes = 4 << 10
	maxChunkBytes = 1 << 30
	// maxChunks bounds the chunks one hashing pass tracks (24 bytes each:
	// 48 MiB), 128 TiB at the default chunk size.
	maxChunks = 1 << 21
)

// openTag opens a checkpoint directory as an os.Root, so that nothing read
// below it escapes it through a symbolic link or "..". The directory itself
// must be a directory, not a link.
func openTag(dir string) (*os.Root, error) {
	fi, err := os.Lstat(dir)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("%s is not a directory (%s)", dir, fi.Mode().Type())
	}
	return os.OpenRoot(dir)
}

// openInTag opens rel under the checkpoint root r read-only, without
// following a final link, without blocking, and only a regular file.
func openInTag(r *os.Root, dir, rel string) (*os.File, error) {
	f, err := r.OpenFile(rel, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s is not a regular file", filepath.Join(dir, rel))
	}
	return f, nil
}

// readInTag reads rel under the checkpoint directory dir, at most max bytes.
func readInTag(dir, rel string, max int64) ([]byte, error) {
	r, err := openTag(dir)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	f, err := openInTag(r, dir, rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return safefs.ReadLimit(f, filepath.Join(dir, rel), max)
}

// checkEntryPath accepts a manifest entry only when it is a clean relative
// slash-separated path inside the checkpoint, outside its .trainrun/: no
// "..", no leading "/" or "./", no empty element, no NUL or backslash.
func checkEntryPath(p string) error {
	if p == "" || len(p) > 4096 || path.Clean(p) != p || !filepath.IsLocal(p) ||
		strings.ContainsAny(p, "\x00\\") || p == metaDir || strings.HasPrefix(p, metaDir+"/") {
		return fmt.Errorf("manifest entry %q is not a clean relative path inside the checkpoint; the manifest was not written by trainrun: delete it or quarantine the checkpoint", p)
	}
	return nil
}

// checkManifest bounds what a parsed manifest makes the reader do.
func checkManifest(p string, m *Manifest) error {
	if m.ChunkBytes < minChunkBytes || m.ChunkBytes > maxChunkBytes {
		return fmt.Errorf("manifest %s: chunk_bytes %d is outside [%d, %d]; trainrun never writes that: delete the manifest or quarantine the checkpoint",
			p, m.ChunkBytes, minChunkBytes, maxChunkBytes)
	}
	if m.WorldSize < 0 || m.WorldSize > maxRank {
		return fmt.Errorf("manifest %s: world_size %d is outside [0, %d]", p, m.WorldSize, maxRank)
	}
	for _, f := range m.Files {
		if err := checkEntryPath(f.Path); err != nil {
			return fmt.Errorf("manifest %s: %w", p, err)
		}
		if f.Size < 0 {
			return fmt.Errorf("manifest %s: entry %q has a negative byte count", p, f.Path)
		}
		if f.XXH64 != "" && !isHex16(f.XXH64) {
			return fmt.Errorf("manifest %s: entry %q: xxh64 is not 16 hex digits", p, f.Path)
		}
	}
	return nil
}

func isHex16(s string) bool {
	if len(s) != 16 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// readPointer reads .trainrun/latest once: "" when absent; an error when it
// is a link, not a regular file, too large, or does not name a tag.
func (s *Store) readPointer() (string, error) {
	d, err := s.openMeta("", false)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	defer d.Close()
	b, err := safefs.ReadFileAt(d, "latest", maxPointerBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	tag := strings.TrimSpace(string(b))
	if CheckTag(tag) != nil {
		return "", fmt.Errorf("pointer %s does not name a checkpoint tag; trainrun rewrites it at the next commit (or delete it)", s.pointerPath())
	}
	return tag, nil
}

// hasManifest says whether tag's directory (not a link) holds a regular
// manifest file, without following links out of it.
func (s *Store) hasManifest(tag string) bool {
	r, err := openTag(s.tagDir(tag))
	if err != nil {
		return false
	}
	defer r.Close()
	fi, err := r.Lstat(filepath.Join(metaDir, manifestName))
	return err == nil && fi.Mode().IsRegular()
}

// resolveBudget is the manifest bytes LatestCommitted's fallback may parse
// in all, listing and verifying together (a few seconds of CPU at the worst
// entry density, see BenchmarkWorstManifest); an honest store resolves by
// its pointer and parses none.
const resolveBudget = 48 << 20

var errBudget = errors.New("manifest read budget exhausted")

// readBudget is what is left of resolveBudget, and each manifest's size as
// committed() read it (verifying it again is charged the same).
type readBudget struct {
	left  int64
	sizes map[string]int64
}

func newReadBudget() *readBudget {
	return &readBudget{left: resolveBudget, sizes: map[string]int64{}}
}

func (s *Store) budgetErr() error {
	return fmt.Errorf("checkpoint store %s: resolving it would parse more than %d bytes of manifests: %w; as the user, trainrun ckpt list and verify show what is wrong (the controller repairs the pointer at its next commit)",
		s.dir, resolveBudget, errBudget)
}

// readManifestBudget is readManifest within the store's budget, if any.
func (s *Store) readManifestBudget(dir string) (Manifest, error) {
	b := s.budget
	if b == nil {
		return readManifest(dir)
	}
	if b.left <= 0 {
		return Manifest{}, s.budgetErr()
	}
	m, n, err := readManifestMax(dir, min(b.left, maxManifestBytes))
	if errors.Is(err, safefs.ErrTooLarge) && b.left < maxManifestBytes {
		b.left = 0
		return m, s.budgetErr()
	}
	b.left -= int64(n)
	b.sizes[dir] = int64(n)
	return m, err
}

// chargeVerify charges verifying dir's manifest again to the budget.
func (s *Store) chargeVerify(dir string) error {
	b := s.budget
	if b == nil {
		return nil
	}
	n := b.sizes[dir]
	if n > b.left {
		return s.budgetErr()
	}
	b.left -= n
	return nil
}
