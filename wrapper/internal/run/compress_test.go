package run

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trainrun/trainrun/checkpoint"
	"github.com/trainrun/trainrun/checkpoint/checkpointtest"
)

// compressFixture: two committed checkpoints of one rank, each a 1 MiB
// BF16-like tensor file (Gaussian weights) and a small JSON file.
func compressFixture(t *testing.T) (string, map[string][]byte) {
	t.Helper()
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(1, 2))
	want := map[string][]byte{}
	for _, tag := range []string{"step-10", "step-20"} {
		w := make([]byte, 1<<20)
		for i := 0; i < len(w); i += 2 {
			binary.LittleEndian.PutUint16(w[i:], uint16(math.Float32bits(float32(r.NormFloat64()*0.02))>>16))
		}
		checkpointtest.SaveRank(t, filepath.Join(dir, tag), 0,
			checkpointtest.File{Name: "weights.bin", Data: string(w)}, checkpointtest.File{Name: "state.json", Data: `{"tag":"` + tag + `"}`})
		want[tag] = w
	}
	s, err := checkpoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, tag := range []string{"step-10", "step-20"} {
		if _, err := s.Commit(t.Context(), tag, 1); err != nil {
			t.Fatal(err)
		}
	}
	return dir, want
}

// The controller's hooks: the mode goes into the store for the drains, and
// after a commit the retained older checkpoints are compressed (the newest
// stays raw), logged; with no, nothing happens.
func TestRunCompressHooks(t *testing.T) {
	for _, mode := range []string{"no", "archive"} {
		dir, _ := compressFixture(t)
		s, err := checkpoint.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		var log bytes.Buffer
		r := &runner{cfg: Config{Options: Options{compress: mode}}, ckpt: runStore{store: s}, env: &Deps{Stderr: &log}}
		r.setCompressMode()
		r.compressKick(true)
		if got := s.CompressMode(); got != mode {
			t.Errorf("%s: store's mode %q", mode, got)
		}
		list, err := s.List()
		if err != nil || len(list) != 2 {
			t.Fatalf("%s: %v %v", mode, list, err)
		}
		old, newest := list[0], list[1]
		if compressed := old.Stored < old.Bytes; compressed != (mode == "archive") || newest.Stored != newest.Bytes {
			t.Errorf("%s: step-10 stored %d of %d, step-20 %d of %d", mode, old.Stored, old.Bytes, newest.Stored, newest.Bytes)
		}
		if logged := strings.Contains(log.String(), "compressed checkpoint step-10"); logged != (mode == "archive") {
			t.Errorf("%s: log %q", mode, log.String())
		}
	}
}
