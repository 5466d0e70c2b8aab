package checkpoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/trainrun/trainrun/internal/safefs"
)

// DrainOptions configure one node's drain.
type DrainOptions struct {
	// Node names this node's drain record (SLURMD_NODENAME). Required.
	Node string
	// Workers is the number of parallel copy streams (default: the
	// store's Workers).
	Workers int
	// Ranks are this node's ranks. When set, only their done markers are
	// carried into staging: a marker in the node-local directory for a rank
	// that runs elsewhere was not written by this job's trainer here (issue
	// 12, finding 2: another local user pre-creating the directory must not
	// complete a checkpoint). Empty carries every marker found (a manual
	// drain of a directory the caller vouches for).
	Ranks []int
	// CompressMin: when the store's mode makes the drain compress, files
	// smaller than this are copied raw (default 64 KiB).
	CompressMin int64
}

// DrainResult says what one drain did.
type DrainResult struct {
	Ranks     []int // the done markers carried into staging
	Files     int
	Bytes     int64 // size of all files
	Copied    int64 // bytes copied this time (a resumed drain reuses what is already in staging)
	Elapsed   time.Duration
	Committed bool // the tag was already committed: nothing was done
	// Compression is what the drain decided about compressing (Copied
	// counts the compressed bytes of the files it compressed).
	Compression DrainCompression
}

// drainRecord is <tag>/.trainrun/drained.<NODE>.json.
type drainRecord struct {
	Node  string    `json:"node"`
	Ranks []int     `json:"ranks"`
	At    time.Time `json:"at"`
	Files []File    `json:"files"`
}

// Drain copies one node's part of checkpoint tag from node-local storage
// (src, the directory the trainer wrote: TRAINRUN_CKPT_LOCAL_DIR/<tag>) into
// the durable store's staging area, so that the trainer can return to
// training as soon as its local save is done.
//
// Files are split into ChunkBytes ranges copied by Workers parallel streams
// with 1 MiB buffers (pread, hash, pwrite: the bytes are hashed on the way, so
// the commit does not read them again). Each file is written as
// <name>.part-trainrun, fsynced, and renamed to its name; then the staged
// directories are fsynced, the node's drain record written durably, and only
// then the done.<RANK> markers of the ranks found in src are created in
// staging. A rank's marker in staging therefore means its files are durable
// there, and the checkpoint can be committed (by the controller, with
// Commit) once all ranks' markers are in staging, i.e. every node's drain
// finished.
//
// Drain is idempotent and resumable: a file already in staging under its final
// name with the source's size was fsynced before that rename and is kept (its
// hash is taken from the source); a killed drain leaves only .part-trainrun
// files and no markers, so nothing partial can be committed. Run again, it
// completes. Draining a tag that is already committed does nothing. Staging
// left by an earlier incarnation of the job must be cleared before its tags
// can be saved again: the controller's Recover(world, true) at each start
// does it, so a file reused from staging always comes from this incarnation.
func Drain(ctx context.Context, src string, dst *Store, tag string, o DrainOptions) (DrainResult, error) {
	start := time.Now()
	var res DrainResult
	if err := CheckTag(tag); err != nil {
		return res, err
	}
	if err := checkNode(o.Node); err != nil {
		return res, err
	}
	if o.Workers <= 0 {
		o.Workers = dst.opts.Workers
	}
	if err := dst.checkMeta(); err != nil {
		return res, fmt.Errorf("drain %s: %w", tag, err)
	}
	if exists(manifestPath(dst.tagDir(tag))) {
		res.Committed = true
		return res, nil
	}
	ranks, err := doneRanks(src)
	if err != nil {
		return res, fmt.Errorf("drain %s: read markers in %s: %w", tag, src, err)
	}
	ranks = onlyRanks(ranks, o.Ranks)
	if len(ranks) == 0 {
		return res, fmt.Errorf("drain %s: no rank has marked %s done (%s); drain once the local ranks have saved",
			tag, src, filepath.Join(src, metaDir, doneMarker+"<RANK>"))
	}
	res.Ranks = ranks
	files, srcDirs, err := listTree(src)
	if err != nil {
		return res, fmt.Errorf("drain %s: %w", tag, err)
	}
	stage := dst.stagingDir(tag)
	dirs, err := mkStagingDirs(dst, src, stage, srcDirs)
	if err != nil {
		return res, fmt.Errorf("drain %s: %w", tag, err)
	}
	var zfiles []File // compressed on the way (the store's CkptCompress)
	files, zfiles, res.Compression = dst.drainSplit(src, stage, files, o.CompressMin)

	chunk := dst.opts.ChunkBytes
	st, units, err := stageParts(stage, files, chunk, &res)
	if err != nil {
		return res, fmt.Errorf("drain %s: %w", tag, err)
	}
	if err := copyChunks(ctx, dst, src, stage, tag, files, st, units, chunk, o.Workers); err != nil {
		return res, err
	}
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("drain %s: %w (run it again to finish)", tag, err)
	}
	for i := range files {
		files[i].XXH64 = hex64(combineChunks(st[i].sums))
	}
	if files, err = dst.drainCompressed(ctx, src, stage, files, zfiles, &res); err != nil {
		return res, fmt.Errorf("drain %s: %w", tag, err)
	}
	if err := finishDrain(dst, stage, o.Node, dirs, ranks, files); err != nil {
		return res, err
	}
	res.Files = len(files)
	res.Elapsed = time.Since(start)
	return res, nil
}

// drainFile is the state of one file being drained.
type drainFile struct {
	reuse bool         // already staged under its final name: only hashed
	left  atomic.Int32 // chunks not yet done
	sums  []uint64     // each chunk's xxh64
}

// drainUnit is one chunk of one file.
type drainUnit struct{ file, chunk int }

// stageParts creates each file's <name>.part-trainrun at its full size in
// stage (or keeps a file already staged with the source's size) and returns
// the files' states and their chunks, those of big files first so that the
// long poles start early. It adds the files' sizes and what is to be copied
// to res.
func stageParts(stage string, files []File, chunk int64, res *DrainResult) ([]*drainFile, []drainUnit, error) {
	st := make([]*drainFile, len(files))
	var units []drainUnit
	for i, f := range files {
		res.Bytes += f.Size
		fst := &drainFile{}
		n := numChunks(f.Size, chunk)
		fst.sums = make([]uint64, n)
		fst.left.Store(int32(n))
		dstPath := filepath.Join(stage, filepath.FromSlash(f.Path))
		if fi, err := os.Stat(dstPath); err == nil && fi.Mode().IsRegular() && fi.Size() == f.Size {
			fst.reuse = true
		} else {
			part := dstPath + partSuffix
			w, err := os.OpenFile(part, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
			if err == nil {
				err = w.Truncate(f.Size)
				if cerr := w.Close(); err == nil {
					err = cerr
				}
			}
			if err != nil {
				return nil, nil, fmt.Errorf("create %s: %w", part, err)
			}
			res.Copied += f.Size
		}
		st[i] = fst
		for c := 0; c < n; c++ {
			units = append(units, drainUnit{i, c})
		}
	}
	sort.SliceStable(units, func(a, b int) bool { return files[units[a].file].Size > files[units[b].file].Size })
	return st, units, nil
}

// copyChunks copies (or, for a reused file, hashes) the units on workers
// streams; the last chunk of a file fsyncs and renames its part. The first
// error stops every stream.
func copyChunks(ctx context.Context, dst *Store, src, stage, tag string, files []File, st []*drainFile, units []drainUnit, chunk int64, workers int) error {
	var next atomic.Int64
	var once sync.Once
	var firstErr error
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= len(units) {
					return
				}
				u := units[i]
				f, fst := files[u.file], st[u.file]
				srcPath := filepath.Join(src, filepath.FromSlash(f.Path))
				dstPath := filepath.Join(stage, filepath.FromSlash(f.Path))
				off := int64(u.chunk) * chunk
				n := max(min(chunk, f.Size-off), 0)
				var err error
				if fst.reuse {
					fst.sums[u.chunk], err = hashFileRange(srcPath, off, n)
				} else {
					fst.sums[u.chunk], err = copyRange(srcPath, dstPath+partSuffix, off, n)
				}
				if err == nil && fst.left.Add(-1) == 0 && !fst.reuse {
					err = finishPart(dst, dstPath)
				}
				if err != nil {
					once.Do(func() { firstErr = fmt.Errorf("drain %s: %s: %w", tag, f.Path, err) })
					next.Store(int64(len(units)))
					return
				}
			}
		}()
	}
	wg.Wait()
	return firstErr
}

// finishDrain makes a drain's copies visible to the commit, durably and in
// order: the staged directories, the node's drain record, then each rank's
// done marker in staging.
func finishDrain(dst *Store, stage, node string, dirs []string, ranks []int, files []File) error {
	sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
	for _, d := range dirs {
		if err := syncDir(d); err != nil {
			return err
		}
	}
	dst.step("drain:dirs-synced")
	return writeDrainRecord(dst, stage, drainRecord{Node: node, Ranks: ranks, At: dst.opts.Now().UTC(), Files: files})
}

// mkStagingDirs creates the staging tree mirroring src's directories (and
// stage/.trainrun) and returns them.
func mkStagingDirs(dst *Store, src, stage string, srcDirs []string) ([]string, error) {
	var dirs []string
	for _, d := range srcDirs {
		rel, _ := filepath.Rel(src, d)
		if rel == metaDir || strings.HasPrefix(rel, metaDir+string(filepath.Separator)) {
			continue
		}
		dirs = append(dirs, filepath.Join(stage, rel))
	}
	dirs = append(dirs, filepath.Join(stage, metaDir))
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("create %s: %w; the store must be writable", d, err)
		}
	}
	return dirs, syncDir(dst.stagingRoot())
}

// writeDrainRecord writes the node's drain record durably, then the done
// markers of its ranks: a marker in staging means the rank's files are
// durable there.
func writeDrainRecord(dst *Store, stage string, rec drainRecord) error {
	if rec.Files == nil {
		rec.Files = []File{}
	}
	b, err := json.MarshalIndent(rec, "", " ")
	if err != nil {
		return err
	}
	if err := dst.writeFileAtomic(drainedPath(stage, rec.Node), append(b, '\n'), "drain:record"); err != nil {
		return err
	}
	for _, r := range rec.Ranks {
		if err := createMarker(DoneMarkerPath(stage, r)); err != nil {
			return err
		}
		dst.step("drain:marker")
	}
	if err := syncDir(ckptMeta(stage)); err != nil {
		return err
	}
	dst.step("drain:done")
	return nil
}

// copyRange copies bytes [off, off+n) from srcPath into the same range of
// dstPath, hashing them on the way.
func copyRange(srcPath, dstPath string, off, n int64) (uint64, error) {
	r, err := safefs.OpenFile(srcPath) // O_NOFOLLOW|O_NONBLOCK, regular files only
	if err != nil {
		return 0, err
	}
	defer r.Close()
	w, err := os.OpenFile(dstPath, os.O_WRONLY, 0)
	if err != nil {
		return 0, err
	}
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	buf := *bp
	d := xxhash.New()
	off0, n0 := off, n
	for n > 0 {
		m := min(int64(len(buf)), n)
		k, rerr := r.ReadAt(buf[:m], off)
		if k > 0 {
			d.Write(buf[:k])
			if _, err := w.WriteAt(buf[:k], off); err != nil {
				w.Close()
				return 0, err
			}
			off += int64(k)
			n -= int64(k)
		}
		if rerr != nil {
			if errors.Is(rerr, io.EOF) && n > 0 {
				w.Close()
				return 0, fmt.Errorf("%s shrank while being drained (%d bytes short): the trainer is still writing it", srcPath, n)
			}
			if !errors.Is(rerr, io.EOF) {
				w.Close()
				return 0, rerr
			}
		}
	}
	// Start writeback of this range now, so that the file's fsync at the
	// end finds little left to write and the disk works while we copy.
	startWriteback(w, off0, n0)
	return d.Sum64(), w.Close()
}

func hashFileRange(p string, off, n int64) (uint64, error) {
	f, err := os.Open(p)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return hashRange(f, off, n)
}

// finishPart makes a fully copied part file durable and gives it its name.
func finishPart(s *Store, dstPath string) error {
	part := dstPath + partSuffix
	w, err := os.OpenFile(part, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	err = w.Sync()
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("fsync %s: %w", part, err)
	}
	s.step("drain:file-synced")
	if err := os.Rename(part, dstPath); err != nil {
		return err
	}
	s.step("drain:file-renamed")
	return nil
}

func readDrainRecords(stage string) ([]drainRecord, error) {
	ents, err := os.ReadDir(ckptMeta(stage))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	var out []drainRecord
	for _, e := range ents {
		n := e.Name()
		if !strings.HasPrefix(n, drainedPfx) || !strings.HasSuffix(n, ".json") || isTempName(n) {
			continue
		}
		p := filepath.Join(ckptMeta(stage), n)
		b, err := safefs.ReadFile(p, maxManifestBytes)
		if err != nil {
			return nil, err
		}
		var r drainRecord
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, fmt.Errorf("drain record %s is not valid JSON (%v): run that node's drain again", p, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// DrainAllOptions configure DrainAll.
type DrainAllOptions struct {
	DrainOptions
	// Ranks are this node's ranks: a tag is drained once all of them have
	// marked done locally, and only their markers are carried (unless
	// DrainOptions.Ranks says otherwise). Empty: drain every tag with any
	// marker, carrying every marker (a manual drain; the epilog passes the
	// handoff record's ranks).
	Ranks []int
	// RemoveLocal deletes a tag's node-local copy once its drain is durable
	// (node-local space, /dev/shm in particular, is memory).
	RemoveLocal bool
	// Drained, when set, is called with each tag this call drained and what
	// its Drain did (files, bytes, time), for the caller's report.
	Drained func(tag string, r DrainResult)
}

// DrainAll drains every checkpoint under localRoot (TRAINRUN_CKPT_LOCAL_DIR)
// that this node has finished saving and not yet drained, oldest first. The
// per-node shim calls it when a local save completes and once more before
// the job's nodes are released; it is idempotent.
func DrainAll(ctx context.Context, localRoot string, dst *Store, o DrainAllOptions) ([]string, error) {
	ents, err := os.ReadDir(localRoot)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("drain: read %s: %w", localRoot, err)
	}
	var tags []string
	for _, e := range ents {
		if e.IsDir() && CheckTag(e.Name()) == nil {
			tags = append(tags, e.Name())
		}
	}
	sort.Slice(tags, func(i, j int) bool {
		if a, b := StepOf(tags[i]), StepOf(tags[j]); a != b {
			return a < b
		}
		return tags[i] < tags[j]
	})
	if len(o.DrainOptions.Ranks) == 0 {
		o.DrainOptions.Ranks = o.Ranks
	}
	var drained []string
	for _, tag := range tags {
		src := filepath.Join(localRoot, tag)
		ranks, err := doneRanks(src)
		ranks = onlyRanks(ranks, o.DrainOptions.Ranks)
		failed := localFailed(src, o.DrainOptions.Ranks) // drain_failed.go
		if err != nil || len(ranks)+len(failed) == 0 {
			continue
		}
		if len(o.Ranks) > 0 && !containsAll(withFailed(ranks, failed), o.Ranks) {
			continue // this node's save is still running
		}
		if err := carryFailed(dst, tag, failed); err != nil {
			return drained, err
		}
		if len(ranks) > 0 && !drainedAlready(dst, tag, o.Node, ranks) {
			res, err := Drain(ctx, src, dst, tag, o.DrainOptions)
			if err != nil {
				return drained, err
			}
			drained = append(drained, tag)
			if o.Drained != nil {
				o.Drained(tag, res)
			}
		}
		if o.RemoveLocal {
			if err := os.RemoveAll(src); err != nil {
				return drained, fmt.Errorf("drain: remove the local copy %s: %w", src, err)
			}
		}
	}
	return drained, nil
}

// onlyRanks is have restricted to mine (all of have when mine is empty).
func onlyRanks(have, mine []int) []int {
	if len(mine) == 0 {
		return have
	}
	set := map[int]bool{}
	for _, r := range mine {
		set[r] = true
	}
	var out []int
	for _, r := range have {
		if set[r] {
			out = append(out, r)
		}
	}
	return out
}

func containsAll(have, want []int) bool {
	set := map[int]bool{}
	for _, r := range have {
		set[r] = true
	}
	for _, r := range want {
		if !set[r] {
			return false
		}
	}
	return true
}

// drainedAlready: committed, or this node's record and all its ranks'
// markers are in staging.
func drainedAlready(s *Store, tag, node string, ranks []int) bool {
	if exists(manifestPath(s.tagDir(tag))) {
		return true
	}
	stage := s.stagingDir(tag)
	if !exists(drainedPath(stage, node)) {
		return false
	}
	for _, r := range ranks {
		if !exists(DoneMarkerPath(stage, r)) {
			return false
		}
	}
	return true
}
