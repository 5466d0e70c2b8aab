package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// saveTensorCkpt writes a checkpoint of world ranks, each with a BF16
// safetensors file and an FP32 optimizer shard (compressible, several codec
// chunks) plus a small JSON file, and returns what each file holds.
func saveTensorCkpt(t *testing.T, s *Store, tag string, world int, seed uint64) map[string][]byte {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 7))
	dir := s.tagDir(tag)
	want := map[string][]byte{}
	for rank := 0; rank < world; rank++ {
		w := filepath.Join(dir, "model", "rank"+string(rune('0'+rank))+".safetensors")
		must(t, os.MkdirAll(filepath.Dir(w), 0o755))
		writeSafetensors(t, w, []tensor{{"w", "BF16", gaussBF16(r, 700_000+rank)}, {"b", "F32", gaussF32(r, 1000)}})
		o := filepath.Join(dir, "optim", "rank"+string(rune('0'+rank))+".distcp")
		must(t, os.MkdirAll(filepath.Dir(o), 0o755))
		writeRaw(t, o, []tensor{{"m", "F32", gaussF32(r, 300_000)}})
		must(t, os.MkdirAll(ckptMeta(dir), 0o755))
		must(t, os.WriteFile(DoneMarkerPath(dir, rank), nil, 0o644))
	}
	must(t, os.WriteFile(filepath.Join(dir, "trainer_state.json"), []byte(`{"step":1}`), 0o644))
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && !strings.Contains(p, metaDir) {
			b, _ := os.ReadFile(p)
			rel, _ := filepath.Rel(dir, p)
			want[filepath.ToSlash(rel)] = b
		}
		return err
	})
	must(t, err)
	return want
}

func checkFiles(t *testing.T, dir string, want map[string][]byte) {
	t.Helper()
	for rel, b := range want {
		got, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel)))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, b) {
			t.Fatalf("%s: %d bytes back, not the %d the trainer wrote", rel, len(got), len(b))
		}
	}
}

func TestCompressVerifyRestore(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	want := saveTensorCkpt(t, s, "step-10", 2, 1)
	_, err := s.Commit(t.Context(), "step-10", 2)
	must(t, err)
	res, err := s.Compress(ctx, "step-10", CompressOptions{Workers: 3})
	must(t, err)
	if res.Files != 4 || res.StoredBytes >= res.RawBytes*9/10 {
		t.Fatalf("compressed %d files, %d -> %d bytes; want the 4 tensor files, saving over 10%%", res.Files, res.RawBytes, res.StoredBytes)
	}
	dir := s.tagDir("step-10")
	for rel := range want {
		_, rawErr := os.Stat(filepath.Join(dir, rel))
		_, trzErr := os.Stat(filepath.Join(dir, rel+TRZSuffix))
		small := strings.HasSuffix(rel, ".json")
		if small != (rawErr == nil) || small == (trzErr == nil) {
			t.Errorf("%s: raw present %v, compressed present %v", rel, rawErr == nil, trzErr == nil)
		}
	}
	if _, err := s.Verify(t.Context(), "step-10", Checksums); err != nil {
		t.Fatalf("a compressed checkpoint must verify: %v", err)
	}
	list, err := s.List()
	must(t, err)
	if len(list) != 1 || list[0].Stored != res.StoredBytes || list[0].Bytes != res.RawBytes {
		t.Fatalf("List: %+v, want raw %d stored %d", list, res.RawBytes, res.StoredBytes)
	}
	again, err := s.Compress(ctx, "step-10", CompressOptions{})
	must(t, err)
	if again.Files != 0 {
		t.Errorf("a second pass compressed %d files again", again.Files)
	}

	to := t.TempDir()
	n, err := s.Restore(ctx, "step-10", to, 2)
	must(t, err)
	if n != res.RawBytes {
		t.Errorf("restored %d bytes, want %d", n, res.RawBytes)
	}
	checkFiles(t, to, want)

	_, err = s.Restore(ctx, "step-10", "", 2)
	must(t, err)
	checkFiles(t, dir, want)
	m, err := s.Verify(t.Context(), "step-10", Checksums)
	must(t, err)
	if m.StoredBytes() != m.Bytes {
		t.Errorf("restored in place, yet stored %d of %d bytes", m.StoredBytes(), m.Bytes)
	}
	if fs, _ := filepath.Glob(filepath.Join(dir, "model", "*"+TRZSuffix)); len(fs) > 0 {
		t.Errorf("compressed copies left after the restore: %v", fs)
	}
}

// TestVerifyNamesFileAndChunk: a bit flipped in a compressed file is
// reported with the file and the chunk.
func TestVerifyNamesFileAndChunk(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	saveTensorCkpt(t, s, "step-10", 1, 2)
	_, err := s.Commit(t.Context(), "step-10", 1)
	must(t, err)
	_, err = s.Compress(ctx, "step-10", CompressOptions{})
	must(t, err)
	p := filepath.Join(s.tagDir("step-10"), "model", "rank0.safetensors"+TRZSuffix)
	h := readIndexOf(t, p)
	b, err := os.ReadFile(p)
	must(t, err)
	c := h.Chunks[1]
	b[c.StoredOff+int64(c.StoredLen)/2] ^= 0x10
	must(t, os.WriteFile(p, b, 0o644))
	// The stored checksum catches it first; decoding says which chunk.
	_, err = s.Verify(t.Context(), "step-10", Checksums)
	var ve *VerifyError
	if !errors.As(err, &ve) || ve.Path != p || !strings.Contains(err.Error(), "chunk 1 ") {
		t.Fatalf("Verify: %v, want a VerifyError naming %s and chunk 1", err, p)
	}
	// Without the file-level stored checksum, the chunk's own checksum.
	m, err := readManifest(s.tagDir("step-10"))
	must(t, err)
	err = verifyCompressed(ctx, s.tagDir("step-10"), m, 2)
	if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "chunk 1 ") {
		t.Fatalf("verifyCompressed: %v, want the file and chunk 1 named", err)
	}
	if _, err := s.Restore(ctx, "step-10", t.TempDir(), 2); err == nil || !strings.Contains(err.Error(), "chunk 1 ") {
		t.Fatalf("Restore of a damaged file: %v, want chunk 1 named", err)
	}
}

func TestCompressRetainedKeepsNewestRaw(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	for i, tag := range []string{"step-10", "step-20", "step-30"} {
		saveTensorCkpt(t, s, tag, 1, uint64(i))
		_, err := s.Commit(t.Context(), tag, 1)
		must(t, err)
	}
	res, err := s.CompressRetained(ctx, CompressOptions{})
	must(t, err)
	if len(res) != 2 || res[0].Tag != "step-10" || res[1].Tag != "step-20" {
		t.Fatalf("compressed %+v, want step-10 and step-20", res)
	}
	r, err := s.Latest(t.Context(), Checksums)
	must(t, err)
	if r.Tag != "step-30" || r.Manifest.StoredBytes() != r.Manifest.Bytes {
		t.Fatalf("latest %s stored %d of %d: the newest must stay raw", r.Tag, r.Manifest.StoredBytes(), r.Manifest.Bytes)
	}
	// The resume point falls back to a compressed one: EnsureRaw brings it back.
	_, err = s.Quarantine("step-30")
	must(t, err)
	r, err = s.Latest(t.Context(), Checksums)
	must(t, err)
	must(t, s.EnsureRaw(ctx, r.Tag))
	m, err := s.Verify(t.Context(), r.Tag, Checksums)
	must(t, err)
	if m.StoredBytes() != m.Bytes {
		t.Fatalf("EnsureRaw left %s compressed", r.Tag)
	}
}

func TestCompressRefusesAChangedFile(t *testing.T) {
	s := newStore(t)
	saveTensorCkpt(t, s, "step-10", 1, 3)
	_, err := s.Commit(t.Context(), "step-10", 1)
	must(t, err)
	p := filepath.Join(s.tagDir("step-10"), "model", "rank0.safetensors")
	b, _ := os.ReadFile(p)
	b[len(b)/2] ^= 1
	must(t, os.WriteFile(p, b, 0o644))
	_, err = s.Compress(context.Background(), "step-10", CompressOptions{})
	var ve *VerifyError
	if !errors.As(err, &ve) || !strings.Contains(err.Error(), "changed after commit") {
		t.Fatalf("Compress of a changed file: %v", err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("the raw file must stay: %v", err)
	}
}

// TestDrainCompresses: with the store's mode always, the drain writes the
// big files compressed into staging, the commit records them, and the
// checkpoint verifies and restores to the trainer's bytes; auto measures
// both speeds and decides.
func TestDrainCompresses(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	local := newStore(t) // a node-local tree laid out by the same helper
	want := saveTensorCkpt(t, local, "step-10", 2, 4)
	must(t, s.SetCompressMode(CompressAlways))
	res, err := Drain(ctx, local.tagDir("step-10"), s, "step-10", DrainOptions{Node: "n1"})
	must(t, err)
	if !res.Compression.Compress || res.Copied >= res.Bytes*9/10 {
		t.Fatalf("drain: %+v, want compressed, copying well under %d bytes", res, res.Bytes)
	}
	if _, err := os.Stat(filepath.Join(s.stagingDir("step-10"), "model", "rank0.safetensors"+TRZSuffix)); err != nil {
		t.Fatalf("staged file is not compressed: %v", err)
	}
	m, err := s.Commit(t.Context(), "step-10", 2)
	must(t, err)
	z := 0
	for _, f := range m.Files {
		if f.Compressed() {
			z++
		}
	}
	if z != 4 || m.Bytes != res.Bytes {
		t.Fatalf("manifest: %d compressed files, %d bytes; want 4 and %d", z, m.Bytes, res.Bytes)
	}
	if _, err := s.Verify(t.Context(), "step-10", Checksums); err != nil {
		t.Fatal(err)
	}
	to := t.TempDir()
	_, err = s.Restore(ctx, "step-10", to, 2)
	must(t, err)
	checkFiles(t, to, want)

	must(t, s.SetCompressMode(CompressAuto))
	if s.CompressMode() != CompressAuto {
		t.Fatalf("mode %q", s.CompressMode())
	}
	saveTensorCkpt(t, local, "step-20", 1, 5)
	res, err = Drain(ctx, local.tagDir("step-20"), s, "step-20", DrainOptions{Node: "n1"})
	must(t, err)
	dc := res.Compression
	if dc.CompressorMBps <= 0 || dc.TargetMBps <= 0 || dc.Compress != (dc.CompressorMBps > dc.TargetMBps) {
		t.Fatalf("auto: %+v", dc)
	}
	t.Logf("auto: compressor %.0f MB/s, target %.0f MB/s: compress %v", dc.CompressorMBps, dc.TargetMBps, dc.Compress)
	_, err = s.Commit(t.Context(), "step-20", 1)
	must(t, err)
	if _, err := s.Verify(t.Context(), "step-20", Checksums); err != nil {
		t.Fatal(err)
	}
	if err := s.SetCompressMode("sometimes"); err == nil || !strings.Contains(err.Error(), `"sometimes"`) {
		t.Fatalf("bad mode: %v", err)
	}
}

// Issue 30: restoring a tag that is not there says so, not "never committed".
func TestRestoreMissingTag(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Restore(t.Context(), "step-1", t.TempDir(), 1)
	if err == nil || !strings.Contains(err.Error(), "no such checkpoint") || strings.Contains(err.Error(), "never committed") {
		t.Errorf("Restore of a missing tag: %v", err)
	}
}
