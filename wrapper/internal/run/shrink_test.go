package run

import (
	"strings"
	"testing"

	"github.com/trainrun/trainrun/checkpoint"
	"github.com/trainrun/trainrun/internal/slurm"
	"github.com/trainrun/trainrun/plan"
)

func TestShrinkLayout(t *testing.T) {
	l := plan.Layout{TP: 2, PP: 2, CP: 1, DP: 3, MicroBatch: 2, GradAccum: 4} // global 24 on 12 GPUs
	n, why, ok := shrinkLayout(l, 8)
	if !ok || n.DP != 2 || n.GradAccum != 6 || n.TP != 2 || n.PP != 2 || n.MicroBatch != 2 {
		t.Fatalf("12 → 8 GPUs: %+v (%s)", n, why)
	}
	if _, why, ok := shrinkLayout(l, 6); ok || !strings.Contains(why, "not a multiple of tp×pp×cp = 4") {
		t.Errorf("6 GPUs: ok %v, %s", ok, why)
	}
	if _, why, ok := shrinkLayout(plan.Layout{TP: 1, PP: 1, CP: 1, DP: 3, MicroBatch: 1, GradAccum: 1}, 2); ok || !strings.Contains(why, "global batch 3") {
		t.Errorf("global 3 on dp 2: ok %v, %s", ok, why)
	}
}

// A step that lost more nodes than there are spares restarts inside the
// allocation when it may shrink, else it is requeued as before.
func TestDecideShrink(t *testing.T) {
	o := Outcome{Code: 1, MaxRestarts: 2, MaxFailures: 3, Requeue: true, MaxRequeue: 5, HaveHistory: true,
		FailedNodes: []checkpoint.FailedNode{{Node: "n2", Cause: checkpoint.CauseNodeFail}}}
	if d := Decide(o); d.Restart || !d.Requeue || !strings.Contains(d.Err, "requeueing without them") {
		t.Fatalf("without a spare or shrink: %+v", d)
	}
	o.CanShrink, o.ShrinkTo = true, "2 node(s), dp 2 (was 3), grad accum 3 (was 2)"
	d := Decide(o)
	if !d.Restart || d.Requeue || !strings.Contains(d.Err, "shrunk to 2 node(s), dp 2 (was 3)") {
		t.Errorf("with shrink: %+v", d)
	}
}

// The planner checks the shrunk layout's memory when the run knows its
// model: llama2-7b with ZeRO-3 over 8 H100s fits, on 1 it does not; a
// pinned layout without a model is not judged.
func TestShrinkFits(t *testing.T) {
	r := &runner{alloc: &slurm.Allocation{TasksPerNode: 8}}
	r.cfg.plan.Model, r.cfg.plan.SeqLen, r.cfg.plan.GlobalBatch, r.cfg.plan.GPU = "llama2-7b", 4096, 64, "h100-sxm"
	l := plan.Layout{TP: 1, PP: 1, CP: 1, EP: 1, DP: 8, MicroBatch: 1, GradAccum: 8, Zero: 3, Recompute: "full"}
	if why, ok := r.shrinkFits(l, 8); !ok {
		t.Fatalf("dp 8: %s", why)
	}
	l.DP, l.GradAccum = 1, 64
	if why, ok := r.shrinkFits(l, 1); ok || !strings.Contains(why, "GiB per GPU") {
		t.Errorf("dp 1: ok %v, %s", ok, why)
	}
	if _, ok := (&runner{alloc: &slurm.Allocation{TasksPerNode: 8}}).shrinkFits(l, 1); !ok {
		t.Error("without a model the shrunk layout was judged")
	}
}
