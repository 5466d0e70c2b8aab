package run

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/trainrun/trainrun/checkpoint"
	"github.com/trainrun/trainrun/internal/slurm"
)

func TestDecideMigrate(t *testing.T) {
	s := time.Second
	// 100 steps left at 2 s/step here: 200 s staying.
	base := func() MigrateInput {
		return MigrateInput{From: "ampere", StepsLeft: 100, StepTime: 2 * s, Save: 5 * s, RequeueWait: 5 * s, Restart: 5 * s, Margin: 0.10,
			Candidates: []MigrateCandidate{{Partition: "hopper", StepTime: s}}}
	}
	tests := []struct {
		name   string
		change func(in *MigrateInput)
		move   bool
		to     string
		why    string // in Why
	}{
		{name: "twice as fast, cheap move", change: func(in *MigrateInput) {}, move: true, to: "hopper", why: "moving from ampere to hopper"},
		{name: "no gain past the margin", change: func(in *MigrateInput) { in.Candidates[0].StepTime = 1900 * time.Millisecond }, why: "not 10% sooner"},
		{name: "gain not twice the cost", change: func(in *MigrateInput) { in.Save, in.RequeueWait, in.Restart = 15*s, 15*s, 5*s }, why: "not more than twice"},
		{name: "start far off counts in the cost", change: func(in *MigrateInput) { in.Candidates[0].StartIn = 90 * s }, why: "not 10% sooner"},
		{name: "candidate refused", change: func(in *MigrateInput) { in.Candidates[0].NoWhy = "0 idle node(s), the job needs 2" }, why: "hopper: 0 idle node(s)"},
		{name: "few steps left", change: func(in *MigrateInput) { in.StepsLeft = 10 }, why: "staying in ampere"},
		{name: "no step time yet", change: func(in *MigrateInput) { in.StepTime = 0 }, why: "no step time observed"},
		{name: "no candidate", change: func(in *MigrateInput) { in.Candidates = nil }, why: "no other partition"},
		{name: "the fastest of two", change: func(in *MigrateInput) {
			in.Candidates = append(in.Candidates, MigrateCandidate{Partition: "volta", StepTime: 1500 * time.Millisecond}, MigrateCandidate{Partition: "h200", StepTime: 800 * time.Millisecond})
		}, move: true, to: "h200"},
		{name: "slower partition never", change: func(in *MigrateInput) { in.Candidates[0].StepTime = 3 * s }, why: "hopper: finishes in"},
		// MigrateMaxDelay: a job waits in hopper that the move's nodes would
		// keep from starting; the move would delay it up to its whole
		// predicted stay there, 115 s.
		{name: "waiting job, delay within the bound", change: func(in *MigrateInput) {
			in.Candidates[0].Waiting, in.MaxDelay = []WaitingJob{{ID: "8", Nodes: 1}}, 2*time.Minute
		}, move: true, to: "hopper", why: "delays job 8 (1 node) waiting there up to 1m55s, within MigrateMaxDelay 2m0s"},
		{name: "waiting job, delay at the bound", change: func(in *MigrateInput) {
			in.Candidates[0].Waiting, in.MaxDelay = []WaitingJob{{ID: "8", Nodes: 1}}, 115*s
		}, move: true, to: "hopper", why: "within MigrateMaxDelay 1m55s"},
		{name: "waiting job, delay beyond the bound", change: func(in *MigrateInput) {
			in.Candidates[0].Waiting, in.MaxDelay = []WaitingJob{{ID: "8", Nodes: 1}}, time.Minute
		}, why: "hopper: job 8 (1 node) waiting there would be delayed up to 1m55s (until the moved job ends there), over MigrateMaxDelay 1m0s"},
		{name: "waiting jobs, default bound 0", change: func(in *MigrateInput) {
			in.Candidates[0].Waiting = []WaitingJob{{ID: "8", Nodes: 1}, {ID: "9", Nodes: 0}}
		}, why: "hopper: 2 jobs (8: 1 node, 9: ? nodes) waiting there would be delayed up to 1m55s (until the moved job ends there), over MigrateMaxDelay 0s"},
		{name: "no waiting job, bound 0", change: func(in *MigrateInput) { in.Candidates[0].Waiting = nil }, move: true, to: "hopper"},
		{name: "the fast one has a waiting job, the other not", change: func(in *MigrateInput) {
			in.Candidates[0].Waiting, in.MaxDelay = []WaitingJob{{ID: "8", Nodes: 1}}, time.Minute
			in.Candidates = append(in.Candidates, MigrateCandidate{Partition: "h200", StepTime: 1200 * time.Millisecond})
		}, move: true, to: "h200"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := base()
			tc.change(&in)
			v := DecideMigrate(in)
			if v.Move != tc.move || v.To != tc.to || !strings.Contains(v.Why, tc.why) {
				t.Fatalf("DecideMigrate = move %v to %q (%s), want move %v to %q with %q", v.Move, v.To, v.Why, tc.move, tc.to, tc.why)
			}
			if v.Move && !(v.Moved+v.Cost < v.Stay) {
				t.Fatalf("moved %s + cost %s is not under staying %s", v.Moved, v.Cost, v.Stay)
			}
		})
	}
	// The figures: 100 × 1 s + (5 + 5 + 5) s = 115 s against 200 s.
	v := DecideMigrate(base())
	if v.Stay != 200*s || v.Moved != 115*s || v.Cost != 15*s {
		t.Fatalf("stay %s moved %s cost %s, want 200s 115s 15s", v.Stay, v.Moved, v.Cost)
	}
}

func TestMigrateOptionsCheck(t *testing.T) {
	for _, tc := range []struct {
		o  migrateOptions
		ok bool
		d  time.Duration
	}{
		{migrateOptions{"yes", "5m"}, true, 5 * time.Minute},
		{migrateOptions{"no", "90"}, true, 90 * time.Second},
		{migrateOptions{"", ""}, true, defaultMigrateEvery},
		{migrateOptions{"maybe", "5m"}, false, 0},
		{migrateOptions{"yes", "0s"}, false, 0},
		{migrateOptions{"yes", "soon"}, false, 0},
	} {
		err := tc.o.check()
		if (err == nil) != tc.ok {
			t.Fatalf("%+v: check() = %v, want ok %v", tc.o, err, tc.ok)
		}
		if d, _ := tc.o.interval(); tc.ok && d != tc.d {
			t.Fatalf("%+v: interval %s, want %s", tc.o, d, tc.d)
		}
	}
	err := migrateOptions{"maybe", ""}.check()
	if err == nil || !strings.Contains(err.Error(), `--migrate "maybe"`) || !strings.Contains(err.Error(), "want yes or no") {
		t.Fatalf("error %v does not name the flag, value and what to give", err)
	}
}

func TestPlanPartitions(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{"ampere", "hopper"} {
		if err := os.WriteFile(filepath.Join(dir, "plan-"+p+"-8gpus-x1.json"), []byte("{}"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(dir, "plan-volta-8gpus-x2.json"), []byte("{}"), 0o600) // another submission's stamp
	got := planPartitions(filepath.Join(dir, "plan-%p-8gpus-x1.json"))
	slices.Sort(got)
	if want := []string{"ampere", "hopper"}; !slices.Equal(got, want) {
		t.Fatalf("planPartitions = %q, want %q", got, want)
	}
	if got := planPartitions(filepath.Join(dir, "plan.json")); got != nil {
		t.Fatalf("no %%p: %q, want none", got)
	}
}

func TestMigrateHistory(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	incs := []checkpoint.Incarnation{
		{Restart: 0, Start: t0, End: t0.Add(time.Minute), Cause: checkpoint.CauseMigrated},
		{Restart: 1, Start: t0.Add(time.Minute + 20*time.Second), End: t0.Add(2 * time.Minute), Cause: checkpoint.CauseTimeLimit},
		{Restart: 2, Start: t0.Add(2*time.Minute + 40*time.Second)},
	}
	if w := requeueWait(incs); w != 40*time.Second {
		t.Fatalf("requeueWait = %s, want the median 40s of 20s and 40s", w) // even count: the upper middle
	}
	if w := requeueWait(incs[:1]); w != 0 {
		t.Fatalf("requeueWait of one run = %s, want 0 (none measured)", w)
	}
	last, ok := lastMigration(incs)
	if !ok || !last.Equal(t0.Add(time.Minute)) {
		t.Fatalf("lastMigration = %s %v, want %s", last, ok, t0.Add(time.Minute))
	}
	if _, ok := lastMigration(incs[1:]); ok {
		t.Fatal("lastMigration found a move in a history without one")
	}
}

func TestMigrateObservedStep(t *testing.T) {
	var s migrateState
	t0 := time.Now()
	if s.observedStep() != 0 {
		t.Fatal("step time before any report")
	}
	r := &runner{}
	r.sess.mig = s
	for i := range 5 {
		r.migrateProgress(int64(10+i), t0.Add(time.Duration(i)*1500*time.Millisecond))
	}
	if got := r.sess.mig.observedStep(); got != 1500*time.Millisecond {
		t.Fatalf("observedStep = %s, want 1.5s", got)
	}
}

// waitingFor: the pending jobs of the partition (not this job, not
// running, not another partition) that the nodes a move takes would keep
// from starting; in the queue's order, those that fit the nodes the move
// leaves idle are not, until the first that does not.
func TestWaitingFor(t *testing.T) {
	job := func(id, state, part, nodes string) slurm.Job {
		return slurm.Job{ID: id, State: state, Partition: part, Record: slurm.Record{"NumNodes": nodes}}
	}
	jobs := []slurm.Job{
		job("7", "PENDING", "ampere,hopper", "2"), // this job, once requeued
		job("8", "PENDING", "hopper", "1-1"),
		job("9", "RUNNING", "hopper", "2"),
		job("10", "PENDING", "ampere", "1"),
		job("11", "PENDING", "hopper2", "1"),
		job("12", "PENDING", "hopper,ampere", "2-4"),
		job("13", "PENDING", "hopper", "1"), // fits, but after 12, which does not: no backfill assumed
	}
	ids := func(w []WaitingJob) string {
		var s []string
		for _, j := range w {
			s = append(s, j.ID+":"+strconv.Itoa(j.Nodes))
		}
		return strings.Join(s, " ")
	}
	for _, tc := range []struct {
		part string
		left int
		want string
	}{
		{"hopper", 0, "8:1 12:2 13:1"},  // the move takes every idle node
		{"hopper", -1, "8:1 12:2 13:1"}, // too few idle nodes for the move itself
		{"hopper", 1, "12:2 13:1"},      // job 8 fits on the node left
		{"hopper", 3, "13:1"},           // 8 and 12 take the three left (1+2), none is left for 13
		{"hopper", 4, ""},
		{"volta", 0, ""},
		{"ampere", 0, "10:1 12:2"},
	} {
		if got := ids(waitingFor(jobs, tc.part, "7", tc.left)); got != tc.want {
			t.Errorf("waitingFor(%s, left %d) = %q, want %q", tc.part, tc.left, got, tc.want)
		}
	}
	// A node count that cannot be read counts as one that does not fit.
	if got := ids(waitingFor([]slurm.Job{job("20", "PENDING", "hopper", "")}, "hopper", "7", 8)); got != "20:0" {
		t.Errorf("unknown node count: %q, want 20:0 (waiting)", got)
	}
}

// migrateQueue asks Slurm only what a move needs: idle nodes and the
// partition's waiting jobs; a candidate refused by its plan stays refused.
func TestMigrateQueue(t *testing.T) {
	canned := &slurm.Canned{Out: map[string]string{
		"scontrol -d show node -o": "NodeName=n1 State=IDLE Partitions=hopper Gres=gpu:h100:8 GresUsed=gpu:h100:0\n" +
			"NodeName=n2 State=IDLE Partitions=hopper Gres=gpu:h100:8 GresUsed=gpu:h100:0\n" +
			"NodeName=n5 State=IDLE Partitions=volta Gres=gpu:v100:8 GresUsed=gpu:v100:0\n" +
			"NodeName=n6 State=IDLE Partitions=volta Gres=gpu:v100:8 GresUsed=gpu:v100:0\n" +
			"NodeName=n7 State=IDLE Partitions=h200 Gres=gpu:h200:8 GresUsed=gpu:h200:0\n" +
			"NodeName=n8 State=ALLOCATED Partitions=b200 Gres=gpu:b200:8 GresUsed=gpu:b200:8\n",
		"scontrol show job -o": "JobId=7 JobName=me JobState=RUNNING Partition=ampere TimeLimit=01:00:00\n" +
			"JobId=8 JobName=small JobState=PENDING Partition=volta,ampere TimeLimit=00:10:00 NumNodes=1-1\n",
	}, Err: map[string]string{
		"sbatch --test-only --partition=b200 --nodes=2 --ntasks-per-node=8 --gpus-per-node=8 --exclusive --time=60 --wrap=true": "sbatch: Job 9 to start at " +
			time.Now().Add(90*time.Second).Format("2006-01-02T15:04:05") + " using 64 processors on nodes n[8-9] in partition b200\n",
	}}
	r := &runner{alloc: &slurm.Allocation{JobID: "7", Nodes: []string{"n3", "n4"}, TasksPerNode: 8, TimeLimit: time.Hour},
		env: &Deps{Slurm: slurm.Client{Run: canned.Run, RunStderr: canned.RunStderr, Location: time.Local}}}
	cands := []MigrateCandidate{{Partition: "hopper", StepTime: time.Second}, {Partition: "volta", StepTime: time.Second},
		{Partition: "h200", StepTime: time.Second}, {Partition: "bad", NoWhy: "no plan"}, {Partition: "b200", StepTime: time.Second}}
	r.migrateQueue(cands)
	if s := cands[4].StartIn; s < 80*time.Second || s > 91*time.Second {
		t.Errorf("b200 starts in %s, want about 90s (sbatch --test-only)", s)
	}
	want := []string{"", "", "1 idle node(s), the job needs 2, and sbatch --test-only failed", "no plan", ""}
	for i, c := range cands {
		if (want[i] == "") != (c.NoWhy == "") || !strings.Contains(c.NoWhy, want[i]) {
			t.Errorf("%s: NoWhy %q, want %q", c.Partition, c.NoWhy, want[i])
		}
		// volta's two idle nodes all go to the move: job 8 waits there (DecideMigrate weighs its delay).
		if w := c.Waiting; (c.Partition == "volta") != (len(w) == 1 && w[0] == WaitingJob{ID: "8", Nodes: 1}) {
			t.Errorf("%s: Waiting %+v, want job 8 (1 node) in volta alone", c.Partition, w)
		}
	}
}

// A move whose requeue would be refused would end the job: not tried.
func TestMigrateCannotRequeue(t *testing.T) {
	for _, tc := range []struct {
		job     slurm.Job
		restart int
		want    string
	}{
		{slurm.Job{Requeue: true, Record: slurm.Record{"BatchFlag": "1"}}, 0, ""},
		{slurm.Job{Requeue: true, Record: slurm.Record{"BatchFlag": "0"}}, 0, "interactive"},
		{slurm.Job{Requeue: false, Record: slurm.Record{"BatchFlag": "1"}}, 0, "Requeue=0"},
		{slurm.Job{Requeue: true, Record: slurm.Record{"BatchFlag": "1"}}, 9, "--max-requeue 10"},
	} {
		r := &runner{alloc: &slurm.Allocation{RestartCount: tc.restart}}
		r.facts.job = tc.job
		r.cfg.maxRequeue = 10
		got := r.migrateCannotRequeue()
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%+v restart %d: %q, want %q", tc.job, tc.restart, got, tc.want)
		}
	}
}
