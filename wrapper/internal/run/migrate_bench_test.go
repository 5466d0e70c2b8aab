package run

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trainrun/trainrun/checkpoint"
	"github.com/trainrun/trainrun/internal/slurm"
)

// BenchmarkCheckMigrate measures one migration tick's own work in the
// controller (checkMigrate: the history read twice, both plan files read,
// DecideMigrate), with a canned Slurm: "stay" is a tick whose verdict needs
// no Slurm query (no other partition pays), the common case; "ask" one
// where a move would pay, so it parses `scontrol -d show node -o` and
// `scontrol show job -o` of a cluster of the given size (and stays: a job
// waits where it would go, MigrateMaxDelay 0). slurmctld's side of those
// two queries, and the fork/exec of scontrol, are not in it (the e2e
// TestRunMigrates logs them on its 4-node cluster).
func BenchmarkCheckMigrate(b *testing.B) {
	for _, size := range []struct{ nodes, jobs int }{{4, 4}, {1000, 5000}} {
		for _, mode := range []string{"stay", "ask"} {
			b.Run(fmt.Sprintf("%s/%dnodes-%djobs", mode, size.nodes, size.jobs), func(b *testing.B) {
				r, canned := migrateBenchRunner(b, mode == "ask", size.nodes, size.jobs)
				m := &monitor{r: r}
				tick := func() {
					r.sess.mig.nextAt, canned.Calls = time.Unix(1, 0), nil
					m.checkMigrate(time.Now())
				}
				tick()
				want, calls := "hopper: finishes in", 0
				if mode == "ask" {
					want, calls = "over MigrateMaxDelay 0s", 2
				}
				if !strings.Contains(r.sess.mig.lastVerdict, want) || len(canned.Calls) != calls || m.reason != None {
					b.Fatalf("the tick measured is not the one meant: verdict %q, Slurm calls %q, stop %q", r.sess.mig.lastVerdict, canned.Calls, m.reason)
				}
				b.ResetTimer()
				for range b.N {
					tick()
				}
			})
		}
	}
}

// migrateBenchRunner: a job on ampere, 900 of 1000 steps left at 2 s/step
// observed, a plan per partition (the acceptance plan: hopper's at half
// the step time when ask), a history of a start and 200 measured saves.
func migrateBenchRunner(b *testing.B, ask bool, nodes, jobs int) (*runner, *slurm.Canned) {
	dir := b.TempDir()
	raw, err := os.ReadFile("../../testdata/plan/acceptance-json.golden")
	if err != nil {
		b.Fatal(err)
	}
	for part, scale := range map[string]float64{"ampere": 1, "hopper": map[bool]float64{false: 1, true: 0.5}[ask]} {
		var pf map[string]any
		if err := json.Unmarshal(raw, &pf); err != nil {
			b.Fatal(err)
		}
		tm := pf["plan"].(map[string]any)["time"].(map[string]any)
		tm["step_s"] = tm["step_s"].(float64) * scale
		out, _ := json.MarshalIndent(pf, "", "  ")
		if err := os.WriteFile(filepath.Join(dir, "plan-"+part+".json"), out, 0o600); err != nil {
			b.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "ckpt"), 0o700); err != nil {
		b.Fatal(err)
	}
	store, err := checkpoint.Open(filepath.Join(dir, "ckpt"))
	if err != nil {
		b.Fatal(err)
	}
	t0 := time.Now().Add(-time.Hour)
	store.History().Append(checkpoint.Event{Time: t0, Type: "start", JobID: "7", WorldSize: 8, Node: "n3"})
	for i := range 200 {
		store.History().Append(checkpoint.Event{Time: t0.Add(time.Duration(i) * time.Second), Type: "ckpt", JobID: "7", Tag: fmt.Sprintf("step-%d", i), CkptSeconds: 1.5, Why: "interval"})
	}
	canned := &slurm.Canned{Out: map[string]string{"scontrol -d show node -o": benchNodes(nodes), "scontrol show job -o": benchJobs(jobs)}}
	vars := map[string]string{planByPartitionEnv: filepath.Join(dir, "plan-%p.json")}
	r := &runner{env: &Deps{Stderr: io.Discard, Getenv: func(k string) string { return vars[k] }, Slurm: slurm.Client{Run: canned.Run, Location: time.Local}},
		alloc: &slurm.Allocation{JobID: "7", Partition: "ampere", Nodes: []string{"n3"}, TasksPerNode: 8, TimeLimit: time.Hour}, t0: t0}
	r.cfg.migrate = migrateOptions{"yes", "3s"}
	r.cfg.obs.trainSteps, r.cfg.maxRequeue = "1000", 10
	r.facts.job = slurm.Job{ID: "7", Partition: "ampere", Requeue: true, Record: slurm.Record{"BatchFlag": "1"}}
	r.ckpt.store = store
	for i := range 11 {
		r.migrateProgress(int64(90+i), t0.Add(time.Minute+time.Duration(2*i)*time.Second))
	}
	return r, canned
}

// benchNodes: n nodes, the first two idle in hopper, the rest allocated in
// ampere; the fields of a real `scontrol -d show node -o` line.
func benchNodes(n int) string {
	var sb strings.Builder
	for i := range n {
		part, state, used := "ampere", "ALLOCATED", 8
		if i < 2 {
			part, state, used = "hopper", "IDLE", 0
		}
		fmt.Fprintf(&sb, "NodeName=n%d Arch=x86_64 CoresPerSocket=32 CPUAlloc=%d CPUEfctv=64 CPUTot=64 CPULoad=3.10 AvailableFeatures=gpu ActiveFeatures=gpu "+
			"Gres=gpu:a100:8(S:0-1) GresDrain=N/A GresUsed=gpu:a100:%d(IDX:0-7) NodeAddr=n%d NodeHostName=n%d Version=23.02.6 OS=Linux 6.1.0 RealMemory=1031000 "+
			"AllocMem=0 FreeMem=990000 Sockets=2 Boards=1 State=%s ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A Partitions=%s "+
			"BootTime=2026-12-01T08:00:00 SlurmdStartTime=2026-12-01T08:01:00 LastBusyTime=2026-12-07T14:00:00 ResumeAfterTime=None CfgTRES=cpu=64,mem=1031000M,billing=64,gres/gpu=8 "+
			"AllocTRES=cpu=%d,gres/gpu=%d CapWatts=n/a CurrentWatts=0 AveWatts=0 ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s\n",
			i, used*8, used, i, i, state, part, used*8, used)
	}
	return sb.String()
}

// benchJobs: n jobs, job 7 (this one) running, one pending in hopper (2
// nodes), the rest running or pending in ampere.
func benchJobs(n int) string {
	var sb strings.Builder
	for i := range n {
		id, state, part, nodes := 100+i, "RUNNING", "ampere", 1
		switch {
		case i == 0:
			id = 7
		case i == 1:
			state, part, nodes = "PENDING", "hopper", 2
		case i%3 == 0:
			state = "PENDING"
		}
		fmt.Fprintf(&sb, "JobId=%d JobName=train-%d UserId=u%d(100%d) GroupId=g(100) MCS_label=N/A Priority=4294901%d Nice=0 Account=team%d QOS=normal JobState=%s "+
			"Reason=None Dependency=(null) Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=0:0 RunTime=00:10:00 TimeLimit=01:00:00 TimeMin=N/A "+
			"SubmitTime=2026-12-07T13:00:00 EligibleTime=2026-12-07T13:00:00 AccrueTime=2026-12-07T13:00:00 StartTime=2026-12-07T13:50:00 EndTime=2026-12-07T14:50:00 "+
			"Deadline=N/A SuspendTime=None SecsPreSuspend=0 LastSchedEval=2026-12-07T13:50:00 Scheduler=Main Partition=%s AllocNode:Sid=login:1234 ReqNodeList=(null) "+
			"ExcNodeList=(null) NodeList=n%d BatchHost=n%d NumNodes=%d NumCPUs=64 NumTasks=8 CPUs/Task=8 ReqB:S:C:T=0:0:*:* ReqTRES=cpu=64,mem=500G,node=%d,billing=64,gres/gpu=8 "+
			"AllocTRES=cpu=64,mem=500G,node=1,billing=64,gres/gpu=8 Socks/Node=* NtasksPerN:B:S:C=8:0:*:* CoreSpec=* MinCPUsNode=64 MinMemoryNode=500G MinTmpDiskNode=0 "+
			"Features=(null) DelayBoot=00:00:00 OverSubscribe=NO Contiguous=0 Licenses=(null) Network=(null) Command=/home/u/train.sh WorkDir=/home/u "+
			"StdErr=/home/u/slurm-%d.out StdIn=/dev/null StdOut=/home/u/slurm-%d.out TresPerNode=gres:gpu:8\n",
			id, i, i%10, i%10, i%100, i%10, state, part, i%1000, i%1000, nodes, nodes, id, id)
	}
	return sb.String()
}
