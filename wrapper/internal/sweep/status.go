package sweep

import (
	"math"
	"sort"
	"strings"
)

// States of a trial in `trainrun sweep status`.
const (
	Pending   = "pending"
	Running   = "running"
	Preempted = "preempted"
	Requeued  = "requeued"
	Finished  = "finished"
	Failed    = "failed"
	Unknown   = "unknown"
)

// TrialFacts are what the command read for one trial: its array element in
// Slurm (InSlurm false once Slurm forgot it) and its run's files.
type TrialFacts struct {
	InSlurm  bool
	State    string // Slurm's JobState
	Reason   string // Slurm's Reason
	ExitCode string // Slurm's ExitCode
	Restarts int
	Finished bool               // the run's store has its finished marker
	Steps    int64              // the last reported step (launch/progress)
	Metrics  map[string]float64 // the last reported metrics
	// StoppedEarly: the trial's early-stop record (--early-stop) says it
	// stopped at a rung.
	StoppedEarly bool
}

// TrialStatus is one row of the status.
type TrialStatus struct {
	Index    int                `json:"index"`
	Params   map[string]string  `json:"params"`
	State    string             `json:"state"`
	Reason   string             `json:"reason,omitempty"`
	Restarts int                `json:"restarts,omitempty"`
	Steps    int64              `json:"steps"`
	Metric   map[string]float64 `json:"metric"`
	// Added by issue 30: a failed trial's trainrun error (the last
	// "trainrun: " line of its log) and the log's path; a trial's job id
	// (ARRAYJOB_TASK) when Slurm knows it.
	Error string `json:"error,omitempty"`
	Log   string `json:"log,omitempty"`
	JobID string `json:"job_id,omitempty"`
}

// StateOf maps Slurm's view and the run's files to a trial state; reason
// says why a trial failed (or waits).
func StateOf(f TrialFacts) (state, reason string) {
	if f.StoppedEarly && !(f.InSlurm && strings.EqualFold(f.State, "RUNNING")) {
		return StoppedEarly, "not in the best trials at its rung (--early-stop)"
	}
	if !f.InSlurm {
		if f.Finished {
			return Finished, ""
		}
		return Failed, "Slurm no longer knows the job and the run did not finish (see the trial's log)"
	}
	s := strings.ToUpper(f.State)
	switch {
	case s == "PENDING" && f.Restarts > 0:
		return Requeued, why(f.Reason)
	case s == "PENDING":
		return Pending, why(f.Reason)
	case s == "RUNNING" || s == "CONFIGURING" || s == "COMPLETING" || s == "RESIZING" || s == "SUSPENDED":
		return Running, ""
	case s == "PREEMPTED":
		return Preempted, ""
	case strings.HasPrefix(s, "REQUEUE"):
		return Requeued, ""
	case s == "COMPLETED" && f.Finished:
		return Finished, ""
	case s == "COMPLETED":
		return Failed, "the job completed but the run recorded no finish (exit " + f.ExitCode + ")"
	case s == "":
		return Unknown, ""
	}
	r := s
	if f.ExitCode != "" && f.ExitCode != "0:0" {
		r += ", exit " + f.ExitCode
	}
	if f.Reason != "" && f.Reason != "None" {
		r += ", " + f.Reason
	}
	return Failed, r
}

func why(reason string) string {
	if reason == "None" {
		return ""
	}
	return reason
}

// Best is the trial with the lowest (maximize: highest) value of metric
// among those that reported it as a number; ok is false when none did.
func Best(rows []TrialStatus, metric string, maximize bool) (best TrialStatus, ok bool) {
	for _, r := range rows {
		v, has := r.Metric[metric]
		if !has || math.IsNaN(v) {
			continue // a diverged trial is never the best
		}
		if !ok {
			best, ok = r, true
			continue
		}
		b := best.Metric[metric]
		if maximize && v > b || !maximize && v < b {
			best = r
		}
	}
	return best, ok
}

// Counts are the trials per state, for trainrun_sweep_trials{state}.
func Counts(rows []TrialStatus) map[string]int {
	m := map[string]int{Pending: 0, Running: 0, Preempted: 0, Requeued: 0, Finished: 0, Failed: 0, StoppedEarly: 0}
	for _, r := range rows {
		m[r.State]++
	}
	return m
}

func sortStrings(s []string) []string { sort.Strings(s); return s }
