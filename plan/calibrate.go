package plan

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// Site calibration: corrections of the time model fitted to a site's own
// measured runs (observations). The model stays the physics of time.go; what
// a calibration changes is the efficiency of each of its terms, one factor
// per group of terms, fitted to the observations nearest to the job:
//
//   - compute: the GPU's own work (GEMMs, attention, elementwise kernels,
//     recompute, optimizer, stragglers) and the pipeline bubble, which is
//     idle time proportional to it;
//   - comm: the exposed TP, CP, PP and DP communication;
//   - ep: the expert-parallel all-to-all;
//   - offload: host and NVMe transfers.
//
// The fit minimises Σ w_i·ln²(pred_i/measured_i) + Σ λ_k·ln² f_k over the
// factors f_k (Gauss-Newton on ln f): each observation's weight w_i falls
// with its distance from the job (stack, GPU, precision, dense or MoE, model
// size, GPU count), and the ridge term λ_k keeps a factor at 1 until the
// evidence moves it: a term an observation hardly exercises is hardly moved
// by it. A layout measured in the same job (same model, batch, GPUs and
// software) is predicted from its measurement, the model only breaking ties.
// The band shrinks with the evidence: ln-half-width
// √(σ²·(1+1/n) + σ₀²/(1+n)), σ the weighted residual spread after the fit,
// n the effective number of observations ((Σw)²/Σw²), σ₀ the uncalibrated
// band's (uncertainty.go).

// Observation is one measured run of a layout, as the planner needs it.
type Observation struct {
	ID     string  // names it in the plan's explanation (job, run, time)
	Inputs Inputs  // what the plan of the run was computed from
	Layout Layout  // the layout it trained
	StepS  float64 // median steady step time, seconds
	Steps  int     // steps behind the median
	Spread float64 // relative spread of the step times ((p90−p10)/median), 0 = unknown
	// PlannedStep is the step time the recorded plan predicted (its
	// time.step_s), 0 = unknown. The plan JSON writes block recompute as
	// "full"; the planned step tells which of the two ran.
	PlannedStep float64
}

// Term groups of the correction.
const (
	termCompute = iota
	termComm
	termEP
	termOffload
	nTerms
)

var termNames = [nTerms]string{"compute", "comm", "ep", "offload"}

// ridge is each factor's prior strength, in units of one observation at
// distance 0: compute moves with the first observation (how far is left to
// shrinkage, below), communication and the rest need more (their share of a
// step is smaller and rides on fewer kernels the observation isolates).
var ridge = [nTerms]float64{0.01, 0.5, 0.5, 0.5}

// maxDistance: observations farther than this from the job do not count
// (weight e^−d below 2 %); another stack is 4 away on its own, so it never
// counts.
const maxDistance = 4.0

// Correction is a calibration fitted for one job (model, job, cluster).
type Correction struct {
	Factors  [nTerms]float64
	Evidence float64 // effective number of observations
	Sigma    float64 // weighted ln residual spread after the fit
	Used     []ObservationUse
	exact    map[string]exactMeasure
	shapes   map[string][]shapeMeasure // the same job's measured layouts by parallel shape (calibrate_shape.go)
}

// ObservationUse is one observation that moved the plan and by how much.
type ObservationUse struct {
	ID        string  `json:"id"`
	Weight    float64 `json:"weight"` // share of the fit's total weight
	Layout    string  `json:"layout"`
	Measured  float64 `json:"measured_step_s"`
	Predicted float64 `json:"predicted_step_s"` // the uncalibrated model's
	Corrected float64 `json:"corrected_step_s"` // after the fit
}

type exactMeasure struct {
	lnStep, spread float64
	n              int
}

// CalibrationNote is the plan's account of its calibration (the "calibration"
// key of the plan JSON): how much the step moved and which observations did it.
type CalibrationNote struct {
	Observations   int                `json:"observations"` // within reach of the job
	Evidence       float64            `json:"evidence"`     // effective number
	Factors        map[string]float64 `json:"factors"`
	UncalibratedS  float64            `json:"step_s_uncalibrated"`
	UncalibRange   [2]float64         `json:"step_s_range_uncalibrated"`
	Moved          float64            `json:"moved"` // step_s / step_s_uncalibrated − 1
	MeasuredLayout bool               `json:"measured_layout"`
	// MeasuredSibling is the layout of the same job and parallel shape whose
	// measurement this one is scaled from ("" = none; calibrate_shape.go).
	MeasuredSibling string           `json:"measured_sibling,omitempty"`
	Nearest         []ObservationUse `json:"nearest"`
}

// distance is how far an observation's job is from the job planned.
func distance(m Model, j Job, c Cluster, om Model, oj Job, oc Cluster) float64 {
	d := 0.0
	sa, sb := stackBase(j.Stack), stackBase(oj.Stack)
	if sa == StackNeMo {
		sa = StackMegatronCore
	}
	if sb == StackNeMo {
		sb = StackMegatronCore
	}
	switch {
	case sa != sb:
		d += 4
	case j.Stack != oj.Stack:
		d += 0.5
	}
	if c.GPU.Name != oc.GPU.Name {
		d++
		if c.GPU.Arch != oc.GPU.Arch {
			d += 2
		}
	}
	if j.Precision != oj.Precision {
		d += 1.5
	}
	if m.isMoE() != om.isMoE() {
		d += 2
	}
	if j.frozenBase() != oj.frozenBase() {
		d++
	}
	d += 0.5 * math.Abs(math.Log(math.Max(m.Params(), 1)/math.Max(om.Params(), 1)))
	d += 0.25 * math.Abs(math.Log(float64(max(c.GPUs, 1))/float64(max(oc.GPUs, 1))))
	d += 0.25 * math.Abs(math.Log(float64(max(j.SeqLen, 1))/float64(max(oj.SeqLen, 1))))
	return d
}

// sameJob reports whether two jobs differ in nothing but the layout.
func sameJob(m Model, j Job, c Cluster, om Model, oj Job, oc Cluster) bool {
	m.Name, om.Name = "", ""
	j.Tokens, oj.Tokens = 0, 0
	return m == om && j == oj && c.GPU.Name == oc.GPU.Name && c.GPUs == oc.GPUs
}

func termsOf(t Time) [nTerms]float64 {
	return [nTerms]float64{
		termCompute: t.Compute + t.Recompute + t.Optimizer + t.Straggler + t.PPBubble,
		termComm:    t.TPComm + t.CPComm + t.PPComm + t.DPCommExposed,
		termEP:      t.EPComm,
		termOffload: t.Offload,
	}
}

// layoutKey names a layout for matching measurements: block recompute is
// "full" in the plan JSON, so the recomputed layer count is left out.
func layoutKey(l Layout) string {
	l = normalizeLayout(l)
	l.RecomputeLayers, l.GradAccum = 0, 0
	return l.Config()
}

type fitRow struct {
	terms  [nTerms]float64
	lnMeas float64
	w      float64
	use    ObservationUse
}

// Calibrate fits a correction for m, j on c from the observations; nil when
// none is within reach (the plan is then exactly the uncalibrated one).
func Calibrate(obs []Observation, m Model, j Job, c Cluster) *Correction {
	if j.Precision == "" {
		j.Precision = BF16
	}
	var rows []fitRow
	exact := map[string][]Observation{}
	exactTerms := map[string][nTerms]float64{}
	for _, o := range obs {
		if o.StepS <= 0 || math.IsNaN(o.StepS) || math.IsInf(o.StepS, 0) {
			continue
		}
		om, oj, oc, err := o.Inputs.Resolve()
		if err != nil {
			continue
		}
		d := distance(m, j, c, om, oj, oc)
		if d >= maxDistance {
			continue
		}
		var x shape
		var e Evaluation
		evaluate(&x, om, oj, oc, o.Layout, &e)
		if l := o.Layout; l.Recompute == "full" && l.RecomputeLayers == 0 && o.PlannedStep > 0 && e.Time.Step > 0 {
			// Block recompute of the fewest layers that fit, if that is
			// what the recorded plan's step time says ran.
			if l.RecomputeLayers = minRecomputeLayers(&x, om, oj, oc, l); l.RecomputeLayers > 0 {
				var eb Evaluation
				evaluate(&x, om, oj, oc, l, &eb)
				if math.Abs(math.Log(eb.Time.Step/o.PlannedStep)) < math.Abs(math.Log(e.Time.Step/o.PlannedStep)) {
					e = eb
				}
			}
		}
		if e.Time.Step <= 0 {
			continue // the layout is not one the model can time
		}
		rows = append(rows, fitRow{terms: termsOf(e.Time), lnMeas: math.Log(o.StepS), w: math.Exp(-d),
			use: ObservationUse{ID: o.ID, Layout: layoutKey(o.Layout), Measured: o.StepS, Predicted: e.Time.Step}})
		if sameJob(m, j, c, om, oj, oc) {
			k := layoutKey(o.Layout)
			exact[k] = append(exact[k], o)
			exactTerms[k] = termsOf(e.Time)
		}
	}
	if len(rows) == 0 {
		return nil
	}
	k := &Correction{}
	a := fitFactors(rows)
	downweightOutliers(rows, a)
	a = fitFactors(rows)
	g := shrinkage(rows)
	for i := range a {
		a[i] *= g
	}
	var sw, sw2, swr2 float64
	for i := range rows {
		r := &rows[i]
		p := predictWith(a, r.terms)
		r.use.Corrected = p
		res := math.Log(p) - r.lnMeas
		sw += r.w
		sw2 += r.w * r.w
		swr2 += r.w * res * res
	}
	for i := range a {
		k.Factors[i] = math.Exp(a[i])
	}
	k.Evidence = sw * sw / sw2
	k.Sigma = math.Sqrt(swr2 / sw)
	sort.SliceStable(rows, func(x, y int) bool { return rows[x].w > rows[y].w })
	for _, r := range rows {
		u := r.use
		u.Weight = r.w / sw
		k.Used = append(k.Used, u)
	}
	k.exact = map[string]exactMeasure{}
	for key, os := range exact {
		var ls, sp []float64
		for _, o := range os {
			ls = append(ls, math.Log(o.StepS))
			sp = append(sp, o.Spread)
		}
		k.exact[key] = exactMeasure{lnStep: median(ls), spread: median(sp), n: len(os)}
	}
	k.addShapes(exact, exactTerms, a)
	return k
}

// downweightOutliers gives observations far from the first fit Huber weights
// (full weight within 2.5 robust standard deviations, then falling as 1/|r|):
// a run on a slow node, or one whose setting the plan has no key for, must
// not drag the factors for everyone.
func downweightOutliers(rows []fitRow, a [nTerms]float64) {
	res := make([]float64, len(rows))
	for i, r := range rows {
		res[i] = math.Abs(math.Log(predictWith(a, r.terms)) - r.lnMeas)
	}
	s := math.Max(1.4826*median(res), noiseFloor)
	for i := range rows {
		if res[i] > 2.5*s {
			rows[i].w *= 2.5 * s / res[i]
		}
	}
}

// noiseFloor is the ln spread below which observations are not taken to
// agree better: run-to-run variation plus what the model's structure gets
// wrong from one layout to the next.
const noiseFloor = 0.03

// shrinkage pulls the fitted factors toward 1 by how sure the observations
// are of the bias they show (a James-Stein-style factor μ²/(μ²+σ²/n)): μ the
// weighted mean ln error of the uncalibrated model on them, σ their spread
// around it (at least noiseFloor), n their effective number. Observations
// that scatter around the model's prediction move it little.
func shrinkage(rows []fitRow) float64 {
	var sw, sw2, swr float64
	for _, r := range rows {
		sw += r.w
		sw2 += r.w * r.w
		swr += r.w * (math.Log(r.use.Predicted) - r.lnMeas)
	}
	mu := swr / sw
	var v float64
	for _, r := range rows {
		d := math.Log(r.use.Predicted) - r.lnMeas - mu
		v += r.w * d * d
	}
	v = math.Max(v/sw, noiseFloor*noiseFloor)
	se2 := v / (sw * sw / sw2)
	return mu * mu / (mu*mu + se2)
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	n := len(s)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func predictWith(a [nTerms]float64, t [nTerms]float64) float64 {
	p := 0.0
	for k := range t {
		p += math.Exp(a[k]) * t[k]
	}
	return p
}

// fitFactors is the ridge-regularised Gauss-Newton fit of the ln factors.
func fitFactors(rows []fitRow) [nTerms]float64 {
	var a [nTerms]float64
	const lim = 4.6052 // factors stay within [1/100, 100]: a trainer bound by something the model does not see (a data loader, a sleep) is still learnt
	for range 20 {
		var A [nTerms][nTerms]float64
		var g [nTerms]float64
		for k := range nTerms {
			A[k][k] = ridge[k]
			g[k] = ridge[k] * a[k]
		}
		for _, r := range rows {
			p := predictWith(a, r.terms)
			res := math.Log(p) - r.lnMeas
			var jac [nTerms]float64
			for k := range nTerms {
				jac[k] = math.Exp(a[k]) * r.terms[k] / p
			}
			for k := range nTerms {
				g[k] += r.w * jac[k] * res
				for l := range nTerms {
					A[k][l] += r.w * jac[k] * jac[l]
				}
			}
		}
		d, ok := solve(A, g)
		if !ok {
			break
		}
		step := 0.0
		for k := range nTerms {
			a[k] = math.Max(-lim, math.Min(lim, a[k]-d[k]))
			step = math.Max(step, math.Abs(d[k]))
		}
		if step < 1e-6 {
			break
		}
	}
	return a
}

// solve solves A·x = b by Gaussian elimination with partial pivoting.
func solve(A [nTerms][nTerms]float64, b [nTerms]float64) ([nTerms]float64, bool) {
	var x [nTerms]float64
	for c := range nTerms {
		p := c
		for r := c + 1; r < nTerms; r++ {
			if math.Abs(A[r][c]) > math.Abs(A[p][c]) {
				p = r
			}
		}
		if math.Abs(A[p][c]) < 1e-12 {
			return x, false
		}
		A[c], A[p] = A[p], A[c]
		b[c], b[p] = b[p], b[c]
		for r := c + 1; r < nTerms; r++ {
			f := A[r][c] / A[c][c]
			for k := c; k < nTerms; k++ {
				A[r][k] -= f * A[c][k]
			}
			b[r] -= f * b[c]
		}
	}
	for c := nTerms - 1; c >= 0; c-- {
		s := b[c]
		for k := c + 1; k < nTerms; k++ {
			s -= A[c][k] * x[k]
		}
		x[c] = s / A[c][c]
	}
	return x, true
}

// exactWeight is how many measurements the model's own prediction counts as
// when the layout was measured in the same job.
const exactWeight = 0.05

// bandFloor is the narrowest band: run-to-run variation of a step time.
const bandFloor = 0.02

// apply corrects one evaluation in place: its time terms, step, band and
// throughput figures, and (note) its calibration account.
func (k *Correction) apply(e *Evaluation, c Cluster, tokensPerStep float64, note bool) {
	if k == nil || e.Time.Step <= 0 {
		return
	}
	t := &e.Time
	before, beforeRange := t.Step, t.StepRange
	scale := [nTerms]float64{}
	for i := range scale {
		scale[i] = k.Factors[i]
	}
	step := predictWith(lnOf(k.Factors), termsOf(*t))
	h0 := 0.0
	if beforeRange[0] > 0 && beforeRange[1] > 0 {
		h0 = math.Log(beforeRange[1]/beforeRange[0]) / 2
	}
	n := k.Evidence
	h := math.Sqrt(k.Sigma*k.Sigma*(1+1/n) + h0*h0/(1+n))
	ex, measured := k.exact[layoutKey(e.Layout)]
	sibling := "" // the measured layout of its shape it is scaled from (calibrate_shape.go)
	if measured {
		// The measurement decides; the model only breaks ties between
		// layouts measured alike. The band is the measurement's spread, and
		// always holds the measured median.
		nn := float64(ex.n)
		ln := (nn*ex.lnStep + exactWeight*math.Log(step)) / (nn + exactWeight)
		for i := range scale {
			scale[i] *= math.Exp(ln) / step
		}
		step = math.Exp(ln)
		h = math.Max(ex.spread/2, math.Abs(ln-ex.lnStep)+bandFloor)
	} else if ln, hs, s, ok := k.sibling(e.Layout, math.Log(step), h); ok {
		for i := range scale {
			scale[i] *= math.Exp(ln) / step
		}
		step, h, sibling = math.Exp(ln), hs, s
	}
	h = math.Max(h, bandFloor)
	band := [2]float64{step * math.Exp(-h), step * math.Exp(h)}
	if x := k.expected(measured || sibling != "", h); x != 1 { // calibrate_shape.go
		for i := range scale {
			scale[i] *= x
		}
		step *= x
	}
	t.Compute *= scale[termCompute]
	t.Recompute *= scale[termCompute]
	t.Optimizer *= scale[termCompute]
	t.Straggler *= scale[termCompute]
	t.PPBubble *= scale[termCompute]
	t.TPComm *= scale[termComm]
	t.CPComm *= scale[termComm]
	t.PPComm *= scale[termComm]
	t.DPCommExposed *= scale[termComm]
	t.EPComm *= scale[termEP]
	t.Offload *= scale[termOffload]
	t.Step = step
	t.StepRange = band
	e.TokensPerSPerGPU = tokensPerStep / step / float64(c.GPUs)
	e.ModelTFLOPSPerGPU = e.TokensPerSPerGPU * e.ModelFlopsPerToken / 1e12
	e.MFU = e.ModelTFLOPSPerGPU * 1e12 / c.GPU.PeakBF16
	if !note {
		return
	}
	cn := &CalibrationNote{Observations: len(k.Used), Evidence: math.Round(n*100) / 100, Factors: map[string]float64{},
		UncalibratedS: before, UncalibRange: beforeRange, Moved: step/before - 1, MeasuredLayout: measured, MeasuredSibling: sibling}
	for i, f := range k.Factors {
		cn.Factors[termNames[i]] = math.Round(f*1000) / 1000
	}
	cn.Nearest = k.Used[:min(len(k.Used), 3)]
	e.Calibration = cn
	for i, w := range e.Why { // the lines of the model's own figures say whose they are
		if strings.HasPrefix(w, "step ") || strings.Contains(w, " tokens/s/GPU, ") {
			e.Why[i] = "uncalibrated model: " + w
		}
	}
	e.Why = append(e.Why, k.why(cn))
}

func lnOf(f [nTerms]float64) [nTerms]float64 {
	var a [nTerms]float64
	for i := range f {
		a[i] = math.Log(f[i])
	}
	return a
}

// why is the plan's line saying which observations moved it and how much.
func (k *Correction) why(cn *CalibrationNote) string {
	var b strings.Builder
	fmt.Fprintf(&b, "calibration: step %.3f s → %.3f s (%+.1f%%) from %d observation(s) within reach (evidence %.1f): factors compute ×%.3f, comm ×%.3f, ep ×%.3f, offload ×%.3f",
		cn.UncalibratedS, cn.UncalibratedS*(1+cn.Moved), 100*cn.Moved, cn.Observations, cn.Evidence,
		k.Factors[termCompute], k.Factors[termComm], k.Factors[termEP], k.Factors[termOffload])
	if cn.MeasuredLayout {
		b.WriteString("; this layout was measured in the same job")
	} else if cn.MeasuredSibling != "" {
		fmt.Fprintf(&b, "; scaled from %s, measured in the same job with the same parallel degrees", cn.MeasuredSibling)
	}
	b.WriteString("; nearest:")
	for i, u := range cn.Nearest {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, " %s (weight %.0f%%, measured %.3f s, model %.3f s → %.3f s)", u.ID, 100*u.Weight, u.Measured, u.Predicted, u.Corrected)
	}
	return b.String()
}

// Apply corrects an evaluation of m, j on c (Evaluate's answer) with its
// calibration note and Why line. A nil correction changes nothing.
func (k *Correction) Apply(e *Evaluation, j Job, c Cluster) {
	k.apply(e, c, float64(j.GlobalBatch)*float64(j.SeqLen), true)
}
