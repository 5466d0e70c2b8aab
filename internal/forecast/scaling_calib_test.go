package forecast

import (
	"flag"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

var calibrateScaling = flag.Bool("calibrate-scaling", false, "measure scalingBandScale on the calibration laws (seeds 2000-2079)")

// scalingCase is one synthetic scaling study: a random law of Chinchilla's
// form (E 1.5-2.0, A and B 200-600, alpha 0.25-0.40, beta 0.25-0.35, raw N
// and D), three proxy sizes 2-3x apart from 30M-200M, each trained to 20
// tokens per parameter with 300 reports, 0.3-1% noise (AR(1) 0.3) and a
// warm-up, and a target 2-20x past the largest proxy at 20 tokens per
// parameter.
type scalingCase struct {
	runs           []SizedRun
	target, tokens float64
	truth          float64
}

func newScalingCase(seed uint64) scalingCase {
	r := rand.New(rand.NewPCG(seed, 0x5ca1))
	u := func(lo, hi float64) float64 { return lo + (hi-lo)*r.Float64() }
	e, a, alpha, b, beta := u(1.5, 2.0), u(200, 600), u(0.25, 0.40), u(200, 600), u(0.25, 0.35)
	law := func(n, d float64) float64 { return e + a/math.Pow(n, alpha) + b/math.Pow(d, beta) }
	noise := u(0.003, 0.01)
	var c scalingCase
	n := u(30e6, 200e6)
	for k := range 3 {
		if k > 0 {
			n *= u(2, 3)
		}
		budget := 20 * n
		run := SizedRun{Name: SI(n), Params: n}
		ar := 0.0
		for s := 1; s <= 300; s++ {
			d := budget * float64(s) / 300
			ar = 0.3*ar + math.Sqrt(1-0.09)*r.NormFloat64()
			run.Points = append(run.Points, Point{Step: int64(s), Tokens: d, Loss: law(n, d) * (1 + 0.5*math.Exp(-d/(0.02*budget))) * (1 + noise*ar)})
		}
		c.runs = append(c.runs, run)
	}
	c.target = n * u(2, 20)
	c.tokens = 20 * c.target
	c.truth = law(c.target, c.tokens)
	return c
}

// scalingCoverage fits cases seeds [from, from+n) and returns the median
// error, the coverage of the band and each case's error over its band's
// half-width on the truth's side, unscaled (for the calibration).
func scalingCoverage(t *testing.T, from, n uint64) (medErr, coverage float64, ratios []float64) {
	var errs []float64
	in := 0
	for s := from; s < from+n; s++ {
		c := newScalingCase(s)
		f, err := FitScaling(c.runs, c.target, c.tokens, 0.8, 100, s)
		if err != nil {
			t.Fatal(err)
		}
		errs = append(errs, math.Abs(f.Loss.Mid-c.truth)/c.truth)
		if f.Loss.Lo <= c.truth && c.truth <= f.Loss.Hi {
			in++
		}
		half := f.Loss.Hi - f.Loss.Mid
		if c.truth < f.Loss.Mid {
			half = f.Loss.Mid - f.Loss.Lo
		}
		ratios = append(ratios, math.Abs(c.truth-f.Loss.Mid)/half*f.bandScale)
	}
	slices.Sort(errs)
	return errs[len(errs)/2], float64(in) / float64(n), ratios
}

// TestCalibrateScalingBand measures scalingBandScale: the factor by which
// the bootstrap band must be widened for 80% of the calibration laws'
// truths to lie inside (the 80th percentile of error over half-width).
func TestCalibrateScalingBand(t *testing.T) {
	if !*calibrateScaling {
		t.Skip("run with -calibrate-scaling to measure scalingBandScale")
	}
	med, cov, ratios := scalingCoverage(t, 2000, 80)
	slices.Sort(ratios)
	t.Logf("calibration laws 2000-2079: median error %.2f%%, coverage %.0f%% at the current scale; the 80th percentile of error/half-width (unscaled) is %.2f",
		100*med, 100*cov, ratios[len(ratios)*8/10])
}

// TestScalingBandCoverage: on 40 laws held out from the calibration
// (seeds 3000-3039), the widened 80% band holds the truth for 70-90% of
// them.
func TestScalingBandCoverage(t *testing.T) {
	if testing.Short() {
		t.Skip("40 scaling fits")
	}
	med, cov, _ := scalingCoverage(t, 3000, 40)
	t.Logf("held-out laws 3000-3039 (2-20x past the largest proxy): median error %.2f%%, 80%% band coverage %.0f%%", 100*med, 100*cov)
	if cov < 0.7 || cov > 0.9 {
		t.Errorf("coverage %.0f%%, want 70-90%%", 100*cov)
	}
}
