package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/trainrun/trainrun/internal/safefs"
)

// Compression of committed checkpoints (the trz codec, codec.go).
//
// A compressed file keeps its name with TRZSuffix (weights.safetensors
// becomes weights.safetensors.trz); its manifest entry keeps the original
// path, size and xxh64 and adds the codec and the stored file's size and
// xxh64. Replacing raw files by compressed ones, and back, is three durable
// steps, so that a process killed anywhere leaves a checkpoint that verifies:
//  1. each compressed copy is written to a temporary file, fsynced and
//     renamed to <name>.trz, and the directory fsynced (the manifest still
//     says raw: the raw file is what counts, the .trz is debris);
//  2. the manifest is rewritten atomically with the codec fields (from here
//     the .trz is what counts, the raw file is debris);
//  3. the raw files are removed.
// The next pass (or Restore) removes the debris of a pass cut short. Restore
// in place is the same with the roles swapped.

// CompressOptions tune Compress and CompressRetained.
type CompressOptions struct {
	// Workers is the number of parallel coders (default: all cores).
	Workers int
	// MinBytes: smaller files stay raw (default 64 KiB).
	MinBytes int64
	// MinSaving: a file whose compressed copy saves less than this
	// fraction stays raw and is recorded as tried (default 0.02).
	MinSaving float64
	// Chunk is the codec's chunk (default DefaultCodecChunk).
	Chunk int
}

func (o CompressOptions) norm() CompressOptions {
	if o.Workers <= 0 {
		o.Workers = runtime.GOMAXPROCS(0)
	}
	if o.MinBytes <= 0 {
		o.MinBytes = 64 << 10
	}
	if o.MinSaving <= 0 {
		o.MinSaving = 0.02
	}
	return o
}

// CompressResult says what compressing one checkpoint did.
type CompressResult struct {
	Tag         string
	Files       int   // files compressed this time
	RawBytes    int64 // of the checkpoint
	StoredBytes int64 // of the checkpoint, after
	Elapsed     time.Duration
}

// tagLocks serialise the read-modify-write of one checkpoint's manifest
// within a process (Seal, Compress, Restore: the controller runs the
// background pass while it commits and seals).
var tagLocks sync.Map // dir -> *sync.Mutex

func lockTag(dir string) func() {
	m, _ := tagLocks.LoadOrStore(dir, &sync.Mutex{})
	mu := m.(*sync.Mutex)
	mu.Lock()
	return mu.Unlock
}

// storedRel is the path, relative to the checkpoint, of f's bytes on disk.
func (f File) storedRel() string {
	if f.Codec == CodecTRZ {
		return f.Path + TRZSuffix
	}
	return f.Path
}

// storedSize is the size of f on disk.
func (f File) storedSize() int64 {
	if f.Codec == CodecTRZ {
		return f.StoredSize
	}
	return f.Size
}

// Compressed says whether f is stored compressed.
func (f File) Compressed() bool { return f.Codec == CodecTRZ }

// StoredBytes is the checkpoint's size on disk (Bytes when nothing is
// compressed).
func (m Manifest) StoredBytes() int64 {
	var n int64
	for _, f := range m.Files {
		n += f.storedSize()
	}
	return n
}

// Compress compresses the committed checkpoint tag's files that are raw
// (sealing it first if it was committed with deferred hashing). Each raw
// file's bytes are checked against the manifest's xxh64 on the way: a file
// that changed since the commit is not compressed, and the error says so.
func (s *Store) Compress(ctx context.Context, tag string, o CompressOptions) (CompressResult, error) {
	o = o.norm()
	start := time.Now()
	res := CompressResult{Tag: tag}
	if err := CheckTag(tag); err != nil {
		return res, err
	}
	if _, err := s.Seal(ctx, tag); err != nil {
		return res, fmt.Errorf("compress %s: %w", tag, err)
	}
	dir := s.tagDir(tag)
	defer lockTag(dir)()
	m, err := verifyDir(ctx, dir, Sizes, s.opts.Workers)
	if err != nil {
		return res, fmt.Errorf("compress %s: %w", tag, err)
	}
	if err := s.clearDebris(dir, m); err != nil {
		return res, fmt.Errorf("compress %s: %w", tag, err)
	}
	changed := false
	for i, f := range m.Files {
		if f.Codec != "" || f.Size < o.MinBytes {
			continue
		}
		nf, err := s.compressOne(ctx, dir, m.ChunkBytes, f, o)
		if err != nil {
			return res, fmt.Errorf("compress %s: %w", tag, err)
		}
		m.Files[i], changed = nf, true
		if nf.Codec == CodecTRZ {
			res.Files++
		}
	}
	res.RawBytes, res.StoredBytes = m.Bytes, m.StoredBytes()
	if !changed {
		res.Elapsed = time.Since(start)
		return res, nil
	}
	if err := s.writeManifest(dir, m); err != nil {
		return res, fmt.Errorf("compress %s: %w", tag, err)
	}
	if err := s.clearDebris(dir, m); err != nil {
		return res, fmt.Errorf("compress %s: %w", tag, err)
	}
	res.Elapsed = time.Since(start)
	return res, nil
}

// compressOne writes f's compressed copy durably as <path>.trz and returns
// its manifest entry (the raw file is left in place for clearDebris).
func (s *Store) compressOne(ctx context.Context, dir string, span int64, f File, o CompressOptions) (File, error) {
	p := filepath.Join(dir, filepath.FromSlash(f.Path))
	in, err := os.Open(p)
	if err != nil {
		return f, err
	}
	defer in.Close()
	tmp, err := os.CreateTemp(filepath.Dir(p), filepath.Base(p)+TRZSuffix+tmpInfix+"*")
	if err != nil {
		return f, fmt.Errorf("create a temporary file next to %s: %w", p, err)
	}
	fail := func(err error) (File, error) {
		tmp.Close()
		os.Remove(tmp.Name())
		return f, err
	}
	rawXXH, stored, err := encodeFile(ctx, f.Path, in, f.Size, tmp, codecOpts{Workers: o.Workers, Chunk: o.Chunk, Span: span})
	if err != nil {
		return fail(fmt.Errorf("%s: %w", p, err))
	}
	s.step("compress:encoded")
	if rawXXH != f.XXH64 {
		return fail(&VerifyError{Tag: filepath.Base(dir), Path: p, What: fmt.Sprintf("xxh64 %s, the manifest says %s: the file changed after commit; not compressed (trainrun ckpt verify)", rawXXH, f.XXH64)})
	}
	if float64(stored) > float64(f.Size)*(1-o.MinSaving) {
		tmp.Close()
		os.Remove(tmp.Name())
		f.Codec = CodecNone
		return f, nil
	}
	if err := tmp.Sync(); err != nil {
		return fail(fmt.Errorf("fsync %s: %w", tmp.Name(), err))
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return f, err
	}
	s.step("compress:temp-synced")
	if err := os.Rename(tmp.Name(), p+TRZSuffix); err != nil {
		os.Remove(tmp.Name())
		return f, err
	}
	s.step("compress:renamed")
	if err := syncDir(filepath.Dir(p)); err != nil {
		return f, err
	}
	nf := f
	nf.Codec = CodecTRZ
	sf := []File{{Path: nf.storedRel(), Size: stored}}
	if err := hashFiles(ctx, dir, sf, span, 1, false); err != nil {
		return f, err
	}
	nf.StoredSize, nf.StoredXXH64 = stored, sf[0].XXH64
	return nf, nil
}

// clearDebris removes what a cut-short Compress or Restore left in the
// checkpoint dir whose manifest is m: temporary files of the codec, the
// compressed copy of a file the manifest says is raw, the raw copy of one it
// says is compressed. It fsyncs the directories it changed.
func (s *Store) clearDebris(dir string, m Manifest) error {
	changed := map[string]bool{}
	rm := func(p string) error {
		err := os.Remove(p)
		if err == nil {
			changed[filepath.Dir(p)] = true
			s.step("compress:debris-removed")
			return nil
		}
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	known := map[string]bool{}
	for _, f := range m.Files {
		known[f.storedRel()] = true
	}
	for _, f := range m.Files {
		other := f.Path + TRZSuffix
		if f.Codec == CodecTRZ {
			other = f.Path
		}
		if known[other] { // a trainer's own file of that name
			continue
		}
		if err := rm(filepath.Join(dir, filepath.FromSlash(other))); err != nil {
			return err
		}
	}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == metaDir {
			return filepath.SkipDir
		}
		if n := d.Name(); !d.IsDir() && (strings.Contains(n, TRZSuffix+tmpInfix) || strings.Contains(n, restoreInfix+tmpInfix)) {
			return rm(p)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for d := range changed {
		if err := syncDir(d); err != nil {
			return err
		}
	}
	return nil
}

// CompressRetained compresses every committed checkpoint except the newest
// (the pointer's tag and the newest by step stay raw, for the fastest
// resume): the background pass the controller starts after each commit, and
// `trainrun ckpt compress --all`. A checkpoint pruned while it is being
// compressed is skipped.
func (s *Store) CompressRetained(ctx context.Context, o CompressOptions) ([]CompressResult, error) {
	ms, _, err := s.committed()
	if err != nil {
		return nil, err
	}
	pointer, _ := s.pointer()
	var out []CompressResult
	for i, m := range ms {
		if i == len(ms)-1 || m.Tag == pointer || !needsCompress(m, o.norm()) {
			continue
		}
		r, err := s.Compress(ctx, m.Tag, o)
		if err != nil {
			if !exists(s.tagDir(m.Tag)) {
				continue // pruned meanwhile
			}
			return out, err
		}
		out = append(out, r)
	}
	return out, ctx.Err()
}

func needsCompress(m Manifest, o CompressOptions) bool {
	for _, f := range m.Files {
		if f.Codec == "" && f.Size >= o.MinBytes {
			return true
		}
	}
	return false
}

// restoreInfix + tmpInfix names Restore's temporary files.
const restoreInfix = ".restore"

// Restore decompresses the committed checkpoint tag. With to == "", in place:
// the raw files come back (the checkpoint stays committed and verifiable
// throughout; see the steps above). Otherwise the checkpoint's files are
// written under to (created if needed), decompressed and checked against the
// manifest's xxh64, and the store is not changed: node-local staging for a
// resume, or a copy to inspect. It returns the bytes written.
func (s *Store) Restore(ctx context.Context, tag, to string, workers int) (int64, error) {
	if err := CheckTag(tag); err != nil {
		return 0, err
	}
	dir := s.tagDir(tag)
	if !exists(dir) { // not "never committed": there is nothing (issue 30)
		return 0, fmt.Errorf("restore %s: %w", tag, &VerifyError{Tag: tag, Path: dir, What: "no such checkpoint; trainrun ckpt list shows what there is"})
	}
	if to == "" {
		defer lockTag(dir)()
	}
	m, err := verifyDir(ctx, dir, Sizes, s.opts.Workers)
	if err != nil {
		return 0, fmt.Errorf("restore %s: %w", tag, err)
	}
	if to == "" {
		return s.restoreInPlace(ctx, dir, m, workers)
	}
	// --to is the user's own directory, others may not write it, and
	// nothing in it is followed out of it (review t4, F4: a DIR another
	// user made 0777, with DIR/model a link elsewhere, received the files
	// through the link, and its owner could swap them after the check).
	if err := safefs.MkdirOwn(to, "ckpt restore --to"); err != nil {
		return 0, fmt.Errorf("restore %s: %w", tag, err)
	}
	out, err := os.OpenRoot(to)
	if err != nil {
		return 0, fmt.Errorf("restore %s: %w", tag, err)
	}
	defer out.Close()
	var n int64
	for _, f := range m.Files {
		if err := s.restoreFile(ctx, dir, m, f, out, workers); err != nil {
			return n, fmt.Errorf("restore %s: %w", tag, err)
		}
		n += f.Size
	}
	return n, nil
}

// NotRaw is nil when every file of m is stored raw; otherwise it names
// the compressed ones and says how to restore them (store is where m's
// checkpoint lives). A trainer loads raw files only: handed a checkpoint
// compressed by the background pass, it would find .trz files.
func (m Manifest) NotRaw(store string) error {
	var z []string
	for _, f := range m.Files {
		if f.Compressed() {
			z = append(z, f.Path)
		}
	}
	if len(z) == 0 {
		return nil
	}
	more := ""
	if len(z) > 3 {
		z, more = z[:3], fmt.Sprintf(" and %d more", len(z)-3)
	}
	return fmt.Errorf("checkpoint %s is stored compressed (%s%s), which a trainer cannot load: restore it first with 'trainrun ckpt restore %s --ckpt-dir %s' (in place; it stays committed)",
		m.Tag, strings.Join(z, ", "), more, m.Tag, store)
}

// EnsureRaw restores tag in place if any of its files is compressed: the
// controller calls it on the checkpoint it resumes from.
func (s *Store) EnsureRaw(ctx context.Context, tag string) error {
	m, err := readManifest(s.tagDir(tag))
	if err != nil {
		return err
	}
	for _, f := range m.Files {
		if f.Compressed() {
			_, err := s.Restore(ctx, tag, "", 0)
			return err
		}
	}
	return nil
}

func (s *Store) restoreInPlace(ctx context.Context, dir string, m Manifest, workers int) (int64, error) {
	if err := s.clearDebris(dir, m); err != nil {
		return 0, err
	}
	out, err := os.OpenRoot(dir)
	if err != nil {
		return 0, err
	}
	defer out.Close()
	var n int64
	changed := false
	for i, f := range m.Files {
		if !f.Compressed() {
			continue
		}
		if err := s.restoreFile(ctx, dir, m, f, out, workers); err != nil {
			return n, fmt.Errorf("restore %s: %w", m.Tag, err)
		}
		m.Files[i] = File{Path: f.Path, Size: f.Size, XXH64: f.XXH64}
		n += f.Size
		changed = true
	}
	if !changed {
		return 0, nil
	}
	if err := s.writeManifest(dir, m); err != nil {
		return n, fmt.Errorf("restore %s: %w", m.Tag, err)
	}
	return n, s.clearDebris(dir, m)
}

// restoreFile writes f's original bytes to f.Path under out durably
// (temporary file, fsync, rename, directory fsync), checking them against
// the manifest. Every path is resolved within out: a symbolic link there
// that leads out of it is an error, not followed.
func (s *Store) restoreFile(ctx context.Context, dir string, m Manifest, f File, out *os.Root, workers int) error {
	src := filepath.Join(dir, filepath.FromSlash(f.storedRel()))
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	rel := filepath.FromSlash(f.Path)
	dst := filepath.Join(out.Name(), rel)
	if err := out.MkdirAll(filepath.Dir(rel), 0o755); err != nil {
		return fmt.Errorf("create the directory of %s: %w", dst, err)
	}
	tmp, tmpRel, err := createTempIn(out, rel+restoreInfix+tmpInfix)
	if err != nil {
		return fmt.Errorf("create a temporary file next to %s: %w", dst, err)
	}
	fail := func(err error) error {
		tmp.Close()
		out.Remove(tmpRel)
		return err
	}
	var sum string
	if f.Compressed() {
		sum, _, err = decodeFile(ctx, in, f.StoredSize, f.Size, tmp, codecOpts{Workers: workers, Span: m.ChunkBytes})
	} else {
		sum, err = copyHashed(ctx, in, f.Size, tmp, m.ChunkBytes)
	}
	if err != nil {
		return fail(fmt.Errorf("%s: %w", src, err))
	}
	if f.XXH64 != "" && sum != f.XXH64 {
		return fail(&VerifyError{Tag: m.Tag, Path: src, What: fmt.Sprintf("decodes to xxh64 %s, the manifest says %s", sum, f.XXH64)})
	}
	if err := tmp.Truncate(f.Size); err != nil {
		return fail(err)
	}
	if err := tmp.Sync(); err != nil {
		return fail(fmt.Errorf("fsync %s: %w", tmp.Name(), err))
	}
	if err := tmp.Close(); err != nil {
		out.Remove(tmpRel)
		return err
	}
	s.step("restore:temp-synced")
	if err := out.Rename(tmpRel, rel); err != nil {
		out.Remove(tmpRel)
		return err
	}
	s.step("restore:renamed")
	d, err := out.Open(filepath.Dir(rel))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// createTempIn creates a new file named prefix plus a random suffix in
// root, mode 0600, as os.CreateTemp does in a directory.
func createTempIn(root *os.Root, prefix string) (*os.File, string, error) {
	for range 100 {
		name := prefix + strconv.FormatUint(rand.Uint64(), 36)
		f, err := root.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		return f, name, err
	}
	return nil, "", fmt.Errorf("%s*: no free temporary name", prefix)
}

// copyHashed copies n bytes of in to out, returning their chunked xxh64.
func copyHashed(ctx context.Context, in *os.File, n int64, out *os.File, span int64) (string, error) {
	h := newSpanHasher(span)
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	buf := *bp
	for off := int64(0); off < n; {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		k, err := in.ReadAt(buf[:min(int64(len(buf)), n-off)], off)
		if k > 0 {
			h.Write(buf[:k])
			if _, werr := out.WriteAt(buf[:k], off); werr != nil {
				return "", werr
			}
			off += int64(k)
		}
		if err != nil && off < n {
			return "", fmt.Errorf("read at %d: %w", off, err)
		}
	}
	return h.Sum(), nil
}

// verifyCompressed decodes every compressed file of m, checking each chunk's
// stored and raw xxh64 and the original's xxh64 from the manifest: the
// Checksums level of verifyDir for them (their stored xxh64 was checked
// before).
func verifyCompressed(ctx context.Context, dir string, m Manifest, workers int) error {
	for _, f := range m.Files {
		if !f.Compressed() {
			continue
		}
		p := filepath.Join(dir, filepath.FromSlash(f.storedRel()))
		err := func() error {
			in, err := os.Open(p)
			if err != nil {
				return err
			}
			defer in.Close()
			sum, n, err := decodeFile(ctx, in, f.StoredSize, f.Size, nil, codecOpts{Workers: workers, Span: m.ChunkBytes})
			if err != nil {
				return err
			}
			if n != f.Size {
				return fmt.Errorf("decodes to %d bytes, the manifest says %d", n, f.Size)
			}
			if f.XXH64 != "" && sum != f.XXH64 {
				return fmt.Errorf("decodes to xxh64 %s, the manifest says %s", sum, f.XXH64)
			}
			return nil
		}()
		if err != nil {
			return &VerifyError{Tag: m.Tag, Path: p, What: err.Error() + " (the original is " + f.Path + ")"}
		}
	}
	return nil
}

// Background runs CompressRetained passes in the background, one at a time:
// the controller calls Kick after each commit (a Kick during a pass makes
// one more pass follow it, so the newest retained checkpoint is not missed)
// and Wait when the run ends. Passes are crash-safe: a run killed mid-pass
// leaves debris the next pass removes.
type Background struct {
	s    *Store
	o    CompressOptions
	logf func(format string, a ...any)
	mu   sync.Mutex
	busy bool
	more bool
	wg   sync.WaitGroup
}

// NewBackground prepares background passes over s; logf (may be nil) gets
// one line per compressed checkpoint and per error.
func (s *Store) NewBackground(o CompressOptions, logf func(format string, a ...any)) *Background {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	return &Background{s: s, o: o, logf: logf}
}

// Kick starts a pass, or asks the running one for another.
func (b *Background) Kick(ctx context.Context) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.busy {
		b.more = true
		return
	}
	b.busy = true
	b.wg.Add(1)
	go b.loop(ctx)
}

func (b *Background) loop(ctx context.Context) {
	defer b.wg.Done()
	for {
		res, err := b.s.CompressRetained(ctx, b.o)
		for _, r := range res {
			if r.Files > 0 {
				b.logf("compressed checkpoint %s: %d files, %d -> %d bytes (%.1f%%) in %.1fs", r.Tag, r.Files,
					r.RawBytes, r.StoredBytes, 100*float64(r.StoredBytes)/float64(max(r.RawBytes, 1)), r.Elapsed.Seconds())
			}
		}
		if err != nil && ctx.Err() == nil {
			b.logf("warning: compressing retained checkpoints: %v", err)
		}
		b.mu.Lock()
		if !b.more || ctx.Err() != nil {
			b.busy = false
			b.mu.Unlock()
			return
		}
		b.more = false
		b.mu.Unlock()
	}
}

// Wait waits for the running pass (and the one it was asked for).
func (b *Background) Wait() { b.wg.Wait() }

// locateDamage, for a compressed file (stored path rel) whose checksum
// failed, decodes it to name the damaged chunk ("" for a raw file).
func locateDamage(ctx context.Context, dir string, m Manifest, rel string, workers int) string {
	for _, f := range m.Files {
		if !f.Compressed() || f.storedRel() != rel {
			continue
		}
		in, err := os.Open(filepath.Join(dir, filepath.FromSlash(rel)))
		if err != nil {
			return ""
		}
		defer in.Close()
		if _, _, err := decodeFile(ctx, in, f.StoredSize, f.Size, nil, codecOpts{Workers: workers, Span: m.ChunkBytes}); err != nil {
			return "; " + err.Error()
		}
		return "; every chunk still decodes to its checksum: the damage is outside the chunks' bytes"
	}
	return ""
}
