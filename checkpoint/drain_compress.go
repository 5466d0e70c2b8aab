package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"
)

// Compress-on-drain: the tiered drain writes a file into staging already
// compressed (<name>.trz, recorded with its codec in the node's drain
// record) when the store's drain setting says so. The setting lives in the
// store (.trainrun/compress, written by the controller from CkptCompress),
// so that every drainer of the store, the shims and the epilog's `trainrun
// ckpt drain`, follows it without a flag of its own.

// Drain compression modes (policy CkptCompress).
const (
	CompressNo      = "no"      // never
	CompressArchive = "archive" // retained checkpoints only: drains stay raw
	CompressAuto    = "auto"    // drains compress when the target is slower than the compressor
	CompressAlways  = "always"  // drains always compress
)

func (s *Store) compressPath() string { return filepath.Join(s.dir, metaDir, "compress") }

// SetCompressMode records the run's CkptCompress in the store for its
// drains (durably, atomically); "" or "no" removes it.
func (s *Store) SetCompressMode(mode string) error {
	switch mode {
	case "", CompressNo:
		err := os.Remove(s.compressPath())
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	case CompressArchive, CompressAuto, CompressAlways:
	default:
		return fmt.Errorf("compression mode %q: use no, archive, auto or always", mode)
	}
	if err := s.mkMeta(); err != nil {
		return err
	}
	return s.writeFileAtomic(s.compressPath(), []byte(mode+"\n"), "compress-mode")
}

// CompressMode is the store's drain compression setting ("no" if none).
func (s *Store) CompressMode() string {
	b, err := os.ReadFile(s.compressPath())
	if err != nil {
		return CompressNo
	}
	switch m := strings.TrimSpace(string(b)); m {
	case CompressArchive, CompressAuto, CompressAlways:
		return m
	}
	return CompressNo
}

// DrainCompression says what a drain decided about compressing.
type DrainCompression struct {
	Mode           string  // the store's setting
	Compress       bool    // whether this drain compressed
	CompressorMBps float64 // auto: measured on a sample with all cores
	TargetMBps     float64 // auto: measured writing a probe into staging
}

// drainSplit takes the files a drain compresses out of files, per the
// store's setting (auto measures; see drainDecide).
func (s *Store) drainSplit(src, stage string, files []File, minBytes int64) (raw, z []File, dc DrainCompression) {
	dc.Mode = s.CompressMode()
	o := CompressOptions{MinBytes: minBytes}.norm()
	var cand []File
	for _, f := range files {
		if f.Size >= o.MinBytes {
			cand = append(cand, f)
		} else {
			raw = append(raw, f)
		}
	}
	if len(cand) == 0 || dc.Mode == CompressNo || dc.Mode == CompressArchive {
		return files, nil, dc
	}
	dc.Compress = dc.Mode == CompressAlways
	if dc.Mode == CompressAuto {
		dc = drainDecide(src, stage, cand, dc)
	}
	if !dc.Compress {
		return files, nil, dc
	}
	return raw, cand, dc
}

// drainDecide measures the compressor on 4 MiB of the largest file (all
// cores) and the target by writing and fsyncing 16 MiB into staging, and
// compresses when the compressor is the faster: then the drain writes fewer
// bytes in no more time.
func drainDecide(src, stage string, cand []File, dc DrainCompression) DrainCompression {
	big := cand[0]
	for _, f := range cand {
		if f.Size > big.Size {
			big = f
		}
	}
	p := filepath.Join(src, filepath.FromSlash(big.Path))
	in, err := os.Open(p)
	if err != nil {
		return dc
	}
	defer in.Close()
	n := min(big.Size, 4<<20)
	var sink memSink
	t := time.Now()
	if _, _, err := encodeFile(context.Background(), big.Path, sectionAt{in, n}, n, &sink, codecOpts{}); err != nil {
		return dc
	}
	dc.CompressorMBps = float64(n) / 1e6 / max(time.Since(t).Seconds(), 1e-6)
	probe, err := os.CreateTemp(stage, ".probe"+tmpInfix+"*")
	if err != nil {
		return dc
	}
	defer os.Remove(probe.Name())
	buf := make([]byte, 1<<20)
	t = time.Now()
	for i := 0; i < 16 && err == nil; i++ {
		_, err = probe.Write(buf)
	}
	if err == nil {
		err = probe.Sync()
	}
	probe.Close()
	if err != nil {
		return dc
	}
	dc.TargetMBps = 16 * (1 << 20) / 1e6 / max(time.Since(t).Seconds(), 1e-6)
	dc.Compress = dc.CompressorMBps > dc.TargetMBps
	return dc
}

// sectionAt reads the first n bytes of a file (the auto sample).
type sectionAt struct {
	f *os.File
	n int64
}

func (s sectionAt) ReadAt(b []byte, off int64) (int, error) { return s.f.ReadAt(b, off) }

// memSink discards what it is written, remembering nothing (the sample's
// coded bytes are not kept).
type memSink struct{}

func (memSink) WriteAt(b []byte, _ int64) (int, error) { return len(b), nil }

// drainCompressed writes each file of z from src into stage compressed
// (<path>.trz: part file, fsync, rename), one file at a time on all cores,
// and returns files with their entries added (sorted by path).
func (s *Store) drainCompressed(ctx context.Context, src, stage string, files, z []File, res *DrainResult) ([]File, error) {
	for _, f := range z {
		p := filepath.Join(src, filepath.FromSlash(f.Path))
		dst := filepath.Join(stage, filepath.FromSlash(f.Path)) + TRZSuffix
		nf, err := s.drainOne(ctx, p, dst, f)
		if err != nil {
			return files, fmt.Errorf("%s: %w", f.Path, err)
		}
		res.Copied += nf.StoredSize
		res.Bytes += nf.Size
		files = append(files, nf)
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	return files, nil
}

func (s *Store) drainOne(ctx context.Context, p, dst string, f File) (File, error) {
	in, err := os.Open(p)
	if err != nil {
		return f, err
	}
	defer in.Close()
	part := dst + partSuffix
	w, err := os.OpenFile(part, os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o644)
	if err != nil {
		return f, err
	}
	fail := func(err error) (File, error) {
		w.Close()
		os.Remove(part)
		return f, err
	}
	rawXXH, stored, err := encodeFile(ctx, f.Path, in, f.Size, w, codecOpts{Workers: runtime.GOMAXPROCS(0), Span: s.opts.ChunkBytes})
	if err != nil {
		return fail(err)
	}
	hashed := []File{{Path: filepath.Base(part), Size: stored}}
	if err := hashFiles(ctx, filepath.Dir(part), hashed, s.opts.ChunkBytes, 1, false); err != nil {
		return fail(err)
	}
	if err := w.Sync(); err != nil {
		return fail(fmt.Errorf("fsync %s: %w", part, err))
	}
	if err := w.Close(); err != nil {
		os.Remove(part)
		return f, err
	}
	s.step("drain:file-synced")
	if err := os.Rename(part, dst); err != nil {
		return f, err
	}
	s.step("drain:file-renamed")
	f.XXH64, f.Codec, f.StoredSize, f.StoredXXH64 = rawXXH, CodecTRZ, stored, hashed[0].XXH64
	return f, nil
}

// stagedAs maps a file listed in staging to its drained entry: a
// compressed file's <path>.trz is the drained <path>.
func stagedAs(f File, known map[string]File) (File, bool) {
	if k, ok := known[f.Path]; ok && !k.Compressed() {
		return k, true
	}
	if p, ok := strings.CutSuffix(f.Path, TRZSuffix); ok {
		if k, ok := known[p]; ok && k.Compressed() {
			return k, true
		}
	}
	return File{}, false
}
