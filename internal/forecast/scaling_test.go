package forecast

import (
	"math"
	"math/rand/v2"
	"testing"
)

// chinchilla is Hoffmann et al. (2022)'s fitted law (their eq. 10:
// E 1.69, A 406.4, alpha 0.34, B 410.7, beta 0.28), in raw N and D.
func chinchilla(n, d float64) float64 {
	return 1.69 + 406.4/math.Pow(n, 0.34) + 410.7/math.Pow(d, 0.28)
}

// proxyRun is a run of n parameters to 20 tokens per parameter, 300
// reports, 0.5% noise (Gaussian, AR(1) 0.3), a warm-up in its first 2%.
func proxyRun(r *rand.Rand, name string, n float64) SizedRun {
	budget := 20 * n
	run := SizedRun{Name: name, Params: n}
	ar := 0.0
	for s := 1; s <= 300; s++ {
		d := budget * float64(s) / 300
		ar = 0.3*ar + math.Sqrt(1-0.09)*r.NormFloat64()
		l := chinchilla(n, d) * (1 + 0.5*math.Exp(-d/(0.02*budget))) * (1 + 0.005*ar)
		run.Points = append(run.Points, Point{Step: int64(s), Tokens: d, Loss: l})
	}
	return run
}

// TestScalingPredictsFourthSize is issue 32's acceptance: a fit on three
// proxy sizes predicts a fourth size's final loss within 3% (synthetic,
// held out: the fourth size is not fitted).
func TestScalingPredictsFourthSize(t *testing.T) {
	for _, c := range []struct {
		name   string
		sizes  []float64
		target float64
	}{
		{"125M 350M 760M -> 1.3B", []float64{125e6, 350e6, 760e6}, 1.3e9},
		{"50M 100M 200M -> 1B", []float64{50e6, 100e6, 200e6}, 1e9},
	} {
		r := rand.New(rand.NewPCG(11, 3))
		var runs []SizedRun
		for _, n := range c.sizes {
			runs = append(runs, proxyRun(r, SI(n), n))
		}
		tokens := 20 * c.target
		f, err := FitScaling(runs, c.target, tokens, 0.8, 100, 1)
		if err != nil {
			t.Fatal(err)
		}
		truth := chinchilla(c.target, tokens)
		e := math.Abs(f.Loss.Mid-truth) / truth
		t.Logf("%s: predicted %.4f [%.4f, %.4f], true %.4f, error %.2f%% (fit: E %.3f alpha %.3f beta %.3f; %.1fx past the largest size)",
			c.name, f.Loss.Mid, f.Loss.Lo, f.Loss.Hi, truth, 100*e, f.Law.E, f.Law.Alpha, f.Law.Beta, f.Extrapolation)
		if e > 0.03 {
			t.Errorf("%s: error %.2f%%, want <= 3%%", c.name, 100*e)
		}
	}
}

func TestScalingNeedsThreeSizes(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	runs := []SizedRun{proxyRun(r, "a", 1e8), proxyRun(r, "b", 2e8), proxyRun(r, "c", 2e8)}
	if _, err := FitScaling(runs, 1e9, 2e10, 0.8, 10, 1); err == nil {
		t.Fatal("two sizes fitted")
	}
	runs[0].Params = 0
	if _, err := FitScaling(runs, 1e9, 2e10, 0.8, 10, 1); err == nil {
		t.Fatal("a run without a size fitted")
	}
}
