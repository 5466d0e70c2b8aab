//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// `trainrun ckpt request`: --then continue makes every trainer checkpoint and
// keep training (the controller commits it in the background); --then stop
// makes them checkpoint and exit, and the job ends with exit 7 (stopped).
func TestRunCheckpointRequest(t *testing.T) {
	requireTorch(t)
	bin := trainrun(t)
	trainer := exampleTrainer()
	ckpt := filepath.Join(t.TempDir(), "ck")
	script := fmt.Sprintf(`#!/bin/bash
#SBATCH --nodes=2 --ntasks-per-node=1 --gpus-per-node=1 --time=10
export GLOO_SOCKET_IFNAME=lo
exec %s run --fix tp=1 --ckpt-dir %s -- /usr/bin/python3 %s --steps 400 --sleep 0.3
`, bin, ckpt, trainer)
	ctx := context.Background()
	id, err := cluster.SubmitBatch(ctx, script)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cluster.Run(context.Background(), "scancel", strconv.Itoa(id)) })
	waitLog := func(what string, d time.Duration) { t.Helper(); waitLog(t, cluster, id, what, d) }
	waitLog("all 2 ranks started", 90*time.Second)
	time.Sleep(10 * time.Second) // past torch's import and the rendezvous
	if _, err := cluster.Run(ctx, bin, "ckpt", "request", "--then", "continue", "--ckpt-dir", ckpt); err != nil {
		t.Fatal(err)
	}
	waitLog("then continue)", 10*time.Second)
	waitLog("complete and committed as latest", 40*time.Second)
	if _, err := cluster.Run(ctx, bin, "ckpt", "request", "--then", "stop", "--ckpt-dir", ckpt); err != nil {
		t.Fatal(err)
	}
	if _, err := cluster.WaitJob(ctx, id, 90*time.Second, "FAILED"); err != nil {
		t.Fatal(err)
	}
	info, _ := cluster.JobInfo(ctx, id)
	log := cluster.JobOutput(id)
	if info["ExitCode"] != "7:0" || !strings.Contains(log, "stopped as requested") {
		t.Errorf("ExitCode=%s, want 7:0 (stopped) and the reason in the log:\n%s", info["ExitCode"], log)
	}
	out, err := cluster.Run(ctx, bin, "ckpt", "list", "--ckpt-dir", ckpt)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out, "step-"); n < 2 {
		t.Errorf("want at least 2 committed checkpoints (continue, stop), got:\n%s", out)
	}
	t.Logf("job log:\n%s\nckpt list:\n%s", log, out)
}
