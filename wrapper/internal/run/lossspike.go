package run

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"github.com/trainrun/trainrun/checkpoint"
	"github.com/trainrun/trainrun/internal/lossspike"
	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
	"github.com/trainrun/trainrun/wrapper/internal/launch"
	"github.com/trainrun/trainrun/wrapper/obs"
)

// Loss spikes and NaN (issue 31, part B). pollProgress hands every
// reported loss to judgeLoss (internal/lossspike: NaN, infinities,
// median + K·MAD over a window). A spike is logged, counted
// (trainrun_loss_spikes_total) and sent to the webhook (event loss-spike);
// with --loss-spike-action rollback the monitor kills the step
// (actOnLossSpike: the trainer's state after a NaN is worthless, a
// checkpoint of it would be poisoned), Decide restarts it inside the
// allocation (decideLossSpike), and restartStep resumes from the newest
// committed checkpoint before the spike's window (rollbackResume), the
// later ones moved aside, with TRAINRUN_SKIP_STEPS naming the window's
// steps for the trainer to skip (kept in CKPT_DIR/.trainrun/skip-steps,
// so a requeued run skips them too). At most N rollbacks, then the run
// stops.

// LossSpike is the stop reason of a step the controller killed for a loss
// spike.
const LossSpike StopReason = "loss-spike"

// skipStepsFile keeps the steps rolled back over, in the store.
const skipStepsFile = "skip-steps"

type spikeOptions struct {
	rule, action string
}

func (o *spikeOptions) addFlags(fs *pflag.FlagSet, getenv func(string) string) {
	fs.StringVar(&o.rule, "loss-spike", cmp.Or(getenv("TRAINRUN_LOSS_SPIKE"), lossspike.Default), "judge the loss the trainer reports (report_progress(metrics={\"loss\": ...})): off; nan (NaN and infinities only); mad:K[:window=W][:metric=NAME]: also a value above median + K·MAD of the last W values (env TRAINRUN_LOSS_SPIKE)")
	fs.StringVar(&o.action, "loss-spike-action", cmp.Or(getenv("TRAINRUN_LOSS_SPIKE_ACTION"), "report"), "on a loss spike or NaN: report (log, metric trainrun_loss_spikes_total, webhook); stop (also end the run); rollback[:N]: restart the step from the last checkpoint before the spike with TRAINRUN_SKIP_STEPS naming the steps to skip, at most N times (default 3), then stop (env TRAINRUN_LOSS_SPIKE_ACTION)")
}

func (o spikeOptions) parsed() (lossspike.Rule, lossspike.Action, error) {
	r, err := lossspike.ParseRule(cmp.Or(o.rule, lossspike.Default))
	if err != nil {
		return r, lossspike.Action{}, usageErrorf("--loss-spike (env TRAINRUN_LOSS_SPIKE) %v", err)
	}
	a, err := lossspike.ParseAction(cmp.Or(o.action, "report"))
	if err != nil {
		return r, a, usageErrorf("--loss-spike-action (env TRAINRUN_LOSS_SPIKE_ACTION) %v", err)
	}
	return r, a, nil
}

// spikeState is the session's loss judging, across restarts.
type spikeState struct {
	det       *lossspike.Detector
	rule      lossspike.Rule
	action    lossspike.Action
	skip      lossspike.Steps // the steps rolled back over (TRAINRUN_SKIP_STEPS)
	rollbacks int
	pending   *lossspike.Spike // a spike the monitor is to stop the step for
	window    lossspike.Range  // the pending rollback's steps
	what      string           // the pending spike, for the decision
	stop      bool             // the pending spike stops the run (no rollback)
}

// spikeWatch starts the session's judging on first use: the rule, and the
// steps an earlier incarnation rolled back over.
func (r *runner) spikeWatch() *spikeState {
	s := &r.sess.spike
	if s.det != nil {
		return s
	}
	s.rule, s.action, _ = r.cfg.spike.parsed() // checked by Validate
	s.det = lossspike.New(s.rule)
	if r.dirs.ckptDir != "" {
		if b, err := os.ReadFile(filepath.Join(r.dirs.ckptDir, ".trainrun", skipStepsFile)); err == nil {
			if st, err := lossspike.ParseSteps(string(b)); err == nil {
				s.skip = st
			} else {
				r.logf("warning: %s: %v; no steps are skipped", skipStepsFile, err)
			}
		}
	}
	return s
}

// judgeLoss judges one progress report's metrics.
func (r *runner) judgeLoss(step int64, metrics map[string]float64) {
	s := r.spikeWatch()
	v, has := metrics[s.rule.Metric]
	if !has || s.rule.Off || s.pending != nil || s.skip.Contains(step) {
		return
	}
	sp, bad := s.det.Observe(step, v)
	if !bad {
		return
	}
	lo := sp.LastGood + 1
	act := s.action
	r.logf("loss spike: %s (--loss-spike %s); the last fine value was at step %d; --loss-spike-action %s", sp, s.rule, sp.LastGood, act)
	r.observe(obs.Event{Kind: obs.KindLossSpike, Step: sp.Step, Cause: sp.Kind, Message: sp.String()})
	switch {
	case act.Kind == "report":
		return
	case act.Kind == "rollback" && s.rollbacks >= act.MaxRollbacks:
		r.logf("loss spike: %d rollback(s) done already (--loss-spike-action %s): stopping the run", s.rollbacks, act)
		s.stop = true
	case act.Kind == "stop":
		s.stop = true
	}
	s.pending, s.window = &sp, lossspike.Range{Lo: lo, Hi: sp.Step}
	s.what = fmt.Sprintf("loss spike: %s", sp)
}

// actOnLossSpike (every second): a pending spike kills the step at once.
func (m *monitor) actOnLossSpike() {
	s := &m.r.sess.spike
	if s.pending == nil || m.reason != None || m.killing > 0 {
		return
	}
	m.markStop()
	m.reason = LossSpike
	m.killing++
	m.do([]stopAction{{kind: actKillStep, reason: LossSpike}})
}

// decideLossSpike: the controller killed the step for a loss spike; stop
// says the run ends (--loss-spike-action stop, or its rollbacks are used
// up), else the step restarts inside the allocation from before the spike.
func decideLossSpike(o Outcome) Decision {
	what := cmp.Or(o.SpikeWhat, "loss spike")
	if o.SpikeStop {
		return Decision{Exit: exitcode.StepFailed, Cause: checkpoint.CauseLossSpike, Tag: o.Latest, Record: what,
			Err: what + "; the run stops (--loss-spike-action): inspect the data and the learning rate around these steps, then resubmit"}
	}
	return Decision{Exit: exitcode.StepFailed, Cause: checkpoint.CauseLossSpike, Tag: o.Latest, Record: what, Restart: true,
		Err: what + "; rolling back inside the allocation to the checkpoint before it"}
}

// rollbackResume: after a loss-spike kill, the checkpoint to resume from is
// the newest committed one before the spike's window; the committed ones
// at or after its first step are moved aside (their state may carry the
// spike, and the trainer saves under their tags again), and the window
// joins the steps the trainer skips.
func (r *runner) rollbackResume(store ckptStore, latest string) (string, error) {
	s := &r.sess.spike
	if s.pending == nil {
		return latest, nil
	}
	sp, w := s.pending, s.window
	s.pending, s.what = nil, ""
	sa, ok := unwrapStore(store)
	if !ok {
		return latest, nil
	}
	list, err := sa.s.List()
	if err != nil {
		return "", withCode(exitcode.Checkpoint, fmt.Errorf("loss spike rollback: checkpoint store %s: %w", r.dirs.ckptDir, err))
	}
	resume, resumeStep := "", int64(0)
	var moved []string
	for _, in := range list {
		if in.State != checkpoint.Committed {
			continue
		}
		if in.Step >= w.Lo {
			dst, err := sa.s.Quarantine(in.Tag)
			if err != nil {
				return "", withCode(exitcode.Checkpoint, fmt.Errorf("loss spike rollback: moving %s aside: %w", in.Tag, err))
			}
			moved = append(moved, in.Tag+" → "+dst)
			continue
		}
		if resume == "" || in.Step > resumeStep {
			resume, resumeStep = in.Dir, in.Step
		}
	}
	s.rollbacks++
	s.skip = s.skip.Add(w.Lo, w.Hi)
	s.det.Reset(resumeStep)
	if err := r.saveSkipSteps(); err != nil {
		r.logf("warning: %v", err)
	}
	if len(moved) > 0 {
		r.logf("loss spike rollback: moved aside the checkpoints at or after step %d: %s", w.Lo, strings.Join(moved, ", "))
	}
	r.logf("loss spike rollback %d of %d: resuming from %s (step %d) and skipping steps %d-%d (spike at step %d); TRAINRUN_SKIP_STEPS=%s",
		s.rollbacks, s.action.MaxRollbacks, orDash(tagOf(resume)), resumeStep, w.Lo, w.Hi, sp.Step, s.skip)
	return resume, nil
}

func (r *runner) saveSkipSteps() error {
	if r.dirs.ckptDir == "" {
		return nil
	}
	dir := filepath.Join(r.dirs.ckptDir, ".trainrun")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return launch.WriteFileAtomic(filepath.Join(dir, skipStepsFile), []byte(r.sess.spike.skip.String()+"\n"), 0o644)
}

// addSkipStepsEnv tells the trainers which steps to skip.
func (r *runner) addSkipStepsEnv(renv *rankEnv) {
	if renv.Common == nil {
		return
	}
	skip := r.spikeWatch().skip
	if v := os.Getenv("TRAINRUN_SKIP_STEPS"); v != "" { // the user's own steps are skipped as well
		user, err := lossspike.ParseSteps(v)
		if err != nil {
			r.logf("warning: TRAINRUN_SKIP_STEPS=%s: %v; the trainers get it as it is", v, err)
			return
		}
		for _, w := range user {
			skip = skip.Add(w.Lo, w.Hi)
		}
	}
	if len(skip) > 0 {
		renv.Common["TRAINRUN_SKIP_STEPS"] = skip.String()
	}
}
