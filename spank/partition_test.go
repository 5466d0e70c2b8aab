package spank

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trainrun/trainrun/checkpoint"
	"github.com/trainrun/trainrun/plan/policy"
)

// Review t4, F5: a job that made the prolog's partition record impossible
// to write (a full cache file system) got the policy of whatever partition
// its own environment named. Without a record the strictest settings apply:
// here no partition allows every user override, so a signal the site did
// not choose is refused, while the "open" partition the environment names
// would have accepted it.
func TestStepPartitionWithoutRecordIsStrictest(t *testing.T) {
	c := policyConfig(t, testPolicy)
	cache := t.TempDir()
	part, note := StepPartition(cache, 7, "open")
	if part != policy.Unrecorded || note == "" {
		t.Fatalf("StepPartition without a record = %q (%q), want the strictest", part, note)
	}
	given := map[string]string{"train-ckpt-signal": "USR1@5m"}
	getenv := func(string) string { return "" }
	if _, err := Resolve(c, "open", given, getenv); err != nil {
		t.Fatalf("the open partition refuses the override: %v", err)
	}
	if _, err := Resolve(c, part, given, getenv); err == nil {
		t.Error("without a partition record, a user override no partition's policy allows in common was accepted")
	}
}

// Review t4, F5: what a job's user writes into its handoff directory is
// bounded by the directory's own file system, and the cache's file system
// (the node's /run by default) stays writable for root's records.
func TestHandoffCannotFillTheCache(t *testing.T) {
	needRoot(t)
	cache := filepath.Join(t.TempDir(), "cache")
	h, err := prepareJobDir(t, cache, 42, nobody, nobody)
	if err != nil {
		t.Fatal(err)
	}
	if !mounted(h) {
		t.Fatal("the handoff directory is on the cache's file system")
	}
	if u, g, m := owner(t, h); u != nobody || g != nobody || m != os.ModeDir|0o700 {
		t.Errorf("handoff dir: %d:%d %v, want %d:%d drwx------", u, g, m, nobody, nobody)
	}
	// The user fills it (root writes here as the user would: tmpfs's size
	// binds root too).
	f, err := os.Create(filepath.Join(h, "fill"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.Write(make([]byte, 2*HandoffFSBytes))
	f.Close()
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("writing %d bytes into the handoff directory: %v, want ENOSPC", 2*HandoffFSBytes, err)
	}
	// Root's record beside it is still written.
	if err := os.WriteFile(filepath.Join(JobDir(cache, 42), "partition"), []byte("gpu\n"), 0o644); err != nil {
		t.Fatalf("the partition record after the handoff filled up: %v", err)
	}
	if p, ok := JobPartition(cache, 42); !ok || p != "gpu" {
		t.Errorf("JobPartition = %q, %v", p, ok)
	}
	// A second step of the job finds the same file system; the epilog's
	// CleanJob unmounts and removes it.
	if h2, err := PrepareJobDir(cache, 42, nobody, nobody); err != nil || h2 != h {
		t.Fatalf("second step: %q, %v", h2, err)
	}
	if err := CleanJob(cache, 42); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(JobDir(cache, 42)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("job dir left after CleanJob: %v", err)
	}
}

// Review t4, F6: a drain's error quotes a file name the user chose; a
// newline in it wrote a line of the user's choosing into slurmd's log.
// Every line the epilog logs stays one line.
func TestEpilogLogIsOneLinePerRecord(t *testing.T) {
	needRoot(t)
	t.Setenv("SLURMD_NODENAME", "n1")
	dir := sharedDir(t)
	forged := `x\n[2026-12-03T12:00:00.000] error: slurmd: forged\u0085\u001b[2J`
	bin, _ := fakeTrainrun(t, dir, `echo '{"node":"n1","left":["step-11"],"error":"lstat /dev/shm/ck/n1/`+forged+`: no such file"}'`)
	cache := filepath.Join(dir, "cache")
	c := &Config{CacheDir: cache, Trainrun: bin, DrainTimeout: 20 * time.Second}
	hdir, err := prepareJobDir(t, cache, 7, nobody, nobody)
	if err != nil {
		t.Fatal(err)
	}
	putRecord(t, hdir, "drain-n1.json", checkpoint.DrainHandoff{Version: 1, JobID: 7, Node: "n1", LocalDir: "/dev/shm/ck/n1", CkptDir: "/lustre/ann/run1", Ranks: []int{0}})
	var lines []string
	JobEpilog(c, 7, nobody, nobody, func(s string) { lines = append(lines, s) })
	if len(lines) != 1 {
		t.Fatalf("%d log lines, want 1: %q", len(lines), lines)
	}
	if strings.ContainsFunc(lines[0], func(r rune) bool { return r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0 }) {
		t.Errorf("a control character reached the log: %q", lines[0])
	}
	if !strings.Contains(lines[0], `x\n[2026-12-03T12:00:00.000] error: slurmd: forged`) {
		t.Errorf("the name is not quoted in the line: %q", lines[0])
	}
}
