package forecast

import (
	"flag"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// curve is one synthetic run: its reports up to Observed tokens and its
// true (noise-free) loss at Budget.
type curve struct {
	pts    []Point
	budget float64
	truth  float64
}

// family draws a loss law; the generators below add a warm-up, one
// learning-rate step decay, noise and spikes to it.
type family func(r *rand.Rand, budget float64) func(d float64) float64

// powerLaw is the fit's own form: E + A·(D/T)^-alpha, with ranges around
// published fits (Chinchilla: E 1.69, beta 0.28; the reducible loss left at
// the budget 0.15-0.5 nats).
func powerLaw(r *rand.Rand, budget float64) func(float64) float64 {
	e, a, alpha := uni(r, 1.6, 2.4), uni(r, 0.15, 0.5), uni(r, 0.2, 0.5)
	return func(d float64) float64 { return e + a*math.Pow(d/budget, -alpha) }
}

// twoPowerLaws is another family: the sum of a slow and a fast power law
// (what a mixture of easy and hard data gives); a single power law fits it
// only approximately.
func twoPowerLaws(r *rand.Rand, budget float64) func(float64) float64 {
	e := uni(r, 1.6, 2.4)
	a1, al1 := uni(r, 0.1, 0.35), uni(r, 0.1, 0.25)
	a2, al2 := uni(r, 0.02, 0.1), uni(r, 0.6, 1.0)
	return func(d float64) float64 {
		x := d / budget
		return e + a1*math.Pow(x, -al1) + a2*math.Pow(x, -al2)
	}
}

// expTail is a third family: a power law whose reducible part also decays
// exponentially (a curve that saturates faster than any power law).
func expTail(r *rand.Rand, budget float64) func(float64) float64 {
	e, a, alpha, d0 := uni(r, 1.6, 2.4), uni(r, 0.2, 0.6), uni(r, 0.2, 0.4), uni(r, 1, 3)*budget
	return func(d float64) float64 { return e + a*math.Pow(d/budget, -alpha)*math.Exp(-d/d0) }
}

func uni(r *rand.Rand, lo, hi float64) float64 { return lo + (hi-lo)*r.Float64() }

// genCurve draws one run: 2500 steps to a budget of 1e10-1e11 tokens,
// reported every step up to frac of the budget; a warm-up of 0.1-0.5% of the
// budget (the loss above the law by a factor 1+b·exp(-D/W), b 0.3-1); one
// step decay of the learning rate at 6-15% of the budget, after which the
// loss falls by 0.02-0.08 nats with a time constant of 1% of its tokens;
// Gaussian noise of 0.3-1.5% of the loss, AR(1) correlated (phi 0-0.6)
// as data order makes it; and loss spikes (0.5% of steps, +5-30%).
// withLR reports the learning rate (linear warm-up, constant, ×0.3 at the
// decay).
func genCurve(r *rand.Rand, fam family, frac float64, withLR bool) curve {
	budget := math.Pow(10, uni(r, 10, 11))
	law := fam(r, budget)
	w, b := uni(r, 0.001, 0.005)*budget, uni(r, 0.3, 1)
	dc, drop := uni(r, 0.06, 0.15)*budget, uni(r, 0.02, 0.08)
	tau := 0.01 * dc
	sigma, phi := uni(r, 0.003, 0.015), uni(r, 0, 0.6)
	clean := func(d float64) float64 {
		v := law(d)
		if d >= dc {
			v -= drop * (1 - math.Exp(-(d-dc)/tau))
		}
		return v
	}
	const steps = 2500
	var pts []Point
	ar := 0.0
	for s := 1; s <= steps; s++ {
		d := budget * float64(s) / steps
		if d > frac*budget {
			break
		}
		ar = phi*ar + math.Sqrt(1-phi*phi)*r.NormFloat64()
		v := clean(d) * (1 + b*math.Exp(-d/w)) * (1 + sigma*ar)
		if r.Float64() < 0.005 {
			v *= 1 + uni(r, 0.05, 0.3)
		}
		p := Point{Step: int64(s), Tokens: d, Loss: v}
		if withLR {
			p.LR = 3e-4 * math.Min(1, d/w)
			if d >= dc {
				p.LR *= 0.3
			}
		}
		pts = append(pts, p)
	}
	return curve{pts: pts, budget: budget, truth: clean(budget)}
}

// score forecasts n seeded curves from the first frac of their tokens and
// returns the median relative error of the final loss and the fraction
// of curves whose 80% band holds the truth.
func score(t *testing.T, fam family, n int, frac float64, withLR bool) (medErr, coverage float64) {
	t.Helper()
	var errs []float64
	in := 0
	for i := range n {
		r := rand.New(rand.NewPCG(uint64(i)+1, 42))
		c := genCurve(r, fam, frac, withLR)
		res, err := Forecast(c.pts, Options{Budget: c.budget, Seed: uint64(i)})
		if err != nil {
			t.Fatalf("curve %d: %v", i, err)
		}
		errs = append(errs, math.Abs(res.Loss.Mid-c.truth)/c.truth)
		if res.Loss.Lo <= c.truth && c.truth <= res.Loss.Hi {
			in++
		}
		if testing.Verbose() {
			t.Logf("curve %2d: truth %.4f forecast %.4f [%.4f, %.4f] err %.2f%% warmup-end %.2g%% drop %.3f at %.2g%% alpha %.2f",
				i, c.truth, res.Loss.Mid, res.Loss.Lo, res.Loss.Hi, 100*errs[i], 100*res.WarmupEnd/c.budget,
				res.Law.Drop, 100*res.Law.DropAt/c.budget, res.Law.Alpha)
		}
	}
	slices.Sort(errs)
	return errs[len(errs)/2], float64(in) / float64(n)
}

// TestForecastAcceptance is issue 32's acceptance: 50 seeded curves of
// known power laws with warm-up, one schedule change and realistic noise;
// from the first 20% of the tokens the median error of the final loss is
// at most 2% and the 80% band holds the truth for 70-90% of curves. The
// curves are held out: nothing in the fit was tuned on these seeds alone
// (the same generator, other seeds, in TestForecastOtherSeeds).
func TestForecastAcceptance(t *testing.T) {
	med, cov := score(t, powerLaw, 50, 0.2, false)
	t.Logf("power law, no learning rate reported: median final-loss error %.2f%%, 80%% band coverage %.0f%% (50 curves, 20%% of tokens)", 100*med, 100*cov)
	if med > 0.02 {
		t.Errorf("median final-loss error %.2f%%, want <= 2%%", 100*med)
	}
	if cov < 0.7 || cov > 0.9 {
		t.Errorf("80%% band coverage %.0f%%, want 70-90%%", 100*cov)
	}
}

// TestForecastOtherFamilies reports the same figures for curves the fit's
// form does not contain (two power laws; an exponential tail) and for the
// fit's own form with the learning rate reported. The issue sets no bound
// on them; the test fails only on gross failure (median error above 10%),
// and prints the figures so that they are reported as measured. It takes
// 150 forecasts (a minute or more): go test ./internal/forecast -families -v.
func TestForecastOtherFamilies(t *testing.T) {
	if !*families {
		t.Skip("run with -families (150 forecasts)")
	}
	for _, c := range []struct {
		name   string
		fam    family
		withLR bool
	}{
		{"two power laws", twoPowerLaws, false},
		{"exponential tail", expTail, false},
		{"power law, learning rate reported", powerLaw, true},
	} {
		med, cov := score(t, c.fam, 50, 0.2, c.withLR)
		t.Logf("%s: median final-loss error %.2f%%, 80%% band coverage %.0f%% (50 curves, 20%% of tokens)", c.name, 100*med, 100*cov)
		if med > 0.10 {
			t.Errorf("%s: median error %.2f%%: the fit fails on it", c.name, 100*med)
		}
	}
}

var families = flag.Bool("families", false, "also score the forecast on curve families other than its own (TestForecastOtherFamilies)")
