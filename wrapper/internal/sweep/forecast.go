package sweep

import (
	"fmt"
	"math"
	"strconv"

	"github.com/trainrun/trainrun/internal/forecast"
)

// parseForecast reads forecast[:P[:MIN_STEPS[:STEPS]]] (f: s split at ':').
// STEPS, the budget at which the trials' forecasts are compared, is the
// sweep's --steps when not given (newManifest fills it in).
func parseForecast(s string, f []string) (EarlyStop, bool, error) {
	e := EarlyStop{Kind: KindForecast, P: 0.05, MinSteps: 100}
	if len(f) > 4 {
		return EarlyStop{}, false, fmt.Errorf("--early-stop %q: want forecast, forecast:P, forecast:P:MIN_STEPS or forecast:P:MIN_STEPS:STEPS (such as forecast:0.05:100)", s)
	}
	if len(f) > 1 {
		p, err := strconv.ParseFloat(f[1], 64)
		if err != nil || !(p > 0 && p < 0.5) {
			return EarlyStop{}, false, fmt.Errorf("--early-stop %q: P %q: want the chance of beating the best trial below which a trial stops, in (0, 0.5), such as 0.05", s, f[1])
		}
		e.P = p
	}
	if len(f) > 2 {
		n, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil || n < 1 {
			return EarlyStop{}, false, fmt.Errorf("--early-stop %q: MIN_STEPS %q: want a positive step count, the first step a trial may be judged at", s, f[2])
		}
		e.MinSteps = n
	}
	if len(f) > 3 {
		n, err := strconv.ParseInt(f[3], 10, 64)
		if err != nil || n < 1 {
			return EarlyStop{}, false, fmt.Errorf("--early-stop %q: STEPS %q: want the steps each trial trains (the budget its forecast is made at), such as 1000", s, f[3])
		}
		e.Budget = n
	}
	return e, true, nil
}

// ForecastLevel is the coverage of the bands the forecast rule compares.
const ForecastLevel = 0.8

// Chance is the probability that a trial whose forecast at the budget is
// mine ends below one whose forecast is best (a lower metric is better):
// each is read as a normal whose spread on the side that matters is its
// band's (mine's lower half, best's upper half; the bands cover level).
// Without spread it is 1, 1/2 or 0 as mine's middle is below, at or above
// best's. An observed final value is a band of zero width.
func Chance(mine, best forecast.Band, level float64) float64 {
	z := math.Sqrt2 * math.Erfinv(level) // the band's half-width in standard deviations
	s1, s2 := math.Max(mine.Mid-mine.Lo, 0)/z, math.Max(best.Hi-best.Mid, 0)/z
	d, s := best.Mid-mine.Mid, math.Hypot(s1, s2)
	switch {
	case math.IsNaN(mine.Mid):
		return 0
	case s == 0 || math.IsNaN(s):
		if d > 0 {
			return 1
		} else if d == 0 {
			return 0.5
		}
		return 0
	}
	return 0.5 * math.Erfc(-d/s/math.Sqrt2)
}
