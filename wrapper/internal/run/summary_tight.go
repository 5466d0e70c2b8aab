package run

import (
	"strings"

	"github.com/trainrun/trainrun/plan"
)

// tightWarning is the start summary's line for a plan inside the memory
// margin (plan.Evaluation.Tight): the planner's own "memory is tight" why
// line, so the job log says what `trainrun plan` shows as TIGHT; "" for a
// plan with headroom.
func tightWarning(e *plan.Evaluation) string {
	if e == nil || !e.Tight {
		return ""
	}
	for _, w := range e.Why {
		if strings.HasPrefix(w, "memory is tight") {
			return "  warning     " + w + "\n"
		}
	}
	return "  warning     memory is tight: the plan leaves less than the memory margin free\n"
}
