//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/trainrun/trainrun/checkpoint"
)

// CkptCompress=archive (issue 17): a job preempted twice resumes and
// finishes with the weights of an uninterrupted run; the checkpoints it
// retains, all but the newest, are stored compressed in the store, and
// `trainrun ckpt restore` gives back the bytes the trainer wrote (the xxh64
// the commit recorded from the raw files, and a torch.load of them).
func TestRunCompressArchivePreempted(t *testing.T) {
	requireTorch(t)
	t.Parallel()
	cluster := ownCluster(t)
	bin := trainrun(t)
	trainer := exampleTrainer()
	dir := t.TempDir()
	conf := filepath.Join(dir, "trainrun.conf")
	if err := os.WriteFile(conf, []byte("CkptCompress=archive\nCkptKeep=10\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	job := func(name string) string {
		return fmt.Sprintf(`#!/bin/bash
#SBATCH --nodes=2 --ntasks-per-node=1 --gpus-per-node=1 --time=10 --requeue --open-mode=append -p low
export GLOO_SOCKET_IFNAME=lo
exec %s run --policy %s --fix tp=1 -- /usr/bin/python3 %s --steps 100 --sleep 0.4 --ballast-kb 512 --out %s/%s.weights --report %s/%s
`, bin, conf, trainer, dir, name, dir, name)
	}
	ref, low := refAndRun(t, cluster, job("ref"), job("low"))
	for _, restart := range []string{"restart 0", "restart 1"} {
		preempt(t, cluster, low, restart, 2, 12*time.Second, "n1")
	}
	waitCompleted(t, cluster, 5*time.Minute, ref, low)
	log := cluster.JobOutput(low)
	if n := strings.Count(log, "preempted (SIGTERM from Slurm to the step"); n != 2 {
		t.Errorf("%d preemptions in the job log, want 2:\n%s", n, log)
	}
	sameWeights(t, dir, "low", log)

	store := filepath.Join(cluster.JobsDir(), fmt.Sprintf("trainrun-%d", low), "checkpoints")
	out, err := exec.Command(bin, "ckpt", "list", "--format", "json", "--ckpt-dir", store).Output()
	if err != nil {
		t.Fatalf("ckpt list: %v\n%s", err, out)
	}
	var rows []struct {
		Tag    string `json:"tag"`
		State  string `json:"state"`
		Latest bool   `json:"latest"`
		Raw    int64  `json:"raw_bytes"`
		Stored int64  `json:"stored_bytes"`
	}
	if err := json.Unmarshal(out, &rows); err != nil || len(rows) < 2 {
		t.Fatalf("ckpt list --format json: want 2 or more checkpoints (%v):\n%s\njob log:\n%s", err, out, log)
	}
	for i, r := range rows {
		newest := i == len(rows)-1
		if r.State != "committed" || newest != (r.Stored == r.Raw) || r.Stored > r.Raw {
			t.Errorf("%s: %+v; want every retained checkpoint but the newest stored compressed, the newest raw\n%s", r.Tag, r, out)
		}
	}
	t.Logf("ckpt list --format json:\n%s", out)
	if strings.Count(log, "compressed checkpoint ") < len(rows)-1 {
		t.Errorf("the job log does not report the background compression:\n%s", log)
	}
	if out, err := exec.Command(bin, "ckpt", "verify", "--all", "--ckpt-dir", store).CombinedOutput(); err != nil {
		t.Fatalf("ckpt verify --all: %v\n%s", err, out)
	}

	old := rows[0].Tag
	to := t.TempDir()
	if out, err := exec.Command(bin, "ckpt", "restore", old, "--to", to, "--ckpt-dir", store).CombinedOutput(); err != nil {
		t.Fatalf("ckpt restore: %v\n%s", err, out)
	}
	var m struct {
		Files []struct {
			Path  string `json:"path"`
			XXH64 string `json:"xxh64"`
			Codec string `json:"codec"`
		} `json:"files"`
	}
	mb, err := os.ReadFile(checkpoint.ManifestPath(filepath.Join(store, old)))
	if err != nil || json.Unmarshal(mb, &m) != nil {
		t.Fatalf("manifest of %s: %v", old, err)
	}
	compressed := 0
	for _, f := range m.Files {
		got, err := os.ReadFile(filepath.Join(to, f.Path))
		if err != nil {
			t.Fatal(err)
		}
		if sum := fmt.Sprintf("%016x", xxhash.Sum64(got)); sum != f.XXH64 {
			t.Errorf("%s restored with xxh64 %s, the trainer's file had %s", f.Path, sum, f.XXH64)
		}
		if f.Codec == "trz1" {
			compressed++
		}
	}
	if compressed == 0 {
		t.Errorf("%s has no compressed file: %s", old, mb)
	}
	py := `import sys, torch
s = torch.load(sys.argv[1])
g = torch.Generator().manual_seed(17)
want = (torch.randn(512 * 512, generator=g) * 0.02).to(torch.bfloat16)
assert torch.equal(s["ballast"], want), "ballast differs"
print(s["step"])`
	got, err := exec.Command("/usr/bin/python3", "-c", py, filepath.Join(to, "rank-0.pt")).CombinedOutput()
	if err != nil || strings.TrimSpace(string(got)) != strings.TrimPrefix(strings.SplitN(old, ".", 2)[0], "step-") {
		t.Errorf("torch.load of the restored %s/rank-0.pt: %v: %s", old, err, got)
	}
}
