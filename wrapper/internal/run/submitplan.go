package run

import (
	"github.com/trainrun/trainrun/plan"
	"github.com/trainrun/trainrun/wrapper/internal/planjson"
)

// submittedPlan is --plan's default: the plan JSON TRAINRUN_PLAN names,
// which `trainrun submit` exports to the job it submits with the layout it
// chose, so that `trainrun run` inside uses exactly that layout. A plan for
// another number of GPUs than the allocation has (the job was resized, or
// TRAINRUN_PLAN is some other step's) is not used: the run says so and plans
// as without it, unless the trainer declares TRAINRUN_RESHARD=dp: then
// the layout for the allocation keeps the plan's tp×pp×cp and global
// batch (resizedPlan; a requeue resized the job, resize.go) and is
// returned as derived. "" when TRAINRUN_PLAN is unset or --plan is given
// (complete decides: Config.submittedPlan).
func (r *runner) submittedPlan(world int) (path string, derived *plan.Layout) {
	path = r.cfg.submittedPlan
	if path == "" {
		return "", nil
	}
	if p, ok := r.partitionPlan(); ok {
		path = p
	}
	if _, err := planjson.ReadSubmitted(path); err != nil { // own file in an own directory: another user must not choose the layout
		r.logf("TRAINRUN_PLAN is not used: %v", err)
		return "", nil
	}
	if _, err := ReadRunPlan(path, world); err != nil {
		if l := r.resizedPlan(path, world); l != nil {
			return path, l
		}
		r.logf("TRAINRUN_PLAN is not used: %v", err)
		return "", nil
	}
	r.logf("layout from TRAINRUN_PLAN=%s (trainrun submit's choice)", path)
	return path, nil
}
