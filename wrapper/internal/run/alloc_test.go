package run

import (
	"strings"
	"testing"

	"github.com/trainrun/trainrun/internal/slurm"
	"github.com/trainrun/trainrun/topo"
	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
)

func envMap(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// slurmEnv4x8 is the batch-step environment of `sbatch -N4 --ntasks-per-node=8
// --gpus-per-node=8 -p low` on the harness cluster (Slurm 22.05).
func slurmEnv4x8() map[string]string {
	return map[string]string{
		"SLURM_JOB_ID": "42", "SLURM_JOB_NODELIST": "n[1-4]", "SLURM_JOB_NUM_NODES": "4",
		"SLURM_TASKS_PER_NODE": "8(x4)", "SLURM_GPUS_ON_NODE": "8", "SLURM_JOB_GPUS": "0,1,2,3,4,5,6,7",
		"SLURM_GPUS_PER_NODE": "8", "SLURM_JOB_PARTITION": "low", "SLURM_SUBMIT_DIR": "/tmp/sub", "SLURMD_NODENAME": "n1",
	}
}

func TestParseAllocation(t *testing.T) {
	tests := []struct {
		name     string
		change   map[string]string // "" value deletes the variable
		wantCode int               // 0 = success
		wantMsg  string
		check    func(t *testing.T, a *slurm.Allocation)
	}{
		{name: "4 nodes x 8 GPUs", check: func(t *testing.T, a *slurm.Allocation) {
			if a.World() != 32 || len(a.Nodes) != 4 || a.Nodes[3] != "n4" || a.GPUsPerNode != 8 || a.TasksPerNode != 8 || a.Partition != "low" {
				t.Errorf("got %+v", a)
			}
		}},
		{name: "restart count", change: map[string]string{"SLURM_RESTART_COUNT": "3"}, check: func(t *testing.T, a *slurm.Allocation) {
			if a.RestartCount != 3 {
				t.Errorf("RestartCount = %d", a.RestartCount)
			}
		}},
		{name: "GPUs from SLURM_JOB_GPUS only", change: map[string]string{"SLURM_GPUS_ON_NODE": "", "SLURM_GPUS_PER_NODE": ""}, check: func(t *testing.T, a *slurm.Allocation) {
			if a.GPUsPerNode != 8 {
				t.Errorf("GPUsPerNode = %d", a.GPUsPerNode)
			}
		}},
		{name: "GPUs from typed SLURM_GPUS_PER_NODE", change: map[string]string{"SLURM_GPUS_ON_NODE": "", "SLURM_JOB_GPUS": "", "SLURM_GPUS_PER_NODE": "h100:8"}, check: func(t *testing.T, a *slurm.Allocation) {
			if a.GPUsPerNode != 8 {
				t.Errorf("GPUsPerNode = %d", a.GPUsPerNode)
			}
		}},
		{name: "mixed task counts in one form", change: map[string]string{"SLURM_TASKS_PER_NODE": "8(x3),8"}},
		{name: "not in an allocation", change: map[string]string{"SLURM_JOB_ID": ""}, wantCode: exitcode.Slurm, wantMsg: "not inside a Slurm allocation"},
		{name: "bad job id", change: map[string]string{"SLURM_JOB_ID": "abc"}, wantCode: exitcode.Slurm, wantMsg: `SLURM_JOB_ID="abc"`},
		{name: "bad nodelist", change: map[string]string{"SLURM_JOB_NODELIST": "n[1-"}, wantCode: exitcode.Slurm, wantMsg: `SLURM_JOB_NODELIST="n[1-"`},
		{name: "node count disagrees", change: map[string]string{"SLURM_JOB_NUM_NODES": "3"}, wantCode: exitcode.Slurm, wantMsg: "SLURM_JOB_NUM_NODES=3"},
		{name: "bad tasks per node", change: map[string]string{"SLURM_TASKS_PER_NODE": "8(4)"}, wantCode: exitcode.Slurm, wantMsg: `SLURM_TASKS_PER_NODE="8(4)"`},
		{name: "one task per node", change: map[string]string{"SLURM_TASKS_PER_NODE": "1(x4)"}, wantCode: exitcode.Slurm, wantMsg: "#SBATCH --ntasks-per-node=8"},
		{name: "uneven tasks", change: map[string]string{"SLURM_TASKS_PER_NODE": "8(x3),4"}, wantCode: exitcode.Slurm, wantMsg: "n4 has 4"},
		{name: "no GPUs", change: map[string]string{"SLURM_GPUS_ON_NODE": "", "SLURM_JOB_GPUS": "", "SLURM_GPUS_PER_NODE": ""}, wantCode: exitcode.Slurm, wantMsg: "the job holds no GPUs (partition low"},
		{name: "zero GPUs", change: map[string]string{"SLURM_GPUS_ON_NODE": "0", "SLURM_JOB_GPUS": ""}, wantCode: exitcode.Slurm, wantMsg: "--gpus-per-node=N"},
		{name: "bad GPU count", change: map[string]string{"SLURM_GPUS_ON_NODE": "eight"}, wantCode: exitcode.Slurm, wantMsg: `SLURM_GPUS_ON_NODE="eight"`},
		{name: "GPU ids disagree", change: map[string]string{"SLURM_JOB_GPUS": "0,1"}, wantCode: exitcode.Slurm, wantMsg: "lists 2 GPUs"},
		{name: "bad restart count", change: map[string]string{"SLURM_RESTART_COUNT": "-1"}, wantCode: exitcode.Slurm, wantMsg: `SLURM_RESTART_COUNT="-1"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := slurmEnv4x8()
			for k, v := range tc.change {
				if v == "" {
					delete(m, k)
				} else {
					m[k] = v
				}
			}
			a, err := parseAllocation(envMap(m), topo.ExpandHostlist)
			if tc.wantCode == 0 {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				if tc.check != nil {
					tc.check(t, a)
				}
				return
			}
			if err == nil {
				t.Fatalf("want exit %d error containing %q, got success %+v", tc.wantCode, tc.wantMsg, a)
			}
			if got := exitcode.Of(err); got != tc.wantCode {
				t.Errorf("exit code %d, want %d (%v)", got, tc.wantCode, err)
			}
			if !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("error %q does not contain %q", err, tc.wantMsg)
			}
		})
	}
}
