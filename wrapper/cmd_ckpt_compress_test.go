package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trainrun/trainrun/checkpoint"
	"github.com/trainrun/trainrun/checkpoint/checkpointtest"
	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
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

func TestCkptCompressListRestore(t *testing.T) {
	dir, want := compressFixture(t)
	code, out, errs := runCkptCmd(t, dir, "compress", "--all", "--workers", "2")
	if code != exitcode.OK || !strings.Contains(out, "step-10: 1 files compressed") || strings.Contains(out, "step-20") {
		t.Fatalf("compress --all: exit %d\n%s%s", code, out, errs)
	}
	if _, err := os.Stat(filepath.Join(dir, "step-10", "weights.bin.trz")); err != nil {
		t.Fatalf("compressed file: %v", err)
	}
	code, out, errs = runCkptCmd(t, dir, "list", "--format", "json")
	if code != exitcode.OK {
		t.Fatalf("list: exit %d: %s", code, errs)
	}
	var rows []struct {
		Tag    string `json:"tag"`
		State  string `json:"state"`
		Step   int64  `json:"step"`
		Raw    int64  `json:"raw_bytes"`
		Stored int64  `json:"stored_bytes"`
	}
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 2 {
		t.Fatalf("list --format json: %v\n%s", err, out)
	}
	if r := rows[0]; r.Tag != "step-10" || r.State != "committed" || r.Step != 10 || r.Stored >= r.Raw*9/10 {
		t.Errorf("step-10: %+v, want stored well under raw", r)
	}
	if r := rows[1]; r.Stored != r.Raw {
		t.Errorf("step-20 (the newest, raw): %+v", r)
	}
	if code, out, errs = runCkptCmd(t, dir, "verify", "--all"); code != exitcode.OK {
		t.Fatalf("verify --all: exit %d\n%s%s", code, out, errs)
	}
	to := t.TempDir()
	code, out, errs = runCkptCmd(t, dir, "restore", "step-10", "--to", to)
	if code != exitcode.OK {
		t.Fatalf("restore: exit %d\n%s%s", code, out, errs)
	}
	got, err := os.ReadFile(filepath.Join(to, "weights.bin"))
	if err != nil || !bytes.Equal(got, want["step-10"]) {
		t.Fatalf("restored weights.bin differs from what the trainer wrote (%v)", err)
	}
	// A flipped bit in the compressed file: verify names the file and the chunk.
	z := filepath.Join(dir, "step-10", "weights.bin.trz")
	zb, err := os.ReadFile(z)
	if err != nil {
		t.Fatal(err)
	}
	zb[len(zb)/2] ^= 0x04
	if err := os.WriteFile(z, zb, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, _ = runCkptCmd(t, dir, "verify", "step-10")
	if code != exitcode.Checkpoint || !strings.Contains(out, z) || !strings.Contains(out, "chunk 0 ") {
		t.Errorf("verify of a flipped bit: exit %d\n%s", code, out)
	}
	code, _, errs = runCkptCmd(t, dir, "list", "--format", "yaml")
	if code != exitcode.Usage || !strings.Contains(errs, `--format "yaml"`) {
		t.Errorf("list --format yaml: exit %d: %s", code, errs)
	}
	code, _, errs = runCkptCmd(t, dir, "compress")
	if code != exitcode.Usage || !strings.Contains(errs, "exactly one TAG or --all") {
		t.Errorf("compress without a tag: exit %d: %s", code, errs)
	}
	code, _, errs = runCkptCmd(t, dir, "restore", "step-99", "--to", to)
	if code != exitcode.Checkpoint || !strings.Contains(errs, "step-99") {
		t.Errorf("restore of a missing tag: exit %d: %s", code, errs)
	}
}

func TestRunRefusesABadCompressMode(t *testing.T) {
	code, _, errs := cli{}.run("run", "--ckpt-compress", "sometimes", "--", "true")
	if code != exitcode.Usage || !strings.Contains(errs, `--ckpt-compress "sometimes"`) || !strings.Contains(errs, "archive") {
		t.Fatalf("exit %d: %s", code, errs)
	}
}
