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
