//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/trainrun/trainrun/test/harness"
)

// TestRunMigrates (issue 34): a late-bound job (-p ampere,hopper, a plan for
// each) starts on ampere while hopper is held; its trainer is slow there
// (0.6 s per step, 0.2 s on hopper). Once hopper's holder ends, the
// controller (--migrate yes, every 3 s) checkpoints, requeues the job into
// hopper, and it resumes there from the checkpoint with hopper's plan and
// finishes; the migrated finish is earlier than staying would have been
// (the steps left at the move × the step time observed on ampere).
func TestRunMigrates(t *testing.T) {
	requireTorch(t)
	t.Parallel()
	bin := trainrun(t)
	c, err := harness.Start(harness.Options{Heterogeneous: true, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	c.LogOnFailure(t)
	dir := t.TempDir()
	plans := filepath.Join(dir, "plans")
	if err := os.Mkdir(plans, 0o700); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for part, gpu := range map[string]string{"hopper": "h100-80gb", "ampere": "a100-40gb"} {
		out, err := c.Run(ctx, bin, "plan", "--model", "gpt3-1.3b", "--gpu", gpu, "--gpus", "1", "--gpus-per-node", "1", "--seq-len", "1024", "--global-batch", "8", "--format", "json")
		if err != nil {
			t.Fatalf("plan for %s: %v", part, err)
		}
		if err := os.WriteFile(filepath.Join(plans, "plan-"+part+".json"), []byte(out), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	const steps = 200
	holder, err := c.SubmitBatch(ctx, "#!/bin/bash\nsleep 600\n", "-p", "hopper", "-N2", "--exclusive", "--time=10")
	if err != nil {
		t.Fatal(err)
	}
	defer cancelJobsOn(t, c, holder)
	if _, err := c.WaitJob(ctx, holder, 20*time.Second, "RUNNING"); err != nil {
		t.Fatal(err)
	}
	ckpt := filepath.Join(dir, "ckpt")
	script := fmt.Sprintf(`#!/bin/bash
#SBATCH --nodes=1 --ntasks-per-node=1 --gpus-per-node=1 --time=5 --requeue --open-mode=append
export GLOO_SOCKET_IFNAME=lo
export TRAINRUN_PLAN=%[1]s/plan-ampere.json TRAINRUN_PLAN_BY_PARTITION=%[1]s/plan-%%p.json
case "$SLURMD_NODENAME" in n1|n2) S=0.2 ;; *) S=0.6 ;; esac
exec %[2]s run --probe none --job-dir %[3]s/job --ckpt-dir %[4]s --migrate yes --migrate-every 3s --train-steps %[5]d -- /usr/bin/python3 %[6]s --steps %[5]d --sleep $S --report %[3]s/report
`, plans, bin, dir, ckpt, steps, exampleTrainer())
	t0 := time.Now()
	id, err := c.SubmitBatch(ctx, script, "-p", "ampere,hopper")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Run(context.Background(), "scancel", strconv.Itoa(id)) })
	progress := filepath.Join(dir, "job", "launch", "progress")
	waitStep(t, c, id, progress, 8)
	// A measured save (the move's cost reads it from the history).
	if _, err := c.Run(ctx, bin, "ckpt", "request", "--then", "continue", "--ckpt-dir", ckpt); err != nil {
		t.Fatal(err)
	}
	waitStep(t, c, id, progress, 15)
	stepAtFree, _ := readProgress(progress)
	cancelJobsOn(t, c, holder) // hopper frees
	freed := time.Now()
	if _, err := c.WaitJob(ctx, id, 100*time.Second, "COMPLETED"); err != nil {
		t.Fatalf("%v\n%s", err, c.JobOutput(id))
	}
	done := time.Now()
	log := c.JobOutput(id)
	for _, want := range []string{"late binding: the job landed in partition ampere", "migration: moving from ampere to hopper",
		"the requeued job " + strconv.Itoa(id) + " goes to partition hopper", "late binding: the job landed in partition hopper", "training finished"} {
		if !strings.Contains(log, want) {
			t.Errorf("the log lacks %q:\n%s", want, log)
		}
	}
	// Staying: the steps left when hopper freed at ampere's observed step time.
	var moveStep int
	var ampereStep float64
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "migration check:") {
			t.Logf("job %d: %s", id, strings.TrimSpace(l))
		}
		if i := strings.Index(l, "migration: moving from ampere to hopper: "); i >= 0 {
			var left int
			var obsv string
			fmt.Sscanf(l[i+len("migration: moving from ampere to hopper: "):], "%d steps left", &left)
			moveStep = steps - left
			if j := strings.LastIndex(l, "staying ("); j >= 0 {
				fmt.Sscanf(l[j+len("staying ("):], "%s", &obsv)
				d, _ := time.ParseDuration(strings.TrimSuffix(obsv, "/step"))
				ampereStep = d.Seconds()
			}
			t.Logf("job %d: %s", id, strings.TrimSpace(l[i:]))
		}
	}
	if moveStep <= 0 || ampereStep <= 0 {
		t.Fatalf("no move with its step and observed step time in the log:\n%s", log)
	}
	stayFinish := freed.Add(time.Duration(float64(steps-stepAtFree) * ampereStep * float64(time.Second)))
	if !done.Before(stayFinish) {
		t.Errorf("migrated finish %s after the free, staying's %s (%d steps left × %.2f s observed): the move did not finish earlier",
			done.Sub(freed).Round(time.Second), stayFinish.Sub(freed).Round(time.Second), steps-stepAtFree, ampereStep)
	}
	// The hopper run resumed from the move's checkpoint (rank 0's report is the last run's).
	b, err := os.ReadFile(filepath.Join(dir, "report", "rank-0.json"))
	var rep struct {
		StartStep int `json:"start_step"`
		EndStep   int `json:"end_step"`
	}
	if err != nil || json.Unmarshal(b, &rep) != nil {
		t.Fatalf("rank 0's report: %v", err)
	}
	if rep.StartStep < moveStep || rep.EndStep != steps {
		t.Errorf("the last run trained steps %d..%d; want from the move's checkpoint (at or after step %d) to %d", rep.StartStep, rep.EndStep, moveStep, steps)
	}
	info, _ := c.JobInfo(ctx, id)
	if info["Partition"] != "hopper" || info["Restarts"] != "1" {
		t.Errorf("job %d: Partition=%s Restarts=%s, want hopper after one requeue", id, info["Partition"], info["Restarts"])
	}
	t.Logf("job %d: resumed on hopper at step %d", id, rep.StartStep)
	t.Logf("job %d: moved at step %d; finished %.1f s after hopper freed (%.1f s after submission); staying would have taken %.1f s more from the free (%d steps × %.2f s observed on ampere)",
		id, moveStep, done.Sub(freed).Seconds(), done.Sub(t0).Seconds(), stayFinish.Sub(freed).Seconds(), steps-stepAtFree, ampereStep)
}
