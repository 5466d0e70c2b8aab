// Package lossspike judges the trainer's reported loss (issue 31): a NaN
// or an infinity, or a spike beyond a robust threshold over a window of the
// last values, median + K·MAD (the median absolute deviation, which one
// outlier cannot move), and keeps the steps a rollback tells the trainer
// to skip (TRAINRUN_SKIP_STEPS, Steps). It does no I/O.
package lossspike

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Rule is the policy's LossSpike= (--loss-spike).
type Rule struct {
	Off    bool    // no judging at all
	K      float64 // 0: NaN and infinities only
	Window int     // the last values the median and MAD are over
	Metric string  // the metric judged (default "loss")
}

// Default is the rule when none is given.
const Default = "mad:6:window=50"

// minValues: no spike is judged before this many values are in the window.
const minValues = 10

// ParseRule reads off, nan, or mad:K[:window=W][:metric=NAME].
func ParseRule(s string) (Rule, error) {
	s = strings.TrimSpace(s)
	r := Rule{Window: 50, Metric: "loss"}
	parts := strings.Split(s, ":")
	switch strings.ToLower(parts[0]) {
	case "off":
		if len(parts) == 1 {
			return Rule{Off: true}, nil
		}
	case "nan":
		for _, p := range parts[1:] {
			if v, ok := strings.CutPrefix(p, "metric="); ok && v != "" {
				r.Metric = v
				continue
			}
			return r, fmt.Errorf("%q: nan takes only metric=NAME, not %q", s, p)
		}
		return r, nil
	case "mad":
		if len(parts) < 2 {
			break
		}
		k, err := strconv.ParseFloat(parts[1], 64)
		if err != nil || !(k > 0) || math.IsInf(k, 0) {
			return r, fmt.Errorf("%q: K %q is not a number above 0 (a spike is a value above median + K·MAD; 6 is a common choice)", s, parts[1])
		}
		r.K = k
		for _, p := range parts[2:] {
			switch {
			case strings.HasPrefix(p, "window="):
				w, err := strconv.Atoi(strings.TrimPrefix(p, "window="))
				if err != nil || w < minValues {
					return r, fmt.Errorf("%q: %s: want window=W with W at least %d values", s, p, minValues)
				}
				r.Window = w
			case strings.HasPrefix(p, "metric=") && len(p) > len("metric="):
				r.Metric = strings.TrimPrefix(p, "metric=")
			default:
				return r, fmt.Errorf("%q: unknown part %q (want window=W or metric=NAME)", s, p)
			}
		}
		return r, nil
	}
	return r, fmt.Errorf("%q: want off, nan (NaN and infinities only), or mad:K[:window=W][:metric=NAME] such as %s", s, Default)
}

func (r Rule) String() string {
	switch {
	case r.Off:
		return "off"
	case r.K == 0:
		return "nan"
	}
	return fmt.Sprintf("mad:%g:window=%d", r.K, r.Window)
}

// Spike is one judged value that is not fine.
type Spike struct {
	Step      int64
	Value     float64
	Kind      string  // "nan", "inf", "spike"
	Median    float64 // spike: the window's
	MAD       float64
	Threshold float64
	LastGood  int64 // the last step whose value was fine (0: none yet)
}

func (s Spike) String() string {
	switch s.Kind {
	case "spike":
		return fmt.Sprintf("loss %.6g at step %d is a spike: above median %.6g + K·MAD %.6g = %.6g", s.Value, s.Step, s.Median, s.MAD, s.Threshold)
	}
	return fmt.Sprintf("loss %v at step %d", s.Value, s.Step)
}

// Detector judges the values in the order they are reported.
type Detector struct {
	rule     Rule
	vals     []float64 // the window, oldest first
	lastGood int64
}

// New starts a detector.
func New(r Rule) *Detector { return &Detector{rule: r} }

// Observe judges the value v reported at step; a spike's value does not
// enter the window (it would raise the threshold the next one is held to).
func (d *Detector) Observe(step int64, v float64) (Spike, bool) {
	if d.rule.Off {
		return Spike{}, false
	}
	sp := Spike{Step: step, Value: v, LastGood: d.lastGood}
	switch {
	case math.IsNaN(v):
		sp.Kind = "nan"
		return sp, true
	case math.IsInf(v, 0):
		sp.Kind = "inf"
		return sp, true
	}
	if d.rule.K > 0 && len(d.vals) >= minValues {
		med, mad := medianMAD(d.vals)
		// A flat window (MAD 0) still allows a relative wobble.
		th := med + d.rule.K*max(mad, 1e-3*math.Abs(med), 1e-12)
		if v > th {
			sp.Kind, sp.Median, sp.MAD, sp.Threshold = "spike", med, mad, th
			return sp, true
		}
	}
	d.vals = append(d.vals, v)
	if len(d.vals) > max(d.rule.Window, minValues) {
		d.vals = d.vals[1:]
	}
	d.lastGood = step
	return Spike{}, false
}

// Reset forgets the window (a rollback: the values after the checkpoint
// come again).
func (d *Detector) Reset(lastGood int64) { d.vals, d.lastGood = nil, lastGood }

func medianMAD(vs []float64) (float64, float64) {
	s := slices.Clone(vs)
	sort.Float64s(s)
	med := median(s)
	dev := make([]float64, len(s))
	for i, v := range s {
		dev[i] = math.Abs(v - med)
	}
	sort.Float64s(dev)
	return med, median(dev)
}

func median(s []float64) float64 {
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// Action is the policy's LossSpikeAction= (--loss-spike-action).
type Action struct {
	Kind         string // "report", "stop", "rollback"
	MaxRollbacks int    // rollback: at most this many in the run, then stop
}

// ParseAction reads report, stop, or rollback[:N] (N default 3).
func ParseAction(s string) (Action, error) {
	k, n, has := strings.Cut(strings.ToLower(strings.TrimSpace(s)), ":")
	switch {
	case (k == "report" || k == "stop") && !has:
		return Action{Kind: k}, nil
	case k == "rollback" && !has:
		return Action{Kind: k, MaxRollbacks: 3}, nil
	case k == "rollback":
		v, err := strconv.Atoi(n)
		if err != nil || v < 1 {
			return Action{}, fmt.Errorf("%q: rollback:N wants N, the most rollbacks of the run, at least 1", s)
		}
		return Action{Kind: k, MaxRollbacks: v}, nil
	}
	return Action{}, fmt.Errorf("%q: want report (log, metric, webhook), stop (and end the run), or rollback[:N] (restart from the checkpoint before the spike, skipping its steps; at most N times, default 3)", s)
}

func (a Action) String() string {
	if a.Kind == "rollback" {
		return fmt.Sprintf("rollback:%d", a.MaxRollbacks)
	}
	return a.Kind
}
