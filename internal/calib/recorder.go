package calib

import (
	"fmt"
	"strings"
	"sync"
	"time"
)

// Recorder collects one run's progress and, at its end, appends its
// observation to every store in Paths. The run controller feeds it the
// trainer's progress (Progress) and calls Finish once.
type Recorder struct {
	Paths    []string // run store and site calibration
	Template Record   // plan, GPU, nodes, stack, software, job
	// PeakMemGiB is the largest peak memory the trainer reported (its
	// progress metric peak_mem_gib); nil when it reported none.
	PeakMemGiB *float64

	mu     sync.Mutex
	steady Steady
	done   bool
}

// Progress records a progress report (nil-safe).
func (r *Recorder) Progress(step int64, at time.Time) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.steady.Add(step, at)
}

// Finish writes the observation and returns what to log: which stores got
// it, or why none was written (once: later calls return "").
func (r *Recorder) Finish(now time.Time) string {
	if r == nil {
		return ""
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done {
		return ""
	}
	r.done = true
	o, ok, why := r.steady.Summary()
	if !ok {
		return "no observation recorded: " + why
	}
	o.PeakMemGiB = r.PeakMemGiB
	rec := r.Template
	rec.Observed, rec.At = o, now.UTC()
	var wrote, failed []string
	for _, p := range r.Paths {
		if err := Append(p, rec); err != nil {
			failed = append(failed, err.Error())
			continue
		}
		wrote = append(wrote, p)
	}
	msg := ""
	if len(wrote) > 0 {
		msg = fmt.Sprintf("observation: median step %.3f s over %d steady steps (spread %.0f%%) recorded in %s", o.StepS, o.Steps, 100*o.Spread, strings.Join(wrote, " and "))
	}
	if len(failed) > 0 {
		if msg != "" {
			msg += "; "
		}
		msg += "observation not recorded: " + strings.Join(failed, "; ")
	}
	return msg
}

// Measure is what the progress so far gives (nil-safe): the summary (ok
// false with why not, as Summary) and the steps reported since the first
// report. trainrun run --tune ends a trial on it.
func (r *Recorder) Measure() (o Observed, ok bool, why string, span int64) {
	if r == nil {
		return Observed{}, false, "no recorder", 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	o, ok, why = r.steady.Summary()
	return o, ok, why, r.steady.Span()
}
