//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/trainrun/trainrun/test/harness"
	"github.com/trainrun/trainrun/topo"
)

// A crash restarts inside the allocation (issue 21): one rank's trainer is
// killed after step 12 (SIGKILL, as a segfault or an OOM kill ends it).
// trainrun relaunches the step in the same job (Slurm's Restarts=0) from
// the latest checkpoint, the history and the report show the restart, and
// the final weights are bit-identical to an uninterrupted run's.
func TestRunCrashRestartsInJob(t *testing.T) {
	requireTorch(t)
	t.Parallel()
	bin := trainrun(t)
	trainer := exampleTrainer()
	dir := t.TempDir()
	const every = 10
	job := func(name string) string {
		return fmt.Sprintf(`#!/bin/bash
#SBATCH --nodes=2 --ntasks-per-node=1 --gpus-per-node=1 --time=5 --requeue --open-mode=append
export GLOO_SOCKET_IFNAME=lo
exec %s run --fix tp=1 --probe none --job-dir %s/%s --max-restarts 1 -- /usr/bin/python3 %s --steps 40 --sleep 0.15 --save-every %d --out %s/%s.weights
`, bin, dir, name, trainer, every, dir, name)
	}
	ref, id := refAndRun(t, cluster, job("ref"), job("crash"))
	progress := filepath.Join(dir, "crash", "launch", "progress")
	ctx := context.Background()
	waitStep(t, cluster, id, progress, 12)
	crashAt, _ := readProgress(progress)
	if killJobRank(cluster, id, 1) == 0 {
		t.Fatalf("no trainer process of rank 1 in job %d to kill", id)
	}
	fault := time.Now()
	resumed := waitResumed(t, cluster, id, progress, 2, fault, fault)
	waitCompleted(t, cluster, 2*time.Minute, ref, id)
	info, err := cluster.JobInfo(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	log := cluster.JobOutput(id)
	if info["Restarts"] != "0" {
		t.Errorf("Restarts=%s, want 0 (restarted inside the job, never requeued):\n%s", info["Restarts"], log)
	}
	for _, want := range []string{"rank 1 (node n2, GPU", "restarting the step inside the allocation from step-10 (restart 1 of --max-restarts 1)", "training finished"} {
		if !strings.Contains(log, want) {
			t.Errorf("the log lacks %q:\n%s", want, log)
		}
	}
	hist, _ := os.ReadFile(filepath.Join(dir, "crash", "checkpoints", ".trainrun", "history.jsonl"))
	if n := bytes.Count(hist, []byte(`"type":"start","job_id":"`+strconv.Itoa(id)+`","restart":0`)); n != 2 || !bytes.Contains(hist, []byte(`"cause":"crash"`)) {
		t.Errorf("history: %d starts of restart 0 (want 2) and a crash end wanted:\n%s", n, hist)
	}
	from := resumeStep(t, filepath.Join(dir, "crash"), log)
	checkRedone(t, "crashed", crashAt, from, every)
	text, _ := exec.Command(bin, "report", filepath.Join(dir, "crash")).CombinedOutput()
	if !bytes.Contains(text, []byte("restarts: 1 (crash 1)")) || !bytes.Contains(text, []byte("restarted inside the job after crash")) {
		t.Errorf("the report does not show the restart inside the job:\n%s", text)
	}
	sameWeights(t, dir, "crash", log)
	if resumed > 90*time.Second {
		t.Errorf("steps resumed %.0f s after the crash, want within 90 s", resumed.Seconds())
	}
	t.Logf("crash at step %d: steps resumed %.1f s later from step %d; report:\n%s", crashAt, resumed.Seconds(), from, text)
}

// A lost node is replaced by a spare inside the job (issue 21): 3 nodes,
// --spare-nodes 1 (n3 stays idle), #SBATCH --no-kill. n2's slurmd is
// stopped and the job's processes there are killed; the step restarts
// inside the same job on n1 and n3 with the same world size, within 90 s,
// at most one checkpoint interval redone, and the report names n2.
func TestRunLostNodeSpare(t *testing.T) {
	requireTorch(t)
	t.Parallel()
	c := ownCluster(t, lostNodeConf...)
	bin := trainrun(t)
	dir := t.TempDir()
	const every = 10
	script := fmt.Sprintf(`#!/bin/bash
#SBATCH --nodes=3 --ntasks-per-node=1 --gpus-per-node=1 --time=5 --requeue --no-kill --open-mode=append
export GLOO_SOCKET_IFNAME=lo
exec %s run --fix tp=1 --job-dir %s/job --spare-nodes 1 -- /usr/bin/python3 %s --steps 40 --sleep 0.15 --save-every %d
`, bin, dir, exampleTrainer(), every)
	ctx := context.Background()
	id, err := c.SubmitBatch(ctx, script, "--nodelist=n[1-3]")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Run(context.Background(), "scancel", strconv.Itoa(id)) })
	progress := filepath.Join(dir, "job", "launch", "progress")
	waitStep(t, c, id, progress, 12)
	log0 := c.JobOutput(id)
	if !strings.Contains(log0, "spare nodes: n3 (--spare-nodes 1) stay idle") || strings.Contains(log0, "has no '#SBATCH --no-kill'") {
		t.Fatalf("the log does not set n3 aside quietly:\n%s", log0)
	}
	lostAt, _ := readProgress(progress)
	fault := time.Now()
	if err := c.StopSlurmd("n2"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.StartSlurmd(context.Background(), "n2") })
	if n := killJobProcs(c, id, "n2"); n == 0 {
		t.Fatalf("found no process of job %d on n2 to kill", id)
	}
	resumed := waitResumed(t, c, id, progress, 2, fault, fault)
	if _, err := c.WaitJob(ctx, id, 2*time.Minute, "COMPLETED"); err != nil {
		t.Fatalf("%v\n%s", err, c.JobOutput(id))
	}
	info, _ := c.JobInfo(ctx, id)
	log := c.JobOutput(id)
	if info["Restarts"] != "0" {
		t.Errorf("Restarts=%s, want 0 (the spare took the node's place inside the job):\n%s", info["Restarts"], log)
	}
	for _, want := range []string{"node n2 was lost", "spare node(s) n3 take the place of the lost n2: the step runs on n[1,3] (2 ranks)", "training finished"} {
		if !strings.Contains(log, want) {
			t.Errorf("the log lacks %q:\n%s", want, log)
		}
	}
	plan, _ := os.ReadFile(filepath.Join(dir, "job", "plan.json"))
	var p struct {
		Ranks []struct{ Node string }
	}
	if json.Unmarshal(plan, &p); len(p.Ranks) != 2 || p.Ranks[0].Node == "n2" || p.Ranks[1].Node == "n2" {
		t.Errorf("the restarted step's ranks %+v, want 2 on n1 and n3", p.Ranks)
	}
	from := resumeStep(t, filepath.Join(dir, "job"), log)
	checkRedone(t, "node lost", lostAt, from, every)
	text, _ := exec.Command(bin, "report", filepath.Join(dir, "job")).CombinedOutput()
	if !bytes.Contains(text, []byte("failed node: n2 (node-fail, restart 0)")) || !bytes.Contains(text, []byte("restarts: 1 (node 1)")) {
		t.Errorf("the report does not name n2 as lost:\n%s", text)
	}
	if resumed > 90*time.Second {
		t.Errorf("steps resumed %.0f s after the fault, want within 90 s", resumed.Seconds())
	}
	t.Logf("lost node: steps resumed %.1f s after the fault, from step %d (lost at %d); report:\n%s", resumed.Seconds(), from, lostAt, text)
}

// A rank SIGKILLed twice is no evidence against its node (issue 35): the
// same rank's trainer is killed from outside twice (--max-restarts 1: the
// first restarts inside the job, the second requeues it). The history
// holds two crashes of that node; the requeued job keeps it (ExcNodeList
// without it), the log says why, and the run finishes.
func TestRunTwiceKilledRankKeepsNode(t *testing.T) {
	requireTorch(t)
	t.Parallel()
	c := ownCluster(t)
	bin, dir := trainrun(t), t.TempDir()
	script := fmt.Sprintf(`#!/bin/bash
#SBATCH --nodes=2 --ntasks-per-node=1 --gpus-per-node=1 --time=5 --requeue --open-mode=append
export GLOO_SOCKET_IFNAME=lo
exec %s run --fix tp=1 --probe none --job-dir %s/job --max-restarts 1 -- /usr/bin/python3 %s --steps 120 --sleep 0.15 --save-every 10
`, bin, dir, exampleTrainer())
	ctx := context.Background()
	id, err := c.SubmitBatch(ctx, script) // no --nodelist: an exclusion must be free to move the job
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Run(context.Background(), "scancel", strconv.Itoa(id)) })
	progress := filepath.Join(dir, "job", "launch", "progress")
	killedOn := regexp.MustCompile(`rank 1 \(node (\w+), GPU -?\d+\) failed first with exit 137`)
	for i, step := range []int{12, 22} {
		waitStep(t, c, id, progress, step)
		if killJobRank(c, id, 1) == 0 {
			t.Fatalf("kill %d: no trainer process of rank 1 in job %d", i+1, id)
		}
		if err := harness.WaitFor(ctx, 90*time.Second, fmt.Sprintf("kill %d reported", i+1), func() bool {
			return len(killedOn.FindAllString(c.JobOutput(id), -1)) > i
		}); err != nil {
			t.Fatalf("%v\n%s", err, c.JobOutput(id))
		}
		if i == 0 {
			waitLog(t, c, id, "restarting the step inside the allocation", 60*time.Second)
			waitStarted(t, c, id, "restarting the step inside the allocation", 2, 90*time.Second)
		}
	}
	waitStarted(t, c, id, "restart 1", 2, 2*time.Minute)
	if _, err := c.WaitJob(ctx, id, 2*time.Minute, "COMPLETED"); err != nil {
		t.Fatalf("%v\n%s", err, c.JobOutput(id))
	}
	log := c.JobOutput(id)
	kills := killedOn.FindAllStringSubmatch(log, -1)
	if len(kills) < 2 || kills[0][1] != kills[1][1] {
		t.Fatalf("want rank 1 killed twice on one node, got %q:\n%s", kills, log)
	}
	node := kills[0][1]
	info, err := c.JobInfo(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	excluded, _ := topo.ExpandHostlist(info["ExcNodeList"])
	if slices.Contains(excluded, node) || strings.Contains(log, "excluding "+node) {
		t.Errorf("%s excluded (ExcNodeList=%q) after two SIGKILLs from outside:\n%s", node, info["ExcNodeList"], log)
	}
	for _, want := range []string{"node " + node + ": kept in the requeued job: its rank failed first: exit 137, killed by SIGKILL", "requeued (restart 1", "training finished"} {
		if !strings.Contains(log, want) {
			t.Errorf("the log lacks %q:\n%s", want, log)
		}
	}
	t.Logf("rank 1 killed twice on %s; requeued job on %s, ExcNodeList=%q", node, info["NodeList"], info["ExcNodeList"])
}
