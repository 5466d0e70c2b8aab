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
	type cand struct{ d, e float64 }
	var buf [128]cand
	cs := buf[:0]
	base := string(stackBase(s))
	if s == StackMegatronCore {
		base = string(StackNeMo) // the same Megatron-Core + TE kernels; the calibration has NeMo rows only
	}
	for _, r := range calErrors {
		d := math.Abs(math.Log(math.Max(params, 1) / math.Max(r.params, 1)))
		if r.stack != base {
			d += 10
		}
		if r.arch != arch {
			d += 3
		}
		cs = append(cs, cand{d, r.err})
	}
	sort.Slice(cs, func(i, j int) bool { return cs[i].d < cs[j].d })
	n := min(nearestRows, len(cs))
	es := make([]float64, n)
	for i := range n {
		es[i] = cs[i].e
	}
	sort.Float64s(es)
	lo := 1 + es[int(math.Floor(0.1*float64(n-1)))]
	hi := 1 + es[int(math.Ceil(0.9*float64(n-1)))]
	lo, hi = math.Min(lo, 0.95), math.Max(hi, 1.05)
	return [2]float64{step * lo, step * hi}
}
