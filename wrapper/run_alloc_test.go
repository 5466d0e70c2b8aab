package main

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/trainrun/trainrun/topo"
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
		check    func(t *testing.T, a *allocation)
	}{
		{name: "4 nodes x 8 GPUs", check: func(t *testing.T, a *allocation) {
			if a.World() != 32 || len(a.Nodes) != 4 || a.Nodes[3] != "n4" || a.GPUsPerNode != 8 || a.TasksPerNode != 8 || a.Partition != "low" {
				t.Errorf("got %+v", a)
			}
		}},
		{name: "restart count", change: map[string]string{"SLURM_RESTART_COUNT": "3"}, check: func(t *testing.T, a *allocation) {
			if a.RestartCount != 3 {
				t.Errorf("RestartCount = %d", a.RestartCount)
			}
		}},
		{name: "GPUs from SLURM_JOB_GPUS only", change: map[string]string{"SLURM_GPUS_ON_NODE": "", "SLURM_GPUS_PER_NODE": ""}, check: func(t *testing.T, a *allocation) {
			if a.GPUsPerNode != 8 {
				t.Errorf("GPUsPerNode = %d", a.GPUsPerNode)
			}
		}},
		{name: "GPUs from typed SLURM_GPUS_PER_NODE", change: map[string]string{"SLURM_GPUS_ON_NODE": "", "SLURM_JOB_GPUS": "", "SLURM_GPUS_PER_NODE": "h100:8"}, check: func(t *testing.T, a *allocation) {
			if a.GPUsPerNode != 8 {
				t.Errorf("GPUsPerNode = %d", a.GPUsPerNode)
			}
		}},
		{name: "mixed task counts in one form", change: map[string]string{"SLURM_TASKS_PER_NODE": "8(x3),8"}},
		{name: "not in an allocation", change: map[string]string{"SLURM_JOB_ID": ""}, wantCode: ExitSlurm, wantMsg: "not inside a Slurm allocation"},
		{name: "bad job id", change: map[string]string{"SLURM_JOB_ID": "abc"}, wantCode: ExitSlurm, wantMsg: `SLURM_JOB_ID="abc"`},
		{name: "bad nodelist", change: map[string]string{"SLURM_JOB_NODELIST": "n[1-"}, wantCode: ExitSlurm, wantMsg: `SLURM_JOB_NODELIST="n[1-"`},
		{name: "node count disagrees", change: map[string]string{"SLURM_JOB_NUM_NODES": "3"}, wantCode: ExitSlurm, wantMsg: "SLURM_JOB_NUM_NODES=3"},
		{name: "bad tasks per node", change: map[string]string{"SLURM_TASKS_PER_NODE": "8(4)"}, wantCode: ExitSlurm, wantMsg: `SLURM_TASKS_PER_NODE="8(4)"`},
		{name: "one task per node", change: map[string]string{"SLURM_TASKS_PER_NODE": "1(x4)"}, wantCode: ExitSlurm, wantMsg: "#SBATCH --ntasks-per-node=8"},
		{name: "uneven tasks", change: map[string]string{"SLURM_TASKS_PER_NODE": "8(x3),4"}, wantCode: ExitSlurm, wantMsg: "n4 has 4"},
		{name: "no GPUs", change: map[string]string{"SLURM_GPUS_ON_NODE": "", "SLURM_JOB_GPUS": "", "SLURM_GPUS_PER_NODE": ""}, wantCode: ExitSlurm, wantMsg: "the job holds no GPUs (partition low"},
		{name: "zero GPUs", change: map[string]string{"SLURM_GPUS_ON_NODE": "0", "SLURM_JOB_GPUS": ""}, wantCode: ExitSlurm, wantMsg: "--gpus-per-node=N"},
		{name: "bad GPU count", change: map[string]string{"SLURM_GPUS_ON_NODE": "eight"}, wantCode: ExitSlurm, wantMsg: `SLURM_GPUS_ON_NODE="eight"`},
		{name: "GPU ids disagree", change: map[string]string{"SLURM_JOB_GPUS": "0,1"}, wantCode: ExitSlurm, wantMsg: "lists 2 GPUs"},
		{name: "bad restart count", change: map[string]string{"SLURM_RESTART_COUNT": "-1"}, wantCode: ExitSlurm, wantMsg: `SLURM_RESTART_COUNT="-1"`},
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
			if got := exitCodeOf(err); got != tc.wantCode {
				t.Errorf("exit code %d, want %d (%v)", got, tc.wantCode, err)
			}
			if !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("error %q does not contain %q", err, tc.wantMsg)
			}
		})
	}
}

func TestParseSlurmCounts(t *testing.T) {
	tests := []struct {
		in   string
		want []int
		bad  bool
	}{
		{in: "8(x4)", want: []int{8, 8, 8, 8}},
		{in: "2(x3),1", want: []int{2, 2, 2, 1}},
		{in: "4", want: []int{4}},
		{in: "8,8", want: []int{8, 8}},
		{in: "8(x0)", bad: true},
		{in: "x", bad: true},
		{in: "8(y2)", bad: true},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := parseSlurmCounts(tc.in)
			if tc.bad {
				if err == nil {
					t.Fatalf("want error, got %v", got)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Errorf("got %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestParseSlurmDuration(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		bad  bool
	}{
		{in: "UNLIMITED", want: 0},
		{in: "30", want: 30 * time.Minute},
		{in: "5:30", want: 5*time.Minute + 30*time.Second},
		{in: "01:02:03", want: time.Hour + 2*time.Minute + 3*time.Second},
		{in: "2-00:00:00", want: 48 * time.Hour},
		{in: "1-12", want: 36 * time.Hour},
		{in: "1-01:30", want: 25*time.Hour + 30*time.Minute},
		{in: "1:2:3:4", bad: true},
		{in: "ten", bad: true},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := parseSlurmDuration(tc.in)
			if tc.bad != (err != nil) || got != tc.want {
				t.Errorf("parseSlurmDuration(%q) = %v, %v; want %v (bad=%v)", tc.in, got, err, tc.want, tc.bad)
			}
		})
	}
}

// A line of `scontrol show job -o` from the harness's Slurm 22.05.
const scontrolJobLine = `JobId=42 JobName=run.sh UserId=root(0) GroupId=root(0) MCS_label=N/A Priority=1 Nice=0 Account=(null) QOS=(null) JobState=RUNNING Reason=None Dependency=(null) Requeue=1 Restarts=2 BatchFlag=1 Reboot=0 ExitCode=0:0 RunTime=00:00:05 TimeLimit=00:10:00 TimeMin=N/A SubmitTime=2026-11-29T12:00:00 EligibleTime=2026-11-29T12:00:00 AccrueTime=Unknown StartTime=2026-11-29T12:00:01 EndTime=2026-11-29T12:10:01 Deadline=N/A Partition=low AllocNode:Sid=host:1 NodeList=n[1-4] BatchHost=n1 NumNodes=4 NumCPUs=32 NumTasks=32 CPUs/Task=1 TRES=cpu=32,node=4,billing=32,gres/gpu=32 Command=/tmp/run.sh WorkDir=/tmp Comment=two words`

func TestParseScontrolJob(t *testing.T) {
	ji, err := parseScontrolJob(scontrolJobLine, time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	if ji.TimeLimit != 10*time.Minute || !ji.EndTime.Equal(time.Date(2026, 11, 29, 12, 10, 1, 0, time.UTC)) || !ji.Requeue || ji.fields["JobState"] != "RUNNING" {
		t.Errorf("got %+v", ji)
	}
	for name, line := range map[string]string{
		"no job id":    "slurm_load_jobs error: Invalid job id specified",
		"bad end time": "JobId=1 EndTime=soon",
		"bad limit":    "JobId=1 TimeLimit=ten",
	} {
		if _, err := parseScontrolJob(line, time.UTC); err == nil {
			t.Errorf("%s: want error", name)
		}
	}
	ji, err = parseScontrolJob("JobId=1 TimeLimit=UNLIMITED EndTime=Unknown Requeue=0", time.UTC)
	if err != nil || ji.TimeLimit != 0 || !ji.EndTime.IsZero() || ji.Requeue {
		t.Errorf("unlimited: %+v %v", ji, err)
	}
}

func TestParseNodeAddrs(t *testing.T) {
	out := "NodeName=n1 Arch=x86_64 CoresPerSocket=1 NodeAddr=127.0.0.1 NodeHostName=host Port=7001\nNodeName=n2 NodeAddr=10.0.0.2 NodeHostName=n2\n"
	m := parseNodeAddrs(out)
	if m["n1"] != "127.0.0.1" || m["n2"] != "10.0.0.2" || len(m) != 2 {
		t.Errorf("got %v", m)
	}
}
