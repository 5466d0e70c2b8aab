//go:build e2e

package e2e

import (
	"bufio"
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

	"github.com/trainrun/trainrun/test/harness"
)

// TestRunResizes (issue 34, sizing at a requeue): a job with the size
// range trainrun submit --min-gpus 1 --max-gpus 2 exports
// (TRAINRUN_MIN_GPUS=1, TRAINRUN_MAX_GPUS=2, beside its 1-GPU
// TRAINRUN_PLAN: dp 1 × micro batch 1 × grad accum 8) and a trainer that
// declares TRAINRUN_RESHARD=dp starts on one hopper node while another job
// holds the other. Its trainer's step is 0.05 s per micro batch, so dp 2
// halves it. A requeue while the other node is held keeps one node (a size
// that must wait is not taken); the holder ends; at the next requeue (both
// asked with `trainrun ckpt request --then requeue`, a checkpoint and a
// requeue the controller decides) the controller gives the pending job 2
// nodes, and the next incarnation runs with dp 2 and grad accum 4 (the
// global batch 8 kept), resumes from the checkpoint and finishes, before
// staying on one node would have (the steps left × the step time observed
// on one node).
func TestRunResizes(t *testing.T) {
	requireTorch(t)
	t.Parallel()
	bin := trainrun(t)
	c := heteroCluster(t)
	dir := t.TempDir()
	plans := filepath.Join(dir, "plans")
	if err := os.Mkdir(plans, 0o700); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	out, err := c.Run(ctx, bin, "plan", "--model", "gpt3-1.3b", "--gpu", "h100-80gb", "--gpus", "1", "--gpus-per-node", "1", "--seq-len", "1024", "--global-batch", "8", "--fix", "mbs=1", "--format", "json")
	if err != nil {
		t.Fatalf("plan: %v", err)
	}
	planFile := filepath.Join(plans, "plan-hopper-1gpus.json")
	if err := os.WriteFile(planFile, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	holder, err := c.SubmitBatch(ctx, "#!/bin/bash\nsleep 600\n", "-p", "hopper", "-N1", "-w", "n2", "--exclusive", "--time=10")
	if err != nil {
		t.Fatal(err)
	}
	defer cancelJobsOn(t, c, holder)
	if _, err := c.WaitJob(ctx, holder, 20*time.Second, "RUNNING"); err != nil {
		t.Fatal(err)
	}
	const steps = 240
	ckpt := filepath.Join(dir, "ckpt")
	script := fmt.Sprintf(`#!/bin/bash
#SBATCH --nodes=1 --ntasks-per-node=1 --gpus-per-node=1 --time=5 --requeue --open-mode=append
export GLOO_SOCKET_IFNAME=lo
export TRAINRUN_PLAN=%[1]s TRAINRUN_MIN_GPUS=1 TRAINRUN_MAX_GPUS=2 TRAINRUN_RESHARD=dp
exec %[2]s run --probe none --job-dir %[3]s/job --ckpt-dir %[4]s --train-steps %[5]d -- /usr/bin/python3 %[6]s --steps %[5]d --sleep-micro 0.05 --report %[3]s/report
`, planFile, bin, dir, ckpt, steps, exampleTrainer())
	id, err := c.SubmitBatch(ctx, script, "-p", "hopper")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Run(context.Background(), "scancel", strconv.Itoa(id)) })
	progress := filepath.Join(dir, "job", "launch", "progress")
	waitStep(t, c, id, progress, 10)
	// A requeue while n2 is held: the job stays on one node.
	requeueAndResume(t, c, bin, ckpt, id, progress, 1)
	cancelJobsOn(t, c, holder) // n2 frees
	if err := harness.WaitFor(ctx, 30*time.Second, "n2 idle", func() bool {
		o, _ := c.Run(ctx, "scontrol", "show", "node", "n2")
		return strings.Contains(o, "State=IDLE")
	}); err != nil {
		t.Fatal(err)
	}
	// Steps on one node observed in this incarnation (the resize scales them).
	resumedAt, _ := readProgress(progress)
	waitStep(t, c, id, progress, resumedAt+10)
	stepAtAsk, _ := readProgress(progress)
	asked := time.Now()
	requeueAndResume(t, c, bin, ckpt, id, progress, 2)
	if _, err := c.WaitJob(ctx, id, 3*time.Minute, "COMPLETED"); err != nil {
		t.Fatalf("%v\n%s", err, c.JobOutput(id))
	}
	done := time.Now()
	log := c.JobOutput(id)
	for _, want := range []string{
		"resize: staying at 1 node(s): 2 node(s): 1 can start it at once",
		"resize: growing from 1 to 2 node(s) (1-2 GPUs allowed)",
		"resize: the requeued job " + strconv.Itoa(id) + " runs on 2 node(s) next (was 1)",
		"is for 1 GPUs, the allocation has 2: tp 1 pp 1 cp 1 kept, dp 2 (was 1), grad accum 4 (was 8): the global batch 8 is kept",
		"train_example: resharding from dp 1 to dp 2 (grad accum 4)", "training finished"} {
		if !strings.Contains(log, want) {
			t.Errorf("the log lacks %q:\n%s", want, log)
		}
	}
	info, _ := c.JobInfo(ctx, id)
	if info["NumNodes"] != "2" || info["Restarts"] != "2" {
		t.Errorf("job %d: NumNodes=%s Restarts=%s, want 2 nodes after two requeues", id, info["NumNodes"], info["Restarts"])
	}
	var startStep int
	for r := 0; r < 2; r++ {
		rep := readRankReport(t, dir, r)
		if rep.Env["TRAINRUN_DP"] != "2" || rep.Env["TRAINRUN_GRAD_ACCUM"] != "4" || rep.EndStep != steps || rep.StartStep < stepAtAsk {
			t.Errorf("rank %d after the resize: dp %s grad accum %s, steps %d..%d; want dp 2, grad accum 4, from the checkpoint at or after step %d, to %d",
				r, rep.Env["TRAINRUN_DP"], rep.Env["TRAINRUN_GRAD_ACCUM"], rep.StartStep, rep.EndStep, stepAtAsk, steps)
		}
		startStep = rep.StartStep
	}
	ends, worlds := resizeHistory(t, ckpt)
	if len(ends) != 2 || ends[0] != "" || !strings.HasPrefix(ends[1], "2 growing from 1 to 2 node(s)") {
		t.Errorf("history's requeue ends' resizes %q, want none then 2 nodes", ends)
	}
	if want := "1 1 2"; worlds != want {
		t.Errorf("history's start world sizes %q, want %q", worlds, want)
	}
	if rep, err := exec.Command(bin, "report", filepath.Join(dir, "job")).CombinedOutput(); err != nil || !strings.Contains(string(rep), "resizes: 1") ||
		!strings.Contains(string(rep), "1 -> 2 node(s): growing from 1 to 2 node(s)") {
		t.Errorf("trainrun report (%v) lacks the resize:\n%s", err, rep)
	}
	// Staying: the steps left at the ask at the step time observed on one node.
	oneNode := observedStep(t, log)
	stay := time.Duration(float64(steps-stepAtAsk) * oneNode * float64(time.Second))
	if took := done.Sub(asked); took >= stay {
		t.Errorf("resized: finished %s after the ask, staying would have taken %s (%d steps × %.3f s observed on one node)", took.Round(time.Second), stay.Round(time.Second), steps-stepAtAsk, oneNode)
	}
	t.Logf("job %d: asked at step %d, resumed on 2 nodes at step %d, finished %.1f s after the ask; staying on one node: %.1f s (%d steps × %.3f s observed)",
		id, stepAtAsk, startStep, done.Sub(asked).Seconds(), stay.Seconds(), steps-stepAtAsk, oneNode)
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "resize:") {
			t.Logf("job %d: %s", id, strings.TrimSpace(l))
		}
	}
}

// requeueAndResume asks the job for a checkpoint and a requeue and waits
// until its incarnation restart runs and reports a step after the ask.
func requeueAndResume(t *testing.T, c *harness.Cluster, bin, ckpt string, id int, progress string, restart int) {
	t.Helper()
	ctx := context.Background()
	if _, err := c.Run(ctx, bin, "ckpt", "request", "--then", "requeue", "--ckpt-dir", ckpt); err != nil {
		t.Fatal(err)
	}
	ask := time.Now()
	if err := harness.WaitFor(ctx, 90*time.Second, fmt.Sprintf("restart %d stepping", restart), func() bool {
		info, _ := c.JobInfo(ctx, id)
		_, at := readProgress(progress)
		return info["Restarts"] == strconv.Itoa(restart) && info["JobState"] == "RUNNING" && at.After(ask)
	}); err != nil {
		t.Fatalf("%v\n%s", err, c.JobOutput(id))
	}
}

// resizeHistory reads the store's history: each end's resize ("NODES WHY",
// "" for none) and the start events' world sizes.
func resizeHistory(t *testing.T, ckpt string) (ends []string, worlds string) {
	t.Helper()
	f, err := os.Open(filepath.Join(ckpt, ".trainrun", "history.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var ws []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e struct {
			Type        string `json:"type"`
			Cause       string `json:"cause"`
			WorldSize   int    `json:"world_size"`
			ResizeNodes int    `json:"resize_nodes"`
			ResizeWhy   string `json:"resize_why"`
		}
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			continue
		}
		switch {
		case e.Type == "start":
			ws = append(ws, strconv.Itoa(e.WorldSize))
		case e.Type == "end" && e.Cause != "finished":
			s := ""
			if e.ResizeNodes > 0 {
				s = fmt.Sprintf("%d %s", e.ResizeNodes, e.ResizeWhy)
			}
			ends = append(ends, s)
		}
	}
	return ends, strings.Join(ws, " ")
}

// observedStep is the step time on one node the resize weighed ("vs ...
// staying (Xs/step observed").
func observedStep(t *testing.T, log string) float64 {
	t.Helper()
	for _, l := range strings.Split(log, "\n") {
		if !strings.Contains(l, "resize: growing from 1 to 2") {
			continue
		}
		if j := strings.LastIndex(l, "staying ("); j >= 0 {
			var s string
			fmt.Sscanf(l[j+len("staying ("):], "%s", &s)
			if d, err := time.ParseDuration(strings.TrimSuffix(s, "/step")); err == nil {
				return d.Seconds()
			}
		}
	}
	t.Fatalf("no resize with the observed step time in the log:\n%s", log)
	return 0
}
