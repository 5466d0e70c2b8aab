package plan

import (
	"fmt"
	"math"
)

// Siblings: a layout not measured in the same job whose parallel shape (tp,
// pp, cp, ep, etp) was is predicted from that measurement, scaled by the
// corrected model's ratio between the two. The degrees decide most of what
// a model cannot know about a cluster (which links carry which collective,
// how the pipeline overlaps); within one shape the model's differences
// (micro-batch, ZeRO stage, recompute) are what it knows best. Without this,
// one global factor fitted to a few measured shapes ranks an unmeasured
// sibling of a slow measured layout ahead of a fast measured one, as
// trainrun run --tune's trials showed (e2e TestRunTune).

// shapeMeasure is one layout measured in the same job, for its siblings.
type shapeMeasure struct {
	layout  string  // layoutKey
	lnStep  float64 // the measurement (median of its runs)
	spread  float64
	lnModel float64 // the corrected model's ln step for it (set after the fit)
}

// shapeKey names a layout's parallel shape.
func shapeKey(l Layout) string {
	l = normalizeLayout(l)
	etp := l.ETP
	if etp == 0 {
		etp = l.TP
	}
	return fmt.Sprintf("tp=%d,pp=%d,cp=%d,ep=%d,etp=%d", l.TP, l.PP, l.CP, l.EP, etp)
}

// addShapes keeps the same job's measured layouts by shape, with the
// corrected model's prediction for each (a: the fitted ln factors).
func (k *Correction) addShapes(exact map[string][]Observation, terms map[string][nTerms]float64, a [nTerms]float64) {
	k.shapes = map[string][]shapeMeasure{}
	for key, ex := range k.exact {
		obs := exact[key]
		if len(obs) == 0 {
			continue
		}
		s := shapeKey(obs[0].Layout)
		k.shapes[s] = append(k.shapes[s], shapeMeasure{layout: key, lnStep: ex.lnStep, spread: ex.spread,
			lnModel: math.Log(predictWith(a, terms[key]))})
	}
}

// sibling is the prediction of layout l (the corrected model's ln step
// lnModel, its band's ln half-width hModel) combined with the measured
// layout of its shape nearest to it by the model, each weighted by the
// inverse of its variance: the sibling's is its spread and how far the
// model moves l from it, so a good global fit keeps its say where the
// layouts differ much (recompute), and a poor one yields to a near
// measurement. It returns the ln step, the ln half-width and the sibling;
// ok false when l's shape was not measured in the same job.
func (k *Correction) sibling(l Layout, lnModel, hModel float64) (ln, h float64, sib string, ok bool) {
	best := -1
	ms := k.shapes[shapeKey(l)]
	for i, m := range ms {
		if best < 0 || math.Abs(lnModel-m.lnModel) < math.Abs(lnModel-ms[best].lnModel) {
			best = i
		}
	}
	if best < 0 || math.IsNaN(ms[best].lnModel) || math.IsInf(ms[best].lnModel, 0) {
		return 0, 0, "", false
	}
	m := ms[best]
	d := lnModel - m.lnModel
	hs := math.Max(m.spread/2, math.Abs(d)) + bandFloor
	ws, wm := 1/(hs*hs), 1/math.Max(hModel*hModel, bandFloor*bandFloor)
	return (ws*(m.lnStep+d) + wm*lnModel) / (ws + wm), math.Sqrt(1 / (ws + wm)), m.layout, true
}

// expected is the factor from an unmeasured layout's median prediction to
// its expected step time, e^(h²/2) for the band's ln half-width h, when the
// job has layouts measured in it (known: this layout is one, or a sibling
// of one): a measurement is a time, a prediction a spread of times, and the
// run should train the layout expected to be fastest. A good fit (h small)
// hardly moves it; one global factor that fits the measured layouts badly
// (h large) no longer ranks a guessed layout ahead of a measured fast one.
// Without measurements in the job, nothing changes.
func (k *Correction) expected(known bool, h float64) float64 {
	if known || len(k.exact) == 0 {
		return 1
	}
	return math.Exp(h * h / 2)
}
