package run

// trainrun run's side of issue 32: --target-loss forecasts at each commit
// (internal/forecast on the store's loss history, wrapper/internal/losshist)
// and --stop-if-off-track; a sweep trial's --early-stop (ASHA rungs,
// wrapper/internal/rungs). The commands (trainrun forecast, scaling) are
// wrapper/cmd_forecast.go.

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/trainrun/trainrun/checkpoint"
	"github.com/trainrun/trainrun/internal/forecast"
	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
	"github.com/trainrun/trainrun/wrapper/internal/losshist"
	"github.com/trainrun/trainrun/wrapper/internal/planflags"
	"github.com/trainrun/trainrun/wrapper/internal/rungs"
	"github.com/trainrun/trainrun/wrapper/internal/sweep"
	"github.com/trainrun/trainrun/wrapper/obs"
)

// forecastWatch is trainrun run --target-loss: a forecast at each
// committed checkpoint, exported and logged, a webhook when the verdict
// turns, and with --stop-if-off-track a checkpoint-and-stop once the run
// is off track with probability 0.9.
type forecastWatch struct {
	target     float64
	budget     losshist.Budget // put in the history's unit at each forecast (Budget.In)
	stop       float64         // the off-track probability that stops the run (0: never)
	last       string          // the previous verdict
	stoppedWhy string          // set when the watch asked the run to stop
}

// startForecast checks --target-loss and its budget before the run
// starts: a bad value fails the job at once, not at its first checkpoint.
// The budget, when the run knows one, is recorded in the store for
// trainrun forecast (runBudget), with or without a target.
func (r *runner) startForecast() error {
	o := r.cfg.obs
	b, hasB, err := r.runBudget()
	if err != nil {
		return err
	}
	if o.targetLoss == "" {
		if o.stopOffTrack != "" && r.cfg.fromUser("stop-if-off-track") { // the policy's StopIfOffTrack applies to runs with a target only
			return usageErrorf("--stop-if-off-track needs --target-loss (or TRAINRUN_TARGET_LOSS): the loss the run must reach")
		}
		r.recordBudget(b, hasB)
		return nil
	}
	var t float64
	if _, err := fmt.Sscan(o.targetLoss, &t); err != nil || !(t > 0) || math.IsInf(t, 0) {
		return usageErrorf("--target-loss %q (or TRAINRUN_TARGET_LOSS): want a loss above 0, such as 2.1", o.targetLoss)
	}
	if !hasB {
		return usageErrorf("--target-loss %s needs the run's budget, where the loss is forecast: --tokens (such as 2T), or --train-steps (TRAINRUN_TRAIN_STEPS)", o.targetLoss)
	}
	if r.dirs.ckptDir == "" {
		return usageErrorf("--target-loss needs --ckpt-dir: the loss history is kept in the store")
	}
	stop := 0.0
	if o.stopOffTrack != "" {
		p, err := strconv.ParseFloat(o.stopOffTrack, 64)
		if err != nil || !(p >= 0.5 && p < 1) {
			return usageErrorf("--stop-if-off-track=%s (or TRAINRUN_STOP_IF_OFF_TRACK): want the probability of being off track at which to stop, in [0.5, 1), such as 0.9", o.stopOffTrack)
		}
		stop = p
	}
	r.sess.fc = &forecastWatch{target: t, budget: b, stop: stop}
	r.recordBudget(b, hasB)
	return nil
}

// recordBudget keeps the run's budget in its store (losshist.BudgetFile),
// once its flags are known good; a dry run writes nothing.
func (r *runner) recordBudget(b losshist.Budget, ok bool) {
	if !ok || r.dirs.ckptDir == "" || r.cfg.dryRun {
		return
	}
	if err := losshist.WriteBudget(r.dirs.ckptDir, b); err != nil {
		r.logf("warning: %v (trainrun forecast then needs --tokens)", err)
	}
}

// runBudget is the run's training budget as far as it knows it: --tokens;
// else --train-steps, in tokens too when the plan's --global-batch and
// --seq-len are given (otherwise the forecast converts the steps at the
// tokens per step the trainer reports). ok is false without either.
func (r *runner) runBudget() (b losshist.Budget, ok bool, err error) {
	po := r.cfg.plan
	if po.Tokens != "" {
		t, err := planflags.ParseTokens(po.Tokens)
		if err != nil || t <= 0 {
			return b, false, usageErrorf("--tokens %q: want a token count such as 2T, 300B or 1e12", po.Tokens)
		}
		b = losshist.Budget{Tokens: t, From: "--tokens " + po.Tokens}
	}
	if s := r.cfg.obs.trainSteps; s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n <= 0 {
			return b, false, usageErrorf("--train-steps %q (or TRAINRUN_TRAIN_STEPS): want the optimizer steps the run trains, such as 100000", s)
		}
		b.Steps = n
		switch {
		case b.Tokens > 0:
			b.From += fmt.Sprintf(", --train-steps %d", n)
		case po.GlobalBatch > 0 && po.SeqLen > 0:
			b.Tokens = float64(n) * float64(po.GlobalBatch) * float64(po.SeqLen)
			b.From = fmt.Sprintf("--train-steps %d × --global-batch %d × --seq-len %d", n, po.GlobalBatch, po.SeqLen)
		default:
			b.From = fmt.Sprintf("--train-steps %d", n)
		}
	}
	return b, b.Tokens > 0 || b.Steps > 0, nil
}

// forecastAtCommit forecasts from the loss history after a commit.
func (r *runner) forecastAtCommit() {
	w := r.sess.fc
	if w == nil || w.stoppedWhy != "" {
		return
	}
	es, err := losshist.Read(losshist.Path(r.dirs.ckptDir))
	if err != nil {
		r.logf("warning: forecast: %v", err)
		return
	}
	pts, bySteps := losshist.Points(es, "loss")
	budget, _, ok := w.budget.In(es, bySteps)
	if !ok { // --tokens alone and no tokens reported: read as steps, as before
		budget = w.budget.Tokens
	}
	if budget <= 0 { // --train-steps alone, and no report with tokens yet to convert them
		return
	}
	res, err := forecast.Forecast(pts, forecast.Options{Budget: budget, Target: w.target, Seed: 1})
	if err != nil && !errors.Is(err, forecast.ErrTooFew) {
		r.logf("warning: forecast: %v", err)
		return
	}
	if err != nil {
		res.Verdict = forecast.TooEarly
	}
	f := &obs.Forecast{Verdict: res.Verdict, PReach: res.PReach, Target: w.target, Budget: budget,
		Lo: res.Loss.Lo, Mid: res.Loss.Mid, Hi: res.Loss.Hi, Level: res.Level, Noise: res.Noise,
		Changed: w.last != "" && w.last != forecast.TooEarly && res.Verdict != forecast.TooEarly && res.Verdict != w.last}
	if res.Verdict != forecast.TooEarly {
		w.last = res.Verdict
	} else if w.last == "" {
		w.last = forecast.TooEarly
	}
	r.observe(obs.Event{Kind: obs.KindForecast, Forecast: f, Message: res.Why})
	r.logf("forecast: %s: %s", res.Verdict, res.Why)
	if w.stop > 0 && res.Verdict == forecast.OffTrack && 1-res.PReach >= w.stop && r.ckpt.store != nil {
		w.stoppedWhy = res.Why
		if err := r.ckpt.store.PutRequest(checkpoint.Request{Then: "stop", Reason: "off-track", By: "trainrun run --stop-if-off-track"}); err != nil {
			r.logf("warning: forecast: asking the run to stop: %v", err)
			w.stoppedWhy = ""
			return
		}
		r.logf("forecast: off track with probability %.2f: checkpointing and stopping (--stop-if-off-track, exit %d)", 1-res.PReach, exitcode.OffTrack)
	}
}

// offTrackExit gives a stop that --stop-if-off-track asked for its own
// exit code.
func (r *runner) offTrackExit(d Decision) Decision {
	if w := r.sess.fc; w != nil && w.stoppedWhy != "" && d.Exit == exitcode.Stopped {
		d.Exit = exitcode.OffTrack
		d.Err = "checkpointed (latest " + d.Tag + ") and stopped: off track: " + w.stoppedWhy
		d.Record = "stopped off track (--stop-if-off-track)"
	}
	return d
}

// earlyStopWatch is a sweep trial's side of `trainrun sweep --early-stop`
// (the sweep's script exports TRAINRUN_EARLY_STOP, TRAINRUN_SWEEP_DIR,
// TRAINRUN_SWEEP_TRIAL, TRAINRUN_SWEEP_METRIC, TRAINRUN_SWEEP_MAXIMIZE):
// at each rung it records the trial's metric in the sweep directory and
// stops the trial (a checkpoint, then exit 7) unless it ranks among the
// best 1/ETA of the trials that reached the rung.
type earlyStopWatch struct {
	off      bool
	es       sweep.EarlyStop
	dir      string
	trial    int
	metric   string
	maximize bool
	rung     int
	stopped  bool
	mine     []rungValue      // what this trial recorded at each rung it reached
	judged   int64            // the step of the last judgement
	pts      []forecast.Point // --early-stop forecast: the trial's curve (esforecast.go)
}

func (r *runner) earlyStopWatch() *earlyStopWatch {
	if r.sess.esw != nil {
		return r.sess.esw
	}
	g := r.env.Getenv
	w := &earlyStopWatch{off: true, rung: -1}
	r.sess.esw = w
	es, ok, err := sweep.ParseEarlyStop(g("TRAINRUN_EARLY_STOP"))
	trial, terr := strconv.Atoi(g("TRAINRUN_SWEEP_TRIAL"))
	switch {
	case err != nil:
		r.logf("warning: TRAINRUN_EARLY_STOP: %v; no early stopping", err)
	case !ok:
	case g("TRAINRUN_SWEEP_DIR") == "" || terr != nil:
		r.logf("warning: TRAINRUN_EARLY_STOP=%s without TRAINRUN_SWEEP_DIR and TRAINRUN_SWEEP_TRIAL (set by trainrun sweep's script): no early stopping", g("TRAINRUN_EARLY_STOP"))
	default:
		w.off, w.es, w.dir, w.trial = false, es, g("TRAINRUN_SWEEP_DIR"), trial
		w.metric, w.maximize = cmp.Or(g("TRAINRUN_SWEEP_METRIC"), "loss"), g("TRAINRUN_SWEEP_MAXIMIZE") == "true"
	}
	return w
}

// earlyStop is called with each progress report. On reaching a rung the
// trial records its metric there and goes on only if it ranks among the
// best 1/ETA of the trials that reached the rung. Without a coordinator the
// first trials at a rung pass on little evidence, so every rung already
// passed is judged again, with the records that arrived since, at the
// trial's later reports (at most once per MinSteps/2 steps): a trial that
// was promoted early and is now outside the best 1/ETA of that rung stops
// too (successive halving's rule, applied as the evidence comes in; on a
// loaded 2-core harness the one-shot rule ran 46 % of the steps, TestSweepASHA27).
func (r *runner) earlyStop(step int64, metrics map[string]float64) {
	w := r.earlyStopWatch()
	v, has := metrics[w.metric]
	if w.off || w.stopped || !has {
		return
	}
	if w.es.Forecast() {
		r.forecastStop(w, step, v)
		return
	}
	if k := w.es.Rung(step); k > w.rung {
		w.rung = k
		if err := rungs.Record(w.dir, k, w.trial, step, v); err != nil {
			r.logf("warning: %v", err)
			return
		}
		w.mine = append(w.mine, rungValue{rung: k, step: step, v: v})
	} else if step-w.judged < max(1, w.es.MinSteps/2) {
		return
	}
	w.judged = step
	for _, m := range w.mine {
		vals, err := rungs.Values(w.dir, m.rung)
		if err != nil {
			r.logf("warning: %v", err)
			return
		}
		keep := (len(vals) + w.es.Eta - 1) / w.es.Eta
		if w.es.Continue(m.v, vals, w.maximize) {
			if m.rung == w.rung && m.step == step {
				r.logf("early stop: rung %d (step %d): %s %.4g is in the best %d of the %d trials there: going on", m.rung, m.step, w.metric, m.v, keep, len(vals))
			}
			continue
		}
		w.stopped = true
		r.logf("early stop: rung %d (step %d): %s %.4g is not in the best %d of the %d trials there (judged at step %d): checkpointing and stopping (state stopped-early)", m.rung, m.step, w.metric, m.v, keep, len(vals), step)
		if err := rungs.MarkStopped(w.dir, w.trial, m.rung, m.step, m.v); err != nil {
			r.logf("warning: %v", err)
		}
		if r.ckpt.store != nil {
			if err := r.ckpt.store.PutRequest(checkpoint.Request{Then: "stop", Reason: "stopped-early", By: "trainrun sweep --early-stop"}); err != nil {
				r.logf("warning: early stop: asking the run to stop: %v", err)
			}
		}
		return
	}
}

// rungValue is the metric a trial recorded at one of its rungs.
type rungValue struct {
	rung int
	step int64
	v    float64
}
