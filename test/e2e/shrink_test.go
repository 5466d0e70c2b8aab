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

	"github.com/trainrun/trainrun/test/harness"
)

// Shrink to fit (issue 31): 3 nodes, dp 3 × grad accum 2 (global batch 6),
// no spare, --shrink yes and a trainer that declares TRAINRUN_RESHARD=dp.
// n2's slurmd is stopped and the job's processes there killed: the step
// restarts inside the same job on n1 and n3 with dp 2 × grad accum 3 (the
// same global batch) within 60 s, resumes from the checkpoint written at
// dp 3, and finishes.
func TestRunShrinkAfterLostNode(t *testing.T) {
	requireTorch(t)
	t.Parallel()
	c := ownCluster(t, lostNodeConf...)
	bin := trainrun(t)
	dir := t.TempDir()
	script := fmt.Sprintf(`#!/bin/bash
#SBATCH --nodes=3 --ntasks-per-node=1 --gpus-per-node=1 --time=5 --requeue --no-kill --open-mode=append
export GLOO_SOCKET_IFNAME=lo
export TRAINRUN_RESHARD=dp
exec %s run --fix tp=1,mbs=1,grad_accum=2 --job-dir %s/job --shrink yes -- /usr/bin/python3 %s --steps 40 --sleep 0.15 --save-every 10 --report %s/report
`, bin, dir, exampleTrainer(), dir)
	ctx := context.Background()
	id, err := c.SubmitBatch(ctx, script, "--nodelist=n[1-3]")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Run(context.Background(), "scancel", strconv.Itoa(id)) })
	progress := filepath.Join(dir, "job", "launch", "progress")
	waitStep(t, c, id, progress, 12)
	fault := time.Now()
	if err := c.StopSlurmd("n2"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.StartSlurmd(context.Background(), "n2") })
	if n := killJobProcs(c, id, "n2"); n == 0 {
		t.Fatalf("found no process of job %d on n2 to kill", id)
	}
	// Steps resume: the shrunk step's 2 ranks started (the first step had 3)
	// and rank 0 reported a step after the fault.
	var resumed time.Duration
	if err := harness.WaitFor(ctx, 90*time.Second, "a step after the shrink", func() bool {
		_, at := readProgress(progress)
		resumed = at.Sub(fault)
		return strings.Contains(c.JobOutput(id), "all 2 ranks started") && at.After(fault)
	}); err != nil {
		t.Fatalf("%v\n%s", err, c.JobOutput(id))
	}
	if _, err := c.WaitJob(ctx, id, 2*time.Minute, "COMPLETED"); err != nil {
		t.Fatalf("%v\n%s", err, c.JobOutput(id))
	}
	info, _ := c.JobInfo(ctx, id)
	log := c.JobOutput(id)
	if info["Restarts"] != "0" {
		t.Errorf("Restarts=%s, want 0 (shrunk inside the job):\n%s", info["Restarts"], log)
	}
	for _, want := range []string{"node n2 was lost", "shrink: the lost n2 leave 2 node(s) and no spare: the step runs on n[1,3] (2 ranks) with tp 1 pp 1 cp 1, dp 2 (was 3), grad accum 3 (was 2): the global batch 6 is kept",
		"train_example: resharding from dp 3 to dp 2 (grad accum 3)", "training finished"} {
		if !strings.Contains(log, want) {
			t.Errorf("the log lacks %q:\n%s", want, log)
		}
	}
	for r := 0; r < 2; r++ {
		rep := readRankReport(t, dir, r)
		if rep.Env["TRAINRUN_DP"] != "2" || rep.Env["TRAINRUN_GRAD_ACCUM"] != "3" || rep.EndStep != 40 || rep.StartStep == 0 {
			t.Errorf("rank %d after the shrink: dp %s grad accum %s, steps %d..%d; want dp 2, grad accum 3 (dp × accum 6 as before), resumed, to 40",
				r, rep.Env["TRAINRUN_DP"], rep.Env["TRAINRUN_GRAD_ACCUM"], rep.StartStep, rep.EndStep)
		}
	}
	if resumed > 60*time.Second {
		t.Errorf("steps resumed %.0f s after the lost node, want within 60 s", resumed.Seconds())
	}
	t.Logf("shrunk: steps resumed %.1f s after the lost node", resumed.Seconds())
}
