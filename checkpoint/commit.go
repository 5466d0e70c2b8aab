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
)

// Committing: manifests, the sequence number and the latest pointer.

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
// committed tag only repairs the pointer. Cancelling ctx stops the hashing
// and leaves the checkpoint uncommitted.
func (s *Store) Commit(ctx context.Context, tag string, worldSize int) (Manifest, error) {
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
		k, ok := stagedAs(f, known) // a compressed file's <path>.trz is the drained <path>
		if !ok {
			seen[f.Path] = true
			unhashed = append(unhashed, f)
			idx = append(idx, i)
			continue
		}
		seen[k.Path] = true
		if k.storedSize() != f.Size {
			return Manifest{}, fmt.Errorf("commit %s: %s is %d bytes in staging but node %s drained %d; run that node's drain again",
				tag, filepath.Join(dir, f.Path), f.Size, from[k.Path], k.storedSize())
		}
		files[i] = k
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
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
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
		m, err := s.readManifestBudget(s.tagDir(e.Name()))
		if errors.Is(err, errBudget) {
			return nil, nil, err
		}
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
func (s *Store) pointer() (string, error) { return s.readPointer() }

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
	defer lockTag(dir)() // Compress rewrites the manifest too
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
