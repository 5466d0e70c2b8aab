package forecast

import "math"

// window is the part of the run one fit sees.
type window struct {
	seg         *segment
	cut, dropAt float64
}

// Tuning of the window (see Forecast).
const (
	startFrac   = 0.5  // the window first holds the last half of the tokens
	growFactor  = 0.7  // and grows backwards by this factor per step
	transition  = 0.05 // points within 5% of tokens after a change are its transition, left out
	maxFitPts   = 400  // longer windows are thinned evenly: the fit's cost, not its answer
	lrDropRatio = 0.7  // a rate below 70% of the previous report's is a schedule change
)

// need is the fewest points a window may hold (minPoints unless asked).
func chooseWindow(p []Point, warmup float64, need int) window {
	last := p[len(p)-1].Tokens
	floor, known, dropAt := p[0].Tokens, false, 0.0
	if hasLR(p) {
		floor, dropAt = lrWindow(p)
		known = true
	}
	if warmup > 0 {
		floor = warmup
	}
	fit := func(cut float64) window {
		if known {
			d := dropAt
			if d <= cut {
				d = 0 // a change before the window: its law is already the new one
			}
			return window{seg: buildSegment(p, cut, d, last), cut: cut, dropAt: d}
		}
		return scanWindow(p, cut, last)
	}
	c := math.Max(startFrac*last, floor)
	best := fit(c)
	for c > floor {
		c2 := math.Max(growFactor*c, floor)
		w2 := fit(c2)
		if best.seg == nil || len(best.seg.x) < need { // too few to fit: grow until it holds enough, then judge
			best, c = w2, c2
			continue
		}
		if !agrees(w2, best, c2, c, last, need) {
			break
		}
		best, c = w2, c2
	}
	return best
}

func hasLR(p []Point) bool {
	for _, q := range p {
		if q.LR > 0 {
			return true
		}
	}
	return false
}

// lrWindow reads the warm-up's end and the last schedule change from the
// reported learning rate: the fit starts no earlier than the peak, and the
// window grows back towards it as far as the points agree.
func lrWindow(p []Point) (cut, dropAt float64) {
	peak := 0.0
	for _, q := range p {
		peak = math.Max(peak, q.LR)
	}
	wi := 0
	for i, q := range p {
		if q.LR >= 0.99*peak {
			wi = i
			break
		}
	}
	cut = math.Max(p[wi].Tokens, p[0].Tokens)
	for j := wi + 1; j < len(p); j++ {
		if p[j].LR > 0 && p[j-1].LR > 0 && p[j].LR < lrDropRatio*p[j-1].LR {
			dropAt = p[j].Tokens
		}
	}
	return cut, dropAt
}

// buildSegment is the fit's view of the points at or after cut, with a
// step at dropAt (0: none), its transition left out.
func buildSegment(p []Point, cut, dropAt, ref float64) *segment {
	var idx []int
	for i, q := range p {
		if q.Tokens < cut {
			continue
		}
		if dropAt > 0 && q.Tokens >= dropAt && q.Tokens < dropAt*(1+transition) {
			continue
		}
		idx = append(idx, i)
	}
	if len(idx) > maxFitPts {
		thin := make([]int, maxFitPts)
		for k := range thin {
			thin[k] = idx[k*(len(idx)-1)/(maxFitPts-1)]
		}
		idx = thin
	}
	s := &segment{hasStep: dropAt > 0}
	for _, i := range idx {
		s.x = append(s.x, p[i].Tokens/ref)
		s.y = append(s.y, p[i].Loss)
		s.w = append(s.w, 1)
		s.step = append(s.step, dropAt > 0 && p[i].Tokens >= dropAt)
	}
	if len(s.x) == 0 {
		return nil
	}
	return s
}

// scanWindow fits the points from cut on, with the schedule change (if
// any) that the Bayesian information criterion prefers: a step at one of
// 17 candidate points between 10% and 90% of the window, refined between
// its neighbours, kept only when it lowers the BIC by 10 (strong evidence,
// Kass and Raftery 1995). The BIC counts the points as n(1-ρ)/(1+ρ)
// independent ones, ρ the no-change fit's residual autocorrelation: noise
// correlated over steps otherwise looks like structure.
func scanWindow(p []Point, cut, ref float64) window {
	base := buildSegment(p, cut, 0, ref)
	best := window{seg: base, cut: cut}
	if base == nil || len(base.x) < minPoints {
		return best
	}
	n := float64(len(base.x))
	base.logs()
	r0 := fitVarPro(base)
	resid := make([]float64, len(base.x))
	for i := range base.x {
		resid[i] = base.y[i] - r0.predict(base, i)
	}
	rho := math.Min(math.Max(lag1(resid), 0), 0.95)
	ne := n * (1 - rho) / (1 + rho)
	bic := func(sse float64, k float64) float64 { return ne*math.Log(sse/n) + k*math.Log(ne) }
	b0 := bic(r0.sse, 3)
	try := func(at float64) float64 {
		s := &segment{x: base.x, lnx: base.lnx, y: base.y, w: base.w, hasStep: true, step: make([]bool, len(base.x))}
		for i, x := range base.x {
			s.step[i] = x*ref >= at
		}
		r := fitVarPro(s)
		if r.drop <= 0 {
			return math.Inf(1)
		}
		return bic(r.sse, 5)
	}
	lo, hi := base.x[0]*ref, base.x[len(base.x)-1]*ref
	bestB, bestAt, step := math.Inf(1), 0.0, (hi-lo)/20
	for k := 2; k <= 18; k++ {
		if b := try(lo + float64(k)*step); b < bestB {
			bestB, bestAt = b, lo+float64(k)*step
		}
	}
	for k := -4; k <= 4; k++ {
		if at := bestAt + float64(k)*step/5; k != 0 {
			if b := try(at); b < bestB {
				bestB, bestAt = b, at
			}
		}
	}
	if bestB < b0-10 {
		best.dropAt = bestAt
		best.seg = buildSegment(p, cut, bestAt, ref)
	}
	return best
}

// agrees says whether the points in [lo, hi) lie on the law of the window
// prev that starts at hi, judged by the window w that adds them: (1) the
// added points' earlier half lies no more than three standard errors above
// w's law (warm-up lies above the law, most at its start), and (2) adding
// them does not bend the law away from prev's points: w fits those no
// worse than prev did by more than 12 noise variances (a Chow test; 12 is
// the 99.3% point of chi-square with 3 degrees of freedom). Standard
// errors and variances count the residuals' autocorrelation.
func agrees(w, prev window, lo, hi, ref float64, need int) bool {
	if w.seg == nil || len(w.seg.x) < need {
		return false
	}
	r := fitVarPro(w.seg)
	resid := make([]float64, len(w.seg.x))
	for i := range w.seg.x {
		resid[i] = w.seg.y[i] - r.predict(w.seg, i)
	}
	s, rho := madScale(resid), math.Min(math.Max(0, lag1(resid)), 0.95)
	infl := (1 + rho) / (1 - rho)
	var band []float64
	for i, x := range w.seg.x {
		if t := x * ref; t >= lo && t < hi {
			band = append(band, resid[i])
		}
	}
	band = band[:(len(band)+1)/2]
	if m := float64(len(band)); m >= 3 {
		var mean float64
		for _, e := range band {
			mean += e
		}
		if mean /= m; mean > 3*s*math.Sqrt(infl/m) {
			return false
		}
	}
	if prev.seg == nil || s == 0 {
		return true
	}
	// prev's points under w's law (w's step, if any, placed as prev's is
	// not comparable: use w's own step flags by token)
	pr := fitVarPro(prev.seg)
	var worse float64
	for i, x := range prev.seg.x {
		t := x * ref
		v := r.e + r.a*math.Exp(-r.alpha*prev.seg.lnx[i])
		if w.dropAt > 0 && t >= w.dropAt {
			v -= r.drop
		}
		e := prev.seg.y[i] - v
		e0 := prev.seg.y[i] - pr.predict(prev.seg, i)
		worse += e*e - e0*e0
	}
	return worse/(s*s*infl) <= 12
}
