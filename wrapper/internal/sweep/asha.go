package sweep

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// StoppedEarly is the state of a trial that early stopping ended.
const StoppedEarly = "stopped-early"

// EarlyStop is `trainrun sweep --early-stop asha[:ETA[:MIN_STEPS]]`:
// asynchronous successive halving (Li et al. 2020, "A System for Massively
// Parallel Hyperparameter Tuning"), run by the trials themselves. Rung k
// is step MinSteps·Eta^k; a trial reaching it records its metric and goes
// on only if it is among the best 1/Eta (rounded up) of the trials that
// reached that rung so far; otherwise it stops, freeing its array slot.
// Without a daemon nothing is paused and promoted later (ASHA's own
// rule): the first trials at a rung pass on little evidence, the price of
// needing no coordinator.
//
// Kind "forecast" (forecast.go) is the other rule: from MinSteps on, a
// trial fits its own curve and stops once its forecast at Budget steps is
// better than the best trial's with probability under P.
type EarlyStop struct {
	Kind     string // "asha" or "forecast" ("" reads as asha)
	Eta      int
	MinSteps int64
	P        float64 // forecast: the chance of beating the best below which a trial stops
	Budget   int64   // forecast: the steps each trial trains (the sweep's --steps)
}

// Forecast says whether this is the forecast rule.
func (e EarlyStop) Forecast() bool { return e.Kind == KindForecast }

// The rules of --early-stop.
const (
	KindASHA     = "asha"
	KindForecast = "forecast"
)

// ParseEarlyStop reads the flag's value; "" is none (ok false).
func ParseEarlyStop(s string) (e EarlyStop, ok bool, err error) {
	if s == "" {
		return EarlyStop{}, false, nil
	}
	f := strings.Split(s, ":")
	if f[0] == KindForecast {
		return parseForecast(s, f)
	}
	if f[0] != KindASHA || len(f) > 3 {
		return EarlyStop{}, false, fmt.Errorf("--early-stop %q: want asha, asha:ETA or asha:ETA:MIN_STEPS (such as asha:3:100), or forecast[:P[:MIN_STEPS[:STEPS]]] (such as forecast:0.05:100)", s)
	}
	e = EarlyStop{Kind: KindASHA, Eta: 3, MinSteps: 100}
	if len(f) > 1 {
		n, err := strconv.Atoi(f[1])
		if err != nil || n < 2 {
			return EarlyStop{}, false, fmt.Errorf("--early-stop %q: ETA %q: want an integer of at least 2 (3 keeps a third at each rung)", s, f[1])
		}
		e.Eta = n
	}
	if len(f) > 2 {
		n, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil || n < 1 {
			return EarlyStop{}, false, fmt.Errorf("--early-stop %q: MIN_STEPS %q: want a positive step count, the first rung", s, f[2])
		}
		e.MinSteps = n
	}
	return e, true, nil
}

// String is the flag's form.
func (e EarlyStop) String() string {
	if e.Forecast() {
		return fmt.Sprintf("forecast:%s:%d:%d", strconv.FormatFloat(e.P, 'g', -1, 64), e.MinSteps, e.Budget)
	}
	return fmt.Sprintf("asha:%d:%d", e.Eta, e.MinSteps)
}

// Rung is the highest rung at or below step (-1 below the first).
func (e EarlyStop) Rung(step int64) int {
	k := -1
	if e.Eta < 2 || e.MinSteps < 1 { // the forecast rule has no rungs
		return k
	}
	for s := e.MinSteps; s <= step; s *= int64(e.Eta) {
		k++
		if s > math.MaxInt64/int64(e.Eta) {
			break
		}
	}
	return k
}

// RungStep is rung k's step.
func (e EarlyStop) RungStep(k int) int64 {
	s := e.MinSteps
	for range k {
		s *= int64(e.Eta)
	}
	return s
}

// Continue says whether a trial whose metric at a rung is mine goes on,
// given the metrics of every trial that reached the rung (mine included):
// it must rank in the best ceil(n/Eta). A NaN (diverged) never continues.
func (e EarlyStop) Continue(mine float64, atRung []float64, maximize bool) bool {
	if math.IsNaN(mine) {
		return false
	}
	better := 0
	for _, v := range atRung {
		if math.IsNaN(v) {
			continue
		}
		if maximize && v > mine || !maximize && v < mine {
			better++
		}
	}
	keep := (len(atRung) + e.Eta - 1) / e.Eta
	return better < keep
}
