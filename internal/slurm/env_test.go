package slurm

import (
	"errors"
	"strings"
	"testing"

	"github.com/trainrun/trainrun/topo"
)

// capturedEnv is the batch step's SLURM_* of the captured job (4 nodes x 8).
func capturedEnv(t testing.TB) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(readTestdata(t, "env-batch.txt")), "\n") {
		k, v, _ := strings.Cut(line, "=")
		m[k] = v
	}
	return m
}

func getenvOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestAllocationFromCapturedEnv(t *testing.T) {
	a, err := AllocationFromEnv(getenvOf(capturedEnv(t)), topo.ExpandHostlist)
	if err != nil {
		t.Fatal(err)
	}
	if a.World() != 32 || len(a.Nodes) != 4 || a.Nodes[3] != "n4" || a.GPUsPerNode != 8 || a.TasksPerNode != 8 ||
		a.Partition != "low" || a.BatchNode != "n1" || a.InStep || len(a.GPUIDs) != 8 || a.RestartCount != 0 {
		t.Errorf("got %+v", a)
	}
}

func TestAllocationFromEnv(t *testing.T) {
	tests := []struct {
		name    string
		change  map[string]string // "" value deletes the variable
		wantVar string            // "" = success
		wantMsg string
		check   func(t *testing.T, a *Allocation)
	}{
		{name: "restart count", change: map[string]string{"SLURM_RESTART_COUNT": "3"}, check: func(t *testing.T, a *Allocation) {
			if a.RestartCount != 3 {
				t.Errorf("RestartCount = %d", a.RestartCount)
			}
		}},
		{name: "cpus per task", change: map[string]string{"SLURM_CPUS_PER_TASK": "6"}, check: func(t *testing.T, a *Allocation) {
			if a.CPUsPerTask != 6 {
				t.Errorf("CPUsPerTask = %d", a.CPUsPerTask)
			}
		}},
		{name: "cpus per task not a count", change: map[string]string{"SLURM_CPUS_PER_TASK": "x"}, check: func(t *testing.T, a *Allocation) {
			if a.CPUsPerTask != 0 {
				t.Errorf("CPUsPerTask = %d, want 0 (unknown)", a.CPUsPerTask)
			}
		}},
		{name: "GPUs from SLURM_JOB_GPUS only", change: map[string]string{"SLURM_GPUS_ON_NODE": "", "SLURM_GPUS_PER_NODE": ""}, check: func(t *testing.T, a *Allocation) {
			if a.GPUsPerNode != 8 {
				t.Errorf("GPUsPerNode = %d", a.GPUsPerNode)
			}
		}},
		{name: "GPUs from typed SLURM_GPUS_PER_NODE", change: map[string]string{"SLURM_GPUS_ON_NODE": "", "SLURM_JOB_GPUS": "", "SLURM_GPUS_PER_NODE": "h100:8"}, check: func(t *testing.T, a *Allocation) {
			if a.GPUsPerNode != 8 {
				t.Errorf("GPUsPerNode = %d", a.GPUsPerNode)
			}
		}},
		{name: "old names", change: map[string]string{"SLURM_JOB_ID": "", "SLURM_JOB_NODELIST": "", "SLURM_TASKS_PER_NODE": "", "SLURM_NTASKS_PER_NODE": "8(x4)"}, check: func(t *testing.T, a *Allocation) {
			if a.JobID != "1" || a.NodeList != "n[1-4]" || a.TasksPerNode != 8 {
				t.Errorf("got %+v", a)
			}
		}},
		{name: "inside a step", change: map[string]string{"SLURM_STEP_ID": "0"}, check: func(t *testing.T, a *Allocation) {
			if !a.InStep {
				t.Error("InStep false")
			}
		}},
		{name: "the batch step is no step", change: map[string]string{"SLURM_STEP_ID": "4294967294"}, check: func(t *testing.T, a *Allocation) {
			if a.InStep {
				t.Error("InStep true")
			}
		}},
		{name: "mixed task counts in one form", change: map[string]string{"SLURM_TASKS_PER_NODE": "8(x3),8"}},
		{name: "not in an allocation", change: map[string]string{"SLURM_JOB_ID": "", "SLURM_JOBID": ""}, wantVar: "SLURM_JOB_ID", wantMsg: "not inside a Slurm allocation"},
		{name: "bad job id", change: map[string]string{"SLURM_JOB_ID": "abc"}, wantVar: "SLURM_JOB_ID", wantMsg: `SLURM_JOB_ID="abc"`},
		{name: "bad nodelist", change: map[string]string{"SLURM_JOB_NODELIST": "n[1-"}, wantVar: "SLURM_JOB_NODELIST", wantMsg: `SLURM_JOB_NODELIST="n[1-"`},
		{name: "node count disagrees", change: map[string]string{"SLURM_JOB_NUM_NODES": "3"}, wantVar: "SLURM_JOB_NUM_NODES", wantMsg: "SLURM_JOB_NUM_NODES=3"},
		{name: "bad tasks per node", change: map[string]string{"SLURM_TASKS_PER_NODE": "8(4)"}, wantVar: "SLURM_TASKS_PER_NODE", wantMsg: `SLURM_TASKS_PER_NODE="8(4)"`},
		{name: "forged repeat", change: map[string]string{"SLURM_TASKS_PER_NODE": "8(x20000000)"}, wantVar: "SLURM_TASKS_PER_NODE", wantMsg: "more than the allocation's 4 node(s)"},
		{name: "too few task counts", change: map[string]string{"SLURM_TASKS_PER_NODE": "8(x3)"}, wantVar: "SLURM_TASKS_PER_NODE", wantMsg: "gives 3 nodes but the allocation has 4"},
		{name: "one task per node", change: map[string]string{"SLURM_TASKS_PER_NODE": "1(x4)"}, wantVar: "SLURM_TASKS_PER_NODE", wantMsg: "#SBATCH --ntasks-per-node=8"},
		{name: "uneven tasks", change: map[string]string{"SLURM_TASKS_PER_NODE": "8(x3),4"}, wantVar: "SLURM_TASKS_PER_NODE", wantMsg: "n4 has 4"},
		{name: "no tasks", change: map[string]string{"SLURM_TASKS_PER_NODE": "", "SLURM_NTASKS_PER_NODE": ""}, wantVar: "SLURM_TASKS_PER_NODE", wantMsg: "is not set"},
		{name: "no GPUs", change: map[string]string{"SLURM_GPUS_ON_NODE": "", "SLURM_JOB_GPUS": "", "SLURM_GPUS_PER_NODE": ""}, wantVar: "SLURM_GPUS_ON_NODE", wantMsg: "the job holds no GPUs (partition low"},
		{name: "zero GPUs", change: map[string]string{"SLURM_GPUS_ON_NODE": "0", "SLURM_JOB_GPUS": ""}, wantVar: "SLURM_GPUS_ON_NODE", wantMsg: "--gpus-per-node=N"},
		{name: "bad GPU count", change: map[string]string{"SLURM_GPUS_ON_NODE": "eight"}, wantVar: "SLURM_GPUS_ON_NODE", wantMsg: `SLURM_GPUS_ON_NODE="eight"`},
		{name: "GPU ids disagree", change: map[string]string{"SLURM_JOB_GPUS": "0,1"}, wantVar: "SLURM_GPUS_ON_NODE", wantMsg: "lists 2 GPUs"},
		{name: "bad GPU id", change: map[string]string{"SLURM_JOB_GPUS": "0,x"}, wantVar: "SLURM_JOB_GPUS", wantMsg: `SLURM_JOB_GPUS="0,x"`},
		{name: "bad restart count", change: map[string]string{"SLURM_RESTART_COUNT": "-1"}, wantVar: "SLURM_RESTART_COUNT", wantMsg: `SLURM_RESTART_COUNT="-1"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := capturedEnv(t)
			for k, v := range tc.change {
				if v == "" {
					delete(m, k)
				} else {
					m[k] = v
				}
			}
			a, err := AllocationFromEnv(getenvOf(m), topo.ExpandHostlist)
			if tc.wantVar == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				if tc.check != nil {
					tc.check(t, a)
				}
				return
			}
			var ee *EnvError
			if !errors.As(err, &ee) {
				t.Fatalf("want an *EnvError for %s containing %q, got %v (%+v)", tc.wantVar, tc.wantMsg, err, a)
			}
			if ee.Var != tc.wantVar || !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("error %q (var %s), want var %s and %q", err, ee.Var, tc.wantVar, tc.wantMsg)
			}
		})
	}
}

// Whatever the environment, the result is an allocation that keeps its
// promise (one task per GPU, as many task counts as nodes) or an *EnvError.
func FuzzAllocationFromEnv(f *testing.F) {
	f.Add("n[1-4]", "4", "8(x4)", "8", "0,1,2,3,4,5,6,7", "")
	f.Add("n[1-2]", "2", "8(x20000000)", "8", "", "h100:8")
	f.Add("n1", "", "2(x1)", "", "0,1", "")
	f.Fuzz(func(t *testing.T, nodelist, numNodes, tpn, gpusOn, jobGPUs, gpusPer string) {
		m := map[string]string{"SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": nodelist, "SLURM_JOB_NUM_NODES": numNodes,
			"SLURM_TASKS_PER_NODE": tpn, "SLURM_GPUS_ON_NODE": gpusOn, "SLURM_JOB_GPUS": jobGPUs, "SLURM_GPUS_PER_NODE": gpusPer}
		expand := func(s string) ([]string, error) {
			if len(s) > 64 { // keep the fuzzer's hostlists small: the bound under test is ParseCounts'
				return nil, errors.New("long")
			}
			return topo.ExpandHostlist(s)
		}
		a, err := AllocationFromEnv(getenvOf(m), expand)
		if err != nil {
			var ee *EnvError
			if !errors.As(err, &ee) {
				t.Fatalf("error %v is no *EnvError", err)
			}
			return
		}
		if a.GPUsPerNode <= 0 || a.GPUsPerNode > maxGPUIDs || a.TasksPerNode != a.GPUsPerNode || len(a.Nodes) == 0 {
			t.Fatalf("accepted %+v", a)
		}
	})
}

// A GPU count at the bound reads; one past it is refused, naming the
// variable, whichever variable carries it.
func TestAllocationGPUCountBoundary(t *testing.T) {
	expand := func(s string) ([]string, error) { return topo.ExpandHostlist(s) }
	for _, key := range []string{"SLURM_GPUS_ON_NODE", "SLURM_GPUS_PER_NODE"} {
		for n, ok := range map[string]bool{"1024": true, "1025": false, "9223372036854775807": false, "99999999999999999999": false} {
			m := map[string]string{"SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "n[1-2]", "SLURM_TASKS_PER_NODE": "1024(x2)", key: n}
			a, err := AllocationFromEnv(getenvOf(m), expand)
			var ee *EnvError
			switch {
			case ok && (err != nil || a.GPUsPerNode != 1024):
				t.Errorf("%s=%s: %+v, %v", key, n, a, err)
			case !ok && (err == nil || !errors.As(err, &ee) || !strings.Contains(err.Error(), key)):
				t.Errorf("%s=%s: %v, want an error naming %s", key, n, err, key)
			}
		}
	}
}

func TestJobAndTaskFromEnv(t *testing.T) {
	m := capturedEnv(t)
	j := JobFromEnv(getenvOf(m))
	if j.ID != "1" || j.Name != "run two.sh" || j.User != "root" || j.NodeList != "n[1-4]" || j.Partition != "low" || j.StepID != "" {
		t.Errorf("JobFromEnv: %+v", j)
	}
	task := TaskFromEnv(getenvOf(m))
	if task.ProcID != "0" || task.Node != "n1" || task.StepGPUs != "0,1,2,3,4,5,6,7" || task.Restart != "" {
		t.Errorf("TaskFromEnv: %+v", task)
	}
	m["SLURM_STEP_GPUS"] = "4,5"
	if got := TaskFromEnv(getenvOf(m)).StepGPUs; got != "4,5" {
		t.Errorf("SLURM_STEP_GPUS first: %q", got)
	}
}
