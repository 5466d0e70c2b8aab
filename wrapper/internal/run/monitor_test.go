package run

import (
	"testing"
	"time"
)

// Slurm's SIGTERM means a time limit, a preemption or a cancellation; the
// job's record and the clock tell which (issue 21: the time limit's SIGTERM
// to trainrun was taken for a cancellation and the run never requeued).
func TestTermCause(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name     string
		state    string
		end      time.Time
		stopping bool
		own      bool
		want     StopReason
	}{
		{"scancel", "CANCELLED", now.Add(time.Hour), false, true, Cancelled},
		{"scancel, seen by the step only", "CANCELLED", now.Add(time.Hour), false, false, Cancelled},
		{"completing after trainrun's own stop", "COMPLETING", now.Add(time.Hour), true, false, Cancelled},
		{"time limit, Slurm's state", "TIMEOUT", now.Add(time.Hour), false, true, TermLimit},
		{"deadline", "DEADLINE", time.Time{}, false, true, TermLimit},
		{"time limit, end time reached", "RUNNING", now.Add(-time.Second), false, true, TermLimit},
		{"time limit, state unknown", "", now.Add(2 * time.Second), false, true, TermLimit},
		{"cancelled even at the end time", "CANCELLED", now, false, true, Cancelled},
		{"preemption: the step's TERM, job still RUNNING", "RUNNING", now.Add(time.Hour), false, false, Preempted},
		{"preemption, no end time", "RUNNING", time.Time{}, false, false, Preempted},
		{"SIGTERM to trainrun, job RUNNING", "RUNNING", now.Add(time.Hour), false, true, Cancelled},
		{"SIGTERM to trainrun, Slurm not answering", "", now.Add(time.Hour), false, true, Cancelled},
		// scancel as CI saw it: the step's TERM first, the job COMPLETING.
		{"scancel, the step's TERM first", jobState("COMPLETING", 0, 0), now.Add(time.Hour), false, false, Cancelled},
		{"scancel of a requeued run", jobState("COMPLETING", 2, 2), now.Add(time.Hour), false, true, Cancelled},
		{"time limit, completing", jobState("COMPLETING", 0, 0), now, false, false, TermLimit},
		{"requeued by Slurm past the grace time", jobState("COMPLETING", 1, 0), now.Add(time.Hour), false, false, Preempted},
		{"requeued by Slurm, then trainrun's TERM", jobState("COMPLETING", 3, 2), now.Add(time.Hour), false, true, Preempted},
	} {
		if got := termCause(c.state, c.end, now, c.stopping, c.own); got != c.want {
			t.Errorf("%s: termCause(%q) = %s, want %s", c.name, c.state, got, c.want)
		}
	}
}
