// Measured autotune inside one allocation (trainrun run --tune K[:STEPS]):
// the candidates from the planner's search, the budget arithmetic, when a
// trial ends, the pick, the table and the observation records. No I/O: the
// controller runs the trials and hands the facts in.

package run

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/trainrun/trainrun/internal/calib"
	"github.com/trainrun/trainrun/plan"
)

// TuneDone is the stop reason of a tune trial that has measured enough (or
// ran out of its time): the controller kills its step, nothing is saved.
const TuneDone StopReason = "tune-trial-done"

// TuneSpec is --tune K[:STEPS]: run the planner's K best layouts, STEPS
// steps each. The zero value is off.
type TuneSpec struct {
	K     int // candidates (0: no tuning)
	Steps int // steps per candidate, the first warm-up ones included
}

// DefaultTuneSteps is STEPS when --tune gives only K.
const DefaultTuneSteps = 10

// MinTuneSteps is the fewest STEPS that give a steady step time: the
// observation leaves out warm-up steps and needs calib.MinSteps after them,
// measured between reports.
const MinTuneSteps = 6

// MaxTuneCandidates bounds K: each candidate is a relaunch of the trainer.
const MaxTuneCandidates = 16

// ParseTune reads --tune's value: K or K:STEPS; "", "0", "no" and "none" are
// off. name labels errors (the flag, the variable or the policy key).
func ParseTune(name, s string) (TuneSpec, error) {
	s = strings.TrimSpace(s)
	switch strings.ToLower(s) {
	case "", "0", "no", "none", "off":
		return TuneSpec{}, nil
	}
	ks, ss, hasSteps := strings.Cut(s, ":")
	k, err := strconv.Atoi(ks)
	if err != nil || k < 1 || k > MaxTuneCandidates {
		return TuneSpec{}, fmt.Errorf("%s %q: want K or K:STEPS, K the number of layouts to try (1 to %d), e.g. --tune 4:10", name, s, MaxTuneCandidates)
	}
	t := TuneSpec{K: k, Steps: DefaultTuneSteps}
	if hasSteps {
		n, err := strconv.Atoi(ss)
		if err != nil || n < MinTuneSteps {
			return TuneSpec{}, fmt.Errorf("%s %q: STEPS %q must be a whole number of at least %d (the first steps are warm-up, left out of the median), e.g. --tune %d:%d",
				name, s, ss, MinTuneSteps, k, DefaultTuneSteps)
		}
		t.Steps = n
	}
	return t, nil
}

func (t TuneSpec) String() string {
	if t.K == 0 {
		return "none"
	}
	return fmt.Sprintf("%d:%d", t.K, t.Steps)
}

// DefaultBudgetShare is the default --tune-budget: this share of the job's
// time limit.
const DefaultBudgetShare = 0.05

// DefaultBudgetNoLimit is the default --tune-budget of a job without a time
// limit.
const DefaultBudgetNoLimit = 10 * time.Minute

// TuneBudget is the time the trials may take: given (--tune-budget; 0 =
// its default), else DefaultBudgetShare of the job's time limit, else
// DefaultBudgetNoLimit. from says which, for the log.
func TuneBudget(given, timeLimit time.Duration) (budget time.Duration, from string) {
	switch {
	case given > 0:
		return given, "--tune-budget"
	case timeLimit > 0:
		return (time.Duration(float64(timeLimit) * DefaultBudgetShare)).Round(time.Second),
			fmt.Sprintf("%.0f%% of the job's %s time limit; --tune-budget sets it", 100*DefaultBudgetShare, timeLimit)
	}
	return DefaultBudgetNoLimit, fmt.Sprintf("the job has no time limit: %s; --tune-budget sets it", DefaultBudgetNoLimit)
}

// shape is a layout's parallel degrees: candidates that differ only in
// micro-batch, recompute or ZeRO stage say less about the cluster than a
// different split of the GPUs.
type shape struct{ tp, pp, cp, ep, etp int }

func shapeOf(l plan.Layout) shape { return shape{l.TP, l.PP, l.CP, l.EP, l.ETP} }

// Candidates are the planner's k best layouts of res that use world GPUs,
// in its order: the best of each distinct parallel shape first (tp, pp, cp,
// ep), then the next best of the shapes already taken.
func Candidates(res plan.Result, k, world int) []plan.Evaluation {
	var all []plan.Evaluation
	if res.Plan != nil {
		all = append(all, *res.Plan)
	}
	all = append(all, res.Alternatives...)
	var first, rest []plan.Evaluation
	seen := map[shape]bool{}
	configs := map[string]bool{}
	for _, e := range all {
		if e.Reason != "" || plan.LayoutGPUs(e.Layout) != world || configs[e.Layout.Config()] {
			continue
		}
		configs[e.Layout.Config()] = true
		if s := shapeOf(e.Layout); !seen[s] {
			seen[s] = true
			first = append(first, e)
		} else {
			rest = append(rest, e)
		}
	}
	out := append(first, rest...)
	return out[:min(k, len(out))]
}

// DefaultTrialStartup is what one trial's launch (srun, the trainer's
// imports, its first steps) is assumed to cost before a trial has measured
// it.
const DefaultTrialStartup = 30 * time.Second

// TrialCost is what one trial of ev is expected to take: its launch
// (startup) and steps steps at the predicted step time.
func TrialCost(ev plan.Evaluation, steps int, startup time.Duration) time.Duration {
	return startup + time.Duration(float64(steps)*ev.Time.Step*float64(time.Second))
}

// TrialDeadline is when a trial that starts at now must end: within what
// is left of the budget, and, while candidates after it (left, itself
// included) wait, within max(2 × its expected cost, an even share of it).
func TrialDeadline(now, end time.Time, cost time.Duration, left int) time.Time {
	remain := end.Sub(now)
	share := remain
	if left > 1 {
		share = max(2*cost, remain/time.Duration(left))
	}
	return now.Add(min(share, remain))
}

// TrialAction is what the controller does with a running trial at a tick.
type TrialAction int

const (
	TrialGoOn    TrialAction = iota // keep measuring
	TrialDone                       // measured STEPS steps: end it
	TrialTimeOut                    // its deadline passed: end it, with what it measured
)

// TrialTick decides at now whether a trial that must run steps steps and
// end by deadline goes on: span is how many steps its progress reports
// cover, measured whether they give a steady step time yet.
func TrialTick(steps int, span int64, measured bool, now, deadline time.Time) TrialAction {
	switch {
	case span >= int64(steps-1) && measured:
		return TrialDone
	case !now.Before(deadline):
		return TrialTimeOut
	}
	return TrialGoOn
}

// Trial is one candidate's trial: what the planner predicted, what was
// measured, or why it was dropped.
type Trial struct {
	Eval     plan.Evaluation
	Observed calib.Observed // StepS 0: nothing measured
	Failed   string         // why it was dropped ("" = measured)
	Took     time.Duration  // launch to end (0: not run)
	Record   calib.Record   // the observation's template: plan, GPU, nodes, job (calib.Recorder's)
}

// Measured says whether the trial gave a step time.
func (t Trial) Measured() bool { return t.Failed == "" && t.Observed.StepS > 0 }

// Startup estimates what a measured trial's launch cost: its wall time less
// the steps it ran (span) at its measured step time.
func (t Trial) Startup(span int64) time.Duration {
	d := t.Took - time.Duration(float64(span)*t.Observed.StepS*float64(time.Second))
	return max(d, 0)
}

// Pick is the fastest measured trial (the planner's order breaks ties);
// -1 when none was measured.
func Pick(trials []Trial) int {
	best := -1
	for i, t := range trials {
		if t.Measured() && (best < 0 || t.Observed.StepS < trials[best].Observed.StepS) {
			best = i
		}
	}
	return best
}

// Records are the tune's observations, one per trial that ran, chosen the
// one the run trains with (-1: none), steps the trial length asked for.
func Records(trials []Trial, chosen, steps int, at time.Time) []calib.Record {
	var out []calib.Record
	for i, t := range trials {
		if t.Took == 0 {
			continue // not run: the budget ran out first; the table says so
		}
		r := t.Record
		r.Software = cloneMap(r.Software)
		r.At = at.UTC()
		r.Observed = calib.Observed{}
		if t.Measured() {
			r.Observed = t.Observed
		}
		r.Tune = &calib.Trial{Index: i + 1, Of: len(trials), Steps: steps, Chosen: i == chosen, Failed: t.Failed,
			Predicted: t.Eval.Time.Step, Seconds: t.Took.Seconds()}
		out = append(out, r)
	}
	return out
}

func cloneMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// Table is the predicted-versus-measured table of a tune, one line each,
// the chosen trial marked with *.
func Table(trials []Trial, chosen int) []string {
	lines := []string{fmt.Sprintf("   %-2s %-44s %-22s %s", "#", "layout", "predicted step", "measured step")}
	for i, t := range trials {
		mark := " "
		if i == chosen {
			mark = "*"
		}
		pred := fmt.Sprintf("%.3f s", t.Eval.Time.Step)
		if r := t.Eval.Time.StepRange; r[1] > 0 {
			pred += fmt.Sprintf(" [%.3f-%.3f]", r[0], r[1])
		}
		var got string
		switch {
		case t.Measured():
			got = fmt.Sprintf("%.3f s (%d steps, spread %.0f%%, %+.0f%% vs predicted)", t.Observed.StepS, t.Observed.Steps, 100*t.Observed.Spread,
				100*(t.Observed.StepS/cmp.Or(t.Eval.Time.Step, t.Observed.StepS)-1))
		default:
			got = "dropped: " + t.Failed
		}
		lines = append(lines, fmt.Sprintf(" %s %-2d %-44s %-22s %s", mark, i+1, t.Eval.Layout.Config(), pred, got))
	}
	return lines
}

// Cost is the tune's overhead line: what the trials took of the budget and
// of the job's time limit.
func Cost(took, budget, timeLimit time.Duration, ran, of int) string {
	s := fmt.Sprintf("tune: %d of %d candidate(s) ran in %s of the %s budget", ran, of, took.Round(time.Second), budget)
	if timeLimit > 0 {
		s += fmt.Sprintf(" (%.1f%% of the job's %s time limit)", 100*took.Seconds()/timeLimit.Seconds(), timeLimit)
	}
	return s
}

// Failure words why a trial's step ended without a measurement: it hung,
// it ran out of its time (TuneDone: the controller ended it), its first
// failed rank (the controller's line), its exit code, or why its reports
// gave no step time.
func Failure(code int, firstFail string, reason StopReason, why string) string {
	switch {
	case reason == Hang:
		return "hung (no progress within the hang timeout)"
	case reason == TuneDone:
		return "out of its share of the budget: " + cmp.Or(why, "no step time measured")
	case firstFail != "":
		return firstFail + " (out of memory or a crash: see the job log)"
	case code != 0:
		return fmt.Sprintf("the step exited %d", code)
	}
	return cmp.Or(why, "no step time measured")
}

// Ran counts the trials that ran.
func Ran(trials []Trial) int {
	return len(slices.DeleteFunc(slices.Clone(trials), func(t Trial) bool { return t.Took == 0 }))
}
