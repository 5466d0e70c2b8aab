package checkpoint

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// benchSource writes a checkpoint-like tree into node-local storage
// (/dev/shm when present, as a trainer would): a few big shards that the
// drain splits into ranges, and many small ones.
func benchSource(b *testing.B, big, bigMiB, small, smallMiB int) (string, int64) {
	b.Helper()
	root := ""
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		d, err := os.MkdirTemp("/dev/shm", "trainrun-bench-")
		if err == nil {
			root = d
			b.Cleanup(func() { os.RemoveAll(d) })
		}
	}
	if root == "" {
		root = b.TempDir()
	}
	src := filepath.Join(root, "step-1")
	buf := content("bench", 0, 0, 1<<20)
	var total int64
	write := func(name string, mib int) {
		p := filepath.Join(src, name)
		must(b, os.MkdirAll(filepath.Dir(p), 0o755))
		f, err := os.Create(p)
		must(b, err)
		for i := 0; i < mib; i++ {
			buf[0] = byte(i) // not all blocks equal
			_, err := f.Write(buf)
			must(b, err)
		}
		must(b, f.Close())
		total += int64(mib) << 20
	}
	for i := 0; i < big; i++ {
		write(fmt.Sprintf("model/big%d.distcp", i), bigMiB)
	}
	for i := 0; i < small; i++ {
		write(fmt.Sprintf("optim/small%03d.distcp", i), smallMiB)
	}
	must(b, os.MkdirAll(filepath.Join(src, metaDir), 0o755))
	must(b, os.WriteFile(DoneMarkerPath(src, 0), nil, 0o644))
	return src, total
}

// BenchmarkDrainVsCp drains a checkpoint from node-local storage to the store
// and, in the same iteration, copies the same files to the same file system
// with `cp -r`, then with `cp -r` followed by `sync FILES` (cp alone does not
// make the copy durable; the drain does). Ratios above 1 mean the drain is
// faster.
func BenchmarkDrainVsCp(b *testing.B) {
	if _, err := exec.LookPath("cp"); err != nil {
		b.Skip("no cp")
	}
	src, total := benchSource(b, 4, 96, 32, 4) // 512 MiB
	dstRoot := b.TempDir()
	var tDrain, tCp, tSync time.Duration
	b.SetBytes(total)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		dir := filepath.Join(dstRoot, fmt.Sprint("store", i))
		must(b, os.MkdirAll(dir, 0o755))
		s, err := Open(dir)
		must(b, err)
		cpDst := filepath.Join(dstRoot, fmt.Sprint("cp", i))
		b.StartTimer()

		t0 := time.Now()
		if _, err := Drain(context.Background(), src, s, "step-1", DrainOptions{Node: "n0"}); err != nil {
			b.Fatal(err)
		}
		tDrain += time.Since(t0)

		b.StopTimer()
		t0 = time.Now()
		if out, err := exec.Command("cp", "-r", src, cpDst).CombinedOutput(); err != nil {
			b.Fatalf("cp: %v %s", err, out)
		}
		tCp += time.Since(t0)
		files, err := listFiles(cpDst)
		must(b, err)
		args := []string{}
		for _, f := range files {
			args = append(args, filepath.Join(cpDst, f.Path))
		}
		t0 = time.Now()
		if out, err := exec.Command("sync", args...).CombinedOutput(); err != nil {
			b.Fatalf("sync: %v %s", err, out)
		}
		tSync += time.Since(t0)
		os.RemoveAll(dir)
		os.RemoveAll(cpDst)
		b.StartTimer()
	}
	mb := float64(total) / 1e6 * float64(b.N)
	b.ReportMetric(mb/tDrain.Seconds(), "drain_MB/s")
	b.ReportMetric(mb/tCp.Seconds(), "cp_MB/s")
	b.ReportMetric(mb/(tCp+tSync).Seconds(), "cp+sync_MB/s")
	b.ReportMetric(tCp.Seconds()/tDrain.Seconds(), "drain/cp_speed")
	b.ReportMetric((tCp+tSync).Seconds()/tDrain.Seconds(), "drain/cp+sync_speed")
}

// BenchmarkCommit1000Shards times Commit (fsync every file, hash it, write
// the manifest, move the pointer) of a checkpoint of 1,000 ranks with one
// 256 KiB shard each, the trainer having made its files durable already;
// "deferred" is Commit with Options.DeferHash (no reading; Seal hashes later).
func BenchmarkCommit1000Shards(b *testing.B) {
	for _, c := range []struct {
		name      string
		deferHash bool
	}{{"hash", false}, {"deferred", true}} {
		b.Run(c.name, func(b *testing.B) {
			s, err := OpenWith(b.TempDir(), Options{DeferHash: c.deferHash})
			must(b, err)
			const ranks = 1000
			dir := s.tagDir("step-1000")
			buf := content("shard", 0, 0, 256<<10)
			for r := 0; r < ranks; r++ {
				p := filepath.Join(dir, fmt.Sprintf("__%d_0.distcp", r))
				must(b, os.MkdirAll(filepath.Dir(p), 0o755))
				must(b, os.WriteFile(p, buf, 0o644))
				must(b, os.MkdirAll(ckptMeta(dir), 0o755))
				must(b, os.WriteFile(DoneMarkerPath(dir, r), nil, 0o644))
			}
			must(b, exec.Command("sync").Run())
			var tVerify time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := s.Commit(b.Context(), "step-1000", ranks); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if c.deferHash {
					if _, err := s.Seal(context.Background(), "step-1000"); err != nil {
						b.Fatal(err)
					}
				}
				t0 := time.Now()
				if _, err := s.Verify(b.Context(), "step-1000", Checksums); err != nil {
					b.Fatal(err)
				}
				tVerify += time.Since(t0)
				must(b, os.Remove(manifestPath(dir)))
				b.StartTimer()
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "commit_ms")
			b.ReportMetric(float64(tVerify.Microseconds())/1000/float64(b.N), "verify_ms")
		})
	}
}

// BenchmarkVerify measures full verification (reread and xxh64 of every byte)
// of a committed checkpoint in the page cache: the hashing's own cost, the
// floor under any file system's.
func BenchmarkVerify(b *testing.B) {
	s, err := Open(b.TempDir())
	must(b, err)
	dir := s.tagDir("step-1")
	buf := content("verify", 0, 0, 1<<20)
	for i := 0; i < 8; i++ {
		p := filepath.Join(dir, fmt.Sprintf("shard%d.bin", i))
		must(b, os.MkdirAll(dir, 0o755))
		f, err := os.Create(p)
		must(b, err)
		for j := 0; j < 96; j++ {
			_, err := f.Write(buf)
			must(b, err)
		}
		must(b, f.Close())
	}
	must(b, os.MkdirAll(ckptMeta(dir), 0o755))
	must(b, os.WriteFile(DoneMarkerPath(dir, 0), nil, 0o644))
	m, err := s.Commit(b.Context(), "step-1", 1)
	must(b, err)
	b.SetBytes(m.Bytes)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := s.Verify(b.Context(), "step-1", Checksums); err != nil {
			b.Fatal(err)
		}
	}
}
