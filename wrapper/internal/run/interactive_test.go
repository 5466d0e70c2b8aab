package run

import (
	"strings"
	"testing"

	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
)

// Issue 30 point 9: under salloc a crashed step is not requeued (Slurm
// refuses: "Only batch jobs are accepted") and exits step-failed, not
// stopped; a checkpointed stop there exits stopped.
func TestDecideInteractiveNeverRequeues(t *testing.T) {
	d := requeue(Decision{Exit: exitcode.StepFailed}, Outcome{Interactive: true, Requeue: true, MaxRequeue: 3}, "rank 0 exited 1")
	if d.Requeue || d.Exit != exitcode.StepFailed || !strings.Contains(d.Err, "interactive allocation") {
		t.Errorf("failure under salloc: %+v", d)
	}
	d = requeue(Decision{}, Outcome{Interactive: true, Requeue: true, MaxRequeue: 3}, "time-limit: checkpointed")
	if d.Requeue || d.Exit != exitcode.Stopped {
		t.Errorf("stop under salloc: %+v", d)
	}
	if d := requeue(Decision{}, Outcome{Requeue: true, MaxRequeue: 3}, "x"); !d.Requeue || d.Exit != exitcode.Requeued {
		t.Errorf("batch job: %+v", d)
	}
}
