package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trainrun/trainrun/internal/safefs/safefstest"
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
	if code == ExitOK || len(f.submitted) != 0 {
		t.Fatalf("exit %d, submitted %q", code, f.submitted)
	}
	if !strings.Contains(errOut, "--plan-dir "+dir) || !strings.Contains(errOut, "uid 65534") {
		t.Errorf("stderr does not name the directory and its owner:\n%s", errOut)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("a plan was written into nobody's directory: %v", entries)
	}
}
