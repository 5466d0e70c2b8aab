//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trainrun/trainrun/test/harness"
)

// TestRunMigrates (issue 34): a late-bound job (-p ampere,hopper, a plan for
// each) starts on ampere while hopper is held; its trainer is slow there
// (0.6 s per step, 0.2 s on hopper). Once hopper's holder ends, the
// controller (--migrate yes, every 3 s) checkpoints, requeues the job into
// hopper, and it resumes there from the checkpoint with hopper's plan and
// finishes. A control job, the same in all but --migrate no (same trainer,
// steps, plans, a measured save at the same step), is submitted with it and
// runs beside it on ampere's other node under the same holder; it must
// never move, and the migrated job's measured submit-to-end time must be
// below the control's. The prediction staying would have made (the steps
// left at the free × the step time observed on ampere) is logged too.
func TestRunMigrates(t *testing.T) {
	requireTorch(t)
	t.Parallel()
	bin := trainrun(t)
	c := heteroCluster(t)
	dir := t.TempDir()
	plans := writeMigratePlans(t, c, bin, dir)
	ctx := context.Background()
	const steps = 200
	holder, err := c.SubmitBatch(ctx, "#!/bin/bash\nsleep 600\n", "-p", "hopper", "-N2", "--exclusive", "--time=10")
	if err != nil {
		t.Fatal(err)
	}
	defer cancelJobsOn(t, c, holder)
	if _, err := c.WaitJob(ctx, holder, 20*time.Second, "RUNNING"); err != nil {
		t.Fatal(err)
	}
	mig := submitMigrateJob(t, c, bin, plans, filepath.Join(dir, "migrated"), "yes", steps)
	ctl := submitMigrateJob(t, c, bin, plans, filepath.Join(dir, "control"), "no", steps)
	for _, j := range []*migrateJob{mig, ctl} {
		waitStep(t, c, j.id, j.progress(), 8)
		// A measured save (the move's cost reads it from the history).
		if _, err := c.Run(ctx, bin, "ckpt", "request", "--then", "continue", "--ckpt-dir", j.ckpt()); err != nil {
			t.Fatal(err)
		}
	}
	waitStep(t, c, mig.id, mig.progress(), 15)
	stepAtFree, _ := readProgress(mig.progress())
	ctlAtFree, _ := readProgress(ctl.progress())
	cancelJobsOn(t, c, holder) // hopper frees
	freed := time.Now()
	var wg sync.WaitGroup
	for _, j := range []*migrateJob{mig, ctl} {
		wg.Add(1)
		go func() { // both ends measured the same way, at once
			defer wg.Done()
			_, j.err = c.WaitJob(ctx, j.id, 200*time.Second, "COMPLETED")
			j.done = time.Now()
		}()
	}
	// The queries a migration check makes when a move would pay, timed
	// here against this cluster (4 nodes, a few jobs) while both jobs run.
	for _, q := range [][]string{{"-d", "show", "node", "-o"}, {"show", "job", "-o"}} {
		t.Logf("scontrol %s: %s (5 runs, min/median/max, from the test's process)", strings.Join(q, " "), timeQuery(t, c, q, 5))
	}
	wg.Wait()
	for _, j := range []*migrateJob{mig, ctl} {
		if j.err != nil {
			t.Fatalf("job %d (--migrate %s): %v\n%s", j.id, j.migrate, j.err, c.JobOutput(j.id))
		}
	}
	moveStep, ampereStep := checkMigrated(t, c, mig, steps)
	checkStayed(t, c, ctl, steps)
	// Weights continuity: the trainer's data and seed depend on the step
	// only, so the run resumed from the move's checkpoint ends with the
	// weights of the control that trained without a stop.
	if m, k := lastReport(t, mig).SHA, lastReport(t, ctl).SHA; m == "" || m != k {
		t.Errorf("final weights: migrated job %d %q, control %d %q: want the same, from one uninterrupted trajectory", mig.id, m, ctl.id, k)
	}
	stayFinish := freed.Add(time.Duration(float64(steps-stepAtFree) * ampereStep * float64(time.Second)))
	t.Logf("job %d: moved at step %d; finished %.1f s after hopper freed; the prediction for staying was %.1f s from the free (%d steps × %.2f s observed on ampere)",
		mig.id, moveStep, mig.done.Sub(freed).Seconds(), stayFinish.Sub(freed).Seconds(), steps-stepAtFree, ampereStep)
	migJCT, ctlJCT := mig.done.Sub(mig.t0), ctl.done.Sub(ctl.t0)
	t.Logf("measured submit-to-end: migrated job %d %.1f s, control job %d (--migrate no, stayed on ampere) %.1f s; the move saved %.1f s (%.0f%%); at the free the migrated job was at step %d, the control at %d",
		mig.id, migJCT.Seconds(), ctl.id, ctlJCT.Seconds(), (ctlJCT - migJCT).Seconds(), 100*(ctlJCT-migJCT).Seconds()/ctlJCT.Seconds(), stepAtFree, ctlAtFree)
	if migJCT >= ctlJCT {
		t.Errorf("the migrated job took %.1f s from submission to end, the control that stayed %.1f s: the move did not finish earlier", migJCT.Seconds(), ctlJCT.Seconds())
	}
}

// TestRunMigrateMaxDelay (issue 34): hopper has one node idle (n2; n1 is
// taken) and a 2-node job pending there: a late-bound job on ampere that
// would gain by moving to hopper does not move while the site's
// MigrateMaxDelay=0 (the check names the pending job, the delay and the
// bound); the same job under MigrateMaxDelay=10m moves, goes ahead of it,
// and says by how much it delays it. The pending job is held (sbatch
// --hold): one that is not gets n2 planned for it by Slurm's backfill
// (State=IDLE+PLANNED), so the move would not find n2 idle and would wait
// for sbatch --test-only's start instead; the rule under test counts a held
// job like any other pending one.
func TestRunMigrateMaxDelay(t *testing.T) {
	requireTorch(t)
	t.Parallel()
	bin := trainrun(t)
	c := heteroCluster(t)
	dir := t.TempDir()
	plans := writeMigratePlans(t, c, bin, dir)
	ctx := context.Background()
	holder, err := c.SubmitBatch(ctx, "#!/bin/bash\nsleep 600\n", "-p", "hopper", "-w", "n1", "--exclusive", "--time=10")
	if err != nil {
		t.Fatal(err)
	}
	defer cancelJobsOn(t, c, holder)
	if _, err := c.WaitJob(ctx, holder, 20*time.Second, "RUNNING"); err != nil {
		t.Fatal(err)
	}
	big, err := c.SubmitBatch(ctx, "#!/bin/bash\nsleep 5\n", "-p", "hopper", "-N2", "--exclusive", "--time=5", "--hold")
	if err != nil {
		t.Fatal(err)
	}
	defer cancelJobsOn(t, c, big)
	if err := harness.WaitFor(ctx, 20*time.Second, "the 2-node job pending", func() bool {
		i, _ := c.JobInfo(ctx, big)
		return i["JobState"] == "PENDING"
	}); err != nil {
		t.Fatal(err)
	}
	for _, bound := range []string{"0", "10m"} {
		// CkptLead: the policy's default 5m is the job's whole limit.
		pol := filepath.Join(dir, "trainrun-"+bound+".conf")
		if err := os.WriteFile(pol, []byte("CkptLead=30s\nMigrateMaxDelay="+bound+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		j := submitMigrateJob(t, c, bin, plans, filepath.Join(dir, "bound-"+bound), "yes", 200, "--policy", pol)
		waitStep(t, c, j.id, j.progress(), 8)
		if _, err := c.Run(ctx, bin, "ckpt", "request", "--then", "continue", "--ckpt-dir", j.ckpt()); err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("hopper: job %d (2 nodes) waiting there would be delayed up to ", big)
		if bound != "0" {
			want = fmt.Sprintf("delays job %d (2 nodes) waiting there up to ", big)
		}
		var line string
		if err := harness.WaitFor(ctx, 60*time.Second, "the check on job "+strconv.Itoa(big), func() bool {
			for _, l := range strings.Split(c.JobOutput(j.id), "\n") {
				if strings.Contains(l, want) {
					line = strings.TrimSpace(l)
				}
			}
			return line != ""
		}); err != nil {
			t.Fatalf("MigrateMaxDelay=%s: job %d: %v\n%s", bound, j.id, err, c.JobOutput(j.id))
		}
		t.Logf("MigrateMaxDelay=%s: job %d: %s", bound, j.id, line)
		if bound == "0" {
			if !strings.Contains(line, "over MigrateMaxDelay 0s") || strings.Contains(c.JobOutput(j.id), "migration: moving") {
				t.Errorf("MigrateMaxDelay=0: job %d moved or gave another reason: %s\n%s", j.id, line, c.JobOutput(j.id))
			}
			cancelJobsOn(t, c, j.id) // it would stay: no need to finish it
			continue
		}
		if !strings.Contains(line, "migration: moving from ampere to hopper") || !strings.Contains(line, "within MigrateMaxDelay 10m0s") {
			t.Errorf("MigrateMaxDelay=10m: job %d: %s", j.id, line)
		}
		if _, err := c.WaitJob(ctx, j.id, 120*time.Second, "COMPLETED"); err != nil {
			t.Fatalf("%v\n%s", err, c.JobOutput(j.id))
		}
		if info, _ := c.JobInfo(ctx, j.id); info["Partition"] != "hopper" {
			t.Errorf("job %d ended in partition %s, want hopper", j.id, info["Partition"])
		}
		if info, _ := c.JobInfo(ctx, big); info["JobState"] != "PENDING" {
			t.Errorf("the 2-node job %d is %s; want still pending (n1 held)", big, info["JobState"])
		}
	}
}

// migrateJob is one of TestRunMigrates' two jobs.
type migrateJob struct {
	id       int
	dir      string
	migrate  string
	t0, done time.Time // submitted, seen COMPLETED
	err      error
}

func (j *migrateJob) progress() string { return filepath.Join(j.dir, "job", "launch", "progress") }
func (j *migrateJob) ckpt() string     { return filepath.Join(j.dir, "ckpt") }

// writeMigratePlans writes a plan for each partition (1 GPU) and returns
// their directory.
func writeMigratePlans(t *testing.T, c *harness.Cluster, bin, dir string) string {
	t.Helper()
	plans := filepath.Join(dir, "plans")
	if err := os.Mkdir(plans, 0o700); err != nil {
		t.Fatal(err)
	}
	for part, gpu := range map[string]string{"hopper": "h100-80gb", "ampere": "a100-40gb"} {
		out, err := c.Run(context.Background(), bin, "plan", "--model", "gpt3-1.3b", "--gpu", gpu, "--gpus", "1", "--gpus-per-node", "1", "--seq-len", "1024", "--global-batch", "8", "--format", "json")
		if err != nil {
			t.Fatalf("plan for %s: %v", part, err)
		}
		if err := os.WriteFile(filepath.Join(plans, "plan-"+part+".json"), []byte(out), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return plans
}

// submitMigrateJob submits the late-bound job (-p ampere,hopper) with
// --migrate migrate; everything else is the same for every call.
func submitMigrateJob(t *testing.T, c *harness.Cluster, bin, plans, dir, migrate string, steps int, runArgs ...string) *migrateJob {
	t.Helper()
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	j := &migrateJob{dir: dir, migrate: migrate}
	script := fmt.Sprintf(`#!/bin/bash
#SBATCH --nodes=1 --ntasks-per-node=1 --gpus-per-node=1 --time=5 --requeue --open-mode=append
export GLOO_SOCKET_IFNAME=lo
export TRAINRUN_PLAN=%[1]s/plan-ampere.json TRAINRUN_PLAN_BY_PARTITION=%[1]s/plan-%%p.json
case "$SLURMD_NODENAME" in n1|n2) S=0.2 ;; *) S=0.6 ;; esac
exec %[2]s run --probe none --job-dir %[3]s/job --ckpt-dir %[4]s --migrate %[7]s --migrate-every 3s --train-steps %[5]d %[8]s -- /usr/bin/python3 %[6]s --steps %[5]d --sleep $S --report %[3]s/report
`, plans, bin, dir, j.ckpt(), steps, exampleTrainer(), migrate, strings.Join(runArgs, " "))
	j.t0 = time.Now()
	id, err := c.SubmitBatch(context.Background(), script, "-p", "ampere,hopper")
	if err != nil {
		t.Fatal(err)
	}
	j.id = id
	t.Cleanup(func() { c.Run(context.Background(), "scancel", strconv.Itoa(id)) })
	return j
}

// checkMigrated: the job moved from ampere to hopper once, resumed there
// from the move's checkpoint with hopper's plan and finished; it returns
// the move's step and the step time observed on ampere.
func checkMigrated(t *testing.T, c *harness.Cluster, j *migrateJob, steps int) (int, float64) {
	t.Helper()
	log := c.JobOutput(j.id)
	for _, want := range []string{"late binding: the job landed in partition ampere", "migration: moving from ampere to hopper",
		"the requeued job " + strconv.Itoa(j.id) + " goes to partition hopper", "late binding: the job landed in partition hopper", "training finished"} {
		if !strings.Contains(log, want) {
			t.Errorf("job %d: the log lacks %q:\n%s", j.id, want, log)
		}
	}
	var moveStep int
	var ampereStep float64
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "migration check:") {
			t.Logf("job %d: %s", j.id, strings.TrimSpace(l))
		}
		if i := strings.Index(l, "migration: moving from ampere to hopper: "); i >= 0 {
			var left int
			var obsv string
			fmt.Sscanf(l[i+len("migration: moving from ampere to hopper: "):], "%d steps left", &left)
			moveStep = steps - left
			if k := strings.LastIndex(l, "staying ("); k >= 0 {
				fmt.Sscanf(l[k+len("staying ("):], "%s", &obsv)
				d, _ := time.ParseDuration(strings.TrimSuffix(obsv, "/step"))
				ampereStep = d.Seconds()
			}
			t.Logf("job %d: %s", j.id, strings.TrimSpace(l[i:]))
		}
	}
	if moveStep <= 0 || ampereStep <= 0 {
		t.Fatalf("job %d: no move with its step and observed step time in the log:\n%s", j.id, log)
	}
	// The hopper run resumed from the move's checkpoint (rank 0's report is the last run's).
	rep := lastReport(t, j)
	if rep.StartStep < moveStep || rep.EndStep != steps {
		t.Errorf("job %d: the last run trained steps %d..%d; want from the move's checkpoint (at or after step %d) to %d", j.id, rep.StartStep, rep.EndStep, moveStep, steps)
	}
	info, _ := c.JobInfo(context.Background(), j.id)
	if info["Partition"] != "hopper" || info["Restarts"] != "1" {
		t.Errorf("job %d: Partition=%s Restarts=%s, want hopper after one requeue", j.id, info["Partition"], info["Restarts"])
	}
	t.Logf("job %d: resumed on hopper at step %d", j.id, rep.StartStep)
	return moveStep, ampereStep
}

// checkStayed: the control (--migrate no) ran all its steps on ampere in
// one run, never checking for a move nor moving.
func checkStayed(t *testing.T, c *harness.Cluster, j *migrateJob, steps int) {
	t.Helper()
	log := c.JobOutput(j.id)
	if !strings.Contains(log, "late binding: the job landed in partition ampere") || !strings.Contains(log, "training finished") {
		t.Errorf("control job %d: the log lacks its landing in ampere or its finish:\n%s", j.id, log)
	}
	for _, never := range []string{"migration", "landed in partition hopper"} {
		if strings.Contains(log, never) {
			t.Errorf("control job %d (--migrate no): the log has %q:\n%s", j.id, never, log)
		}
	}
	if rep := lastReport(t, j); rep.StartStep != 0 || rep.EndStep != steps {
		t.Errorf("control job %d: its run trained steps %d..%d; want one run 0..%d", j.id, rep.StartStep, rep.EndStep, steps)
	}
	info, _ := c.JobInfo(context.Background(), j.id)
	if info["Partition"] != "ampere" || info["Restarts"] != "0" {
		t.Errorf("control job %d: Partition=%s Restarts=%s, want ampere, never requeued", j.id, info["Partition"], info["Restarts"])
	}
}

// timeQuery runs scontrol args n times and says how long it took.
func timeQuery(t *testing.T, c *harness.Cluster, args []string, n int) string {
	t.Helper()
	var ds []time.Duration
	for range n {
		t0 := time.Now()
		if _, err := c.Run(context.Background(), "scontrol", args...); err != nil {
			t.Errorf("scontrol %s: %v", strings.Join(args, " "), err)
			return "failed"
		}
		ds = append(ds, time.Since(t0))
	}
	slices.Sort(ds)
	return fmt.Sprintf("%s / %s / %s", ds[0].Round(100*time.Microsecond), ds[n/2].Round(100*time.Microsecond), ds[n-1].Round(100*time.Microsecond))
}

// migrateReport is the part of rank 0's report (train_example.py) read here.
type migrateReport struct {
	StartStep int    `json:"start_step"`
	EndStep   int    `json:"end_step"`
	SHA       string `json:"weights_sha256"`
}

// lastReport is rank 0's report of the job's last run.
func lastReport(t *testing.T, j *migrateJob) migrateReport {
	t.Helper()
	var rep migrateReport
	b, err := os.ReadFile(filepath.Join(j.dir, "report", "rank-0.json"))
	if err == nil {
		err = json.Unmarshal(b, &rep)
	}
	if err != nil {
		t.Fatalf("job %d: rank 0's report: %v", j.id, err)
	}
	return rep
}
