//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A full disk at a save never costs the latest checkpoint (issue 21): the
// store is a 4 MiB tmpfs, filled by the test so that step-10 fits and
// step-20 does not. The trainer's failed save is discarded, the latest stays
// step-10 and verifies, the log names the file system, what filled and its
// free space, training goes on; once the test frees the space the next save
// commits, the run finishes, and the metric counts the one failed save.
func TestRunDiskFullAtSave(t *testing.T) {
	requireTorch(t)
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	t.Parallel()
	bin := trainrun(t)
	trainer := exampleTrainer()
	dir := t.TempDir()
	ckpt := filepath.Join(dir, "ck")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Mkdir(ckpt, 0o755))
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", ckpt).CombinedOutput(); err != nil {
		t.Skipf("mount -t tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", ckpt).Run() })
	// Leave 800 KiB: one checkpoint of two ranks' 256 KiB ballast fits, two do not.
	var st syscall.Statfs_t
	must(syscall.Statfs(ckpt, &st))
	filler := filepath.Join(ckpt, "filler.bin")
	must(os.WriteFile(filler, make([]byte, int64(st.Bavail)*st.Bsize-800<<10), 0o644))
	prom := filepath.Join(dir, "trainrun.prom")
	script := fmt.Sprintf(`#!/bin/bash
#SBATCH --nodes=2 --ntasks-per-node=1 --gpus-per-node=1 --time=5
export GLOO_SOCKET_IFNAME=lo
exec %s run --fix tp=1 --ckpt-dir %s --metrics-textfile %s -- /usr/bin/python3 %s --steps 50 --sleep 0.4 --save-every 10 --ballast-kb 256
`, bin, ckpt, prom, trainer)
	ctx := context.Background()
	t0 := time.Now()
	id, err := cluster.SubmitBatch(ctx, script)
	must(err)
	t.Cleanup(func() { cluster.Run(context.Background(), "scancel", strconv.Itoa(id)) })
	log := waitLog(t, cluster, id, "checkpoint step-20 was not saved", 90*time.Second)
	latest, _ := os.ReadFile(filepath.Join(ckpt, ".trainrun", "latest"))
	if strings.TrimSpace(string(latest)) != "step-10" {
		t.Errorf("latest after the failed save is %q, want step-10", latest)
	}
	if out, err := exec.Command(bin, "ckpt", "verify", "step-10", "--ckpt-dir", ckpt).CombinedOutput(); err != nil {
		t.Errorf("step-10 does not verify after the failed save: %v\n%s", err, out)
	}
	must(os.Remove(filler)) // the operator frees space: the next save goes through
	for _, want := range []string{"file system " + ckpt + " (tmpfs) is full", "KiB free of 4.0 MiB", "the latest committed checkpoint stays step-10", "next save retries"} {
		if !strings.Contains(log, want) {
			t.Errorf("the failed save's message lacks %q:\n%s", want, log)
		}
	}
	if _, err := cluster.WaitJob(ctx, id, 90*time.Second, "COMPLETED"); err != nil {
		t.Fatalf("%v\n%s", err, cluster.JobOutput(id))
	}
	took := time.Since(t0)
	log = cluster.JobOutput(id)
	latest, _ = os.ReadFile(filepath.Join(ckpt, ".trainrun", "latest"))
	if l := strings.TrimSpace(string(latest)); l != "step-40" {
		t.Errorf("latest at the end is %q, want step-40: the saves after the freed space were not committed\n%s", l, log)
	}
	if strings.Count(log, "was not saved") != 1 {
		t.Errorf("want exactly one failed save in the log:\n%s", log)
	}
	text, err := os.ReadFile(prom)
	must(err)
	if !regexp.MustCompile(`trainrun_checkpoint_failures_total\{[^}]*cause="disk-full"[^}]*\} 1\n`).Match(text) {
		t.Errorf("the metrics textfile does not count one disk-full save:\n%s", text)
	}
	t.Logf("disk-full run took %.1f s from submission\n%s", took.Seconds(), log)
}
