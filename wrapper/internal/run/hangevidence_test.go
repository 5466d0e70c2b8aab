package run

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trainrun/trainrun/wrapper/internal/jobdir"
)

// Hangs are numbered after the run directory's existing ones (a requeued
// job keeps the earlier evidence); the summary names the rank that did not
// enter the collective, and a rank whose shim wrote nothing.
func TestHangEvidenceNumberedAndSummarised(t *testing.T) {
	dir := t.TempDir()
	var log bytes.Buffer
	r := &runner{env: &Deps{Stderr: &log}, dirs: runDirs{jobDir: dir}}
	if err := os.MkdirAll(filepath.Join(dir, jobdir.Hangs, "2"), 0o755); err != nil {
		t.Fatal(err)
	}
	n := r.newHangDir()
	if n != 3 {
		t.Fatalf("newHangDir = %d, want 3 (after hangs/2)", n)
	}
	h := jobdir.Hang(dir, n)
	os.WriteFile(filepath.Join(h, "rank-0.collectives.txt"), []byte("# rank 0\n1 1 done all_reduce world:3 1 [1]\n2 2 enter all_reduce world:3 2 [1]\n"), 0o644)
	os.WriteFile(filepath.Join(h, "rank-1.collectives.txt"), []byte("# rank 1\n1 1 done all_reduce world:3 1 [1]\n"), 0o644)
	os.WriteFile(filepath.Join(h, "rank-2.proc.txt"), []byte("pid 9\nstate D\nwchan: unreadable\n"), 0o644)
	r.summariseHang(n, []int{0, 1, 2}, "rank 1 (node n2, GPU 0) stopped")
	sum, err := os.ReadFile(filepath.Join(h, "summary.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"hang 3: rank 1 (node n2, GPU 0) stopped", "rank 1 did not enter collective #2 on world:3 (all_reduce) that rank(s) 0 wait in", "rank 2: no record of its collectives (its shim wrote nothing", "rank 2's process is in an uninterruptible wait in the kernel (state D)"} {
		if !strings.Contains(string(sum), s) {
			t.Errorf("summary.txt lacks %q:\n%s", s, sum)
		}
	}
	if !strings.Contains(log.String(), "hang: collectives: rank 1 did not enter") || !strings.Contains(log.String(), "hang: evidence of 3 rank(s) in "+h) {
		t.Errorf("log:\n%s", log.String())
	}
	// No job directory (a unit test's runner): no evidence, no files.
	if n := (&runner{env: &Deps{Stderr: &log}}).newHangDir(); n != 0 {
		t.Errorf("newHangDir without a job directory = %d", n)
	}
}

// The flight recorder's variables point into hangs/; the user's own win.
func TestFlightRecorderEnv(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("TORCH_NCCL_TRACE_BUFFER_SIZE", "500")
	r := &runner{dirs: runDirs{jobDir: dir}}
	renv := rankEnv{Common: map[string]string{"TORCH_FR_BUFFER_SIZE": "7"}}
	r.addFlightRecorderEnv(&renv)
	c := renv.Common
	if _, set := c["TORCH_NCCL_TRACE_BUFFER_SIZE"]; set {
		t.Errorf("the user's TORCH_NCCL_TRACE_BUFFER_SIZE is replaced: %v", c)
	}
	if c["TORCH_FR_BUFFER_SIZE"] != "7" || c["TORCH_NCCL_DUMP_ON_TIMEOUT"] != "1" ||
		c["TORCH_NCCL_DEBUG_INFO_TEMP_FILE"] != filepath.Join(dir, "hangs", "nccl_trace_rank_") || c["TORCH_FR_DUMP_TEMP_FILE"] != c["TORCH_NCCL_DEBUG_INFO_TEMP_FILE"] {
		t.Errorf("flight recorder env = %v", c)
	}
}
