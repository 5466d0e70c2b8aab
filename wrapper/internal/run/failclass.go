package run

import (
	"cmp"
	"fmt"
	"strings"

	"github.com/trainrun/trainrun/checkpoint"
	"github.com/trainrun/trainrun/internal/failclass"
	"github.com/trainrun/trainrun/internal/units"
	"github.com/trainrun/trainrun/plan"
	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
)

// Failure classes and restarts by class (issue 31): each shim names its
// failed rank's class (internal/failclass, from the exit, the trainer's
// last stderr lines and the cgroup's OOM kills); classifyStep makes the
// step's from them and the lost nodes, and the policy's RestartOn= says
// what follows: restart, exclude (restart without the failing rank's node)
// or stop (decideStopClass).

// failPolicy is the policy's RestartOn=, its default without a policy.
func (c *Config) failPolicy() failclass.Policy {
	if c.restartOn != nil {
		return c.restartOn
	}
	p, _ := failclass.ParsePolicy("")
	return p
}

// classifyStep sets the failed step's class, the rank it comes from and
// the policy's action on o, logs them, and keeps the node of a class that
// excludes out of the next step (a spare takes its place). A hung step is
// the hang's (hang.go), not classified here.
func (r *runner) classifyStep(o *Outcome, res stepResult) {
	r.sess.failClass = failclass.Result{}
	if !o.Failed() || o.Reason == Hang {
		return
	}
	lost := ""
	for _, f := range o.FailedNodes {
		if f.Cause == checkpoint.CauseNodeFail {
			lost = f.Node
			break
		}
	}
	var first *failclass.Rank
	if len(res.Fails) > 0 {
		first = &res.Fails[0]
	}
	cls, who := failclass.Step(first, res.Fails[min(1, len(res.Fails)):], lost)
	if cls.Class == "" {
		cls = failclass.Result{Class: failclass.Unknown, Evidence: fmt.Sprintf("srun exited with %d and no rank reported a failure", o.Code)}
	}
	o.Class, o.ClassAction = cls, r.cfg.failPolicy().Of(cls.Class)
	stopped := ""
	if o.Reason != None && o.ClassAction != failclass.Restart {
		// The step was being stopped (preemption, time limit, a signal):
		// its failure may be the stop's, so it neither stops the job nor
		// excludes a node.
		o.ClassAction, stopped = failclass.Restart, fmt.Sprintf(" (the step failed during the %s stop: handled as any failure)", o.Reason)
	}
	var slot *rankSlot
	if who >= 0 && who < len(r.placed.Slots) {
		slot = &r.placed.Slots[who]
		o.ClassWho = fmt.Sprintf("rank %d (node %s, GPU %d)", slot.Rank, slot.Node, slot.GPU)
	}
	action := string(o.ClassAction)
	if cls.Echo && o.ClassAction == failclass.Exclude {
		action = "restart (an echo of a peer's failure excludes no node)"
	}
	r.logf("failure class %s from %s: %s; RestartOn: %s%s", cls.Class, cmp.Or(o.ClassWho, "the step"), cls.Evidence, action, stopped)
	if o.ClassAction == failclass.Exclude && !cls.Echo && slot != nil {
		r.NoteFailedNode(checkpoint.FailedNode{Node: slot.Node, Cause: checkpoint.CauseNodeFault,
			Detail: fmt.Sprintf("rank %d (GPU %d), failure class %s: %s", slot.Rank, slot.GPU, cls.Class, cls.Evidence)})
		o.FailedNodes = r.failedNodes()
	}
	if o.ClassAction == failclass.Stop && cls.Class == failclass.OOM {
		o.OOMAdvice = r.oomAdvice()
	}
	r.sess.failClass = cls
}

// decideStopClass: the policy stops on the failed step's class (by
// default the trainer's own error and an OOM, which recur from the same
// checkpoint on any node): no restart, no requeue, whatever budget is
// left. d is decideFailure's decision so far.
func decideStopClass(d Decision, o Outcome) Decision {
	from := cmp.Or(o.ClassWho, "the step")
	switch o.Class.Class {
	case failclass.User:
		d.Exit = exitcode.UserError
		d.Err = fmt.Sprintf("%s; stopped: %s failed with the trainer's own error (see its traceback above), which recurs from %s on any node: not restarting or requeueing; fix it and resubmit (the policy's RestartOn=user=restart retries such failures)",
			d.Err, from, cmp.Or(o.Latest, "the start"))
	case failclass.OOM:
		d.Exit = exitcode.NoFit
		d.Err = fmt.Sprintf("%s; stopped: %s ran out of memory, which recurs with the same layout: not restarting or requeueing; %s (RestartOn=oom=restart retries such failures)",
			d.Err, from, cmp.Or(o.OOMAdvice, "run with a smaller micro-batch (--fix mbs=N) or more recompute (--fix recompute=full); trainrun plan shows the layouts the planner expects to fit"))
	default:
		d.Err = fmt.Sprintf("%s; stopped: the policy's RestartOn=%s=stop: not restarting or requeueing", d.Err, o.Class.Class)
	}
	return d
}

// oomAdvice asks the planner what would fit after an OOM: the run's layout
// with half the micro-batch (twice the accumulation, the same global
// batch), with full recompute, and with both, each with its predicted
// memory per GPU; "" when the run knows no model to plan.
func (r *runner) oomAdvice() string {
	m, j, ok, err := r.planModel()
	if err != nil || !ok {
		return ""
	}
	name := cmp.Or(r.cfg.plan.GPU, r.probedGPUName(), r.cfg.policyGPU.Value, "h100-sxm")
	g, err := plan.LookupGPU(name)
	if err != nil {
		return ""
	}
	cl := plan.ClusterOf(g, r.alloc.World())
	cl.GPUsPerNode = r.alloc.TasksPerNode
	return OOMAdvice(m, j, cl, r.choice.Layout)
}

// OOMAdvice is the planner's advice after an OOM with layout l: each of
// half the micro-batch, full recompute and both, with the memory per GPU
// the planner predicts, the first that fits named as what to run.
func OOMAdvice(m plan.Model, j plan.Job, cl plan.Cluster, l plan.Layout) string {
	now := plan.Evaluate(m, j, cl, l)
	type cand struct {
		pins string
		l    plan.Layout
	}
	var cands []cand
	if l.MicroBatch > 1 {
		h := l
		h.MicroBatch, h.GradAccum = l.MicroBatch/2, l.GradAccum*2
		cands = append(cands, cand{fmt.Sprintf("mbs=%d", h.MicroBatch), h})
	}
	if l.Recompute != "full" {
		f := l
		f.Recompute, f.RecomputeLayers = "full", 0
		cands = append(cands, cand{"recompute=full", f})
		if l.MicroBatch > 1 {
			f.MicroBatch, f.GradAccum = l.MicroBatch/2, l.GradAccum*2
			cands = append(cands, cand{fmt.Sprintf("mbs=%d,recompute=full", f.MicroBatch), f})
		}
	}
	parts := []string{fmt.Sprintf("the planner predicts %s per GPU for the run's layout (mbs=%d, recompute=%s)", units.Bytes(int64(now.Memory.PerGPU)), l.MicroBatch, cmp.Or(l.Recompute, "none"))}
	best := ""
	for _, c := range cands {
		e := plan.Evaluate(m, j, cl, c.l)
		if e.Reason != "" && e.Memory.PerGPU == 0 {
			continue
		}
		fit := "does not fit"
		if e.Memory.Fits {
			fit = "fits"
			if best == "" {
				best = c.pins
			}
		}
		parts = append(parts, fmt.Sprintf("%s: %s (%s)", c.pins, units.Bytes(int64(e.Memory.PerGPU)), fit))
	}
	advice := strings.Join(parts, "; ")
	if best != "" {
		return advice + fmt.Sprintf("; run with --fix %s (or let the planner choose: trainrun plan)", best)
	}
	return advice + "; none of these fits: more GPUs, ZeRO/offload or a smaller model (trainrun plan shows what would)"
}
