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
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trainrun/trainrun/checkpoint"
	"github.com/trainrun/trainrun/test/harness"
)

// A lost node stays out (issue 21): one node's slurmd is stopped and the
// job's processes there are killed. The step fails, trainrun records the
// node in the job history (no exit report came from any of its ranks),
// requeues the job with the node in its ExcNodeList, and the next run
// resumes from the latest checkpoint on other nodes, although the failed
// node is back up by then; the report names it.
func TestRunLostNodeExcluded(t *testing.T) {
	requireTorch(t)
	t.Parallel()
	c := ownCluster(t, lostNodeConf...)
	bin := trainrun(t)
	trainer := exampleTrainer()
	script := fmt.Sprintf(`#!/bin/bash
#SBATCH --nodes=2 --ntasks-per-node=1 --gpus-per-node=1 --time=5 --requeue --no-kill --open-mode=append
export GLOO_SOCKET_IFNAME=lo
exec %s run --fix tp=1 -- /usr/bin/python3 %s --steps 120 --sleep 0.3 --save-every 10
`, bin, trainer)
	ctx := context.Background()
	id, err := c.SubmitBatch(ctx, script) // Slurm picks n1,n2 (no --nodelist: it would conflict with the exclusion)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Run(context.Background(), "scancel", strconv.Itoa(id)) })
	// Step-20 saved by both ranks (committed in the background, or at the
	// step's end at the latest).
	step20 := filepath.Join(c.JobsDir(), fmt.Sprintf("trainrun-%d", id), "checkpoints", "step-20")
	if err := harness.WaitFor(ctx, 90*time.Second, "step-20 saved", func() bool {
		_, e0 := os.Stat(checkpoint.DoneMarkerPath(step20, 0))
		_, e1 := os.Stat(checkpoint.DoneMarkerPath(step20, 1))
		return e0 == nil && e1 == nil
	}); err != nil {
		t.Fatalf("%v\n%s", err, c.JobOutput(id))
	}
	info0, _ := c.JobInfo(ctx, id)
	if info0["NodeList"] != "n[1-2]" {
		t.Fatalf("the job runs on %s, want n[1-2]", info0["NodeList"])
	}
	fault := time.Now()
	if err := c.StopSlurmd("n2"); err != nil {
		t.Fatal(err)
	}
	if n := killJobProcs(c, id, "n2"); n == 0 {
		t.Fatalf("found no process of job %d on n2 to kill", id)
	}
	waitLog(t, c, id, "excluding n2 from the requeued job", 90*time.Second)
	if err := c.StartSlurmd(ctx, "n2"); err != nil { // the node is back: only the exclusion keeps the job off it
		t.Fatal(err)
	}
	out := waitStarted(t, c, id, "restart 1", 2, 90*time.Second)
	resumed := time.Since(fault)
	if _, err := c.WaitJob(ctx, id, 120*time.Second, "COMPLETED"); err != nil {
		t.Fatalf("%v\n%s", err, c.JobOutput(id))
	}
	info, err := c.JobInfo(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	log := c.JobOutput(id)
	if !strings.Contains(info["ExcNodeList"], "n2") || strings.Contains(info["NodeList"], "n2") {
		t.Errorf("ExcNodeList=%q NodeList=%q, want n2 excluded and not used\n%s", info["ExcNodeList"], info["NodeList"], log)
	}
	if resumed > 90*time.Second {
		t.Errorf("steps resumed %.0f s after the fault, want within 90 s", resumed.Seconds())
	}
	rep, err := exec.Command(bin, "report", "--format", "json", filepath.Join(c.JobsDir(), fmt.Sprintf("trainrun-%d", id))).Output()
	if err != nil {
		t.Fatalf("trainrun report: %v", err)
	}
	text, _ := exec.Command(bin, "report", filepath.Join(c.JobsDir(), fmt.Sprintf("trainrun-%d", id))).Output()
	if !bytes.Contains(text, []byte("failed node: n2 (node-fail, restart 0)")) || !bytes.Contains(text, []byte("restarts: 1 (node 1)")) {
		t.Errorf("the report does not name n2 as lost:\n%s", text)
	}
	var parsed struct {
		Goodput struct {
			StepsRedone int64 `json:"steps_redone"`
		}
	}
	if err := json.Unmarshal(rep, &parsed); err != nil || parsed.Goodput.StepsRedone > 10 {
		t.Errorf("steps redone %d (%v), want at most one checkpoint interval (10)", parsed.Goodput.StepsRedone, err)
	}
	t.Logf("lost node: steps resumed %.1f s after the fault; job log:\n%s\nreport:\n%s\n(%d bytes of log before the restart)", resumed.Seconds(), log, text, len(out))
}

// killJobProcs SIGKILLs every process of job id on node (the tasks, found
// by SLURM_JOB_ID and SLURMD_NODENAME in their environment) and the
// slurmstepd above them, as a node that dies takes them, on cluster c only;
// it returns how many it killed.
func killJobProcs(c *harness.Cluster, id int, node string) int {
	ents, _ := os.ReadDir("/proc")
	kill := map[int]bool{}
	jobEnv, nodeEnv := []byte(fmt.Sprintf("SLURM_JOB_ID=%d\x00", id)), []byte("SLURMD_NODENAME="+node+"\x00")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err != nil || !ofCluster(c, env) || !bytes.Contains(env, jobEnv) || !bytes.Contains(env, nodeEnv) {
			continue
		}
		kill[pid] = true
		if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
			if f := strings.Fields(string(st[bytes.LastIndexByte(st, ')')+1:])); len(f) > 1 {
				ppid, _ := strconv.Atoi(f[1])
				if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", ppid)); strings.TrimSpace(string(comm)) == "slurmstepd" {
					kill[ppid] = true
				}
			}
		}
	}
	for pid := range kill {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	return len(kill)
}
