package plan

import (
	"math"
	"sort"
)

// Uncertainty band of a prediction (step_s_range): the step time scaled by
// the spread of the leave-one-family-out errors of the calibration rows
// nearest to the job: same stack first, then same GPU architecture, then
// nearest model size (stackfit.go: calErrors, regenerated with the fit).

// calError is one calibration row's cross-validated error.
type calError struct {
	stack  string  // stackBase of the row's stack
	arch   string  // GPU architecture
	params float64 // model parameters
	err    float64 // (predicted − published) / published tokens/s/GPU, LOFO
}

// nearestRows is how many rows the band is taken from.
const nearestRows = 8

// stepRange returns [low, high] seconds: a prediction err too optimistic in
// tokens/s means the real step is (1+err) times longer, so the band spans
// the 10th to 90th percentile of (1+err) over the nearest rows. Both ends
// are widened to at least ±5 %, the floor of run-to-run variation.
func stepRange(step float64, s Stack, arch string, params float64) [2]float64 {
	if step <= 0 || len(calErrors) == 0 {
		return [2]float64{step, step}
	}
	// The nearestRows closest rows, kept sorted by distance by insertion
	// (no allocation: Evaluate's budget is microseconds).
	var ds, near [nearestRows]float64
	n := 0
	base := string(stackBase(s))
	seen := false // a calibration row of this architecture exists
	if s == StackMegatronCore {
		base = string(StackNeMo) // the same Megatron-Core + TE kernels; the calibration has NeMo rows only
	}
	for _, r := range calErrors {
		seen = seen || r.arch == arch
		d := math.Abs(math.Log(math.Max(params, 1) / math.Max(r.params, 1)))
		if r.stack != base {
			d += 10
		}
		if r.arch != arch {
			d += 3
		}
		if n == nearestRows && d >= ds[n-1] {
			continue
		}
		i := min(n, nearestRows-1)
		for i > 0 && ds[i-1] > d {
			ds[i], near[i] = ds[i-1], near[i-1]
			i--
		}
		ds[i], near[i] = d, r.err
		n = min(n+1, nearestRows)
	}
	es := near[:n]
	sort.Float64s(es)
	lo := 1 + es[int(math.Floor(0.1*float64(n-1)))]
	hi := 1 + es[int(math.Ceil(0.9*float64(n-1)))]
	lo, hi = math.Min(lo, 0.95), math.Max(hi, 1.05)
	if !seen { // never checked on this architecture: at least the error of carrying the fit to one it did not see
		lo, hi = math.Min(lo, 1-unseenArchBand), math.Max(hi, 1+unseenArchBand)
	}
	return [2]float64{step * lo, step * hi}
}

// unseenArchBand is the least band, each side, of a prediction on a GPU
// architecture the calibration has no row of (a V100, a B200):
// archout_test.go refits the model without one architecture's rows and
// predicts them; on 2026-12-07 the step ran up to 18.4 % longer (hopper
// held out, p90) and 21.6 % shorter (ampere held out, p10) than predicted.
// An architecture further from both (Volta: no BF16, older kernels) may be
// off by more; this is the least the data supports.
const unseenArchBand = 0.20
