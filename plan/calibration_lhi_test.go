package plan

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"testing"
)

// Leave-half-in (issue 29's acceptance): for every family with at least four
// rows, half of its rows (every other one, in file order) become a site
// calibration's observations and the other half is predicted with the
// correction fitted to them (calibrate.go), the same way `trainrun calib
// import` and `trainrun plan --calibration` do. Two bases are reported:
//
//   - LOFO base: the stack constants fitted without the family (as in the
//     LOFO column): the family is unseen by the model, only its observed
//     half is known. This is the out-of-sample figure.
//   - in-sample base: the constants fitted on all rows, the family's
//     predicted half included (the in-sample column).
//
// The bars: median |error| of the predicted halves ≤ 8 %, and no family's
// mean |error| worse with the observations than without them, nor its median
// by more than lhiTolerance.

// lhiMinRows is the smallest family the check runs on.
const lhiMinRows = 4

// rowJob is a calibration row as the planner sees it: the job, the layout
// predictRun evaluates, and the published step time.
func rowJob(t testing.TB, r publishedRun) (Model, Job, Cluster, Layout, float64) {
	m := r.model()
	gbs, _ := r.globalBatch()
	j := r.job()
	c := r.cluster(t)
	l, rc := r.layout()
	if rc != "" {
		l.Recompute = rc
	} else {
		l.Recompute = "none"
		if e := Evaluate(m, j, c, l); !e.Memory.Fits {
			l.Recompute = "full"
			var x shape
			l.RecomputeLayers = minRecomputeLayers(&x, m, j, c, l)
		}
	}
	pub, _ := r.published(m)
	step := 0.0
	if pub > 0 {
		step = float64(gbs) * float64(r.SeqLen) / (pub * float64(r.NumGPUs))
	}
	return m, j, c, l, step
}

type lhiFamily struct {
	name             string
	observed, pred   int
	before, after    []float64 // errors of the predicted half, tokens/s
	inBefore, inAftr []float64 // the same on the in-sample base
	inBand           int       // predicted rows whose published step lies in the calibrated band
	contradicts      bool      // two rows are one plan with different published figures
	conflict         string
}

// lhiTolerance: a family's median |error| may rise this much with the
// calibration (its mean may not rise at all): with four to six predicted
// rows the median is one or two rows, and a factor that moves every row the
// same way cannot help a row the model erred on in the other direction.
const lhiTolerance = 0.005

func absMean(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += math.Abs(x)
	}
	return s / math.Max(float64(len(xs)), 1)
}

// contradiction finds two rows that are the same plan (inputs and layout)
// with published step times more than 20 % apart.
func contradiction(t testing.TB, fam []publishedRun) (bool, string) {
	seen := map[string]float64{}
	for _, r := range fam {
		m, j, c, l, step := rowJob(t, r)
		m.Name = ""
		k := fmt.Sprintf("%+v %+v %s %d %s", m, j, c.GPU.Name, c.GPUs, layoutKey(l))
		if s, ok := seen[k]; ok && math.Abs(math.Log(s/step)) > math.Log(1.2) {
			return true, fmt.Sprintf("%.2f×", math.Max(s/step, step/s))
		}
		seen[k] = step
	}
	return false, ""
}

// viaRecord is the observation as `trainrun calib import` reads it from a
// record written from `trainrun plan --format json --fix <the layout>`: the
// plan JSON, inputs included, parsed back.
func viaRecord(t testing.TB, id string, m Model, j Job, c Cluster, l Layout, step float64) Observation {
	e := Evaluate(m, j, c, l)
	var b strings.Builder
	if err := RenderJSONWithInputs(&b, Result{Plan: &e, Alternatives: []Evaluation{}, Rejected: []Rejection{}}, InputsOf(m, j, c, "")); err != nil {
		t.Fatal(err)
	}
	pr, err := ParsePlanJSON([]byte(b.String()))
	if err != nil || pr.Inputs == nil {
		t.Fatalf("%s: the plan JSON does not parse back: %v", id, err)
	}
	return Observation{ID: id, Inputs: *pr.Inputs, Layout: pr.Layout, StepS: step, Steps: 1, PlannedStep: pr.Step}
}

// leaveHalfIn runs the check on base constants fitted by fit(train rows).
func leaveHalfIn(t testing.TB, fam []publishedRun, base func() (map[Stack]float64, float64)) (before, after []float64, inBand int) {
	var obs []Observation
	for i, r := range fam {
		if i%2 != 0 {
			continue
		}
		m, j, c, l, step := rowJob(t, r)
		if step > 0 {
			obs = append(obs, viaRecord(t, r.ID, m, j, c, l, step))
		}
	}
	eff, pooled := base()
	withStackEff(eff, pooled, func() {
		for i, r := range fam {
			if i%2 == 0 {
				continue
			}
			m, j, c, l, step := rowJob(t, r)
			if step <= 0 {
				continue
			}
			e := Evaluate(m, j, c, l)
			before = append(before, step/e.Time.Step-1)
			Calibrate(obs, m, j, c).Apply(&e, j, c)
			after = append(after, step/e.Time.Step-1)
			if step >= e.Time.StepRange[0] && step <= e.Time.StepRange[1] {
				inBand++
			}
		}
	})
	return before, after, inBand
}

// leaveHalfInDoc is calibration.md's leave-half-in section; it fails the test
// when a bar is missed.
func leaveHalfInDoc(t testing.TB, runs []publishedRun, allEff map[Stack]float64, allPooled float64) string {
	fams := map[string][]publishedRun{}
	for _, r := range runs {
		fams[r.family()] = append(fams[r.family()], r)
	}
	var names []string
	for f, rs := range fams {
		if len(rs) >= lhiMinRows {
			names = append(names, f)
		}
	}
	sort.Strings(names)
	var out []lhiFamily
	for _, f := range names {
		fam := fams[f]
		var train []publishedRun
		for _, r := range runs {
			if r.family() != f {
				train = append(train, r)
			}
		}
		lf := lhiFamily{name: f, observed: (len(fam) + 1) / 2, pred: len(fam) / 2}
		lf.contradicts, lf.conflict = contradiction(t, fam)
		lf.before, lf.after, lf.inBand = leaveHalfIn(t, fam, func() (map[Stack]float64, float64) { return fitStacks(t, train) })
		lf.inBefore, lf.inAftr, _ = leaveHalfIn(t, fam, func() (map[Stack]float64, float64) { return allEff, allPooled })
		out = append(out, lf)
	}
	var b strings.Builder
	b.WriteString("\n## Leave-half-in: a site calibration of half of each family predicts the other half (issue 29)\n\n")
	b.WriteString("Every family with at least four rows: every other row (file order) is imported as an observation (its published layout and step time, written as `trainrun plan --format json` prints it and parsed back as `trainrun calib import` reads it), the remaining rows are predicted by `Calibrate` + `Apply` (plan/calibrate.go), which is what `trainrun plan --calibration` does. *LOFO base*: the stack constants fitted without the family, so only its observed half is known of it (out of sample). *in-sample base*: constants fitted on all rows, the predicted half included (in-sample for the constants, shown for comparison). Errors are of tokens/s/GPU on the predicted half, medians of |error| (the mean of the two middle values for an even count); *in band*: predicted rows whose published step lies inside the calibrated step_s_range. Bars: overall median ≤ 8 %; per family the mean |error| never worse and the median not worse by more than 0.5 points.\n\n")
	b.WriteString("| family | observed | predicted | LOFO base: without | with calibration | in band | in-sample base: without | with calibration |\n|---|---:|---:|---:|---:|---:|---:|---:|\n")
	var allB, allA, allIB, allIA []float64
	for _, f := range out {
		fmt.Fprintf(&b, "| %s | %d | %d | %.1f %% | %.1f %% | %d/%d | %.1f %% | %.1f %% |\n", f.name, f.observed, f.pred,
			100*absMed(f.before), 100*absMed(f.after), f.inBand, len(f.after), 100*absMed(f.inBefore), 100*absMed(f.inAftr))
		allB, allA = append(allB, f.before...), append(allA, f.after...)
		allIB, allIA = append(allIB, f.inBefore...), append(allIA, f.inAftr...)
		worse := func(before, after []float64) bool {
			return absMed(after) > absMed(before)+lhiTolerance || absMean(after) > absMean(before)+1e-9
		}
		if (worse(f.before, f.after) || worse(f.inBefore, f.inAftr)) && !f.contradicts {
			t.Errorf("leave-half-in %s: the calibration made the |error| worse (median, LOFO base %.2f%% → %.2f%%, in-sample base %.2f%% → %.2f%%; mean %.2f%% → %.2f%%)",
				f.name, 100*absMed(f.before), 100*absMed(f.after), 100*absMed(f.inBefore), 100*absMed(f.inAftr), 100*absMean(f.before), 100*absMean(f.after))
		}
	}
	for _, f := range out {
		if f.contradicts {
			fmt.Fprintf(&b, "\n- %s: two of its rows are the same plan (same job, same layout as the plan JSON states it) with published throughputs %s apart, so the observed one is taken as the measurement of the predicted one; the bar \"never worse\" is not applied to it (internevo-7b-1024gpu-tp1-zeroall differs from -tp1-zero8 only in the ZeRO shard-group size, which no plan key carries).\n", f.name, f.conflict)
		}
	}
	fmt.Fprintf(&b, "\n**Leave-half-in over %d predicted rows of %d families: LOFO base median |error| %.1f %% → %.1f %% with the calibration (p90 %.1f %% → %.1f %%); in-sample base %.1f %% → %.1f %%** (target ≤ 8 %%, never worse).\n",
		len(allA), len(out), 100*absMed(allB), 100*absMed(allA), 100*absQ(allB, 0.9), 100*absQ(allA, 0.9), 100*absMed(allIB), 100*absMed(allIA))
	if m := absMed(allA); m > 0.08 || math.IsNaN(m) {
		t.Errorf("leave-half-in median |error| %.1f%% above 8%%", 100*m)
	}
	return b.String()
}

// absMed is the median |x| (the mean of the two middle values for an even
// count: a family's predicted half is often four rows).
func absMed(xs []float64) float64 {
	a := make([]float64, len(xs))
	for i, x := range xs {
		a[i] = math.Abs(x)
	}
	return median(a)
}
