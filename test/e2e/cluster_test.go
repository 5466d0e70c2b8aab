//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trainrun/trainrun/internal/slurm"
	"github.com/trainrun/trainrun/test/harness"
)

// TestClusterShape checks what later tests rely on: 4 idle nodes with 32
// CPUs and 8 GPUs each, backed by character devices; the two preemption
// partitions; and the plugins the harness documents.
func TestClusterShape(t *testing.T) {
	ctx := context.Background()
	nodes, err := cluster.NodeInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(nodes); got != 4 {
		t.Fatalf("scontrol shows %d nodes, want 4: %v", got, nodes)
	}
	for _, n := range cluster.Nodes() {
		f := nodes[n].Fields
		for k, want := range map[string]string{"State": "IDLE", "CPUTot": "32", "Sockets": "2", "CoresPerSocket": "16",
			"NodeAddr": "127.0.0.1", "Partitions": "low,high"} {
			if f[k] != want {
				t.Errorf("node %s: %s=%q, want %q", n, k, f[k], want)
			}
		}
		if !strings.HasPrefix(f["Gres"], "gpu:8") {
			t.Errorf("node %s: Gres=%q, want gpu:8", n, f["Gres"])
		}
		for i := 0; i < cluster.GPUsPerNode(); i++ {
			p := cluster.GPUDevice(n, i)
			var st syscall.Stat_t
			if err := syscall.Stat(p, &st); err != nil {
				t.Fatal(err)
			}
			if st.Mode&syscall.S_IFMT != syscall.S_IFCHR || st.Rdev>>8 != 195 || st.Rdev&0xff != uint64(i) {
				t.Errorf("%s: mode %o rdev %d:%d, want a character device 195:%d", p, st.Mode, st.Rdev>>8, st.Rdev&0xff, i)
			}
		}
	}

	out, err := cluster.Run(ctx, "scontrol", "show", "partition", "-o")
	if err != nil {
		t.Fatal(err)
	}
	parts := map[string]map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		kv := slurm.ParseRecord(line)
		parts[kv["PartitionName"]] = kv
	}
	low, high := parts[harness.LowPartition], parts[harness.HighPartition]
	if low == nil || high == nil {
		t.Fatalf("partitions %q and %q expected, scontrol shows:\n%s", harness.LowPartition, harness.HighPartition, out)
	}
	if low["Default"] != "YES" || high["Default"] != "NO" {
		t.Errorf("Default: low=%s high=%s, want low the default", low["Default"], high["Default"])
	}
	lt, _ := strconv.Atoi(low["PriorityTier"])
	ht, _ := strconv.Atoi(high["PriorityTier"])
	if ht <= lt {
		t.Errorf("PriorityTier: low=%d high=%d, want high > low so high preempts low", lt, ht)
	}
	if g := low["GraceTime"]; g != strconv.Itoa(harness.DefaultGraceTime) {
		t.Errorf("low GraceTime=%s, want %d", g, harness.DefaultGraceTime)
	}
	if low["Nodes"] != cluster.NodeList() || high["Nodes"] != cluster.NodeList() {
		t.Errorf("Nodes: low=%s high=%s, want both %s", low["Nodes"], high["Nodes"], cluster.NodeList())
	}

	cfg, err := cluster.Run(ctx, "scontrol", "show", "config")
	if err != nil {
		t.Fatal(err)
	}
	conf := map[string]string{}
	for _, line := range strings.Split(cfg, "\n") {
		k, v, ok := strings.Cut(line, "=")
		if ok {
			conf[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	for k, want := range map[string]string{
		"SelectType": "select/cons_tres", "GresTypes": "gpu", "PreemptType": "preempt/partition_prio",
		"PreemptMode": "REQUEUE", "JobRequeue": "1", "ProctrackType": "proctrack/linuxproc", "TaskPlugin": "task/none",
		"KillWait": fmt.Sprintf("%d sec", harness.DefaultKillWait), "SlurmdParameters": harness.DefaultSlurmdParameters,
	} {
		if conf[k] != want {
			t.Errorf("scontrol show config: %s = %q, want %q", k, conf[k], want)
		}
	}
	if !strings.Contains(conf["AuthInfo"], "cred_expire=10") {
		t.Errorf("AuthInfo = %q, want cred_expire=10 in it", conf["AuthInfo"])
	}
}

// TestTopologyTree: slurmctld loaded the topology.conf given to the harness.
func TestTopologyTree(t *testing.T) {
	out, err := cluster.Run(context.Background(), "scontrol", "show", "topology")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		kv := slurm.ParseRecord(line)
		got[kv["SwitchName"]] = kv
	}
	for sw, want := range map[string]map[string]string{
		"leaf1": {"Level": "0", "Nodes": "n[1-2]"},
		"leaf2": {"Level": "0", "Nodes": "n[3-4]"},
		"spine": {"Level": "1", "Switches": "leaf[1-2]", "Nodes": "n[1-4]"},
	} {
		for k, v := range want {
			if got[sw][k] != v {
				t.Errorf("switch %s: %s=%q, want %q; scontrol show topology:\n%s", sw, k, got[sw][k], v, out)
			}
		}
	}
}

// TestRestartSlurmd: a node's slurmd stops cleanly on SIGTERM, comes back
// idle, and runs steps again (what a plugstack.conf change needs).
func TestRestartSlurmd(t *testing.T) {
	ctx := context.Background()
	t0 := time.Now()
	if err := cluster.RestartSlurmd(ctx, "n4"); err != nil {
		t.Fatal(err)
	}
	t.Logf("slurmd of n4 restarted and idle in %v", time.Since(t0).Round(time.Millisecond))
	if _, err := cluster.Run(ctx, "srun", "--immediate=30", "-w", "n4", "true"); err != nil {
		t.Fatal(err)
	}
}

// task is what one task of a step reports about itself.
type task struct {
	node          string
	procID, local int
	cvd, stepGPUs string
	jobGPUs       string
}

const taskReport = `echo "node=$SLURMD_NODENAME procid=$SLURM_PROCID localid=$SLURM_LOCALID cvd=$CUDA_VISIBLE_DEVICES stepgpus=$SLURM_STEP_GPUS jobgpus=$SLURM_JOB_GPUS"`

func parseTasks(t *testing.T, out string) []task {
	t.Helper()
	var ts []task
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		kv := map[string]string{}
		for _, w := range strings.Fields(line) {
			k, v, _ := strings.Cut(w, "=")
			kv[k] = v
		}
		p, err1 := strconv.Atoi(kv["procid"])
		l, err2 := strconv.Atoi(kv["localid"])
		if err1 != nil || err2 != nil || kv["node"] == "" {
			t.Fatalf("unexpected task line %q in:\n%s", line, out)
		}
		ts = append(ts, task{node: kv["node"], procID: p, local: l, cvd: kv["cvd"], stepGPUs: kv["stepgpus"], jobGPUs: kv["jobgpus"]})
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].procID < ts[j].procID })
	return ts
}

// TestSrunEightTasksEightGPUsPerNode runs one step of 32 tasks on the 4 nodes
// and checks that Slurm gave each node's 8 tasks 8 distinct GPUs.
func TestSrunEightTasksEightGPUsPerNode(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name string
		args []string
		// perTask: each task sees exactly one GPU, distinct within its node;
		// otherwise every task sees all 8.
		perTask bool
	}{
		{"gpus-per-node=8 gpu-bind=single:1", []string{"--gpus-per-node=8", "--gpu-bind=single:1"}, true},
		{"gpus-per-task=1", []string{"--gpus-per-task=1"}, true},
		{"gpus-per-node=8 unbound", []string{"--gpus-per-node=8"}, false},
	}
	all := "0,1,2,3,4,5,6,7"
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"--immediate=30", "-N4", "--ntasks-per-node=8"}, tc.args...)
			args = append(args, "bash", "-c", taskReport)
			out, err := cluster.Run(ctx, "srun", args...)
			if err != nil {
				t.Fatal(err)
			}
			ts := parseTasks(t, out)
			if len(ts) != 32 {
				t.Fatalf("%d tasks reported, want 32:\n%s", len(ts), out)
			}
			seen := map[string][]string{} // node -> CUDA_VISIBLE_DEVICES of its tasks
			for i, tk := range ts {
				// block distribution: ranks 0-7 on n1, 8-15 on n2, ...
				wantNode := fmt.Sprintf("n%d", i/8+1)
				if tk.procID != i || tk.node != wantNode || tk.local != i%8 {
					t.Errorf("task %d: on %s local %d, want %s local %d", tk.procID, tk.node, tk.local, wantNode, i%8)
				}
				if tk.cvd != tk.stepGPUs {
					t.Errorf("task %d: CUDA_VISIBLE_DEVICES=%s but SLURM_STEP_GPUS=%s", tk.procID, tk.cvd, tk.stepGPUs)
				}
				seen[tk.node] = append(seen[tk.node], tk.cvd)
			}
			for _, n := range cluster.Nodes() {
				got := seen[n]
				if !tc.perTask {
					for _, g := range got {
						if g != all {
							t.Errorf("node %s: a task sees CUDA_VISIBLE_DEVICES=%s, want %s", n, g, all)
						}
					}
					continue
				}
				sorted := slices.Clone(got)
				sort.Slice(sorted, func(i, j int) bool { a, _ := strconv.Atoi(sorted[i]); b, _ := strconv.Atoi(sorted[j]); return a < b })
				if strings.Join(sorted, ",") != all {
					t.Errorf("node %s: tasks see CUDA_VISIBLE_DEVICES %v, want one each of %s", n, got, all)
				}
			}
		})
	}
}

// TestConcurrentJobsGetDisjointGPUs: two jobs of 4 GPUs on one node get the
// two halves; a fifth GPU is not to be had while they hold them.
func TestConcurrentJobsGetDisjointGPUs(t *testing.T) {
	ctx := context.Background()
	script := "#!/bin/bash\n" + taskReport + "\nsleep 300\n"
	var ids []int
	t.Cleanup(func() { cancelJobs(t, ids...) })
	for i := 0; i < 2; i++ {
		id, err := cluster.SubmitBatch(ctx, script, "-w", "n1", "--gpus=4", "-J", "gpuhalf")
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	var sets []string
	for _, id := range ids {
		if _, err := cluster.WaitJob(ctx, id, 30*time.Second, "RUNNING"); err != nil {
			t.Fatal(err)
		}
		out := waitOutput(t, id, "node=")
		ts := parseTasks(t, strings.SplitN(out, "\n", 2)[0])
		sets = append(sets, ts[0].jobGPUs)
		// Without ConstrainDevices, CUDA_VISIBLE_DEVICES holds the GPUs'
		// node-wide indices, the same as SLURM_JOB_GPUS.
		if ts[0].cvd != ts[0].jobGPUs {
			t.Errorf("job %d: CUDA_VISIBLE_DEVICES=%s, SLURM_JOB_GPUS=%s", id, ts[0].cvd, ts[0].jobGPUs)
		}
	}
	u := strings.Split(sets[0]+","+sets[1], ",")
	slices.Sort(u)
	if strings.Join(u, ",") != "0,1,2,3,4,5,6,7" {
		t.Errorf("the two jobs got GPUs %q and %q, want disjoint halves of 0-7", sets[0], sets[1])
	}
	_, err := cluster.Run(ctx, "srun", "--immediate=2", "-w", "n1", "--gpus=1", "true")
	if err == nil {
		t.Errorf("srun --gpus=1 on n1 started although both jobs hold all 8 GPUs")
	} else if !strings.Contains(err.Error(), "Unable to allocate resources") {
		t.Errorf("srun --gpus=1 on a full node failed, but not for lack of resources: %v", err)
	}
}

// TestBatchJob: a batch job runs on the nodes it asked for and completes; a
// failing one ends FAILED with its exit code.
func TestBatchJob(t *testing.T) {
	ctx := context.Background()
	t.Run("completes", func(t *testing.T) {
		id, err := cluster.SubmitBatch(ctx, "#!/bin/bash\necho nodes=$SLURM_JOB_NODELIST gpus=$SLURM_GPUS_ON_NODE\nsrun hostname | sort | uniq -c\n",
			"-N2", "--gpus-per-node=8", "-J", "batch-ok")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cluster.WaitJob(ctx, id, 60*time.Second, "COMPLETED"); err != nil {
			t.Fatal(err)
		}
		info, err := cluster.JobInfo(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		out := cluster.JobOutput(id)
		want := fmt.Sprintf("nodes=%s gpus=8", info["NodeList"])
		if !strings.Contains(out, want) || !strings.Contains(out, "2 "+cluster.Hostname()) {
			t.Errorf("job output %q, want %q and 2 tasks on host %s", out, want, cluster.Hostname())
		}
		if info["ExitCode"] != "0:0" {
			t.Errorf("ExitCode=%s, want 0:0", info["ExitCode"])
		}
	})
	t.Run("fails with its exit code", func(t *testing.T) {
		id, err := cluster.SubmitBatch(ctx, "#!/bin/bash\nexit 3\n", "-J", "batch-fail")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cluster.WaitJob(ctx, id, 60*time.Second, "FAILED"); err != nil {
			t.Fatal(err)
		}
		info, err := cluster.JobInfo(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if info["ExitCode"] != "3:0" {
			t.Errorf("ExitCode=%s, want 3:0", info["ExitCode"])
		}
	})
}

// TestPreemptionRequeuesLowJob: a job in "high" preempts a running job of
// "low"; the low job is requeued (not killed) and the high one runs.
func TestPreemptionRequeuesLowJob(t *testing.T) {
	cluster.LogOnFailure(t)
	ctx := context.Background()
	var ids []int
	t.Cleanup(func() { cancelJobs(t, ids...) })
	low, err := cluster.SubmitBatch(ctx, "#!/bin/bash\necho start restart=$SLURM_RESTART_COUNT\nsleep 300\n",
		"-p", harness.LowPartition, "-N4", "--gpus-per-node=8", "--requeue", "-J", "low")
	if err != nil {
		t.Fatal(err)
	}
	ids = append(ids, low)
	if _, err := cluster.WaitJob(ctx, low, 30*time.Second, "RUNNING"); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	high, err := cluster.SubmitBatch(ctx, "#!/bin/bash\necho high\nsleep 300\n",
		"-p", harness.HighPartition, "-N1", "--gpus-per-node=8", "-J", "high")
	if err != nil {
		t.Fatal(err)
	}
	ids = append(ids, high)
	if _, err := cluster.WaitJob(ctx, high, 60*time.Second, "RUNNING"); err != nil {
		t.Fatal(err)
	}
	t.Logf("the high job ran %v after submission (GraceTime %d s, KillWait %d s)",
		time.Since(t0).Round(time.Millisecond), harness.DefaultGraceTime, harness.DefaultKillWait)
	info, err := cluster.JobInfo(ctx, low)
	if err != nil {
		t.Fatal(err)
	}
	if info["Restarts"] != "1" || (info["JobState"] != "PENDING" && info["JobState"] != "COMPLETING") {
		t.Errorf("low job after preemption: JobState=%s Restarts=%s Reason=%s, want PENDING (or still COMPLETING), 1 (requeued)",
			info["JobState"], info["Restarts"], info["Reason"])
	}
	if out := cluster.JobOutput(low); !strings.Contains(out, "DUE TO PREEMPTION") {
		t.Errorf("low job output does not say it was preempted:\n%s", out)
	}
}

// TestSecondClusterCoexistsAndStopsClean starts a second, one-node cluster
// beside the package's one, leaves a job running in it, stops it, and checks
// that none of its processes and none of its files remain, while the first
// cluster still works.
func TestSecondClusterCoexistsAndStopsClean(t *testing.T) {
	ctx := context.Background()
	c2, err := harness.Start(harness.Options{Nodes: 1, GPUsPerNode: 2, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = c2.Stop()
		}
	})
	if c2.ConfPath() == cluster.ConfPath() {
		t.Fatal("the second cluster shares the first one's slurm.conf")
	}
	out, err := c2.Run(ctx, "srun", "--immediate=30", "--gpus=2", "bash", "-c", taskReport)
	if err != nil {
		t.Fatal(err)
	}
	if ts := parseTasks(t, out); len(ts) != 1 || ts[0].node != "n1" || ts[0].cvd != "0,1" {
		t.Errorf("second cluster: %q, want one task on n1 with GPUs 0,1", out)
	}
	// A job with a step and a grandchild that would outlive a careless stop.
	id, err := c2.SubmitBatch(ctx, "#!/bin/bash\necho batch=$$ stepd=$PPID\nsrun bash -c 'echo task=$$; sleep 300 & echo bg=$!; wait'\n")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c2.WaitJob(ctx, id, 30*time.Second, "RUNNING"); err != nil {
		t.Fatal(err)
	}
	var pids []int
	out = waitLog(t, c2, id, "bg=", 20*time.Second)
	for _, w := range strings.Fields(out) {
		if _, v, ok := strings.Cut(w, "="); ok {
			if p, err := strconv.Atoi(v); err == nil {
				pids = append(pids, p)
			}
		}
	}
	if len(pids) != 4 {
		t.Fatalf("want the pids of batch shell, its slurmstepd, task and background child; job printed %q", out)
	}
	dir := c2.Dir()
	stopped = true
	if err := c2.Stop(); err != nil {
		t.Fatal(err)
	}
	t.Logf("second cluster: start %v, stop %v", c2.Timings().Start.Round(time.Millisecond), c2.Timings().Stop.Round(time.Millisecond))
	for _, p := range pids {
		// A zombie is dead; only its parent (here perhaps a lazy init) may reap it.
		if stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p), "stat")); err == nil && !isZombie(string(stat)) {
			cmd, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p), "cmdline"))
			t.Errorf("pid %d (%s) of the stopped cluster still runs", p, strings.ReplaceAll(string(cmd), "\x00", " "))
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s still exists after Stop (%v)", dir, err)
	}
	if _, err := cluster.Run(ctx, "srun", "--immediate=30", "-N4", "true"); err != nil {
		t.Errorf("the package's cluster no longer works after the second one stopped: %v", err)
	}
}

// isZombie reads the state field of a /proc/PID/stat line.
func isZombie(stat string) bool {
	i := strings.LastIndexByte(stat, ')')
	f := strings.Fields(stat[i+1:])
	return len(f) > 0 && f[0] == "Z"
}
