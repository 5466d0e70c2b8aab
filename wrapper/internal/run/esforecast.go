package run

import (
	"errors"
	"math"
	"sort"

	"github.com/trainrun/trainrun/checkpoint"
	"github.com/trainrun/trainrun/internal/forecast"
	"github.com/trainrun/trainrun/wrapper/internal/losshist"
	"github.com/trainrun/trainrun/wrapper/internal/rungs"
	"github.com/trainrun/trainrun/wrapper/internal/sweep"
)

// forecastMinPoints: a trial is judged on 10 reports after its warm-up
// (a run's own forecast wants 20): a sweep's trials are short, and a band
// from few points is wide, which only delays the stop.
const forecastMinPoints = 10

// forecastStop is a sweep trial's `--early-stop forecast`: from MinSteps
// on (then every MinSteps/4 steps) it fits its own curve of the sweep's
// metric against steps, forecasts it at the budget (the sweep's --steps)
// with the 80% band, records that in the sweep directory, and stops
// (checkpoint, then exit 7, state stopped-early) once its chance of ending
// below the best other trial's forecast (or observed final value) is under
// P (sweep.Chance). A trial that trained the budget records its observed
// value. Without a coordinator: each trial judges itself against the
// records the others left.
func (r *runner) forecastStop(w *earlyStopWatch, step int64, v float64) {
	if w.pts == nil && r.dirs.ckptDir != "" { // a requeued trial continues its history
		es, _ := losshist.Read(losshist.Path(r.dirs.ckptDir))
		for _, e := range es {
			if m, ok := e.Metrics[w.metric]; ok && e.Step < step {
				w.pts = append(w.pts, forecast.Point{Step: e.Step, Tokens: float64(e.Step), Loss: m})
			}
		}
	}
	if n := len(w.pts); n > 0 && step <= w.pts[n-1].Step { // redone steps replace
		w.pts = w.pts[:sort.Search(n, func(i int) bool { return w.pts[i].Step >= step })]
	}
	w.pts = append(w.pts, forecast.Point{Step: step, Tokens: float64(step), Loss: v})
	es := w.es
	if step >= es.Budget {
		if err := rungs.RecordForecast(w.dir, rungs.ForecastRecord{Trial: w.trial, Step: step, Lo: v, Mid: v, Hi: v}); err != nil {
			r.logf("warning: %v", err)
		}
		return
	}
	if step < es.MinSteps || step-w.judged < max(1, es.MinSteps/4) {
		return
	}
	w.judged = step
	res, err := forecast.Forecast(w.pts, forecast.Options{Budget: float64(es.Budget), Level: sweep.ForecastLevel,
		Seed: uint64(w.trial) + 1, Samples: 100, MinPoints: forecastMinPoints})
	if errors.Is(err, forecast.ErrTooFew) {
		return
	} else if err != nil {
		r.logf("warning: early stop: forecast: %v", err)
		return
	}
	mine := res.Loss
	if res.Diverging || math.IsNaN(v) {
		mine = forecast.Band{Lo: math.NaN(), Mid: math.NaN(), Hi: math.NaN()}
	} else if err := rungs.RecordForecast(w.dir, rungs.ForecastRecord{Trial: w.trial, Step: step, Lo: mine.Lo, Mid: mine.Mid, Hi: mine.Hi}); err != nil {
		r.logf("warning: %v", err)
	}
	best, ok := bestOther(w)
	if !ok && !math.IsNaN(mine.Mid) {
		return
	}
	p := sweep.Chance(mine, forecast.Band{Lo: best.Lo, Mid: best.Mid, Hi: best.Hi}, sweep.ForecastLevel)
	if p >= es.P {
		return
	}
	w.stopped = true
	r.logf("early stop: step %d: %s forecast at step %d is %.4g (80%% band %.4g - %.4g); trial %d's is %.4g (%.4g - %.4g): the chance of ending below it is %.3f < %g: checkpointing and stopping (state stopped-early)",
		step, w.metric, es.Budget, mine.Mid, mine.Lo, mine.Hi, best.Trial, best.Mid, best.Lo, best.Hi, p, es.P)
	if err := rungs.MarkStopped(w.dir, w.trial, -1, step, mine.Mid); err != nil {
		r.logf("warning: %v", err)
	}
	if r.ckpt.store != nil {
		if err := r.ckpt.store.PutRequest(checkpoint.Request{Then: "stop", Reason: "stopped-early", By: "trainrun sweep --early-stop"}); err != nil {
			r.logf("warning: early stop: asking the run to stop: %v", err)
		}
	}
}

// bestOther is the other trials' record with the lowest forecast.
func bestOther(w *earlyStopWatch) (rungs.ForecastRecord, bool) {
	recs, err := rungs.Forecasts(w.dir)
	if err != nil {
		return rungs.ForecastRecord{}, false
	}
	var best rungs.ForecastRecord
	found := false
	for _, rec := range recs {
		if rec.Trial != w.trial && (!found || rec.Mid < best.Mid) {
			best, found = rec, true
		}
	}
	return best, found
}
