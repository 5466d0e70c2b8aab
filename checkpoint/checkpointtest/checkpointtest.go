// Package checkpointtest builds checkpoint stores for the tests of other
// packages, as net/http/httptest serves HTTP for them: ranks that save
// following the handshake (their files, then their done marker), saves
// committed, incomplete, half-drained into staging, or left on node-local
// storage. Tests ask it instead of spelling the store's layout
// (.trainrun/done.<RANK>, .trainrun/staging/), which only package checkpoint
// knows.
//
// checkpoint's own in-package tests cannot import it (an import cycle) and
// keep their helpers in checkpoint/helpers_test.go.
package checkpointtest

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/trainrun/trainrun/checkpoint"
)

// A File is one file a rank saves: Name relative to the checkpoint directory
// (subdirectories are created), Data its content.
type File struct {
	Name, Data string
}

// Weights is the file SaveRanks writes for rank of checkpoint tag:
// rank<R>.pt holding "weights of rank R at TAG", so a test can tell which
// save and which rank a restored file came from.
func Weights(tag string, rank int) File {
	return File{Name: "rank" + strconv.Itoa(rank) + ".pt", Data: "weights of rank " + strconv.Itoa(rank) + " at " + tag}
}

// SaveRank does what rank of a trainer does for one checkpoint in ckptDir:
// it writes its files, then its done marker.
func SaveRank(t testing.TB, ckptDir string, rank int, files ...File) {
	t.Helper()
	for _, f := range files {
		p := filepath.Join(ckptDir, f.Name)
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		must(t, os.WriteFile(p, []byte(f.Data), 0o644))
	}
	MarkDone(t, ckptDir, rank)
}

// SaveRanks saves checkpoint tag into ckptDir for each of ranks, each with
// its Weights file.
func SaveRanks(t testing.TB, ckptDir, tag string, ranks ...int) {
	t.Helper()
	for _, r := range ranks {
		SaveRank(t, ckptDir, r, Weights(tag, r))
	}
}

// MarkDone writes only rank's done marker in ckptDir (the handshake's last
// step; a test that wants a marker without files, or files written its own
// way, calls it directly).
func MarkDone(t testing.TB, ckptDir string, rank int) {
	t.Helper()
	p := checkpoint.DoneMarkerPath(ckptDir, rank)
	must(t, os.MkdirAll(filepath.Dir(p), 0o755))
	must(t, os.WriteFile(p, nil, 0o644))
}

// A Fixture is a store in a temporary directory of the test.
type Fixture struct {
	t     testing.TB
	Store *checkpoint.Store
}

// NewFixture opens a store with options o in t.TempDir().
func NewFixture(t testing.TB, o checkpoint.Options) *Fixture {
	t.Helper()
	s, err := checkpoint.OpenWith(t.TempDir(), o)
	must(t, err)
	return &Fixture{t: t, Store: s}
}

// Dir is the store's directory (CKPT_DIR).
func (f *Fixture) Dir() string { return f.Store.Dir() }

// Save saves checkpoint tag in the store for each of ranks (SaveRanks).
func (f *Fixture) Save(tag string, ranks ...int) {
	f.t.Helper()
	SaveRanks(f.t, f.Store.TagDir(tag), tag, ranks...)
}

// Stage puts rank's files of tag in the store's staging area, as a drain
// that has carried that rank so far leaves them.
func (f *Fixture) Stage(tag string, rank int, files ...File) {
	f.t.Helper()
	SaveRank(f.t, f.Store.StagingDir(tag), rank, files...)
}

// Commit saves each tag for ranks 0..world-1 and commits it.
func (f *Fixture) Commit(world int, tags ...string) {
	f.t.Helper()
	for _, tag := range tags {
		for r := 0; r < world; r++ {
			f.Save(tag, r)
		}
		if _, err := f.Store.Commit(f.t.Context(), tag, world); err != nil {
			f.t.Fatalf("commit %s: %v", tag, err)
		}
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
