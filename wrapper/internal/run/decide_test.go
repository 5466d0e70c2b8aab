package run

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/trainrun/trainrun/checkpoint"
	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
)

// base is a job that may be requeued, on its restart 1 of at most 10,
// requeued after failures until 3 in a row made no progress.
func base() Outcome {
	return Outcome{JobID: "42", RestartCount: 1, Requeue: true, MaxRequeue: 10, MaxFailures: 3, Command: "python", CkptDir: "/ck",
		HaveHistory: true, History: []checkpoint.Incarnation{
			{JobID: "42", Restart: 0, Cause: checkpoint.CausePreempted, LastCommitted: "step-100", Progress: 100},
			{JobID: "42", Restart: 1, Progress: -1}, // this run: started, no end yet
		}}
}

// crashed is a history whose runs before this one failed without progress.
func crashed(n int) []checkpoint.Incarnation {
	h := []checkpoint.Incarnation{{JobID: "42", Restart: 0, Cause: checkpoint.CausePreempted, LastCommitted: "step-100", Progress: 100}}
	for i := 1; i <= n; i++ {
		h = append(h, checkpoint.Incarnation{JobID: "42", Restart: i, Cause: checkpoint.CauseCrash, LastCommitted: "step-100", Progress: 100})
	}
	return append(h, checkpoint.Incarnation{JobID: "42", Restart: n + 1, Progress: -1})
}

func TestDecide(t *testing.T) {
	tests := []struct {
		name   string
		change func(o *Outcome)
		exit   int
		cause  checkpoint.Cause
		req    bool   // asks Slurm to requeue
		done   bool   // writes the finished marker
		msg    string // in Err
	}{
		{name: "finished", change: func(o *Outcome) { o.Latest = "step-900" }, exit: exitcode.OK, cause: checkpoint.CauseFinished, done: true},
		{name: "time limit, checkpointed", change: func(o *Outcome) { o.Reason, o.Latest, o.TagAtStop = TimeLimit, "step-200", "step-100" },
			exit: exitcode.Requeued, cause: checkpoint.CauseTimeLimit, req: true, msg: "time-limit: checkpointed"},
		{name: "time limit, no new checkpoint", change: func(o *Outcome) { o.Reason, o.Latest, o.TagAtStop = TimeLimit, "step-100", "step-100" },
			exit: exitcode.Checkpoint, cause: checkpoint.CauseTimeLimit, msg: "no new complete checkpoint is in /ck"},
		{name: "time limit, no checkpoint at all", change: func(o *Outcome) { o.Reason = TimeLimit },
			exit: exitcode.Checkpoint, cause: checkpoint.CauseTimeLimit, msg: "not requeueing"},
		// The request reached no trainer: they ended by themselves.
		{name: "time limit unheard: finished", change: func(o *Outcome) { o.Reason, o.Latest, o.TagAtStop, o.Unheard = TimeLimit, "step-100", "step-100", true },
			exit: exitcode.OK, cause: checkpoint.CauseFinished, done: true},
		{name: "signal unheard: finished", change: func(o *Outcome) { o.Reason, o.Unheard = Signal, true },
			exit: exitcode.OK, cause: checkpoint.CauseFinished, done: true},
		{name: "stop request unheard: finished", change: func(o *Outcome) { o.Reason, o.Unheard = Requested, true },
			exit: exitcode.OK, cause: checkpoint.CauseFinished, done: true},
		{name: "preempted: Slurm's SIGTERM is heard whatever the shims saw", change: func(o *Outcome) { o.Reason, o.Unheard = Preempted, true },
			exit: exitcode.Checkpoint, cause: checkpoint.CausePreempted, msg: "not requeueing"},
		{name: "unheard but failed", change: func(o *Outcome) { o.Reason, o.Unheard, o.Code = TimeLimit, true, 1 },
			exit: exitcode.Requeued, cause: checkpoint.CauseCrash, req: true},
		{name: "migrated, checkpointed", change: func(o *Outcome) { o.Reason, o.Latest, o.TagAtStop = Migrated, "step-200", "step-100" },
			exit: exitcode.Requeued, cause: checkpoint.CauseMigrated, req: true, msg: "migrate: checkpointed"},
		{name: "migration unheard: finished", change: func(o *Outcome) { o.Reason, o.Latest, o.TagAtStop, o.Unheard = Migrated, "step-100", "step-100", true },
			exit: exitcode.OK, cause: checkpoint.CauseFinished, done: true},
		{name: "Slurm's SIGTERM at the time limit", change: func(o *Outcome) { o.Reason, o.Latest = TermLimit, "step-200" },
			exit: exitcode.Requeued, cause: checkpoint.CauseTimeLimit, req: true},
		{name: "signal near the end is a time limit", change: func(o *Outcome) { o.Reason, o.Latest, o.EndNear = Signal, "step-200", true },
			exit: exitcode.Requeued, cause: checkpoint.CauseTimeLimit, req: true, msg: "signal: checkpointed"},
		{name: "signal far from the end is a preemption", change: func(o *Outcome) { o.Reason, o.Latest = Signal, "step-200" },
			exit: exitcode.Requeued, cause: checkpoint.CausePreempted, req: true},
		{name: "preempted, checkpointed", change: func(o *Outcome) { o.Reason, o.Latest = Preempted, "step-200" },
			exit: exitcode.Requeued, cause: checkpoint.CausePreempted, req: true, msg: "preempted: checkpointed"},
		{name: "preempted, job may not be requeued", change: func(o *Outcome) { o.Reason, o.Latest, o.Requeue = Preempted, "step-200", false },
			exit: exitcode.Stopped, cause: checkpoint.CausePreempted, msg: "Requeue=0: submit with --requeue"},
		{name: "preempted, requeue limit", change: func(o *Outcome) { o.Reason, o.Latest, o.RestartCount = Preempted, "step-200", 10 },
			exit: exitcode.RequeueLimit, cause: checkpoint.CausePreempted, msg: "restart 10 of --max-requeue 10"},
		{name: "cancelled", change: func(o *Outcome) { o.Reason, o.Code, o.Latest = Cancelled, 143, "step-200" },
			exit: exitcode.Stopped, cause: checkpoint.CauseCancelled, msg: "cancelled; the step was stopped (srun exit 143)"},
		{name: "stop requested", change: func(o *Outcome) { o.Reason, o.Latest = Requested, "step-200" },
			exit: exitcode.Stopped, cause: checkpoint.CauseCancelled, msg: "checkpointed (latest step-200) and stopped as requested"},
		{name: "stop requested, trainers failed", change: func(o *Outcome) { o.Reason, o.Code = Requested, 1 },
			exit: exitcode.Requeued, cause: checkpoint.CauseCrash, req: true, msg: "after the request-stop checkpoint request"},
		{name: "commit failed", change: func(o *Outcome) { o.Reason, o.CommitErr = TimeLimit, errors.New("manifest: disk full") },
			exit: exitcode.Checkpoint, cause: checkpoint.CauseCrash, msg: "manifest: disk full"},
		{name: "failure, requeued", change: func(o *Outcome) {
			o.Code, o.Latest, o.FirstFail = 1, "step-200", "rank 3 (node n1, GPU 3) failed first with exit 1"
		}, exit: exitcode.Requeued, cause: checkpoint.CauseCrash, req: true,
			msg: "rank 3 (node n1, GPU 3) failed first with exit 1; srun exited with 1 (failure 0 of at most 3 in a row without progress)"},
		{name: "failure without progress, counted", change: func(o *Outcome) { o.Code, o.Latest = 1, "step-100" },
			exit: exitcode.Requeued, cause: checkpoint.CauseCrash, req: true, msg: "(failure 1 of at most 3 in a row without progress)"},
		{name: "failure limit", change: func(o *Outcome) { o.Code, o.Latest, o.History, o.RestartCount = 1, "step-100", crashed(2), 3 },
			exit: exitcode.RequeueLimit, cause: checkpoint.CauseCrash, msg: "3 run(s) in a row failed without progress (latest checkpoint step-100): not requeueing (--max-failures 3)"},
		{name: "failure below the limit", change: func(o *Outcome) { o.Code, o.Latest, o.History, o.RestartCount = 1, "step-100", crashed(1), 2 },
			exit: exitcode.Requeued, cause: checkpoint.CauseCrash, req: true, msg: "(failure 2 of at most 3"},
		{name: "failure, --max-failures 0", change: func(o *Outcome) { o.Code, o.MaxFailures = 1, 0 },
			exit: exitcode.StepFailed, cause: checkpoint.CauseCrash, msg: "srun exited with 1"},
		{name: "failure, no history", change: func(o *Outcome) { o.Code, o.HaveHistory = 1, false },
			exit: exitcode.StepFailed, cause: checkpoint.CauseCrash},
		{name: "failure, history unreadable", change: func(o *Outcome) { o.Code, o.HistoryErr = 1, errors.New("EIO") },
			exit: exitcode.StepFailed, cause: checkpoint.CauseCrash},
		{name: "failure, job may not be requeued", change: func(o *Outcome) { o.Code, o.Requeue = 1, false },
			exit: exitcode.Stopped, cause: checkpoint.CauseCrash, msg: "may not be requeued"},
		{name: "command not found", change: func(o *Outcome) { o.Code, o.RankExits = 127, map[int]int{0: 127, 1: 127} },
			exit: exitcode.NotFound, cause: checkpoint.CauseCrash, msg: `the training command "python" was not found on the nodes`},
		{name: "command not found, no rank reported", change: func(o *Outcome) { o.Code = 127 },
			exit: exitcode.NotFound, cause: checkpoint.CauseCrash},
		{name: "127 from one rank only is a failure", change: func(o *Outcome) { o.Code, o.RankExits = 127, map[int]int{0: 127, 1: 0} },
			exit: exitcode.Requeued, cause: checkpoint.CauseCrash, req: true, msg: "srun exited with 127"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := base()
			tc.change(&o)
			d := Decide(o)
			if d.Exit != tc.exit || d.Cause != tc.cause || d.Requeue != tc.req || d.Finished != tc.done || !strings.Contains(d.Err, tc.msg) {
				t.Errorf("Decide = %+v\nwant exit %d cause %s requeue %v finished %v, error with %q", d, tc.exit, tc.cause, tc.req, tc.done, tc.msg)
			}
			if (d.Exit == exitcode.OK) != (d.Err == "") {
				t.Errorf("exit %d with error %q", d.Exit, d.Err)
			}
			if o.CommitErr == nil && d.Tag != o.Latest {
				t.Errorf("end event's tag %q, want the latest %q", d.Tag, o.Latest)
			}
		})
	}
}

// Decide reads only its argument: the history it is given stays as it was.
func TestDecideLeavesHistoryAlone(t *testing.T) {
	o := base()
	o.Code = 1
	before := append([]checkpoint.Incarnation(nil), o.History...)
	Decide(o)
	for i := range before {
		if !reflect.DeepEqual(o.History[i], before[i]) {
			t.Fatalf("history[%d] changed: %+v → %+v", i, before[i], o.History[i])
		}
	}
}

func TestDecideHang(t *testing.T) {
	hung := func(o *Outcome) {
		o.Reason, o.Code, o.Latest, o.MaxRestarts = Hang, 137, "step-200", 2
		o.HangWhat = "rank 3 (node n2, GPU 1) stopped at step 210"
	}
	for _, tc := range []struct {
		name    string
		change  func(o *Outcome)
		exit    int
		restart bool
		req     bool
		msg     string
	}{
		{"restart inside the allocation", func(o *Outcome) {}, exitcode.StepFailed, true, false, "restarting the step inside the allocation from step-200 (restart 1 of --max-restarts 2)"},
		{"second restart", func(o *Outcome) { o.Restarts = 1 }, exitcode.StepFailed, true, false, "restart 2 of --max-restarts 2"},
		{"restarts used: requeue", func(o *Outcome) { o.Restarts = 2 }, exitcode.Requeued, false, true, "2 restart(s) inside the allocation used"},
		{"no restarts allowed: requeue", func(o *Outcome) { o.MaxRestarts = 0 }, exitcode.Requeued, false, true, "hang: rank 3 (node n2, GPU 1)"},
		{"restarts used, no progress for too long", func(o *Outcome) { o.Restarts, o.History, o.Latest = 2, crashed(2), "step-100" }, exitcode.RequeueLimit, false, false, "not requeueing (--max-failures 3)"},
		{"restarts used, may not requeue", func(o *Outcome) { o.Restarts, o.Requeue = 2, false }, exitcode.Stopped, false, false, "Requeue=0"},
		{"near the job's end: requeue", func(o *Outcome) { o.EndNear = true }, exitcode.Requeued, false, true, "hang: rank 3"},
		{"killed with exit 0 still counts", func(o *Outcome) { o.Restarts, o.Code = 2, 0 }, exitcode.Requeued, false, true, "srun exited with 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := base()
			hung(&o)
			tc.change(&o)
			d := Decide(o)
			if d.Exit != tc.exit || d.Restart != tc.restart || d.Requeue != tc.req || d.Cause != checkpoint.CauseHang || !strings.Contains(d.Err, tc.msg) {
				t.Errorf("Decide = %+v; want exit %d restart %v requeue %v cause hang, Err containing %q", d, tc.exit, tc.restart, tc.req, tc.msg)
			}
			if d.Restart && d.Tag != "step-200" {
				t.Errorf("restart from %q, want step-200", d.Tag)
			}
		})
	}
}
