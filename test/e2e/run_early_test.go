//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/trainrun/trainrun/test/harness"
)

// TestRunEarlyStepFallsBackToHostfile: trainrun run starts its step before
// the plan, in Slurm's block order, with the shims waiting. On a cluster
// whose switches interleave the node names (n1 and n3 on one leaf, n2 and n4
// on the other), a tp=8 pp=4 layout keeps each pipeline's neighbours on one
// leaf: rank order n1 n3 n2 n4, not Slurm's. The early step must then be
// called off (no rank started in it) and the step started again with the
// hostfile, so that every rank runs where the plan put it, with SLURM_PROCID
// equal to its RANK, and exactly once.
func TestRunEarlyStepFallsBackToHostfile(t *testing.T) {
	t.Parallel()
	bin := trainrun(t)
	c, err := harness.Start(harness.Options{Logf: t.Logf,
		TopologyConf: "SwitchName=leaf1 Nodes=n1,n3\nSwitchName=leaf2 Nodes=n2,n4\nSwitchName=spine Switches=leaf[1-2]\n"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	c.LogOnFailure(t)
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	script := fmt.Sprintf(`#!/bin/bash
#SBATCH --nodes=4 --ntasks-per-node=8 --gpus-per-node=8 --time=5
export TRAINRUN_JOB_DIR=%s/job
%s run --probe all --model llama2-7b --seq-len 4096 --global-batch 256 --gpu h100-sxm --fix tp=8,pp=4 -- \
  /bin/sh -c 'echo "$RANK $SLURM_PROCID $SLURMD_NODENAME" >> %s/ranks.$RANK'
`, dir, bin, dir)
	t0 := time.Now()
	id, err := c.SubmitBatch(context.Background(), script, "-D", dir)
	if err != nil {
		t.Fatal(err)
	}
	state, err := c.WaitJob(context.Background(), id, 90*time.Second, "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT")
	out := c.JobOutput(id)
	if err != nil || state != "COMPLETED" {
		t.Fatalf("job %d: %s %v\n%s", id, state, err, out)
	}
	if !strings.Contains(out, "calling off the step started before the plan") {
		t.Errorf("no fallback to the hostfile logged:\n%s", out)
	}
	hosts, err := os.ReadFile(filepath.Join(dir, "job", "hostfile"))
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Fields(string(hosts))
	if len(want) != 32 || strings.Join(uniq(want), " ") != "n1 n3 n2 n4" {
		t.Fatalf("hostfile %q: want 32 ranks in the order n1 n3 n2 n4 (the test's premise)", want)
	}
	line := regexp.MustCompile(`^(\d+) (\d+) (\S+)$`)
	for r := range 32 {
		b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("ranks.%d", r)))
		if err != nil {
			t.Errorf("rank %d did not run: %v", r, err)
			continue
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		m := line.FindStringSubmatch(lines[0])
		if len(lines) != 1 || m == nil || m[1] != m[2] || m[3] != want[r] {
			t.Errorf("rank %d ran as %q; want once, SLURM_PROCID=%d on %s", r, lines, r, want[r])
		}
	}
	t.Logf("took %v", time.Since(t0).Round(time.Millisecond))
}

func uniq(s []string) []string {
	var out []string
	for i, v := range s {
		if i == 0 || s[i-1] != v {
			out = append(out, v)
		}
	}
	return out
}
