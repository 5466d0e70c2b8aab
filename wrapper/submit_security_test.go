package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trainrun/trainrun/internal/safefs/safefstest"
	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
	"github.com/trainrun/trainrun/wrapper/internal/run"
)

// Review t4, F2: another user who created --plan-dir first (mode 0777)
// could swap the plan the job reads. submit refuses the directory and
// submits nothing.
func TestSubmitRefusesForeignPlanDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "trainrun-submit")
	if err := os.Mkdir(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o777)
	safefstest.AsNobody(t, dir)
	f := &fakeSched{t: t}
	args := append([]string{"submit", "--policy", policyFile(t, ampere40), "--tokens", "2e8", "--partition", "ampere", "--min-gpus", "16", "--plan-dir", dir}, job8b...)
	_, errOut, code := runSched(t, f, append(args, "--", "job.sh")...)
	if code == exitcode.OK || len(f.submitted) != 0 {
		t.Fatalf("exit %d, submitted %q", code, f.submitted)
	}
	if !strings.Contains(errOut, "--plan-dir "+dir) || !strings.Contains(errOut, "uid 65534") {
		t.Errorf("stderr does not name the directory and its owner:\n%s", errOut)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("a plan was written into nobody's directory: %v", entries)
	}
}

// Review t4 (noted): --init-from a checkpoint the background pass
// compressed handed the trainer .trz files. It is refused, saying how to
// restore it; once restored it is accepted.
func TestInitFromCompressedRefused(t *testing.T) {
	dir, _ := compressFixture(t)
	if code, out, errs := runCkptCmd(t, dir, "compress", "--all", "--workers", "2"); code != exitcode.OK {
		t.Fatalf("compress: exit %d\n%s%s", code, out, errs)
	}
	from := filepath.Join(dir, "step-10")
	_, err := run.InitialCheckpoint(from)
	if err == nil || !strings.Contains(err.Error(), "weights.bin") || !strings.Contains(err.Error(), "trainrun ckpt restore step-10 --ckpt-dir "+dir) {
		t.Fatalf("--init-from a compressed checkpoint: %v", err)
	}
	if code, out, errs := runCkptCmd(t, dir, "restore", "step-10"); code != exitcode.OK {
		t.Fatalf("restore: exit %d\n%s%s", code, out, errs)
	}
	if got, err := run.InitialCheckpoint(from); err != nil || got != from {
		t.Errorf("--init-from the restored checkpoint: %q, %v", got, err)
	}
}
