package run

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/trainrun/trainrun/checkpoint"
	"github.com/trainrun/trainrun/internal/slurm"
	"github.com/trainrun/trainrun/plan"
	"github.com/trainrun/trainrun/topo"
	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
	"github.com/trainrun/trainrun/wrapper/internal/launch"
)

// spareRunner is a 3-node job, one task per node, batch node n1, with the
// flags args (e.g. --spare-nodes 1), resolved by complete; fake answers its
// Slurm queries.
func spareRunner(t *testing.T, log *bytes.Buffer, fake *slurm.Canned, args ...string) *runner {
	t.Helper()
	var o Options
	fs := testFlags(log)
	o.AddFlags(fs, func(string) string { return "" })
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	a := &slurm.Allocation{JobID: "77", Nodes: []string{"n1", "n2", "n3"}, NodeList: "n[1-3]", TasksPerNode: 1, BatchNode: "n1"}
	getenv := func(string) string { return "" }
	cfg, err := complete(o, givenFlags(fs), getenv, a, log)
	if err != nil {
		t.Fatal(err)
	}
	return &runner{cfg: cfg, env: &Deps{Stderr: log, Getenv: getenv, Slurm: slurm.Client{Run: fake.Run}}, alloc: a}
}

func TestSplitSpares(t *testing.T) {
	for _, c := range []struct {
		nodes       []string
		batch       string
		k           int
		work, spare string
	}{
		{[]string{"n1", "n2", "n3", "n4"}, "n1", 1, "n1,n2,n3", "n4"},
		{[]string{"n1", "n2", "n3", "n4"}, "n4", 1, "n1,n2,n4", "n3"}, // never the batch node
		{[]string{"n1", "n2", "n3", "n4"}, "n1", 2, "n1,n2", "n3,n4"},
	} {
		w, s := splitSpares(c.nodes, c.batch, c.k)
		if strings.Join(w, ",") != c.work || strings.Join(s, ",") != c.spare {
			t.Errorf("splitSpares(%v, %s, %d) = %v %v, want %s / %s", c.nodes, c.batch, c.k, w, s, c.work, c.spare)
		}
	}
}

// --spare-nodes K leaves the layout the other nodes, says which are spare,
// and warns once when the batch script lacks --no-kill.
func TestSetupSpares(t *testing.T) {
	for _, tc := range []struct {
		script string
		warn   bool
	}{{"#!/bin/bash\n#SBATCH --nodes=3 --no-kill\nexec trainrun run\n", false}, {"#!/bin/bash\n#SBATCH --nodes=3\nexec trainrun run\n", true}} {
		var log bytes.Buffer
		fake := &slurm.Canned{Out: map[string]string{"scontrol write batch_script 77 -": tc.script}}
		r := spareRunner(t, &log, fake, "--spare-nodes", "1")
		if err := r.setupSpares(context.Background()); err != nil {
			t.Fatal(err)
		}
		if strings.Join(r.alloc.Nodes, ",") != "n1,n2" || r.alloc.World() != 2 || strings.Join(r.sess.spare.spare, ",") != "n3" {
			t.Errorf("nodes %v (world %d), spare %v; want n1,n2 (2) and n3", r.alloc.Nodes, r.alloc.World(), r.sess.spare.spare)
		}
		if got := strings.Contains(log.String(), "has no '#SBATCH --no-kill'"); got != tc.warn {
			t.Errorf("script %q: warned %v, want %v:\n%s", tc.script, got, tc.warn, log.String())
		}
		if !strings.Contains(r.spareSummary(), "spare       n3 (idle") {
			t.Errorf("summary line %q does not name the spare", r.spareSummary())
		}
	}
}

// K must leave the layout a node: the error names the flag or the policy
// key, the value and the allocation.
func TestSetupSparesTooMany(t *testing.T) {
	var log bytes.Buffer
	r := spareRunner(t, &log, &slurm.Canned{}, "--spare-nodes", "3")
	err := r.setupSpares(context.Background())
	if err == nil || !strings.Contains(err.Error(), "--spare-nodes 3: the job holds 3 node(s) (n[1-3])") || exitcode.Of(err) != exitcode.Usage {
		t.Errorf("err %v (exit %d), want a usage error naming --spare-nodes 3 and n[1-3]", err, exitcode.Of(err))
	}
	conf := filepath.Join(t.TempDir(), "site.conf")
	if err := os.WriteFile(conf, []byte("# spare nodes\nSpareNodes=4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = spareRunner(t, &log, &slurm.Canned{}, "--policy", conf)
	if err := r.setupSpares(context.Background()); err == nil || !strings.Contains(err.Error(), "the policy's SpareNodes=4 (site ("+conf+":2))") {
		t.Errorf("policy: err %v, want one naming SpareNodes=4 and its line", err)
	}
}

// After a failure, a node scontrol calls DOWN or NOT_RESPONDING is lost,
// and only healthy spares count.
func TestSpareOutcome(t *testing.T) {
	for _, tc := range []struct {
		states string
		lost   []string
		spares int
	}{
		{"NodeName=n1 State=MIXED\nNodeName=n2 State=DOWN+NOT_RESPONDING\nNodeName=n3 State=IDLE\n", []string{"n2"}, 1},
		{"NodeName=n1 State=MIXED\nNodeName=n2 State=MIXED\nNodeName=n3 State=IDLE*\n", nil, 0},
	} {
		var log bytes.Buffer
		fake := &slurm.Canned{Out: map[string]string{"scontrol write batch_script 77 -": "#SBATCH --no-kill\n", "scontrol show node -o n1,n2,n3": tc.states}}
		r := spareRunner(t, &log, fake, "--spare-nodes", "1")
		if err := r.setupSpares(context.Background()); err != nil {
			t.Fatal(err)
		}
		o := Outcome{Code: 1}
		r.spareOutcome(&o)
		if got := LostNodes(o.FailedNodes); !slices.Equal(got, tc.lost) || o.SpareNodes != tc.spares {
			t.Errorf("states %q: lost %v, spares %d; want %v, %d\n%s", tc.states, got, o.SpareNodes, tc.lost, tc.spares, log.String())
		}
	}
}

// A lost node's ranks move to the spare: the same world size, the step's
// node list names the healthy nodes.
func TestReplaceLostNodes(t *testing.T) {
	var log bytes.Buffer
	fake := &slurm.Canned{Out: map[string]string{"scontrol write batch_script 77 -": "#SBATCH --no-kill\n"}}
	r := spareRunner(t, &log, fake, "--spare-nodes", "1")
	if err := r.setupSpares(context.Background()); err != nil {
		t.Fatal(err)
	}
	r.choice.Layout = plan.Layout{TP: 1, PP: 1, VPP: 1, CP: 1, EP: 1, DP: 2, MicroBatch: 1, GradAccum: 1}
	f := runFacts{cluster: topo.FlatCluster(r.sess.spare.all)}
	p, err := r.place(f, r.choice)
	if err != nil {
		t.Fatal(err)
	}
	r.placed = p
	if got := r.stepNodeList(); got != "n1,n2" {
		t.Errorf("step nodes %q before the loss, want n1,n2", got)
	}
	r.NoteFailedNode(checkpoint.FailedNode{Node: "n2", Cause: checkpoint.CauseNodeFail})
	gone, err := r.replaceLostNodes(f)
	if err != nil || !slices.Equal(gone, []string{"n2"}) {
		t.Fatalf("replaceLostNodes = %v %v", gone, err)
	}
	if len(r.placed.Slots) != 2 || r.stepNodeList() != "n1,n3" || len(r.sess.spare.spare) != 0 || !slices.Equal(r.sess.spare.lost, []string{"n2"}) {
		t.Errorf("after the loss: %d slots on %q, spare %v, lost %v; want 2 on n1,n3", len(r.placed.Slots), r.stepNodeList(), r.sess.spare.spare, r.sess.spare.lost)
	}
	if !strings.Contains(r.spareSummary(), "lost        n2 (failed") || strings.Contains(r.spareSummary(), "spare ") {
		t.Errorf("summary %q does not name the lost node", r.spareSummary())
	}
	// A second loss without a spare left keeps the placement (a hang's restart).
	r.NoteFailedNode(checkpoint.FailedNode{Node: "n3", Cause: checkpoint.CauseNodeFail})
	if gone, err := r.replaceLostNodes(f); err != nil || gone != nil || r.stepNodeList() != "n1,n3" {
		t.Errorf("no spare left: %v %v on %s", gone, err, r.stepNodeList())
	}
}

// A SIGTERM the shims see after a rank failed is srun's --kill-on-bad-exit,
// not Slurm's preemption or time limit: the job's state is not asked and
// no stop is marked; before any failure it is Slurm's word.
func TestShimTermAfterFailure(t *testing.T) {
	var log bytes.Buffer
	fake := &slurm.Canned{Out: map[string]string{"scontrol show job -o 77": "JobId=77 JobState=RUNNING Restarts=0"}}
	r := spareRunner(t, &log, fake)
	m := &monitor{r: r, exits: map[int]int{}, stateCh: make(chan string, 1)}
	m.onShim(launch.Event{Msg: launch.Msg{Kind: launch.Exit, Rank: 1, Code: 137}})
	m.onShim(launch.Event{Msg: launch.Msg{Kind: launch.Signal, Rank: 0, Signal: "TERM"}})
	if m.stepTerm || m.stateAsked || m.stopMarked {
		t.Errorf("after rank 1 failed, a SIGTERM was taken for Slurm's (stepTerm %v, state asked %v)", m.stepTerm, m.stateAsked)
	}
	m = &monitor{r: r, exits: map[int]int{}, stateCh: make(chan string, 1)}
	m.onShim(launch.Event{Msg: launch.Msg{Kind: launch.Signal, Rank: 0, Signal: "TERM"}})
	if !m.stepTerm || !m.stateAsked {
		t.Errorf("a SIGTERM before any failure was not taken for Slurm's")
	}
	<-m.stateCh
}

// A refused node-local save names --ckpt-local-dir and the failed rank's
// node, not the store's file system.
func TestLocalDiskMessage(t *testing.T) {
	var log bytes.Buffer
	r := faultRunner(t, &log)
	r.cfg.ckptLocal = "/dev/shm/trainrun-%j"
	r.setLastTag("step-10")
	msg := r.localDiskMessage(checkpoint.FailedSave{Tag: "step-20", Cause: checkpoint.DiskFull, Ranks: []int{3}, Local: true})
	for _, want := range []string{"checkpoint step-20 was not saved", "--ckpt-local-dir /dev/shm/trainrun-%j on n2 is full", "the latest committed checkpoint stays step-10"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
}
