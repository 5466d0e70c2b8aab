package plan

import (
	"math"
	"sort"
	"testing"
)

// TestLeaveOneArchOut measures how far the fitted model carries to a GPU
// architecture none of its constants saw: every stack efficiency refitted
// without one architecture's rows, that architecture's rows predicted
// with them. Its errors are the basis of unseenArchBand (uncertainty.go):
// the band a prediction gets on an architecture the calibration has no row
// of (a V100, say). It fails when the figure the code uses is no longer at
// least this measurement's p90 of under-prediction of the step time.
func TestLeaveOneArchOut(t *testing.T) {
	runs := loadRuns(t)
	byArch := map[string][]publishedRun{}
	for _, r := range runs {
		if r.HeldOut {
			continue
		}
		a := gpuArchOf(r.GPUType)
		byArch[a] = append(byArch[a], r)
	}
	archs := make([]string, 0, len(byArch))
	for a := range byArch {
		archs = append(archs, a)
	}
	sort.Strings(archs)
	var all []float64 // (published − predicted)/predicted tokens/s: a step that much longer than predicted
	for _, a := range archs {
		var train []publishedRun
		for _, r := range runs {
			if !r.HeldOut && gpuArchOf(r.GPUType) != a {
				train = append(train, r)
			}
		}
		if len(train) == 0 {
			continue
		}
		eff, pooled := fitStacks(t, train)
		var errs []float64
		withStackEff(eff, pooled, func() {
			for _, r := range byArch[a] {
				row := predictRun(t, r)
				if row.pub > 0 && row.pred > 0 {
					errs = append(errs, row.pred/row.pub-1)
				}
			}
		})
		if len(errs) == 0 {
			continue
		}
		t.Logf("%s held out (%d rows, fitted on %d): step longer than predicted by p10 %+.1f%%, median %+.1f%%, p90 %+.1f%%; |error| median %.1f%%, p90 %.1f%%",
			a, len(errs), len(train), 100*quantile(errs, 0.1), 100*quantile(errs, 0.5), 100*quantile(errs, 0.9), 100*absQ(errs, 0.5), 100*absQ(errs, 0.9))
		all = append(all, errs...)
	}
	if len(all) < 20 {
		t.Fatalf("only %d held-out rows across %v: the measurement needs two architectures with rows", len(all), archs)
	}
	hi, lo := quantile(all, 0.9), quantile(all, 0.1)
	t.Logf("all architectures: p10 %+.1f%%, p90 %+.1f%%; unseenArchBand %.0f%%", 100*lo, 100*hi, 100*unseenArchBand)
	if unseenArchBand < math.Max(hi, -lo) {
		t.Errorf("unseenArchBand %.2f is narrower than the leave-one-architecture-out p90 error %.3f: widen it", unseenArchBand, math.Max(hi, -lo))
	}
}
