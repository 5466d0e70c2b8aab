//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Two differently named `trainrun run` steps in one batch script both run
// (before run names, the second found the first's "finished" marker in the
// shared default store and did nothing); the script requeues itself between
// them, and the rerun skips only the run that finished.
func TestRunTwoNamedRunsOneJob(t *testing.T) {
	requireTorch(t)
	t.Parallel()
	bin := trainrun(t)
	trainer := exampleTrainer()
	script := fmt.Sprintf(`#!/bin/bash
#SBATCH --nodes=1 --ntasks-per-node=1 --gpus-per-node=1 --time=5 --requeue --open-mode=append
export GLOO_SOCKET_IFNAME=lo
echo "script restart ${SLURM_RESTART_COUNT:-0}"
%[1]s run --name prep --fix tp=1 -- /usr/bin/python3 %[2]s --steps 2 || exit $?
if [ "${SLURM_RESTART_COUNT:-0}" = 0 ]; then scontrol requeue "$SLURM_JOB_ID"; sleep 60; exit 1; fi
exec %[1]s run --name main --fix tp=1 -- /usr/bin/python3 %[2]s --steps 3
`, bin, trainer)
	start := time.Now()
	state, code, out, id := runJob(t, script, 2*time.Minute)
	t.Logf("two named runs with a requeue between them: %v", time.Since(start).Round(time.Second))
	if state != "COMPLETED" || code != 0 {
		t.Fatalf("job ended %s exit %d:\n%s", state, code, out)
	}
	for want, n := range map[string]int{
		"script restart 0":                 1,
		"script restart 1":                 1,
		"train_example: steps 0..2 of 2":   1, // prep ran once
		"train_example: steps 0..3 of 3":   1, // main ran once, after the requeue
		`run "prep" already finished (job`: 1,
		`trainrun run --name prep-2`:       1,
		`run "main" already finished`:      0,
	} {
		if got := strings.Count(out, want); got != n {
			t.Errorf("job log has %q %d times, want %d:\n%s", want, got, n, out)
		}
	}
	for _, run := range []string{"prep", "main"} {
		p := filepath.Join(cluster.JobsDir(), fmt.Sprintf("trainrun-%d", id), "runs", run, "checkpoints", ".trainrun", "finished")
		b, err := os.ReadFile(p)
		if err != nil {
			t.Errorf("run %s has no finished marker in its own store: %v", run, err)
			continue
		}
		var f struct {
			Run     string `json:"run"`
			Restart int    `json:"restart"`
		}
		if err := json.Unmarshal(b, &f); err != nil || f.Run != run {
			t.Errorf("%s: %s (%v), want run %q", p, b, err, run)
		}
	}
}

// sweepStatus is `trainrun sweep status DIR --format json`.
type sweepStatus struct {
	Trials []struct {
		Index  int                `json:"index"`
		Params map[string]string  `json:"params"`
		State  string             `json:"state"`
		Reason string             `json:"reason"`
		Steps  int                `json:"steps"`
		Metric map[string]float64 `json:"metric"`
	} `json:"trials"`
	Best *struct {
		Index  int                `json:"index"`
		Params map[string]string  `json:"params"`
		Metric map[string]float64 `json:"metric"`
	} `json:"best"`
}

// A 3 x 2 grid with --max-concurrent 2: one job array of 6 elements, never
// more than 2 running (squeue sampled while it runs), each trial's command
// and environment got its own values, and sweep status lists the 6 with the
// final loss each trainer printed and names the lowest as the best.
func TestSweepGrid3x2MaxConcurrent2(t *testing.T) {
	requireTorch(t)
	t.Parallel()
	bin := trainrun(t)
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "sweep")
	rep := t.TempDir()
	start := time.Now()
	cmd := cluster.Command(ctx, bin, "sweep", "--grid", "lr=0.01,0.05,0.2", "--grid", "mom=0,0.9", "--max-concurrent", "2",
		"--time", "3", "--gpus-per-node", "1", "--fix", "tp=1", "--sweep-dir", dir, "--format", "json", "--",
		"/usr/bin/python3", exampleTrainer(), "--steps", "8", "--sleep", "0.2", "--lr", "{lr}", "--momentum", "{mom}", "--report-loss",
		"--report", rep+"/{lr}-{mom}")
	cmd.Env = append(cmd.Env, "GLOO_SOCKET_IFNAME=lo")
	out, err := cluster.Exec(cmd)
	if err != nil {
		t.Fatal(err)
	}
	var sub struct {
		Dir    string `json:"sweep_dir"`
		JobID  string `json:"job_id"`
		Trials []struct {
			Index  int               `json:"index"`
			Params map[string]string `json:"params"`
		} `json:"trials"`
	}
	if err := json.Unmarshal([]byte(out), &sub); err != nil || sub.JobID == "" || len(sub.Trials) != 6 || sub.Dir != dir {
		t.Fatalf("sweep --format json: %v\n%s", err, out)
	}
	t.Cleanup(func() { cluster.Run(context.Background(), "scancel", sub.JobID) })
	if info, err := cluster.Run(ctx, "scontrol", "show", "job", "-o", sub.JobID); err != nil || !strings.Contains(info, "ArrayJobId="+sub.JobID) {
		t.Fatalf("job %s is not a job array: %v\n%s", sub.JobID, err, info)
	}

	// Sample the array while it runs: how many run at once, until none is left.
	maxRunning, seen := 0, map[string]bool{}
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		q, err := cluster.Run(ctx, "squeue", "-h", "-r", "-j", sub.JobID, "-o", "%i %T")
		if err != nil {
			break // the array left slurmctld's queue view
		}
		running := 0
		for _, line := range strings.Split(strings.TrimSpace(q), "\n") {
			if f := strings.Fields(line); len(f) == 2 {
				seen[f[0]] = true
				if f[1] == "RUNNING" {
					running++
				}
			}
		}
		maxRunning = max(maxRunning, running)
		if strings.TrimSpace(q) == "" {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Logf("3x2 sweep, 2 at a time: %v; at most %d running; array elements seen %d", time.Since(start).Round(time.Second), maxRunning, len(seen))
	if maxRunning > 2 || maxRunning == 0 {
		t.Errorf("at most %d trials ran at once, want 1 or 2 (--max-concurrent 2)", maxRunning)
	}
	if len(seen) != 6 {
		t.Errorf("squeue showed %d elements of array %s, want 6: %v", len(seen), sub.JobID, seen)
	}
	st := waitSweepFinished(t, bin, dir, 6)

	// Each trial's own values reached its command and its environment, and
	// its reported final loss is what its trainer printed.
	best, bestLoss := -1, 0.0
	for _, tr := range st.Trials {
		lr, mom := tr.Params["lr"], tr.Params["mom"]
		if lr != sub.Trials[tr.Index].Params["lr"] || mom != sub.Trials[tr.Index].Params["mom"] {
			t.Errorf("trial %d params %v, submitted %v", tr.Index, tr.Params, sub.Trials[tr.Index].Params)
		}
		log, _ := os.ReadFile(filepath.Join(dir, "logs", fmt.Sprintf("trial-%d.out", tr.Index)))
		var loss float64
		line := fmt.Sprintf("train_example: lr %s momentum %s final loss ", pyFloat(lr), pyFloat(mom))
		i := strings.Index(string(log), line)
		if i < 0 {
			t.Errorf("trial %d's log lacks %q:\n%s", tr.Index, line, log)
			continue
		}
		fmt.Sscan(string(log[i+len(line):]), &loss)
		if tr.State != "finished" || tr.Steps != 8 || tr.Metric["loss"] != loss {
			t.Errorf("trial %d: state %s steps %d metric %v; its trainer printed loss %v", tr.Index, tr.State, tr.Steps, tr.Metric, loss)
		}
		var r struct {
			Env map[string]string `json:"env"`
		}
		b, _ := os.ReadFile(filepath.Join(rep, lr+"-"+mom, "rank-0.json"))
		if err := json.Unmarshal(b, &r); err != nil || r.Env["TRAINRUN_SWEEP_LR"] != lr || r.Env["TRAINRUN_SWEEP_MOM"] != mom {
			t.Errorf("trial %d: the trainer's environment %v (%v), want TRAINRUN_SWEEP_LR=%s TRAINRUN_SWEEP_MOM=%s", tr.Index, r.Env, err, lr, mom)
		}
		if best < 0 || loss < bestLoss {
			best, bestLoss = tr.Index, loss
		}
	}
	if st.Best == nil || st.Best.Index != best || st.Best.Metric["loss"] != bestLoss {
		t.Errorf("best %+v, want trial %d with loss %v", st.Best, best, bestLoss)
	}
}

// pyFloat spells a value as Python's repr of float(value) does for the
// grid's values (0 -> 0.0).
func pyFloat(s string) string {
	if !strings.ContainsAny(s, ".e") {
		return s + ".0"
	}
	return s
}

// waitSweepFinished polls sweep status until n trials finished (or one failed).
func waitSweepFinished(t *testing.T, bin, dir string, n int) sweepStatus {
	t.Helper()
	var st sweepStatus
	var out string
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		var err error
		out, err = cluster.Exec(cluster.Command(context.Background(), bin, "sweep", "status", dir, "--format", "json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			t.Fatalf("sweep status --format json: %v\n%s", err, out)
		}
		done := 0
		for _, tr := range st.Trials {
			switch tr.State {
			case "finished":
				done++
			case "failed":
				log, _ := os.ReadFile(filepath.Join(dir, "logs", fmt.Sprintf("trial-%d.out", tr.Index)))
				t.Fatalf("trial %d failed: %s\n%s", tr.Index, tr.Reason, log)
			}
		}
		if len(st.Trials) == n && done == n {
			return st
		}
	}
	t.Fatalf("the sweep did not finish:\n%s", out)
	return st
}

// Branch-train-merge: a base run's final checkpoint, three branches from it
// on different data (one job array), and a merge job that Slurm starts only
// after all three finished (--dependency=afterok): its output is exactly the
// element-wise mean of the three branches' weights, committed and verified.
func TestBranchesMergeAfterAllThree(t *testing.T) {
	requireTorch(t)
	t.Parallel()
	bin := trainrun(t)
	ctx := context.Background()
	trainer := exampleTrainer()
	start := time.Now()
	state, code, out, base := runJob(t, fmt.Sprintf(`#!/bin/bash
#SBATCH --nodes=1 --ntasks-per-node=1 --gpus-per-node=1 --time=3
export GLOO_SOCKET_IFNAME=lo
exec %s run --fix tp=1 -- /usr/bin/python3 %s --steps 3 --save-final
`, bin, trainer), 2*time.Minute)
	if state != "COMPLETED" || code != 0 {
		t.Fatalf("base run: %s exit %d\n%s", state, code, out)
	}
	from := filepath.Join(cluster.JobsDir(), fmt.Sprintf("trainrun-%d", base), "checkpoints", "step-3")
	dir := filepath.Join(t.TempDir(), "br")
	merge := "/usr/bin/python3 " + filepath.Join(repoRoot(), "contrib", "trainer", "merge_checkpoints.py") + " --weights {weights} --out {out} {branches}"
	cmd := cluster.Command(ctx, bin, "branches", "--from", from, "--data", "a=alpha,b=beta,c=gamma", "--merge", merge, "--time", "3",
		"--gpus-per-node", "1", "--fix", "tp=1", "--branches-dir", dir, "--format", "json", "--",
		"/usr/bin/python3", trainer, "--steps", "6", "--data", "{data}", "--save-final", "--report-loss")
	cmd.Env = append(cmd.Env, "GLOO_SOCKET_IFNAME=lo")
	js, err := cluster.Exec(cmd)
	if err != nil {
		t.Fatal(err)
	}
	var sub struct {
		JobID      string `json:"job_id"`
		MergeJobID string `json:"merge_job_id"`
	}
	if err := json.Unmarshal([]byte(js), &sub); err != nil || sub.JobID == "" || sub.MergeJobID == "" {
		t.Fatalf("branches --format json: %v\n%s", err, js)
	}
	t.Cleanup(func() { cluster.Run(context.Background(), "scancel", sub.JobID, sub.MergeJobID) })
	mid, _ := strconv.Atoi(sub.MergeJobID)
	if st, err := cluster.WaitJob(ctx, mid, 3*time.Minute, "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"); err != nil || st != "COMPLETED" {
		mlog, _ := os.ReadFile(filepath.Join(dir, "logs", "merge.out"))
		t.Fatalf("merge job %s: %s %v\n%s", sub.MergeJobID, st, err, mlog)
	}
	t.Logf("base run, 3 branches and the merge: %v", time.Since(start).Round(time.Second))

	// The merge started only after every branch ended.
	arr, err := cluster.Run(ctx, "scontrol", "show", "job", "-o", sub.JobID)
	if err != nil {
		t.Fatal(err)
	}
	minfo, _ := cluster.JobInfo(ctx, mid)
	ends := 0
	for _, line := range strings.Split(strings.TrimSpace(arr), "\n") {
		end := field(line, "EndTime")
		if field(line, "JobState") != "COMPLETED" || end == "" || end > minfo["StartTime"] {
			t.Errorf("branch %s: %s ended %s; the merge started %s", field(line, "ArrayTaskId"), field(line, "JobState"), end, minfo["StartTime"])
		}
		ends++
	}
	if ends != 3 {
		t.Errorf("%d branches in the array, want 3:\n%s", ends, arr)
	}
	for _, b := range []string{"a", "b", "c"} {
		log, _ := os.ReadFile(filepath.Join(dir, "logs", fmt.Sprintf("trial-%d.out", int(b[0]-'a'))))
		if !strings.Contains(string(log), "(--init-from;") || !strings.Contains(string(log), "train_example: steps 3..6 of 6") {
			t.Errorf("branch %s did not start from %s:\n%s", b, from, log)
		}
	}
	mstore := filepath.Join(dir, "runs", "merge", "checkpoints")
	if v, err := cluster.Exec(cluster.Command(ctx, bin, "ckpt", "verify", "merged", "--ckpt-dir", mstore)); err != nil {
		t.Errorf("trainrun ckpt verify merged: %v\n%s", err, v)
	}
	// Exactly the element-wise mean, recomputed here from the branches' own final checkpoints.
	check := `import sys, torch
b = [torch.load(p)["model"] for p in sys.argv[2:]]
m = torch.load(sys.argv[1])["model"]
bad = [k for k in m if not torch.equal(m[k], (((b[0][k].double() + b[1][k].double()) + b[2][k].double()) / 3.0).to(m[k].dtype))]
same = [k for k in m if torch.equal(b[0][k], b[1][k])]
print("keys", len(m), "bad", bad, "branches-equal", same)
sys.exit(1 if bad or same or not m else 0)
`
	args := []string{"-c", check, filepath.Join(mstore, "merged", "rank-0.pt")}
	for _, b := range []string{"a", "b", "c"} {
		args = append(args, filepath.Join(dir, "runs", "branch-"+b, "checkpoints", "step-6", "rank-0.pt"))
	}
	if o, err := exec.Command("/usr/bin/python3", args...).CombinedOutput(); err != nil {
		t.Errorf("the merged weights are not the exact mean of the branches': %v\n%s", err, o)
	}
}

// field is KEY's value in one `scontrol show job -o` line.
func field(line, key string) string {
	for _, f := range strings.Fields(line) {
		if k, v, ok := strings.Cut(f, "="); ok && k == key {
			return v
		}
	}
	return ""
}

// A trial preempted by a high-priority job is requeued, resumes from its
// checkpoint and finishes with the same weights and final loss as its twin
// (the same command, an unused grid key apart) that ran undisturbed on
// another node (--cpus-per-task=32 fills a node: one trial per node). Its
// own cluster: the preemption must not touch other tests.
func TestSweepPreemptedTrialResumes(t *testing.T) {
	requireTorch(t)
	t.Parallel()
	c := ownCluster(t)
	bin := trainrun(t)
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "sweep")
	wdir := t.TempDir()
	start := time.Now()
	cmd := c.Command(ctx, bin, "sweep", "--grid", "lr=0.05", "--grid", "twin=a,b", "--time", "5", "--gpus-per-node", "1",
		"--sbatch-arg=--cpus-per-task=32", "--sbatch-arg=--partition=low", "--fix", "tp=1", "--sweep-dir", dir, "--format", "json", "--",
		"/usr/bin/python3", exampleTrainer(), "--steps", "30", "--sleep", "0.3", "--lr", "{lr}", "--report-loss", "--out", wdir+"/{twin}.weights")
	cmd.Env = append(cmd.Env, "GLOO_SOCKET_IFNAME=lo")
	out, err := c.Exec(cmd)
	if err != nil {
		t.Fatal(err)
	}
	var sub struct {
		JobID string `json:"job_id"`
	}
	if err := json.Unmarshal([]byte(out), &sub); err != nil || sub.JobID == "" {
		t.Fatalf("sweep --format json: %v\n%s", err, out)
	}
	t.Cleanup(func() { c.Run(context.Background(), "scancel", sub.JobID) })

	// Once trial 0 trained a few steps, preempt its node.
	progress := filepath.Join(dir, "runs", "trial-0", "launch", "progress")
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		b, _ := os.ReadFile(progress)
		var step int
		if _, err := fmt.Sscan(string(b), &step); err == nil && step >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("trial 0 reported no progress:\n%s", readFile(filepath.Join(dir, "logs", "trial-0.out")))
		}
	}
	node, err := c.Run(ctx, "squeue", "-h", "-j", sub.JobID+"_0", "-o", "%N")
	if err != nil || strings.TrimSpace(node) == "" {
		t.Fatalf("trial 0's node: %v %q", err, node)
	}
	high, err := c.SubmitBatch(ctx, "#!/bin/bash\nsleep 1\n", "-p", "high", "--nodelist="+strings.TrimSpace(node), "--exclusive", "--time=2")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitJob(ctx, high, 2*time.Minute, "COMPLETED"); err != nil {
		t.Fatal(err)
	}
	var st sweepStatus
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		o, err := c.Exec(c.Command(ctx, bin, "sweep", "status", dir, "--format", "json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(o), &st); err != nil {
			t.Fatal(err)
		}
		if len(st.Trials) == 2 && st.Trials[0].State == "finished" && st.Trials[1].State == "finished" {
			break
		}
		if st.Trials[0].State == "failed" || st.Trials[1].State == "failed" {
			break
		}
	}
	t.Logf("sweep with a preempted trial: %v", time.Since(start).Round(time.Second))
	log0 := readFile(filepath.Join(dir, "logs", "trial-0.out"))
	if len(st.Trials) != 2 || st.Trials[0].State != "finished" || st.Trials[1].State != "finished" {
		t.Fatalf("trials %+v\ntrial 0:\n%s", st.Trials, log0)
	}
	if !strings.Contains(log0, "preempted (SIGTERM from Slurm to the step") || !strings.Contains(log0, "checkpointed; requeued") {
		t.Errorf("trial 0 was not preempted and requeued:\n%s", log0)
	}
	a, b := readFile(filepath.Join(wdir, "a.weights")), readFile(filepath.Join(wdir, "b.weights"))
	if a == "" || a != b || st.Trials[0].Metric["loss"] != st.Trials[1].Metric["loss"] || st.Trials[0].Steps != 30 {
		t.Errorf("preempted trial: weights %q loss %v steps %d; undisturbed twin: weights %q loss %v",
			a, st.Trials[0].Metric, st.Trials[0].Steps, b, st.Trials[1].Metric)
	}
}

func readFile(p string) string {
	b, _ := os.ReadFile(p)
	return string(b)
}
