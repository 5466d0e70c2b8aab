package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Listing and completeness: what is in the store and whether a checkpoint
// has every rank's marker.

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
	Stored    int64 // bytes on disk: less than Bytes once compressed
	ModTime   time.Time
	Latest    bool   // named by the .trainrun/latest pointer
	Note      string // why the state is what it is, for native kinds the weaker guarantee
}

// List describes every checkpoint in the store and in its staging area,
// oldest first. It reads manifests and sizes but no file contents (Verify does
// that). Directories with neither trainrun markers nor a native layout are not
// checkpoints and are left out.
func (s *Store) List() ([]Info, error) {
	if err := s.checkMeta(); err != nil {
		return nil, err
	}
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
					Step: StepOf(strings.TrimSuffix(name, ".ckpt")), Files: 1, Bytes: fi.Size(), Stored: fi.Size(), ModTime: fi.ModTime(), Note: NativeNote[KindLightning]})
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
			in.Files, in.Bytes, in.Stored = len(m.Files), m.Bytes, m.StoredBytes()
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
	in.Stored = in.Bytes
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
