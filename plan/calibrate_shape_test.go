package plan

import (
	"math"
	"testing"
)

// Measured shapes decide over the global fit: in one job, the planner's
// first layout (tp=1,pp=1) measured slow and a deep pipeline measured fast
// (a cluster the model does not know, as trainrun run --tune measures it).
// The calibrated plan ranks the fast shape first, predicts it at its
// measurement, and an unmeasured sibling of the slow layout (same degrees,
// another ZeRO stage or micro-batch) near the slow measurement, not at the
// global factor's guess.
func TestCalibrationMeasuredShapeDecides(t *testing.T) {
	m := Model{Name: "tiny", Layers: 4, Hidden: 256, Heads: 8, KVHeads: 8, FFN: 1024, Vocab: 1024}
	c := ClusterOf(mustGPU(t, "h100-sxm"), 4)
	j := Job{SeqLen: 128, GlobalBatch: 16, Precision: BF16}
	base := Search(m, j, c, SearchOptions{TopK: 40})
	if base.Plan == nil || base.Plan.Layout.TP != 1 || base.Plan.Layout.PP != 1 {
		t.Fatalf("the uncalibrated plan is not tp=1,pp=1: %+v", base.Plan)
	}
	var deep *Evaluation
	for i, e := range base.Alternatives {
		if e.Layout.PP == 4 && e.Layout.TP == 1 && deep == nil {
			deep = &base.Alternatives[i]
		}
	}
	if deep == nil {
		t.Fatal("no tp=1,pp=4 alternative")
	}
	in := InputsOf(m, j, c, "")
	obs := []Observation{
		{ID: "slow", Inputs: in, Layout: base.Plan.Layout, StepS: 0.48, Steps: 7, Spread: 0.02},
		{ID: "fast", Inputs: in, Layout: deep.Layout, StepS: 0.12, Steps: 7, Spread: 0.02},
	}
	r := Search(m, j, c, SearchOptions{TopK: 40, Calibration: obs})
	p := r.Plan
	if p == nil || layoutKey(p.Layout) != layoutKey(deep.Layout) {
		t.Fatalf("calibrated plan %v, want the measured fast %s", p, deep.Layout.Config())
	}
	if math.Abs(p.Time.Step/0.12-1) > 0.05 || p.Time.StepRange[0] > 0.12 || p.Time.StepRange[1] < 0.12 {
		t.Errorf("fast layout: step %.3f band %v, want 0.12 inside", p.Time.Step, p.Time.StepRange)
	}
	for _, e := range r.Alternatives {
		if shapeKey(e.Layout) != shapeKey(base.Plan.Layout) || layoutKey(e.Layout) == layoutKey(base.Plan.Layout) {
			continue
		}
		if e.Calibration == nil || e.Calibration.MeasuredSibling == "" || e.Time.Step < 0.2 {
			t.Errorf("%s, a sibling of the slow measured layout: step %.3f, calibration %+v: want it scaled from the 0.48 s measurement", e.Layout.Config(), e.Time.Step, e.Calibration)
		}
	}
}
