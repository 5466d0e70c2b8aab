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
	"strconv"
	"strings"
	"time"
)

// ErrNoCheckpoint is returned (wrapped) by Latest when nothing committed verifies.
var ErrNoCheckpoint = errors.New("no committed checkpoint")

// Options tune a Store. The zero value is usable.
type Options struct {
	// WorldSize is the number of ranks List and Complete expect when the
	// caller gives none; 0 takes it from the last incarnation in the history.
	WorldSize int
	// Workers is the number of parallel I/O streams for hashing and
	// draining (default 8: parallel file systems need several streams).
	Workers int
	// ChunkBytes is the hash and copy unit (default DefaultChunkBytes).
	ChunkBytes int64
	// Now is the clock (default time.Now).
	Now func() time.Time
	// DeferHash makes Commit of a checkpoint written in place record the
	// files' sizes only, without reading their bytes, so that commit time
	// does not grow with the checkpoint's size; Seal adds the checksums
	// afterwards (the controller runs it in the background). Until then
	// Verify checks sizes, markers and presence only. Drained checkpoints
	// always get their checksums, computed during the copy.
	DeferHash bool
}

// Store is one checkpoint directory (CKPT_DIR). All its I/O goes through
// it; it holds no global state, so stores in different directories are
// independent.
type Store struct {
	dir  string
	opts Options
	// hook, when set (tests only), runs at every durable step so that the
	// crash test can kill the process exactly there. The drain's workers
	// call it concurrently.
	hook func(step string)
}

// Open opens the store in dir, which must exist. It writes nothing.
func Open(dir string) (*Store, error) { return OpenWith(dir, Options{}) }

// OpenWith is Open with options.
func OpenWith(dir string, o Options) (*Store, error) {
	if dir == "" {
		return nil, fmt.Errorf("no checkpoint directory given: pass --ckpt-dir or set TRAINRUN_CKPT_DIR")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("checkpoint directory %s: %w", dir, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("checkpoint directory %s: %v; create it (mkdir -p) or pass the right --ckpt-dir", dir, errString(err))
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("checkpoint directory %s is a file, not a directory; pass the directory that holds the checkpoints", dir)
	}
	if o.Workers <= 0 {
		o.Workers = 8
	}
	if o.ChunkBytes <= 0 {
		o.ChunkBytes = DefaultChunkBytes
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Store{dir: abs, opts: o}, nil
}

// Dir is the store's directory (absolute).
func (s *Store) Dir() string { return s.dir }

// TagDir is where the committed checkpoint tag lives (TRAINRUN_RESUME_DIR).
func (s *Store) TagDir(tag string) string { return s.tagDir(tag) }

func (s *Store) step(name string) {
	if s.hook != nil {
		s.hook(name)
	}
}

func (s *Store) mkMeta() error {
	p := filepath.Join(s.dir, metaDir)
	if err := os.MkdirAll(p, 0o755); err != nil {
		return fmt.Errorf("create %s: %w; the checkpoint directory must be writable by the job", p, err)
	}
	return nil
}

// worldSize resolves the expected number of ranks: the argument, the option,
// or the last incarnation recorded in the history.
func (s *Store) worldSize(n int) int {
	if n > 0 {
		return n
	}
	if s.opts.WorldSize > 0 {
		return s.opts.WorldSize
	}
	h, _ := s.History().Load()
	for i := len(h) - 1; i >= 0; i-- {
		if h[i].WorldSize > 0 {
			return h[i].WorldSize
		}
	}
	return 0
}

// State is where a checkpoint is in its life.
type State string

const (
	Committed        State = "committed"         // has a manifest: durable, verifiable, may be latest
	Complete         State = "complete"          // every rank marked done, not committed yet
	Incomplete       State = "incomplete"        // some ranks' markers missing: being written, or abandoned
	Staged           State = "staged"            // in staging, every rank drained: ready to commit
	Draining         State = "draining"          // in staging, some nodes' drains not done
	Native           State = "native"            // a framework's own marker says complete; not committed
	NativeIncomplete State = "native-incomplete" // a framework layout without its completion marker
	Corrupt          State = "corrupt"           // has a manifest that cannot be read
)

// Info describes one checkpoint for List.
type Info struct {
	Tag       string
	Dir       string
	Kind      Kind
	State     State
	Step      int64 // StepOf(Tag)
	Seq       int64 // commit order, 0 if not committed
	Ranks     int   // done markers found
	WorldSize int   // markers expected (manifest, or Options/history), 0 if unknown
	Files     int
	Bytes     int64
	ModTime   time.Time
	Latest    bool   // named by the .trainrun/latest pointer
	Note      string // why the state is what it is, for native kinds the weaker guarantee
}

// List describes every checkpoint in the store and in its staging area,
// oldest first. It reads manifests and sizes but no file contents (Verify does
// that). Directories with neither trainrun markers nor a native layout are not
// checkpoints and are left out.
func (s *Store) List() ([]Info, error) {
	world := s.worldSize(0)
	pointer, _ := s.pointer()
	var out []Info
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", s.dir, err)
	}
	for _, e := range ents {
		name := e.Name()
		if strings.HasPrefix(name, ".") || isTempName(name) {
			continue
		}
		if !e.IsDir() {
			if strings.HasSuffix(name, ".ckpt") && e.Type().IsRegular() {
				fi, err := e.Info()
				if err != nil {
					continue
				}
				out = append(out, Info{Tag: name, Dir: filepath.Join(s.dir, name), Kind: KindLightning, State: Native,
					Step: StepOf(strings.TrimSuffix(name, ".ckpt")), Files: 1, Bytes: fi.Size(), ModTime: fi.ModTime(), Note: NativeNote[KindLightning]})
			}
			continue
		}
		in, ok := s.describe(name, s.tagDir(name), false, world)
		if !ok {
			continue
		}
		in.Latest = name == pointer
		out = append(out, in)
	}
	if ents, err := os.ReadDir(s.stagingRoot()); err == nil {
		for _, e := range ents {
			if e.IsDir() && CheckTag(e.Name()) == nil {
				if in, ok := s.describe(e.Name(), s.stagingDir(e.Name()), true, world); ok {
					out = append(out, in)
				}
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return olderInfo(out[i], out[j]) })
	return out, nil
}

func olderInfo(a, b Info) bool {
	if a.Step != b.Step {
		return a.Step < b.Step
	}
	if a.Seq != b.Seq {
		return a.Seq < b.Seq
	}
	return a.Tag < b.Tag
}

func (s *Store) describe(tag, dir string, staged bool, world int) (Info, bool) {
	in := Info{Tag: tag, Dir: dir, Kind: KindTrainrun, Step: StepOf(tag), WorldSize: world}
	if fi, err := os.Stat(dir); err == nil {
		in.ModTime = fi.ModTime()
	}
	ranks, _ := doneRanks(dir)
	in.Ranks = len(ranks)
	if !staged {
		m, err := readManifest(dir)
		switch {
		case err == nil:
			in.Kind, in.State, in.Seq, in.WorldSize = m.Kind, Committed, m.Seq, m.WorldSize
			in.Files, in.Bytes = len(m.Files), m.Bytes
			if !m.CommittedAt.IsZero() {
				in.ModTime = m.CommittedAt
			}
			if m.Kind != KindTrainrun {
				in.Note = NativeNote[m.Kind]
			}
			if !m.Sealed() {
				in.Note = strings.TrimPrefix(in.Note+"; checksums not recorded yet (committed with deferred hashing, Seal adds them)", "; ")
			}
			return in, true
		case !errors.Is(err, fs.ErrNotExist):
			in.State, in.Note = Corrupt, err.Error()
			return in, true
		}
	}
	files, _ := listFiles(dir)
	in.Files = len(files)
	for _, f := range files {
		in.Bytes += f.Size
	}
	if len(ranks) == 0 && !staged {
		kind, complete := detectNative(s.dir, tag, dir)
		if kind == "" {
			return in, false
		}
		in.Kind, in.Note = kind, NativeNote[kind]
		in.State = NativeIncomplete
		if complete {
			in.State = Native
		}
		return in, true
	}
	done := allDone(ranks, world)
	switch {
	case staged && done:
		in.State = Staged
	case staged:
		in.State = Draining
	case done:
		in.State = Complete
	default:
		in.State = Incomplete
	}
	if !done {
		if world == 0 {
			in.Note = fmt.Sprintf("%d rank(s) marked done; world size unknown (pass --world-size)", len(ranks))
		} else {
			in.Note = fmt.Sprintf("%d of %d ranks marked done", countBelow(ranks, world), world)
		}
	}
	return in, true
}

func countBelow(ranks []int, n int) int {
	c := 0
	for _, r := range ranks {
		if r < n {
			c++
		}
	}
	return c
}

// Complete says whether tag is ready to commit (or already committed): every
// rank 0..worldSize-1 has marked done, in place or in staging; without any
// marker, a native layout whose framework marker says complete.
func (s *Store) Complete(tag string, worldSize int) (bool, error) {
	if err := CheckTag(tag); err != nil {
		return false, err
	}
	dir := s.tagDir(tag)
	if exists(manifestPath(dir)) {
		return true, nil
	}
	for _, d := range []string{dir, s.stagingDir(tag)} {
		ranks, err := doneRanks(d)
		if err != nil {
			return false, fmt.Errorf("read the done markers of %s: %w", d, err)
		}
		if len(ranks) > 0 {
			return allDone(ranks, s.worldSize(worldSize)), nil
		}
	}
	if kind, complete := detectNative(s.dir, tag, dir); kind != "" {
		return complete, nil
	}
	return false, nil
}

// WaitComplete polls Complete every poll until tag is complete or ctx ends.
func (s *Store) WaitComplete(ctx context.Context, tag string, worldSize int, poll time.Duration) error {
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		ok, err := s.Complete(tag, worldSize)
		if err != nil || ok {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for checkpoint %s to complete: %w", tag, ctx.Err())
		case <-t.C:
		}
	}
}

// NewestComplete is the newest checkpoint (by step, then tag) that is ready to
// commit but not committed, in place or in staging; ok is false when none is.
// The controller calls it after asking for a checkpoint, since the trainer
// picks the tag.
func (s *Store) NewestComplete(worldSize int) (tag string, ok bool, err error) {
	if worldSize > 0 {
		o := s.opts
		o.WorldSize = worldSize
		s = &Store{dir: s.dir, opts: o, hook: s.hook}
	}
	list, err := s.List()
	if err != nil {
		return "", false, err
	}
	for i := len(list) - 1; i >= 0; i-- {
		switch list[i].State {
		case Complete, Staged, Native:
			if list[i].Kind != KindLightning {
				return list[i].Tag, true, nil
			}
		}
	}
	return "", false, nil
}

// Commit makes tag a committed checkpoint, durably and atomically, then moves
// the latest pointer to the newest committed checkpoint. In order:
//  1. every rank's done marker is present (native kinds: their marker);
//  2. every file is fsynced and hashed (a drained checkpoint: the drain did
//     both and recorded the hashes; Commit checks the sizes);
//  3. the manifest is written (temporary file, fsync, rename, fsync dir);
//  4. a staged checkpoint is renamed from staging to <tag>/, and the store's
//     directory is fsynced: from here the checkpoint is committed;
//  5. .trainrun/latest is rewritten the same durable way, last.
//
// A Commit killed at any point leaves either an uncommitted checkpoint, which
// a second Commit (or Recover) completes, or a committed one. Commit of a
// committed tag only repairs the pointer.
func (s *Store) Commit(tag string, worldSize int) (Manifest, error) {
	return s.CommitContext(context.Background(), tag, worldSize)
}

// CommitContext is Commit with a context that can cancel the hashing.
func (s *Store) CommitContext(ctx context.Context, tag string, worldSize int) (Manifest, error) {
	if err := CheckTag(tag); err != nil {
		return Manifest{}, err
	}
	if err := s.mkMeta(); err != nil {
		return Manifest{}, err
	}
	final, staged := s.tagDir(tag), s.stagingDir(tag)
	if m, err := readManifest(final); err == nil {
		return m, s.updatePointer()
	} else if !errors.Is(err, fs.ErrNotExist) {
		return m, fmt.Errorf("commit %s: %w", tag, err)
	}
	finalExists, stagedExists := exists(final), exists(staged)
	var m Manifest
	var err error
	switch {
	case finalExists && stagedExists:
		return m, fmt.Errorf("commit %s: both %s (written in place) and %s (drained) exist; keep one: remove the other, then commit again", tag, final, staged)
	case stagedExists:
		m, err = s.commitStaged(ctx, tag, s.worldSize(worldSize))
	case finalExists:
		m, err = s.commitInPlace(ctx, tag, s.worldSize(worldSize))
	default:
		return m, fmt.Errorf("commit %s: no checkpoint directory %s (nor %s); the trainer has not saved it yet", tag, final, staged)
	}
	if err != nil {
		return m, err
	}
	return m, s.updatePointer()
}

func missingRanks(ranks []int, world int) string {
	have := map[int]bool{}
	for _, r := range ranks {
		have[r] = true
	}
	var miss []string
	for r := 0; r < world && len(miss) < 8; r++ {
		if !have[r] {
			miss = append(miss, strconv.Itoa(r))
		}
	}
	return strings.Join(miss, ",")
}

func (s *Store) commitInPlace(ctx context.Context, tag string, world int) (Manifest, error) {
	dir := s.tagDir(tag)
	ranks, err := doneRanks(dir)
	if err != nil {
		return Manifest{}, fmt.Errorf("commit %s: read done markers: %w", tag, err)
	}
	kind := KindTrainrun
	if len(ranks) == 0 {
		k, complete := detectNative(s.dir, tag, dir)
		if k == "" {
			return Manifest{}, fmt.Errorf("commit %s: %s has no done markers (%s) and no native completion marker; each rank must create it when its files are durable",
				tag, dir, DoneMarkerPath(dir, 0))
		}
		if !complete {
			return Manifest{}, fmt.Errorf("commit %s: a %s checkpoint whose completion marker is missing; wait for the framework to finish the save", tag, k)
		}
		kind, world = k, 0
	} else if world <= 0 {
		return Manifest{}, fmt.Errorf("commit %s: world size unknown; pass the number of ranks", tag)
	} else if !allDone(ranks, world) {
		return Manifest{}, fmt.Errorf("commit %s: not complete: ranks %s of %d have not created %s", tag, missingRanks(ranks, world), world, filepath.Join(dir, metaDir, doneMarker+"<RANK>"))
	}
	files, dirs, err := listTree(dir)
	if err != nil {
		return Manifest{}, fmt.Errorf("commit %s: %w", tag, err)
	}
	if s.opts.DeferHash {
		err = syncFiles(ctx, dir, files, s.opts.Workers)
	} else {
		err = hashFiles(ctx, dir, files, s.opts.ChunkBytes, s.opts.Workers, true)
	}
	if err != nil {
		return Manifest{}, fmt.Errorf("commit %s: %w", tag, err)
	}
	s.step("commit:hashed")
	for _, d := range dirs {
		if err := syncDir(d); err != nil {
			return Manifest{}, fmt.Errorf("commit %s: %w", tag, err)
		}
	}
	s.step("commit:dirs-synced")
	m, err := s.newManifest(tag, kind, world, files)
	if err != nil {
		return m, err
	}
	if !exists(ckptMeta(dir)) { // a native checkpoint
		if err := os.Mkdir(ckptMeta(dir), 0o755); err != nil {
			return m, fmt.Errorf("commit %s: %w", tag, err)
		}
		if err := syncDir(dir); err != nil {
			return m, fmt.Errorf("commit %s: %w", tag, err)
		}
	}
	// The checkpoint's own name in the store must be durable before the
	// manifest makes it committed.
	if err := syncDir(s.dir); err != nil {
		return m, fmt.Errorf("commit %s: %w", tag, err)
	}
	if err := s.writeManifest(dir, m); err != nil {
		return m, fmt.Errorf("commit %s: %w", tag, err)
	}
	s.step("commit:committed")
	return m, nil
}

// listTree is listFiles plus every directory of the tree, deepest first, for
// fsyncing the entries.
func listTree(dir string) ([]File, []string, error) {
	files, err := listFiles(dir)
	if err != nil {
		return nil, nil, err
	}
	var dirs []string
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
	return files, dirs, err
}

func (s *Store) commitStaged(ctx context.Context, tag string, world int) (Manifest, error) {
	dir := s.stagingDir(tag)
	ranks, err := doneRanks(dir)
	if err != nil {
		return Manifest{}, fmt.Errorf("commit %s: read done markers: %w", tag, err)
	}
	if world <= 0 {
		return Manifest{}, fmt.Errorf("commit %s: world size unknown; pass the number of ranks", tag)
	}
	if !allDone(ranks, world) {
		return Manifest{}, fmt.Errorf("commit %s: drained from some nodes only: ranks %s of %d are not in %s yet; wait for every node's drain (trainrun drains in the epilog, or run the drain again)",
			tag, missingRanks(ranks, world), world, dir)
	}
	recs, err := readDrainRecords(dir)
	if err != nil {
		return Manifest{}, fmt.Errorf("commit %s: %w", tag, err)
	}
	known := map[string]File{}
	from := map[string]string{}
	for _, r := range recs {
		for _, f := range r.Files {
			if g, dup := known[f.Path]; dup && (g.Size != f.Size || g.XXH64 != f.XXH64) {
				return Manifest{}, fmt.Errorf("commit %s: nodes %s and %s both drained %s with different contents (%d bytes %s vs %d bytes %s); two ranks on different nodes wrote the same file name: give each rank its own file",
					tag, from[f.Path], r.Node, f.Path, g.Size, g.XXH64, f.Size, f.XXH64)
			}
			known[f.Path], from[f.Path] = f, r.Node
		}
	}
	if err := removeParts(dir); err != nil {
		return Manifest{}, fmt.Errorf("commit %s: %w", tag, err)
	}
	files, err := listFiles(dir)
	if err != nil {
		return Manifest{}, fmt.Errorf("commit %s: %w", tag, err)
	}
	seen := map[string]bool{}
	var unhashed []File
	var idx []int
	for i, f := range files {
		seen[f.Path] = true
		k, ok := known[f.Path]
		if !ok {
			unhashed = append(unhashed, f)
			idx = append(idx, i)
			continue
		}
		if k.Size != f.Size {
			return Manifest{}, fmt.Errorf("commit %s: %s is %d bytes in staging but node %s drained %d; run that node's drain again",
				tag, filepath.Join(dir, f.Path), f.Size, from[f.Path], k.Size)
		}
		files[i].XXH64 = k.XXH64
	}
	for p := range known {
		if !seen[p] {
			return Manifest{}, fmt.Errorf("commit %s: %s was drained by node %s but is missing from staging; run that node's drain again",
				tag, filepath.Join(dir, p), from[p])
		}
	}
	if len(unhashed) > 0 {
		if err := hashFiles(ctx, dir, unhashed, s.opts.ChunkBytes, s.opts.Workers, true); err != nil {
			return Manifest{}, fmt.Errorf("commit %s: %w", tag, err)
		}
		for j, i := range idx {
			files[i] = unhashed[j]
		}
	}
	s.step("commit:hashed")
	m, err := s.newManifest(tag, KindTrainrun, world, files)
	if err != nil {
		return m, err
	}
	if err := s.writeManifest(dir, m); err != nil {
		return m, fmt.Errorf("commit %s: %w", tag, err)
	}
	final := s.tagDir(tag)
	if err := os.Rename(dir, final); err != nil {
		return m, fmt.Errorf("commit %s: rename %s to %s: %w; staging and the store must be on one file system", tag, dir, final, err)
	}
	s.step("commit:renamed")
	if err := syncDir(s.dir); err != nil {
		return m, fmt.Errorf("commit %s: %w", tag, err)
	}
	if err := syncDir(s.stagingRoot()); err != nil {
		return m, fmt.Errorf("commit %s: %w", tag, err)
	}
	s.step("commit:committed")
	return m, nil
}

func removeParts(dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && isTempName(d.Name()) {
			return os.Remove(p)
		}
		return nil
	})
}

func (s *Store) newManifest(tag string, kind Kind, world int, files []File) (Manifest, error) {
	seq, err := s.nextSeq()
	if err != nil {
		return Manifest{}, err
	}
	m := Manifest{Version: manifestVersion, Tag: tag, Kind: kind, WorldSize: world, Step: StepOf(tag), Seq: seq,
		CommittedAt: s.opts.Now().UTC(), Hash: hashName, ChunkBytes: s.opts.ChunkBytes, Files: files}
	if m.Files == nil {
		m.Files = []File{}
	}
	for _, f := range files {
		m.Bytes += f.Size
	}
	return m, nil
}

func (s *Store) writeManifest(dir string, m Manifest) error {
	b, err := json.MarshalIndent(m, "", " ")
	if err != nil {
		return err
	}
	return s.writeFileAtomic(manifestPath(dir), append(b, '\n'), "commit:manifest")
}

// committed lists the committed checkpoints' manifests, oldest first. Entries
// whose manifest cannot be read are returned in bad.
func (s *Store) committed() (ms []Manifest, bad []string, err error) {
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, nil, fmt.Errorf("list %s: %w", s.dir, err)
	}
	for _, e := range ents {
		if !e.IsDir() || CheckTag(e.Name()) != nil {
			continue
		}
		m, err := readManifest(s.tagDir(e.Name()))
		switch {
		case err == nil:
			m.Tag = e.Name()
			ms = append(ms, m)
		case !errors.Is(err, fs.ErrNotExist):
			bad = append(bad, e.Name())
		}
	}
	sort.Slice(ms, func(i, j int) bool { return olderManifest(ms[i], ms[j]) })
	return ms, bad, nil
}

// olderManifest orders committed checkpoints: by step (training progress),
// then by commit order, so a checkpoint committed out of order (its drain was
// slower) never hides a newer one.
func olderManifest(a, b Manifest) bool {
	if a.Step != b.Step {
		return a.Step < b.Step
	}
	if a.Seq != b.Seq {
		return a.Seq < b.Seq
	}
	return a.Tag < b.Tag
}

func (s *Store) nextSeq() (int64, error) {
	ms, _, err := s.committed()
	if err != nil {
		return 0, err
	}
	var max int64
	for _, m := range ms {
		if m.Seq > max {
			max = m.Seq
		}
	}
	return max + 1, nil
}

// pointer reads .trainrun/latest ("" when absent).
func (s *Store) pointer() (string, error) {
	b, err := os.ReadFile(s.pointerPath())
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// updatePointer points .trainrun/latest at the newest committed checkpoint.
// It is always the last step of a change, so the pointer never names an
// uncommitted checkpoint.
func (s *Store) updatePointer() error {
	ms, _, err := s.committed()
	if err != nil {
		return err
	}
	cur, _ := s.pointer()
	want := ""
	if len(ms) > 0 {
		want = ms[len(ms)-1].Tag
	}
	if want == cur {
		return nil
	}
	if want == "" {
		err := os.Remove(s.pointerPath())
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return syncDir(filepath.Join(s.dir, metaDir))
	}
	if err := s.mkMeta(); err != nil {
		return err
	}
	return s.writeFileAtomic(s.pointerPath(), []byte(want+"\n"), "pointer")
}

// Verify checks the committed checkpoint tag fully: the expected ranks'
// markers, every file's presence, size and xxh64 against its manifest. The
// error is a *VerifyError naming the first failing file.
func (s *Store) Verify(tag string) (Manifest, error) {
	return s.VerifyLevel(context.Background(), tag, Checksums)
}

// VerifyLevel is Verify at a chosen depth.
func (s *Store) VerifyLevel(ctx context.Context, tag string, level Level) (Manifest, error) {
	if err := CheckTag(tag); err != nil {
		return Manifest{}, err
	}
	dir := s.tagDir(tag)
	if !exists(dir) {
		if exists(s.stagingDir(tag)) {
			return Manifest{}, &VerifyError{Tag: tag, Path: s.stagingDir(tag), What: "still in staging (being drained): not committed"}
		}
		return Manifest{}, &VerifyError{Tag: tag, Path: dir, What: "no such checkpoint; trainrun ckpt list shows what there is"}
	}
	return verifyDir(ctx, dir, level, s.opts.Workers)
}

// Resolved is the checkpoint to resume from.
type Resolved struct {
	Tag      string
	Dir      string // absolute: the value of TRAINRUN_RESUME_DIR
	Manifest Manifest
	// Skipped holds, newest first, committed checkpoints newer than Tag that
	// failed verification: say so, and Quarantine(Skipped[i].Tag) before
	// the trainer saves under the same tag again.
	Skipped []*VerifyError
	// Pointer is the tag .trainrun/latest names ("" if none). It differs from
	// Tag when a newer one failed verification or a commit was cut short
	// between its manifest and the pointer (the manifest is the commit).
	Pointer string
}

// Latest is the newest committed checkpoint that verifies with checksums; it
// falls back past corrupt ones and lists them in Skipped. With none, the error
// wraps ErrNoCheckpoint.
func (s *Store) Latest() (Resolved, error) {
	return s.LatestLevel(context.Background(), Checksums)
}

// LatestLevel is Latest with a chosen verification depth (Sizes avoids
// rereading terabytes at every restart, at the cost of not detecting bit rot).
func (s *Store) LatestLevel(ctx context.Context, level Level) (Resolved, error) {
	var r Resolved
	r.Pointer, _ = s.pointer()
	ms, bad, err := s.committed()
	if err != nil {
		return r, err
	}
	for _, b := range bad {
		_, err := readManifest(s.tagDir(b))
		r.Skipped = append(r.Skipped, &VerifyError{Tag: b, Path: manifestPath(s.tagDir(b)), What: err.Error()})
	}
	for i := len(ms) - 1; i >= 0; i-- {
		m, err := verifyDir(ctx, s.tagDir(ms[i].Tag), level, s.opts.Workers)
		if err != nil {
			if ctx.Err() != nil {
				return r, ctx.Err()
			}
			var ve *VerifyError
			if !errors.As(err, &ve) {
				ve = &VerifyError{Tag: ms[i].Tag, Path: s.tagDir(ms[i].Tag), What: err.Error()}
			}
			r.Skipped = append(r.Skipped, ve)
			continue
		}
		r.Tag, r.Dir, r.Manifest = ms[i].Tag, s.tagDir(ms[i].Tag), m
		return r, nil
	}
	if len(r.Skipped) > 0 {
		return r, fmt.Errorf("%w in %s verifies: all %d fail (newest: %v)", ErrNoCheckpoint, s.dir, len(ms)+len(bad), r.Skipped[0])
	}
	return r, fmt.Errorf("%w in %s", ErrNoCheckpoint, s.dir)
}

// LatestCommitted is Latest for a caller that runs on every node at every
// job step (the SPANK plugin's TRAINRUN_RESUME_DIR): when the pointer names a
// checkpoint whose manifest is there and no other checkpoint of the same or
// a later step has a manifest, that checkpoint is the answer, found with one
// small read, one directory listing and a stat per newer tag. It reads no
// manifest and checks no file: on a parallel file system, reading every
// manifest and stat'ing every file of the newest checkpoint from every node
// at every step is a metadata storm. Otherwise (no pointer, a dangling one,
// or a commit cut short between its manifest and the pointer) it is
// LatestLevel(ctx, Sizes). A manifest present means committed: the commit
// writes it only after every file is durable, so a half-written checkpoint
// is never returned; damage after the commit is for the full verification
// of trainrun run's controller and `trainrun ckpt verify` to find. The
// fast answer's Manifest is empty.
func (s *Store) LatestCommitted(ctx context.Context) (Resolved, error) {
	tag, err := s.pointer()
	if err == nil && tag != "" && CheckTag(tag) == nil && isRegularFile(manifestPath(s.tagDir(tag))) && !s.committedSince(tag) {
		return Resolved{Tag: tag, Dir: s.tagDir(tag), Pointer: tag}, nil
	}
	return s.LatestLevel(ctx, Sizes)
}

// committedSince says whether a checkpoint other than tag, of the same or a
// later step, has a manifest (or whether the store cannot be listed).
func (s *Store) committedSince(tag string) bool {
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return true
	}
	step := StepOf(tag)
	for _, e := range ents {
		name := e.Name()
		if !e.IsDir() || name == tag || CheckTag(name) != nil || StepOf(name) < step {
			continue
		}
		if _, err := os.Lstat(manifestPath(s.tagDir(name))); err == nil {
			return true
		}
	}
	return false
}

func isRegularFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

// Quarantine moves a committed checkpoint that failed verification out of the
// way, to .trainrun/corrupt/, so that it is never resumed from and the trainer
// can save under its tag again; then it repairs the pointer.
func (s *Store) Quarantine(tag string) (string, error) {
	if err := CheckTag(tag); err != nil {
		return "", err
	}
	dst := filepath.Join(s.corruptRoot(), fmt.Sprintf("%s.%d", tag, s.opts.Now().UnixNano()))
	if err := os.MkdirAll(s.corruptRoot(), 0o755); err != nil {
		return "", err
	}
	if err := os.Rename(s.tagDir(tag), dst); err != nil {
		return "", fmt.Errorf("quarantine %s: %w", tag, err)
	}
	if err := syncDir(s.dir); err != nil {
		return "", err
	}
	if err := syncDir(s.corruptRoot()); err != nil {
		return "", err
	}
	return dst, s.updatePointer()
}

// Retention is the pruning policy.
type Retention struct {
	// KeepLast keeps the newest N committed checkpoints (at least 1).
	KeepLast int
	// KeepEvery, when > 0, also keeps one checkpoint per KeepEvery steps:
	// the lowest-step committed checkpoint whose step is in
	// [m*KeepEvery, (m+1)*KeepEvery), for loss-curve and scaling-law
	// analysis. This choice is stable: a kept one stays kept as newer
	// checkpoints arrive and others are pruned. Tags without a step number
	// are kept only by KeepLast.
	KeepEvery int64
}

// PrunePlan lists the committed checkpoints Prune would delete, oldest first.
// It never includes the pointer's tag, the newest committed checkpoint whose
// files have their recorded sizes (the resume point), or anything not
// committed (in progress, staged, native): only committed checkpoints are
// candidates.
func (s *Store) PrunePlan(r Retention) ([]string, error) {
	if r.KeepLast < 1 {
		return nil, fmt.Errorf("retention keeps %d checkpoints; keep at least 1 (2 or more survives a corrupt newest one)", r.KeepLast)
	}
	if r.KeepEvery < 0 {
		return nil, fmt.Errorf("keep-every %d is negative; use 0 (off) or a step interval", r.KeepEvery)
	}
	ms, _, err := s.committed()
	if err != nil {
		return nil, err
	}
	keep := keepSet(ms, r)
	if p, _ := s.pointer(); p != "" {
		keep[p] = true
	}
	for i := len(ms) - 1; i >= 0; i-- {
		if _, err := verifyDir(context.Background(), s.tagDir(ms[i].Tag), Sizes, s.opts.Workers); err == nil {
			keep[ms[i].Tag] = true
			break
		}
	}
	var del []string
	for _, m := range ms {
		if !keep[m.Tag] {
			del = append(del, m.Tag)
		}
	}
	return del, nil
}

// keepSet is the pure retention rule over committed manifests, oldest first.
func keepSet(ms []Manifest, r Retention) map[string]bool {
	keep := map[string]bool{}
	for i := len(ms) - 1; i >= 0 && i >= len(ms)-r.KeepLast; i-- {
		keep[ms[i].Tag] = true
	}
	if r.KeepEvery > 0 {
		seen := map[int64]bool{}
		for _, m := range ms { // oldest first: the first in a bucket is its lowest step
			if m.Step < 0 {
				continue
			}
			b := m.Step / r.KeepEvery
			if !seen[b] {
				seen[b] = true
				keep[m.Tag] = true
			}
		}
	}
	return keep
}

// Prune deletes what PrunePlan lists: each checkpoint is first renamed into
// .trainrun/trash/ (atomic: it is either whole in place or gone from the
// store), the directory fsynced, and then removed. Leftovers of a killed prune
// are only ever in the trash, which the next Prune or Recover empties.
func (s *Store) Prune(r Retention) ([]string, error) {
	del, err := s.PrunePlan(r)
	if err != nil {
		return nil, err
	}
	for i, tag := range del {
		if err := s.trash(s.tagDir(tag), tag); err != nil {
			return del[:i], fmt.Errorf("prune %s: %w", tag, err)
		}
		s.step("prune:trashed")
	}
	return del, s.emptyTrash()
}

func (s *Store) trash(path, tag string) error {
	if err := os.MkdirAll(s.trashRoot(), 0o755); err != nil {
		return err
	}
	dst := filepath.Join(s.trashRoot(), fmt.Sprintf("%s.%d", tag, s.opts.Now().UnixNano()))
	if err := os.Rename(path, dst); err != nil {
		return err
	}
	if err := syncDir(filepath.Dir(path)); err != nil {
		return err
	}
	return syncDir(s.trashRoot())
}

func (s *Store) emptyTrash() error {
	ents, err := os.ReadDir(s.trashRoot())
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(s.trashRoot(), e.Name())); err != nil {
			return fmt.Errorf("empty %s: %w", s.trashRoot(), err)
		}
		s.step("prune:removed")
	}
	return nil
}

// RecoverReport says what Recover did.
type RecoverReport struct {
	Committed []string // complete checkpoints whose commit had not happened or was cut short
	Discarded []string // incomplete ones moved to the trash and deleted
}

// Recover brings the store to a clean state at the start of an incarnation,
// before any trainer runs (it must not run while trainers save): it commits
// every checkpoint that is complete but not committed (in place or staged),
// discards in-place checkpoints that some rank never marked done (their
// stale markers would make a re-save under the same tag look complete too
// early), discards unfinished drains when discardStaging is set (their
// node-local source is gone after a requeue), empties the trash and repairs
// the pointer. Directories without trainrun markers are left alone.
func (s *Store) Recover(worldSize int, discardStaging bool) (RecoverReport, error) {
	var rep RecoverReport
	world := s.worldSize(worldSize)
	if world <= 0 {
		return rep, fmt.Errorf("recover %s: world size unknown: pass the number of ranks, so that incomplete checkpoints can be told from complete ones", s.dir)
	}
	if err := s.emptyTrash(); err != nil {
		return rep, err
	}
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return rep, fmt.Errorf("recover %s: %w", s.dir, err)
	}
	for _, e := range ents {
		if !e.IsDir() || CheckTag(e.Name()) != nil || exists(manifestPath(s.tagDir(e.Name()))) {
			continue
		}
		tag := e.Name()
		ranks, err := doneRanks(s.tagDir(tag))
		if err != nil || len(ranks) == 0 {
			continue
		}
		if exists(s.stagingDir(tag)) {
			continue // Commit refuses both; the caller decides
		}
		if allDone(ranks, world) {
			if _, err := s.Commit(tag, world); err != nil {
				return rep, fmt.Errorf("recover: %w", err)
			}
			rep.Committed = append(rep.Committed, tag)
			continue
		}
		if err := s.trash(s.tagDir(tag), tag); err != nil {
			return rep, fmt.Errorf("recover: discard incomplete %s: %w", tag, err)
		}
		rep.Discarded = append(rep.Discarded, tag)
	}
	if ents, err := os.ReadDir(s.stagingRoot()); err == nil {
		for _, e := range ents {
			tag := e.Name()
			if !e.IsDir() || CheckTag(tag) != nil {
				continue
			}
			ranks, _ := doneRanks(s.stagingDir(tag))
			switch {
			case allDone(ranks, world) && !exists(s.tagDir(tag)):
				if _, err := s.Commit(tag, world); err != nil {
					return rep, fmt.Errorf("recover: %w", err)
				}
				rep.Committed = append(rep.Committed, tag)
			case discardStaging:
				if err := s.trash(s.stagingDir(tag), tag); err != nil {
					return rep, fmt.Errorf("recover: discard unfinished drain %s: %w", tag, err)
				}
				rep.Discarded = append(rep.Discarded, tag)
			}
		}
	}
	if err := s.emptyTrash(); err != nil {
		return rep, err
	}
	return rep, s.updatePointer()
}

// CommitComplete commits every checkpoint that is complete for world ranks
// (in place or staged) or complete by its native marker, oldest first, and
// returns the tag the latest pointer names afterwards ("" if none) and whether
// that changed. The controller calls it after the trainers saved (or exited).
func (s *Store) CommitComplete(world int) (latest string, changed bool, err error) {
	before, _ := s.pointer()
	if world > 0 {
		o := s.opts
		o.WorldSize = world
		s = &Store{dir: s.dir, opts: o, hook: s.hook}
	}
	list, err := s.List()
	if err != nil {
		return before, false, err
	}
	for _, in := range list {
		switch in.State {
		case Complete, Staged, Native:
			if in.Kind == KindLightning {
				continue
			}
			if _, err := s.Commit(in.Tag, world); err != nil {
				return before, false, err
			}
		}
	}
	if err := s.updatePointer(); err != nil {
		return before, false, err
	}
	after, err := s.pointer()
	return after, after != before, err
}

// Seal adds the checksums a Commit with Options.DeferHash left out: it hashes
// the files whose manifest entry has none and rewrites the manifest
// atomically (the checkpoint stays committed throughout). Sealing a sealed
// checkpoint does nothing. A file changed between the commit and the seal
// fails the size check, or, same size, is recorded as it is now.
func (s *Store) Seal(ctx context.Context, tag string) (Manifest, error) {
	if err := CheckTag(tag); err != nil {
		return Manifest{}, err
	}
	dir := s.tagDir(tag)
	m, err := verifyDir(ctx, dir, Sizes, s.opts.Workers)
	if err != nil {
		return m, fmt.Errorf("seal %s: %w", tag, err)
	}
	var todo []File
	var idx []int
	for i, f := range m.Files {
		if f.XXH64 == "" {
			todo = append(todo, File{Path: f.Path, Size: f.Size})
			idx = append(idx, i)
		}
	}
	if len(todo) == 0 {
		return m, nil
	}
	if err := hashFiles(ctx, dir, todo, m.ChunkBytes, s.opts.Workers, false); err != nil {
		return m, fmt.Errorf("seal %s: %w", tag, err)
	}
	for j, i := range idx {
		m.Files[i].XXH64 = todo[j].XXH64
	}
	if err := s.writeManifest(dir, m); err != nil {
		return m, fmt.Errorf("seal %s: %w", tag, err)
	}
	return m, nil
}

// Sealed says whether every file of m has its checksum.
func (m Manifest) Sealed() bool {
	for _, f := range m.Files {
		if f.XXH64 == "" {
			return false
		}
	}
	return true
}
