package checkpoint

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// Tensor files for the codec's property tests, written the way the
// frameworks write them: safetensors (header + raw tensors), torch.save's
// zip (stored entries, 64-byte aligned storages), DCP's .distcp (raw
// storages back to back) and files of no known format.

type tensor struct {
	name  string
	dtype string // BF16, F16, F32, F64, U8
	data  []byte
}

// randTensor draws a tensor of n elements: Gaussian values of a random
// scale in the float dtypes (what weights and optimizer state look like),
// or, with some probability, constants, sparse values or pure noise.
func randTensor(r *rand.Rand, name, dtype string, n int) tensor {
	size := map[string]int{"BF16": 2, "F16": 2, "F32": 4, "F64": 8, "U8": 1}[dtype]
	b := make([]byte, n*size)
	scale := math.Pow(10, -4+4*r.Float64())
	kind := r.IntN(10)
	for i := 0; i < n; i++ {
		v := r.NormFloat64() * scale
		switch {
		case kind == 0:
			v = 0
		case kind == 1 && r.IntN(10) > 0:
			v = 0
		case kind == 2:
			for j := 0; j < size; j++ { // noise
				b[i*size+j] = byte(r.Uint32())
			}
			continue
		}
		switch dtype {
		case "BF16":
			binary.LittleEndian.PutUint16(b[2*i:], uint16(math.Float32bits(float32(v))>>16))
		case "F16":
			binary.LittleEndian.PutUint16(b[2*i:], f32toF16(float32(v)))
		case "F32":
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(v)))
		case "F64":
			binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(v))
		case "U8":
			b[i] = byte(v * 1e4)
		}
	}
	return tensor{name, dtype, b}
}

// f32toF16 truncates to IEEE half precision (flushing what is out of range).
func f32toF16(f float32) uint16 {
	u := math.Float32bits(f)
	sign := uint16(u>>16) & 0x8000
	exp := int((u>>23)&0xff) - 127 + 15
	if exp <= 0 {
		return sign
	}
	if exp >= 31 {
		return sign | 0x7c00
	}
	return sign | uint16(exp)<<10 | uint16((u>>13)&0x3ff)
}

func writeSafetensors(t testing.TB, path string, ts []tensor) {
	hdr := map[string]any{"__metadata__": map[string]string{"format": "pt"}}
	off := 0
	var body []byte
	for _, x := range ts {
		size := map[string]int{"BF16": 2, "F16": 2, "F32": 4, "F64": 8, "U8": 1}[x.dtype]
		hdr[x.name] = map[string]any{"dtype": x.dtype, "shape": []int{len(x.data) / size}, "data_offsets": []int{off, off + len(x.data)}}
		off += len(x.data)
		body = append(body, x.data...)
	}
	h, _ := json.Marshal(hdr)
	for len(h)%8 != 0 {
		h = append(h, ' ')
	}
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(h)))
	out = append(append(out, h...), body...)
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

// writeTorchZip writes torch.save's layout: archive/data.pkl, then each
// storage as archive/data/<key>, stored, 64-byte aligned.
func writeTorchZip(t testing.TB, path string, ts []tensor) {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	add := func(name string, data []byte) {
		// torch pads the local header's extra field so data is 64-aligned;
		// archive/zip does not, which makes misaligned storages: the
		// codec must cope with both.
		w, err := zw.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Store})
		if err != nil {
			t.Fatal(err)
		}
		w.Write(data)
	}
	add("archive/data.pkl", []byte("\x80\x02}q\x00(X\x06\x00\x00\x00weightq\x01ctorch._utils\n_rebuild_tensor_v2\n"))
	for i, x := range ts {
		add(fmt.Sprintf("archive/data/%d", i), x.data)
	}
	add("archive/version", []byte("3\n"))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func writeRaw(t testing.TB, path string, ts []tensor) {
	var b []byte
	for _, x := range ts {
		b = append(b, x.data...)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

var dtypes = []string{"BF16", "F16", "F32", "F64", "U8"}

func randTensors(r *rand.Rand) []tensor {
	var ts []tensor
	for i := 0; i < 1+r.IntN(6); i++ {
		n := r.IntN(300_000)
		if r.IntN(4) == 0 {
			n = r.IntN(9)
		}
		ts = append(ts, randTensor(r, fmt.Sprintf("layer.%d.weight", i), dtypes[r.IntN(len(dtypes))], n))
	}
	return ts
}

func roundTrip(t *testing.T, path string, workers int) (raw, stored int64) {
	t.Helper()
	ctx := context.Background()
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	raw, stored, err = CompressFile(ctx, path, path+TRZSuffix, workers)
	if err != nil {
		t.Fatalf("compress %s: %v", path, err)
	}
	back := path + ".back"
	if _, err := DecompressFile(ctx, path+TRZSuffix, back, workers); err != nil {
		t.Fatalf("decompress %s: %v", path, err)
	}
	got, err := os.ReadFile(back)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: round trip is not bit-exact (%d bytes back, %d in)", path, len(got), len(want))
	}
	return raw, stored
}

// TestCodecRoundTripProperty: random tensors of random dtypes and sizes, in
// every format, come back bit-exact, with any number of workers.
func TestCodecRoundTripProperty(t *testing.T) {
	seed := uint64(17)
	r := rand.New(rand.NewPCG(seed, seed))
	dir := t.TempDir()
	iters := 40
	if testing.Short() {
		iters = 8
	}
	for it := 0; it < iters; it++ {
		ts := randTensors(r)
		for _, f := range []struct {
			name  string
			write func(testing.TB, string, []tensor)
		}{
			{"model.safetensors", writeSafetensors},
			{"model.pt", writeTorchZip},
			{"__0_0.distcp", writeRaw},
			{"optimizer.bin", writeRaw},
			{"blob", writeRaw},
		} {
			p := filepath.Join(dir, fmt.Sprintf("%d-%s", it, f.name))
			f.write(t, p, ts)
			roundTrip(t, p, 1+r.IntN(4))
		}
	}
}

// TestCodecEdgeCases: empty, tiny, odd-sized, constant and random files.
func TestCodecEdgeCases(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	dir := t.TempDir()
	noise := make([]byte, 3<<20+7)
	for i := range noise {
		noise[i] = byte(r.Uint32())
	}
	cases := map[string][]byte{
		"empty": nil, "one": {7}, "three": {1, 2, 3}, "zeros": make([]byte, 2<<20+1),
		"noise": noise, "text": bytes.Repeat([]byte("step 1200 loss 2.31\n"), 100_000),
	}
	for name, b := range cases {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		raw, stored := roundTrip(t, p, 3)
		if name == "noise" && stored > raw+int64(trzHeaderLen+trzEntryLen*4) {
			t.Errorf("noise: stored %d bytes for %d: incompressible chunks must be stored raw", stored, raw)
		}
		if name == "zeros" && stored > 1000 {
			t.Errorf("zeros: stored %d bytes for %d", stored, raw)
		}
	}
}

// TestCodecDetectsElementSize: the planes split on the header's dtype for
// safetensors, and by trial for raw storages.
func TestCodecDetectsElementSize(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	dir := t.TempDir()
	ts := []tensor{{"a", "BF16", gaussBF16(r, 1<<20)}, {"b", "F32", gaussF32(r, 1<<19)}}
	st := filepath.Join(dir, "m.safetensors")
	writeSafetensors(t, st, ts)
	raw := filepath.Join(dir, "m.distcp")
	writeRaw(t, raw, ts)
	for _, p := range []string{st, raw} {
		roundTrip(t, p, 2)
		h := readIndexOf(t, p+TRZSuffix)
		elems := map[int]int64{}
		for _, c := range h.Chunks {
			elems[c.Elem] += int64(c.RawLen)
		}
		if elems[2] < 2<<20-DefaultCodecChunk || elems[4] < 2<<20-DefaultCodecChunk {
			t.Errorf("%s: bytes per element size %v, want about 2 MiB each of 2 and 4", filepath.Base(p), elems)
		}
	}
}

func gaussBF16(r *rand.Rand, n int) []byte {
	b := make([]byte, 2*n)
	for i := 0; i < n; i++ {
		binary.LittleEndian.PutUint16(b[2*i:], uint16(math.Float32bits(float32(r.NormFloat64()*0.02))>>16))
	}
	return b
}

func gaussF32(r *rand.Rand, n int) []byte {
	b := make([]byte, 4*n)
	for i := 0; i < n; i++ {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(r.NormFloat64()*1e-3)))
	}
	return b
}

func readIndexOf(t *testing.T, p string) *trzHeader {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, _ := f.Stat()
	h, err := readTRZIndex(f, fi.Size())
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestCodecFlippedBit: a bit flipped anywhere in a chunk is reported with
// that chunk's number; in the header or index, as a damaged index.
func TestCodecFlippedBit(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	dir := t.TempDir()
	p := filepath.Join(dir, "w.safetensors")
	writeSafetensors(t, p, []tensor{{"w", "BF16", gaussBF16(r, 3<<20)}})
	roundTrip(t, p, 2)
	z := p + TRZSuffix
	orig, _ := os.ReadFile(z)
	h := readIndexOf(t, z)
	if len(h.Chunks) < 4 {
		t.Fatalf("want several chunks, got %d", len(h.Chunks))
	}
	for trial := 0; trial < 30; trial++ {
		pos := r.IntN(len(orig))
		bad := bytes.Clone(orig)
		bad[pos] ^= 1 << r.IntN(8)
		f, err := os.CreateTemp(dir, "bad")
		if err != nil {
			t.Fatal(err)
		}
		f.Write(bad)
		_, _, err = decodeFile(context.Background(), f, int64(len(bad)), -1, nil, codecOpts{Workers: 2})
		f.Close()
		want := sort.Search(len(h.Chunks), func(i int) bool { return h.Chunks[i].StoredOff+int64(h.Chunks[i].StoredLen) > int64(pos) })
		var ce *ChunkError
		switch {
		case pos < h.indexLen():
			if err == nil || errors.As(err, &ce) {
				t.Errorf("bit flipped at %d (index): got %v, want a damaged-index error", pos, err)
			}
		case !errors.As(err, &ce) || ce.Chunk != want:
			t.Errorf("bit flipped at %d (chunk %d): got %v", pos, want, err)
		}
	}
}

// TestCodecRoundTripRealFiles: the trained weights, the Adam state and a
// real torch.save zip (testdata, see codec_bench_test.go for their source)
// round-trip bit-exact, and the planes split where the dtypes say.
func TestCodecRoundTripRealFiles(t *testing.T) {
	dir := t.TempDir()
	for _, rel := range append(benchFiles, "trained/model.pt") {
		b, err := os.ReadFile(filepath.Join("testdata", rel))
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.Base(rel))
		must(t, os.WriteFile(p, b, 0o644))
		raw, stored := roundTrip(t, p, 2)
		h := readIndexOf(t, p+TRZSuffix)
		elems := map[int]int{}
		for _, c := range h.Chunks {
			elems[c.Elem] += c.RawLen
		}
		t.Logf("%s: %d -> %d bytes (ratio %.3f), bytes by element size %v", rel, raw, stored, float64(raw)/float64(stored), elems)
		want := 2
		if strings.Contains(rel, "fp32") {
			want = 4
		}
		if !strings.HasSuffix(rel, ".pt") && elems[want] < int(raw)*9/10 {
			t.Errorf("%s: %v bytes by element size, want most in %d", rel, elems, want)
		}
		if stored >= raw {
			t.Errorf("%s: stored %d >= raw %d", rel, stored, raw)
		}
	}
}
