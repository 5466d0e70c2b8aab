package forecast

import (
	"flag"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

var calibrate = flag.Bool("calibrate", false, "measure bandScale on the calibration seeds (1000-1099) and print it")

// TestCalibrateBandScale measures the factor by which the bootstrap's
// half-widths must grow for the 80% band to hold the truth for 80% of
// curves, on seeds (1000-1099) that the acceptance test never sees. Run
// with -calibrate; the constant bandScale is its printed value.
func TestCalibrateBandScale(t *testing.T) {
	if !*calibrate {
		t.Skip("run with -calibrate to measure bandScale")
	}
	var ratios []float64
	for i := range 100 {
		r := rand.New(rand.NewPCG(uint64(1000+i), 42))
		c := genCurve(r, powerLaw, 0.2, false)
		res, err := forecastScaled(c.pts, Options{Budget: c.budget, Seed: uint64(i)}, 1)
		if err != nil {
			t.Fatal(err)
		}
		half := res.Loss.Hi - res.Loss.Mid
		if c.truth < res.Loss.Mid {
			half = res.Loss.Mid - res.Loss.Lo
		}
		ratios = append(ratios, math.Abs(c.truth-res.Loss.Mid)/half)
	}
	slices.Sort(ratios)
	t.Logf("bandScale (80th percentile of |truth-mid|/half-width over 100 calibration curves): %.3f", quantile(ratios, 0.8))
}
