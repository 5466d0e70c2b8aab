package run

import (
	"fmt"
	"io/fs"
	"strings"
	"syscall"
	"testing"

	"github.com/trainrun/trainrun/checkpoint"
	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
)

// A stop whose checkpoint the disk refused is requeued from the previous
// latest, never failed: on the trainer side (SaveFailed) and on the commit's.
func TestDecideDiskFaultRequeues(t *testing.T) {
	enospc := fmt.Errorf("commit step-120: write manifest: %w", &fs.PathError{Op: "write", Path: "/ck/x", Err: syscall.ENOSPC})
	for name, set := range map[string]func(*Outcome){
		"trainer save failed": func(o *Outcome) { o.SaveFailed = "checkpoint step-120 was not saved: /ck is full" },
		"commit failed":       func(o *Outcome) { o.CommitErr = enospc },
	} {
		t.Run(name, func(t *testing.T) {
			o := base()
			o.Reason, o.TagAtStop, o.Latest = TimeLimit, "step-100", "step-100"
			set(&o)
			d := Decide(o)
			if !d.Requeue || d.Exit != exitcode.Requeued || d.Cause != checkpoint.CauseDisk || d.Tag != "step-100" {
				t.Fatalf("Decide = %+v, want a requeue with cause disk from step-100", d)
			}
			if !strings.Contains(d.Err, "could not be saved") || !strings.Contains(d.Err, "step-100") {
				t.Errorf("message %q does not say the save failed and what stays", d.Err)
			}
			// Runs in a row that got no further stop the requeues.
			o.History = crashed(3)
			if d := Decide(o); d.Requeue || d.Exit != exitcode.RequeueLimit {
				t.Errorf("after 3 failures without progress Decide = %+v, want requeue-limit", d)
			}
		})
	}
	// A save that failed but a newer one committed for the stop: the usual requeue.
	o := base()
	o.Reason, o.TagAtStop, o.Latest, o.SaveFailed = TimeLimit, "step-100", "step-120", "an earlier save failed"
	if d := Decide(o); !d.Requeue || d.Cause != checkpoint.CauseTimeLimit {
		t.Errorf("Decide with a newer checkpoint = %+v, want a time-limit requeue", d)
	}
	// Without the disk's word, no checkpoint at the stop stays an error.
	o.Latest, o.SaveFailed = "step-100", ""
	if d := Decide(o); d.Requeue || d.Exit != exitcode.Checkpoint {
		t.Errorf("Decide without a checkpoint = %+v, want exit checkpoint", d)
	}
	// A cancelled run is not requeued for a disk fault.
	o.Reason, o.CommitErr = Cancelled, enospc
	if d := Decide(o); d.Requeue {
		t.Errorf("cancelled with a disk fault requeued: %+v", d)
	}
}

func TestDecideFailedNodeCause(t *testing.T) {
	o := base()
	o.Code = 1
	o.FailedNodes = []checkpoint.FailedNode{{Node: "n2", Cause: checkpoint.CauseNodeFail}}
	if d := Decide(o); d.Cause != checkpoint.CauseNodeFail || !d.Requeue || !strings.HasPrefix(d.Err, "node n2 was lost") {
		t.Errorf("lost node: %+v, want cause node-fail, a requeue, and the node named first", d)
	}
	o.FailedNodes = []checkpoint.FailedNode{{Node: "n2", Cause: checkpoint.CauseHang}}
	if d := Decide(o); d.Cause != checkpoint.CauseHang {
		t.Errorf("hang: %+v", d)
	}
	o.FailedNodes = []checkpoint.FailedNode{{Node: "n2", Cause: checkpoint.CauseCrash}}
	if d := Decide(o); d.Cause != checkpoint.CauseCrash {
		t.Errorf("crash: %+v", d)
	}
}

// A failed step restarts inside the allocation while --max-restarts allows
// and the end is not near; a lost node only when a spare node can take its
// place; a command not found never; and a restart that made no progress
// counts toward --max-failures like a requeue, so a crash loop stops.
func TestDecideRestartAfterFailure(t *testing.T) {
	crash := func(o *Outcome) {
		o.Code, o.Latest, o.MaxRestarts = 1, "step-200", 2
		o.FirstFail = "rank 1 (node n2, GPU 0) failed first with exit 1"
		o.FailedNodes = []checkpoint.FailedNode{{Node: "n2", Cause: checkpoint.CauseCrash}}
	}
	lost := func(o *Outcome) {
		o.FailedNodes = []checkpoint.FailedNode{{Node: "n3", Cause: checkpoint.CauseNodeFail, Detail: "ranks 4,5 never reported an exit"}}
	}
	for _, tc := range []struct {
		name    string
		change  func(o *Outcome)
		exit    int
		cause   checkpoint.Cause
		restart bool
		req     bool
		msg     string
	}{
		{"crash restarts inside the allocation", func(o *Outcome) {}, exitcode.StepFailed, checkpoint.CauseCrash, true, false,
			"failed first with exit 1; srun exited with 1 (failure 0 of at most 3 in a row without progress); restarting the step inside the allocation from step-200 (restart 1 of --max-restarts 2)"},
		{"second restart", func(o *Outcome) { o.Restarts = 1 }, exitcode.StepFailed, checkpoint.CauseCrash, true, false, "restart 2 of --max-restarts 2"},
		{"restarts used: requeue", func(o *Outcome) { o.Restarts = 2 }, exitcode.Requeued, checkpoint.CauseCrash, false, true, "2 restart(s) inside the allocation used (--max-restarts 2)"},
		{"--max-restarts 0: requeue as before", func(o *Outcome) { o.MaxRestarts = 0 }, exitcode.Requeued, checkpoint.CauseCrash, false, true, "(failure 0 of at most 3 in a row without progress)"},
		{"near the end: requeue", func(o *Outcome) { o.EndNear = true }, exitcode.Requeued, checkpoint.CauseCrash, false, true, "the job's end is near"},
		{"crash loop stops", func(o *Outcome) { o.Latest, o.History = "step-100", crashed(2) }, exitcode.RequeueLimit, checkpoint.CauseCrash, false, false, "3 run(s) in a row failed without progress"},
		{"restart without progress counts", func(o *Outcome) { o.Latest, o.History = "step-100", crashed(1) }, exitcode.StepFailed, checkpoint.CauseCrash, true, false, "(failure 2 of at most 3"},
		{"command not found never restarts", func(o *Outcome) { o.Code, o.RankExits = 127, map[int]int{0: 127, 1: 127} }, exitcode.NotFound, checkpoint.CauseCrash, false, false, "was not found"},
		{"--max-failures 0: stop", func(o *Outcome) { o.MaxFailures = 0 }, exitcode.StepFailed, checkpoint.CauseCrash, false, false, "srun exited with 1"},
		{"lost node, a spare: restart on the healthy nodes", func(o *Outcome) { lost(o); o.SpareNodes = 1 }, exitcode.StepFailed, checkpoint.CauseNodeFail, true, false,
			"node n3 was lost (ranks 4,5 never reported an exit); rank 1"},
		{"lost node, the spare is named", func(o *Outcome) { lost(o); o.SpareNodes = 1 }, exitcode.StepFailed, checkpoint.CauseNodeFail, true, false,
			"restarting the step inside the allocation on the healthy nodes (1 spare node(s) take the place of n3) from step-200"},
		{"lost node, no spare: requeue without it", func(o *Outcome) { lost(o) }, exitcode.Requeued, checkpoint.CauseNodeFail, false, true,
			"1 node(s) lost and 0 spare node(s) to take their place (--spare-nodes): requeueing without them"},
		{"two lost nodes, one spare: requeue", func(o *Outcome) {
			lost(o)
			o.FailedNodes = append(o.FailedNodes, checkpoint.FailedNode{Node: "n4", Cause: checkpoint.CauseNodeFail}, checkpoint.FailedNode{Node: "n4", Cause: checkpoint.CauseNodeFail})
			o.SpareNodes = 1
		}, exitcode.Requeued, checkpoint.CauseNodeFail, false, true, "2 node(s) lost and 1 spare"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := base()
			crash(&o)
			tc.change(&o)
			d := Decide(o)
			if d.Exit != tc.exit || d.Cause != tc.cause || d.Restart != tc.restart || d.Requeue != tc.req || !strings.Contains(d.Err, tc.msg) {
				t.Errorf("Decide = %+v\nwant exit %d cause %s restart %v requeue %v, Err containing %q", d, tc.exit, tc.cause, tc.restart, tc.req, tc.msg)
			}
			if d.Restart && d.Tag != o.Latest {
				t.Errorf("restart from %q, want the latest %q", d.Tag, o.Latest)
			}
		})
	}
}

func TestLostNodes(t *testing.T) {
	got := LostNodes([]checkpoint.FailedNode{{Node: "n2", Cause: checkpoint.CauseCrash}, {Node: "n3", Cause: checkpoint.CauseNodeFail},
		{Node: "n1", Cause: checkpoint.CauseNodeFail}, {Node: "n3", Cause: checkpoint.CauseNodeFail}})
	if strings.Join(got, ",") != "n3,n1" {
		t.Errorf("LostNodes = %v, want n3,n1", got)
	}
}
