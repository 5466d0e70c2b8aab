//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/trainrun/trainrun/topo"
)

// A node that fails the health pass is kept out before the first step
// (issue 31): 3 nodes, --spare-nodes 1, a fake sysfs per node
// (TRAINRUN_HEALTH_SYSFS=DIR/%n) in which n2's InfiniBand port is DOWN.
// The step runs on n1 and n3 with the spare's help, the job finishes in
// one run, and the log, the report and the history name n2 and the check.
func TestRunHealthExcludesNode(t *testing.T) {
	requireTorch(t)
	bin := trainrun(t)
	dir := t.TempDir()
	for node, state := range map[string]string{"n1": "4: ACTIVE", "n2": "1: DOWN", "n3": "4: ACTIVE"} {
		p := filepath.Join(dir, "sys", node, "class", "infiniband", "mlx5_0", "ports", "1")
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(p, "state"), []byte(state+"\n"), 0o644)
		os.WriteFile(filepath.Join(p, "rate"), []byte("400 Gb/sec (4X NDR)\n"), 0o644)
	}
	script := fmt.Sprintf(`#!/bin/bash
#SBATCH --nodes=3 --ntasks-per-node=1 --gpus-per-node=1 --time=5 --requeue --no-kill --open-mode=append
export GLOO_SOCKET_IFNAME=lo TRAINRUN_HEALTH_SYSFS=%s/sys/%%n
exec %s run --fix tp=1 --probe none --job-dir %s/job --spare-nodes 1 -- /usr/bin/python3 %s --steps 8 --sleep 0.05 --save-every 4
`, dir, bin, dir, exampleTrainer())
	t0 := time.Now()
	state, exit, log, id := runJob(t, script, 3*time.Minute, "--nodelist=n[1-3]")
	if state != "COMPLETED" || exit != 0 {
		t.Fatalf("job %s with exit %d, want COMPLETED:\n%s", state, exit, log)
	}
	for _, want := range []string{"health pass before the first step: 3 node(s) checked", `node n2 failed the health check ib before the first step: mlx5_0/1 port state "1: DOWN" (want ACTIVE)`,
		"node(s) n2 kept out after the health pass: the step uses the other 2 node(s)", "training finished"} {
		if !strings.Contains(log, want) {
			t.Errorf("the log lacks %q:\n%s", want, log)
		}
	}
	info, _ := cluster.JobInfo(context.Background(), id)
	if info["Restarts"] != "0" {
		t.Errorf("Restarts=%s, want 0", info["Restarts"])
	}
	plan, _ := os.ReadFile(filepath.Join(dir, "job", "plan.json"))
	var p struct{ Ranks []struct{ Node string } }
	if json.Unmarshal(plan, &p); len(p.Ranks) != 2 || p.Ranks[0].Node != "n1" || p.Ranks[1].Node != "n3" {
		t.Errorf("the step's ranks %+v, want one on n1 and one on n3", p.Ranks)
	}
	rep, _ := exec.Command(bin, "report", filepath.Join(dir, "job")).CombinedOutput()
	if !strings.Contains(string(rep), "before the first step: node n2 failed ib") || !strings.Contains(string(rep), "failed node: n2 (node-fault") {
		t.Errorf("the report does not name n2 and its check:\n%s", rep)
	}
	hist, _ := os.ReadFile(filepath.Join(dir, "job", "checkpoints", ".trainrun", "history.jsonl"))
	if !strings.Contains(string(hist), `"cause":"node-fault","detail":"health check before the first step: ib:`) {
		t.Errorf("the history lacks n2's health failure:\n%s", hist)
	}
	t.Logf("job %s finished %.1f s after submission; report:\n%s", strconv.Itoa(id), time.Since(t0).Seconds(), rep)
}

// The site's HealthCheck script failing on a named node keeps it out too
// (issue 31): TRAINRUN_HEALTH_CHECK (the policy's HealthCheck= twin) exits
// 1 on n1, the batch node (the controller stays there), with a message;
// the step runs on n2 and n3, the spare's place taken, and the log names
// n1, the script and its message.
func TestRunHealthScriptExcludesNode(t *testing.T) {
	requireTorch(t)
	bin := trainrun(t)
	dir := t.TempDir()
	check := filepath.Join(dir, "node-health")
	if err := os.WriteFile(check, []byte("#!/bin/sh\nif [ \"$TRAINRUN_HEALTH_NODE\" = n1 ]; then echo \"GPU 0: 12 retired pages pending (site check)\"; exit 1; fi\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf(`#!/bin/bash
#SBATCH --nodes=3 --ntasks-per-node=1 --gpus-per-node=1 --time=5 --requeue --no-kill --open-mode=append
export GLOO_SOCKET_IFNAME=lo TRAINRUN_HEALTH_CHECK=%s TRAINRUN_HEALTH_CHECK_TIMEOUT=20s
exec %s run --fix tp=1 --probe none --job-dir %s/job --spare-nodes 1 -- /usr/bin/python3 %s --steps 6 --sleep 0.05 --save-every 3
`, check, bin, dir, exampleTrainer())
	state, exit, log, _ := runJob(t, script, 3*time.Minute, "--nodelist=n[1-3]")
	if state != "COMPLETED" || exit != 0 {
		t.Fatalf("job %s with exit %d, want COMPLETED:\n%s", state, exit, log)
	}
	for _, want := range []string{"node n1 failed the health check script before the first step: " + check + ": exit status 1: GPU 0: 12 retired pages pending (site check)",
		"node(s) n1 kept out after the health pass: the step uses the other 2 node(s)", "training finished"} {
		if !strings.Contains(log, want) {
			t.Errorf("the log lacks %q:\n%s", want, log)
		}
	}
	plan, _ := os.ReadFile(filepath.Join(dir, "job", "plan.json"))
	var p struct{ Ranks []struct{ Node string } }
	if json.Unmarshal(plan, &p); len(p.Ranks) != 2 || p.Ranks[0].Node != "n2" || p.Ranks[1].Node != "n3" {
		t.Errorf("the step's ranks %+v, want one on n2 and one on n3", p.Ranks)
	}
}

// Without a spare, a node that fails the health pass before the first step
// sends the job back to the queue without it (issue 31): an own cluster,
// so Slurm picks n1,n2 for the 2-node job; the site script fails n2; the
// job is requeued with n2 in its ExcNodeList and the next run finishes on
// n1,n3.
func TestRunHealthRequeuesWithoutNode(t *testing.T) {
	requireTorch(t)
	t.Parallel()
	c := ownCluster(t)
	bin := trainrun(t)
	dir := t.TempDir()
	check := filepath.Join(dir, "node-health")
	if err := os.WriteFile(check, []byte("#!/bin/sh\n[ \"$TRAINRUN_HEALTH_NODE\" != n2 ] || { echo 'nvme0: SMART critical warning'; exit 1; }\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf(`#!/bin/bash
#SBATCH --nodes=2 --ntasks-per-node=1 --gpus-per-node=1 --time=5 --requeue --no-kill --open-mode=append --exclude=n4
export GLOO_SOCKET_IFNAME=lo TRAINRUN_HEALTH_CHECK=%s
exec %s run --fix tp=1 --probe none --job-dir %s/job -- /usr/bin/python3 %s --steps 6 --sleep 0.05 --save-every 3
`, check, bin, dir, exampleTrainer())
	ctx := context.Background()
	id, err := c.SubmitBatch(ctx, script)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Run(context.Background(), "scancel", strconv.Itoa(id)) })
	if _, err := c.WaitJob(ctx, id, 150*time.Second, "COMPLETED"); err != nil {
		t.Fatalf("%v\n%s", err, c.JobOutput(id))
	}
	info, _ := c.JobInfo(ctx, id)
	log := c.JobOutput(id)
	for _, want := range []string{"node n2 failed the health check script before the first step", "nvme0: SMART critical warning",
		"node(s) n2 failed the health pass before the first step and --spare-nodes 0 holds only 0 spare node(s): requeued without them", "training finished"} {
		if !strings.Contains(log, want) {
			t.Errorf("the log lacks %q:\n%s", want, log)
		}
	}
	exc, _ := topo.ExpandHostlist(info["ExcNodeList"])
	used, _ := topo.ExpandHostlist(info["NodeList"])
	if info["Restarts"] != "1" || !slices.Contains(exc, "n2") || slices.Contains(used, "n2") {
		t.Errorf("Restarts=%s ExcNodeList=%q NodeList=%q: want one requeue, n2 excluded and not used\n%s", info["Restarts"], info["ExcNodeList"], info["NodeList"], log)
	}
}
