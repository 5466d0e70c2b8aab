package run

import "github.com/trainrun/trainrun/wrapper/internal/planjson"

// submittedPlan is --plan's default: the plan JSON TRAINRUN_PLAN names,
// which `trainrun submit` exports to the job it submits with the layout it
// chose, so that `trainrun run` inside uses exactly that layout. A plan for
// another number of GPUs than the allocation has (the job was resized, or
// TRAINRUN_PLAN is some other step's) is not used: the run says so and plans
// as without it. "" when TRAINRUN_PLAN is unset or --plan is given
// (complete decides: Config.submittedPlan).
func (r *runner) submittedPlan(world int) string {
	path := r.cfg.submittedPlan
	if path == "" {
		return ""
	}
	if p, ok := r.partitionPlan(); ok {
		path = p
	}
	if _, err := planjson.ReadSubmitted(path); err != nil { // own file in an own directory: another user must not choose the layout
		r.logf("TRAINRUN_PLAN is not used: %v", err)
		return ""
	}
	if _, err := ReadRunPlan(path, world); err != nil {
		r.logf("TRAINRUN_PLAN is not used: %v", err)
		return ""
	}
	r.logf("layout from TRAINRUN_PLAN=%s (trainrun submit's choice)", path)
	return path
}
