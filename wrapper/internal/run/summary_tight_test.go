package run

import (
	"strings"
	"testing"
	"time"

	"github.com/trainrun/trainrun/internal/slurm"
	"github.com/trainrun/trainrun/plan"
)

// Issue 30: the start summary says when the plan is tight, and the time
// limit's end has its zone.
func TestSummaryTightAndZone(t *testing.T) {
	m, _ := plan.LookupModel("llama3-8b")
	c := plan.ClusterOf(mustLookupGPU(t, "h100-sxm"), 8)
	c.MemoryMargin = 0.5 // every plan is tight
	j := plan.Job{SeqLen: 4096, GlobalBatch: 64}
	e := plan.Evaluate(m, j, c, plan.Layout{TP: 1, PP: 1, CP: 1, EP: 1, DP: 8, MicroBatch: 1, Zero: 3, Recompute: "none"})
	if !e.Tight {
		t.Fatal("not tight at a 50 % margin")
	}
	end := time.Date(2026, 12, 4, 19, 12, 53, 0, time.UTC)
	r := &runner{alloc: &slurm.Allocation{JobID: "7", Nodes: []string{"n1"}, TasksPerNode: 8, EndTime: end, TimeLimit: time.Hour},
		choice: choice{Layout: e.Layout, Eval: &e}, env: &Deps{}}
	s := r.summary()
	if !strings.Contains(s, "ends 2026-12-04 19:12:53 UTC") || !strings.Contains(s, "  warning     memory is tight:") {
		t.Errorf("summary:\n%s", s)
	}
	e.Tight = false
	if s := r.summary(); strings.Contains(s, "memory is tight") {
		t.Errorf("a plan with headroom warned:\n%s", s)
	}
}

func mustLookupGPU(t *testing.T, name string) plan.GPU {
	t.Helper()
	g, err := plan.LookupGPU(name)
	if err != nil {
		t.Fatal(err)
	}
	return g
}
