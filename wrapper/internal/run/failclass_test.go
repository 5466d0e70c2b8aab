package run

import (
	"bytes"
	"strings"
	"testing"

	"github.com/trainrun/trainrun/checkpoint"
	"github.com/trainrun/trainrun/internal/failclass"
	"github.com/trainrun/trainrun/plan"
	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
)

// Restarts by class (issue 31): the policy's action for the failed step's
// class decides before the failure budget does.
func TestDecideByFailureClass(t *testing.T) {
	pol, _ := failclass.ParsePolicy("")
	failed := func(class failclass.Class, evidence string, fn ...checkpoint.FailedNode) Outcome {
		o := base()
		o.Code, o.Latest, o.MaxRestarts = 1, "step-200", 2
		o.FirstFail = "rank 1 (node n2, GPU 0) failed first with exit 1"
		o.FailedNodes = append([]checkpoint.FailedNode{{Node: "n2", Cause: checkpoint.CauseCrash}}, fn...)
		o.Class, o.ClassWho, o.ClassAction = failclass.Result{Class: class, Evidence: evidence}, "rank 1 (node n2, GPU 0)", pol.Of(class)
		return o
	}
	fault := checkpoint.FailedNode{Node: "n2", Cause: checkpoint.CauseNodeFault, Detail: "failure class nccl"}
	for _, tc := range []struct {
		name    string
		o       Outcome
		spare   int
		exit    int
		restart bool
		requeue bool
		msg     []string
	}{
		{"user stops at once, restarts and requeues left", failed(failclass.User, "ValueError: warmup 0"), 1, exitcode.UserError, false, false,
			[]string{"failure class user: ValueError: warmup 0", "stopped: rank 1 (node n2, GPU 0) failed with the trainer's own error", "RestartOn=user=restart"}},
		{"oom stops with the advice", func() Outcome {
			o := failed(failclass.OOM, "torch.OutOfMemoryError: CUDA out of memory.")
			o.OOMAdvice = "run with --fix mbs=2"
			return o
		}(), 1, exitcode.NoFit, false, false, []string{"ran out of memory", "run with --fix mbs=2"}},
		{"oom without a model: generic advice", failed(failclass.OOM, "CUDA out of memory"), 0, exitcode.NoFit, false, false, []string{"--fix mbs=N", "recompute=full"}},
		{"nccl with a spare restarts on it", failed(failclass.NCCL, "Watchdog caught collective operation timeout", fault), 1, exitcode.StepFailed, true, false,
			[]string{"failure class nccl", "1 spare node(s) take the place of n2"}},
		{"nccl without a spare requeues without the node", failed(failclass.NCCL, "Watchdog caught collective operation timeout", fault), 0, exitcode.Requeued, false, true,
			[]string{"requeueing without them"}},
		{"signal restarts in place", failed(failclass.Signal, "exit 137: killed by signal 9"), 0, exitcode.StepFailed, true, false, []string{"restarting the step inside the allocation from step-200"}},
		{"unknown restarts", failed(failclass.Unknown, "exit 1"), 0, exitcode.StepFailed, true, false, []string{"failure class unknown"}},
		{"a class the site stops on", func() Outcome {
			o := failed(failclass.Signal, "exit 143")
			o.ClassAction = failclass.Stop
			return o
		}(), 0, exitcode.StepFailed, false, false, []string{"RestartOn=signal=stop"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.SpareNodes = tc.spare
			d := Decide(tc.o)
			if d.Exit != tc.exit || d.Restart != tc.restart || d.Requeue != tc.requeue {
				t.Errorf("Decide = %+v\nwant exit %d restart %v requeue %v", d, tc.exit, tc.restart, tc.requeue)
			}
			for _, m := range tc.msg {
				if !strings.Contains(d.Err, m) {
					t.Errorf("Err %q lacks %q", d.Err, m)
				}
			}
			if !strings.Contains(d.Record, "failure class "+string(tc.o.Class.Class)) {
				t.Errorf("the history's record %q lacks the class", d.Record)
			}
		})
	}
}

// A node its failure class excludes is a node the step may not use again,
// and the requeued job keeps it out.
func TestNodeFaultExcludes(t *testing.T) {
	f := checkpoint.FailedNode{Node: "n2", Cause: checkpoint.CauseNodeFault, Detail: "rank 1 (GPU 0), failure class hardware: NVRM: Xid 79"}
	if got := LostNodes([]checkpoint.FailedNode{f}); len(got) != 1 || got[0] != "n2" {
		t.Errorf("LostNodes = %v, want [n2]", got)
	}
	v := JudgeNodes([]checkpoint.Incarnation{{JobID: "1", FailedNodes: []checkpoint.FailedNode{f}}})
	if len(v) != 1 || !v[0].Exclude || !strings.Contains(v[0].Why, "Xid") {
		t.Errorf("JudgeNodes = %+v, want n2 excluded naming the evidence", v)
	}
}

// The planner's advice after an OOM names the smaller layouts with their
// predicted memory, and which fits.
func TestOOMAdvice(t *testing.T) {
	m, err := plan.LookupModel("llama2-7b")
	if err != nil {
		t.Skip(err)
	}
	g, _ := plan.LookupGPU("h100-sxm")
	cl := plan.ClusterOf(g, 8)
	j := plan.Job{GlobalBatch: 64, SeqLen: 4096, Precision: plan.BF16}
	l := plan.Layout{TP: 1, PP: 1, CP: 1, EP: 1, VPP: 1, DP: 8, MicroBatch: 4, GradAccum: 2, Recompute: "none", Zero: 1, Offload: "none"}
	got := OOMAdvice(m, j, cl, l)
	for _, want := range []string{"for the run's layout (mbs=4, recompute=none)", "mbs=2:", "recompute=full:", "mbs=2,recompute=full:"} {
		if !strings.Contains(got, want) {
			t.Errorf("advice %q lacks %q", got, want)
		}
	}
	if !strings.Contains(got, "run with --fix") && !strings.Contains(got, "none of these fits") {
		t.Errorf("advice %q says neither what to run nor that nothing fits", got)
	}
	t.Log(got)
}

// classifyStep: the step's class from the ranks' reports; exclude records
// the rank's node (node-fault), an echo does not; a failure during a stop
// (preemption, time limit) neither stops the job nor excludes a node.
func TestClassifyStep(t *testing.T) {
	var log bytes.Buffer
	fails := func(rs ...failclass.Rank) stepResult { return stepResult{Fails: rs} }
	nccl := failclass.Rank{Rank: 3, Result: failclass.Result{Class: failclass.NCCL, Evidence: "Watchdog caught collective operation timeout"}}
	echo := failclass.Rank{Rank: 0, Result: failclass.FromWire("nccl", "RuntimeError: Connection closed by peer")}
	user := failclass.Rank{Rank: 2, Result: failclass.Result{Class: failclass.User, Evidence: "ValueError: x"}}
	for _, tc := range []struct {
		name   string
		reason StopReason
		res    stepResult
		class  failclass.Class
		action failclass.Action
		fault  string // the node recorded as node-fault ("" none)
	}{
		{"nccl excludes its node", None, fails(nccl, echo), failclass.NCCL, failclass.Exclude, "n2"},
		{"an echo first: the user error behind it stops", None, fails(echo, user), failclass.User, failclass.Stop, ""},
		{"echoes only: restart, no node", None, fails(echo), failclass.NCCL, failclass.Exclude, ""},
		{"during a preemption: any failure", Preempted, fails(user), failclass.User, failclass.Restart, ""},
		{"no report: unknown", None, stepResult{}, failclass.Unknown, failclass.Restart, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log.Reset()
			r := faultRunner(t, &log)
			o := Outcome{Code: 1, Reason: tc.reason}
			r.classifyStep(&o, tc.res)
			if o.Class.Class != tc.class || o.ClassAction != tc.action {
				t.Errorf("class %q action %q, want %q %q; log:\n%s", o.Class.Class, o.ClassAction, tc.class, tc.action, log.String())
			}
			var fault string
			for _, f := range r.failedNodes() {
				if f.Cause == checkpoint.CauseNodeFault {
					fault = f.Node
				}
			}
			if fault != tc.fault || r.sess.failClass.Class != tc.class {
				t.Errorf("node-fault %q (want %q), session class %q", fault, tc.fault, r.sess.failClass.Class)
			}
			if !strings.Contains(log.String(), "failure class "+string(tc.class)) {
				t.Errorf("log lacks the class:\n%s", log.String())
			}
		})
	}
}
