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

// A hang's evidence is kept (issue 31): rank 1 of 2 is stopped (SIGSTOP)
// while rank 0 waits for it in a collective. Before the step is killed,
// hangs/1/ gets rank 0's Python stacks and last collectives, and for the
// stopped rank (which cannot answer) "no answer", its process state and
// its last collectives read from the record it keeps mapped; the log names
// rank 1 as the one that did not enter the collective rank 0 waits in, and
// `trainrun report` links the directory.
func TestFaultHangEvidence(t *testing.T) {
	requireTorch(t)
	t.Parallel()
	bin := trainrun(t)
	dir := t.TempDir()
	script := fmt.Sprintf(`#!/bin/bash
#SBATCH --nodes=2 --ntasks-per-node=1 --gpus-per-node=1 --time=5 --requeue --open-mode=append
export GLOO_SOCKET_IFNAME=lo
exec %s run --fix tp=1 --probe all --job-dir %s/job --hang-timeout 8s --max-restarts 1 -- /usr/bin/python3 %s --steps 30 --sleep 0.15 --save-every 10 --collective-timeout 1800
`, bin, dir, exampleTrainer())
	ctx := context.Background()
	id, err := cluster.SubmitBatch(ctx, script)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cluster.Run(context.Background(), "scancel", strconv.Itoa(id)) })
	job := filepath.Join(dir, "job")
	waitStep(t, cluster, id, filepath.Join(job, "launch", "progress"), 12)
	pid := trainerPID(t, id, 1)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	if _, err := cluster.WaitJob(ctx, id, 3*time.Minute, "COMPLETED"); err != nil {
		t.Fatalf("%v\n%s", err, cluster.JobOutput(id))
	}
	log := cluster.JobOutput(id)
	hang := filepath.Join(job, "hangs", "1")
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(hang, name))
		if err != nil {
			t.Errorf("hangs/1: %v\n%s", err, log)
		}
		return string(b)
	}
	want := map[string][]string{
		"rank-0.stack.txt":       {"most recent call first", "all_reduce"},
		"rank-0.collectives.txt": {" enter all_reduce world:2 "},
		"rank-0.proc.txt":        {"pid ", "wchan"},
		"rank-1.stack.txt":       {"no answer", "state T"},
		"rank-1.proc.txt":        {"state T"},
		"rank-1.collectives.txt": {" done all_reduce world:2 "},
	}
	for name, subs := range want {
		text := read(name)
		for _, s := range subs {
			if !strings.Contains(text, s) {
				t.Errorf("hangs/1/%s lacks %q:\n%s", name, s, text)
			}
		}
	}
	if sum := read("summary.txt"); !strings.Contains(sum, "rank 1 did not enter collective") && !strings.Contains(sum, "rank 1's process is stopped") {
		t.Errorf("hangs/1/summary.txt does not single out rank 1:\n%s", sum)
	}
	t.Logf("hangs/1/summary.txt:\n%s\nrank-1.collectives.txt (tail): %s", read("summary.txt"), tail(read("rank-1.collectives.txt"), 3))
	// The log names rank 1: as the one that did not enter the collective
	// rank 0 waits in (its number one past rank 1's last), or, when rank 1
	// was stopped inside that collective or inside DDP's C++ all-reduce
	// (its record then does not single it out), by its stopped process.
	if m := regexp.MustCompile(`hang: collectives: rank 1 did not enter collective #(\d+) on world:2 \(all_reduce\) that rank\(s\) 0 wait in: its last there is #(\d+)`).FindStringSubmatch(log); m != nil {
		if a, b := atoi(t, m[1]), atoi(t, m[2]); a != b+1 {
			t.Errorf("stuck at #%d, rank 1's last #%d: want one apart", a, b)
		}
	} else if !strings.Contains(log, "hang: collectives: rank 1's process is stopped (state T)") {
		t.Fatalf("the log does not name rank 1 in the collectives' summary:\n%s", log)
	}
	if !strings.Contains(log, "hang: evidence of 2 rank(s) in "+hang) {
		t.Errorf("the log does not point to %s:\n%s", hang, log)
	}
	out, err := exec.Command(bin, "report", job).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "hangs: 1") || !strings.Contains(string(out), hang) || !strings.Contains(string(out), "rank 1 did not enter") && !strings.Contains(string(out), "rank 1's process is stopped") {
		t.Errorf("trainrun report %s (%v) does not link the hang:\n%s", job, err, out)
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func tail(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(l[max(0, len(l)-n):], "\n")
}
