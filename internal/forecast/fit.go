package forecast

import (
	"math"
	"slices"
)

// Law is the fitted curve:
//
//	L(D) = E + A·(D/Ref)^(-Alpha) - Drop·[D >= DropAt]
//
// the saturating power law of Kaplan et al. (2020) and Hoffmann et al.
// (2022, "Chinchilla", eq. 2 with the model size held fixed): E is the
// loss the run's model and data approach, A the reducible part left at Ref
// tokens (Ref is the last observed point, so A is well scaled), Alpha the
// data exponent. Drop is a learning-rate schedule change (a step decay, the
// decay phase of a warmup-stable-decay schedule): the loss falls by Drop
// within a short transition after DropAt tokens and then follows the same
// law lower down. DropAt 0 means no change was detected.
type Law struct {
	E, A, Alpha  float64
	Ref          float64
	Drop, DropAt float64
}

// At is the law's loss at tokens.
func (l Law) At(tokens float64) float64 {
	v := l.E + l.A*math.Pow(tokens/l.Ref, -l.Alpha)
	if l.DropAt > 0 && tokens >= l.DropAt {
		v -= l.Drop
	}
	return v
}

// Floor is the loss the law approaches with unlimited tokens.
func (l Law) Floor() float64 {
	if l.DropAt > 0 {
		return l.E - l.Drop
	}
	return l.E
}

// TokensTo is the smallest token count past from at which the law reaches
// loss target, +Inf when it never does (target at or below its floor).
func (l Law) TokensTo(target, from float64) float64 {
	if l.At(from) <= target {
		return from
	}
	floor := l.Floor()
	if target <= floor || l.A <= 0 {
		return math.Inf(1)
	}
	d := l.Ref * math.Pow(l.A/(target-floor), 1/l.Alpha)
	return math.Max(d, from)
}

// Alpha's search range: exponents published for loss against data lie in
// 0.05-0.7 (Kaplan 0.095, Chinchilla 0.28, Besiroglu et al. 2024 0.37);
// the range is wider so that a curve outside it is fitted at the edge,
// visibly, not silently.
const (
	alphaMin = 0.01
	alphaMax = 3.0
)

// segment is the data one fit sees: tokens x (already divided by Ref),
// losses y, robust weights w, and the schedule change (a step at index
// from; points in the transition after it are left out by the caller).
type segment struct {
	x, y, w []float64
	lnx     []float64 // log x, so that x^-alpha is one exp
	step    []bool    // point is at or after the change
	hasStep bool
}

// fitResult is one fit: the law's linear coefficients for the best Alpha,
// and its weighted sum of squared residuals.
type fitResult struct {
	e, a, drop, alpha, sse float64
}

// fitVarPro fits the law to seg by variable projection (Golub and Pereyra
// 1973): for a fixed Alpha the law is linear in E, A and Drop, solved in
// closed form (with E, A, Drop >= 0), so only Alpha is searched, first on a
// log grid and then by golden section around the best grid point. A
// one-dimensional search cannot be trapped by a bad starting point the way
// Levenberg-Marquardt on all parameters can: the E-Alpha trade-off makes
// that surface a long flat valley. (gonum/optimize has no bounded
// least-squares solver; this needs none.)
func fitVarPro(seg *segment) fitResult {
	const grid = 24
	best := fitResult{sse: math.Inf(1)}
	bi := 0
	alphas := make([]float64, grid)
	for i := range alphas {
		alphas[i] = alphaMin * math.Pow(alphaMax/alphaMin, float64(i)/(grid-1))
		if r := solveLinear(seg, alphas[i]); r.sse < best.sse {
			best, bi = r, i
		}
	}
	lo, hi := alphas[max(bi-1, 0)], alphas[min(bi+1, grid-1)]
	// golden section on log Alpha
	g := (math.Sqrt(5) - 1) / 2
	a, b := math.Log(lo), math.Log(hi)
	c, d := b-g*(b-a), a+g*(b-a)
	fc, fd := solveLinear(seg, math.Exp(c)), solveLinear(seg, math.Exp(d))
	for range 20 {
		if fc.sse < fd.sse {
			b, d, fd = d, c, fc
			c = b - g*(b-a)
			fc = solveLinear(seg, math.Exp(c))
		} else {
			a, c, fc = c, d, fd
			d = a + g*(b-a)
			fd = solveLinear(seg, math.Exp(d))
		}
	}
	for _, r := range []fitResult{fc, fd} {
		if r.sse < best.sse {
			best = r
		}
	}
	return best
}

// solveLinear fits E, A (and Drop) for a fixed alpha by weighted least
// squares, keeping each non-negative: when the unconstrained solution has
// a negative coefficient, every subset of the columns is tried and the best
// feasible one kept (an active set search, exhaustive for three columns).
func solveLinear(seg *segment, alpha float64) fitResult {
	cols := 2
	if seg.hasStep {
		cols = 3
	}
	var ata [3][3]float64
	var aty [3]float64
	seg.logs()
	row := func(i int) [3]float64 {
		r := [3]float64{1, math.Exp(-alpha * seg.lnx[i]), 0}
		if seg.step[i] {
			r[2] = -1
		}
		return r
	}
	for i := range seg.x {
		r, w := row(i), seg.w[i]
		for j := range cols {
			aty[j] += w * r[j] * seg.y[i]
			for k := range cols {
				ata[j][k] += w * r[j] * r[k]
			}
		}
	}
	var yy float64
	for i, y := range seg.y {
		yy += seg.w[i] * y * y
	}
	best := fitResult{sse: math.Inf(1), alpha: alpha}
	for mask := (1 << cols) - 1; mask > 0; mask-- {
		coef, ok := solveMasked(ata, aty, cols, mask)
		if !ok || coef[0] < 0 || coef[1] < 0 || coef[2] < 0 {
			continue
		}
		// the weighted SSE from the normal equations: y'Wy - 2c'A'Wy + c'A'WAc
		sse := yy
		for j := range cols {
			sse -= 2 * coef[j] * aty[j]
			for k := range cols {
				sse += coef[j] * ata[j][k] * coef[k]
			}
		}
		if sse < best.sse {
			best = fitResult{e: coef[0], a: coef[1], drop: coef[2], alpha: alpha, sse: math.Max(sse, 0)}
		}
		if mask == (1<<cols)-1 {
			break // the unconstrained solution is feasible: it is the optimum
		}
	}
	return best
}

// solveMasked solves the normal equations restricted to the columns in
// mask (Gaussian elimination with partial pivoting); the other
// coefficients are 0.
func solveMasked(ata [3][3]float64, aty [3]float64, cols, mask int) ([3]float64, bool) {
	var idx []int
	for j := range cols {
		if mask&(1<<j) != 0 {
			idx = append(idx, j)
		}
	}
	n := len(idx)
	var m [3][4]float64
	for r, j := range idx {
		for c, k := range idx {
			m[r][c] = ata[j][k]
		}
		m[r][n] = aty[j]
	}
	for p := range n {
		piv := p
		for r := p + 1; r < n; r++ {
			if math.Abs(m[r][p]) > math.Abs(m[piv][p]) {
				piv = r
			}
		}
		if math.Abs(m[piv][p]) < 1e-300 {
			return [3]float64{}, false
		}
		m[p], m[piv] = m[piv], m[p]
		for r := range n {
			if r == p {
				continue
			}
			f := m[r][p] / m[p][p]
			for c := p; c <= n; c++ {
				m[r][c] -= f * m[p][c]
			}
		}
	}
	var out [3]float64
	for r, j := range idx {
		out[j] = m[r][n] / m[r][r]
	}
	return out, true
}

// fitRobust fits seg with Huber weights by iteratively reweighted least
// squares (Huber 1964; k = 1.345 gives 95% efficiency on Gaussian noise):
// a loss spike, a bad batch, weighs linearly, not quadratically. It
// returns the fit and the robust residual scale (1.4826·MAD).
func fitRobust(seg *segment) (fitResult, float64) {
	for i := range seg.w {
		seg.w[i] = 1
	}
	var r fitResult
	var scale float64
	res := make([]float64, len(seg.x))
	for it := range 4 {
		r = fitVarPro(seg)
		for i := range seg.x {
			res[i] = seg.y[i] - r.predict(seg, i)
		}
		scale = madScale(res)
		if it == 3 || scale == 0 {
			break
		}
		for i, e := range res {
			seg.w[i] = 1
			if k := 1.345 * scale; math.Abs(e) > k {
				seg.w[i] = k / math.Abs(e)
			}
		}
	}
	return r, scale
}

// logs fills lnx once per segment.
func (seg *segment) logs() {
	if len(seg.lnx) == len(seg.x) {
		return
	}
	seg.lnx = make([]float64, len(seg.x))
	for i, x := range seg.x {
		seg.lnx[i] = math.Log(x)
	}
}

func (r fitResult) predict(seg *segment, i int) float64 {
	seg.logs()
	v := r.e + r.a*math.Exp(-r.alpha*seg.lnx[i])
	if seg.step[i] {
		v -= r.drop
	}
	return v
}

// madScale is 1.4826 times the median absolute deviation from the median:
// the standard deviation for Gaussian data, unmoved by a few spikes.
func madScale(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	med := median(s)
	for i := range s {
		s[i] = math.Abs(s[i] - med)
	}
	return 1.4826 * median(s)
}

// median sorts v in place.
func median(v []float64) float64 {
	slices.Sort(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}
