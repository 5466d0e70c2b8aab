package run

import (
	"fmt"
	"time"

	"github.com/trainrun/trainrun/checkpoint"
	"github.com/trainrun/trainrun/wrapper/internal/launch"
	"github.com/trainrun/trainrun/wrapper/obs"
)

// The badput of a restart inside the allocation (issue 31): where the time
// from a fault to the restarted step's first new step goes, from the
// controller's own clock and the shims' beats.
//
//	detect    the fault's first sign (a rank's failed exit, a lost node's
//	          closed connection, a hang's last progress) to the controller's
//	          knowing (the failure report; the hang's detection)
//	stop      to srun's end (the rest of the step killed and cleaned up)
//	decide    to the decision to restart (commit, history, Slurm's node states)
//	health    the health pass before the restart
//	relaunch  to every rank's hello (the launch files, srun, the shims)
//	first     to the first step after the resume point (the trainer's imports,
//	          rendezvous, checkpoint load, one step)
//	redone    the steps run again (from the resume point to the fault's step),
//	          at the step time observed
type restartClock struct {
	lastStep    int64     // the highest step the beats reported, and when it was reached
	lastStepAt  time.Time // (the trainer's advance, not the beat's arrival)
	stepTime    time.Duration
	fault       time.Time
	detected    time.Time
	stepEnded   time.Time
	decided     time.Time
	healthStart time.Duration // sess.healthTime before the restart's pass
	health      time.Duration
	relaunched  time.Time
	allStarted  time.Time
	faultStep   int64
	resumeStep  int64
	waiting     bool // a restart is under way: the first new step ends it
}

// badputBeat takes a beat: the step the trainer reached and when; after a
// restart, the first step past the resume point ends the measurement.
func (r *runner) badputBeat(ev launch.Event) {
	bp := &r.sess.badput
	if ev.Step < 0 {
		return
	}
	at := ev.At.Add(-time.Duration(ev.AgeMS) * time.Millisecond)
	if !bp.waiting && (ev.Step > bp.lastStep || bp.lastStepAt.IsZero()) {
		bp.lastStep, bp.lastStepAt = ev.Step, at
	}
	if ev.StepMS > 0 {
		bp.stepTime = time.Duration(ev.StepMS) * time.Millisecond
	}
	if bp.waiting && ev.Step > bp.resumeStep {
		bp.waiting = false
		bp.lastStep, bp.lastStepAt = ev.Step, at // the restarted step's own from now on
		r.reportBadput(at)
	}
}

// badputProgress takes rank 0's progress report: the step reached, more
// often than the beats say it (the fault's step; a short restarted step
// may end before its first beat). The failed step's last report was read
// when it ended (badputStepEnded), so a report past the resume point while
// a restart is under way is the restarted step's.
func (r *runner) badputProgress(step int64, at time.Time) {
	bp := &r.sess.badput
	switch {
	case bp.waiting && step > bp.resumeStep:
		bp.waiting = false
		bp.lastStep, bp.lastStepAt = step, at
		r.reportBadput(at)
	case !bp.waiting && step > bp.lastStep:
		bp.lastStep, bp.lastStepAt = step, at
	}
}

// badputAllStarted: every rank of the restarted step said hello.
func (r *runner) badputAllStarted() {
	if r.sess.badput.waiting && r.sess.badput.allStarted.IsZero() {
		r.sess.badput.allStarted = time.Now()
	}
}

// badputStepEnded: the step ended (srun's end); res says when the fault
// showed and was known.
func (r *runner) badputStepEnded(res stepResult) {
	if r.sess.obs != nil {
		r.pollProgress() // the trainer's last steps: the fault's step
	}
	bp := &r.sess.badput
	now := time.Now()
	bp.stepEnded, bp.fault, bp.detected = now, time.Time{}, time.Time{}
	if res.FirstFail != nil {
		bp.fault, bp.detected = res.FirstFail.At, res.FirstFail.At
	}
	for _, t := range res.Closed { // a lost node's connections closed before any exit came
		if !t.IsZero() && (bp.fault.IsZero() || t.Before(bp.fault)) {
			bp.fault = t
		}
	}
	if res.Reason == Hang && !res.StopAt.IsZero() {
		bp.detected = res.StopAt
		if !bp.lastStepAt.IsZero() && bp.lastStepAt.Before(res.StopAt) {
			bp.fault = bp.lastStepAt
		} else {
			bp.fault = res.StopAt
		}
	}
	if bp.detected.IsZero() {
		bp.detected = now
	}
	if bp.fault.IsZero() || bp.fault.After(bp.detected) {
		bp.fault = bp.detected
	}
	bp.faultStep = bp.lastStep
}

// badputRestart: the decision to restart from resume; the health pass follows.
func (r *runner) badputRestart(resume string) {
	bp := &r.sess.badput
	bp.decided, bp.healthStart, bp.waiting = time.Now(), r.sess.healthTime, true
	bp.resumeStep, bp.allStarted = 0, time.Time{}
	if resume != "" {
		bp.resumeStep = max(checkpoint.StepOf(resume), 0)
	}
}

// badputRelaunch: the restarted step's launch begins.
func (r *runner) badputRelaunch() {
	bp := &r.sess.badput
	bp.health, bp.relaunched = r.sess.healthTime-bp.healthStart, time.Now()
}

// Badput is one restart's breakdown, in seconds.
type Badput struct {
	Detect, Stop, Decide, Health, Relaunch, First, Redone float64
	RedoneSteps                                           int64
}

// Total is the restart's time lost: every part.
func (b Badput) Total() float64 {
	return b.Detect + b.Stop + b.Decide + b.Health + b.Relaunch + b.First + b.Redone
}

// String is the breakdown for the log.
func (b Badput) String() string {
	return fmt.Sprintf("%.1f s: detect %.1f s, stop %.1f s, decide %.1f s, health %.1f s, relaunch %.1f s, first step %.1f s, %d step(s) redone %.1f s",
		b.Total(), b.Detect, b.Stop, b.Decide, b.Health, b.Relaunch, b.First, b.RedoneSteps, b.Redone)
}

// badputOf computes the breakdown when the first new step came at first.
func badputOf(bp *restartClock, first time.Time) Badput {
	sec := func(a, b time.Time) float64 {
		if a.IsZero() || b.IsZero() || b.Before(a) {
			return 0
		}
		return b.Sub(a).Seconds()
	}
	allStarted := bp.allStarted
	if allStarted.IsZero() || allStarted.After(first) {
		allStarted = first
	}
	b := Badput{Detect: sec(bp.fault, bp.detected), Stop: sec(bp.detected, bp.stepEnded), Health: bp.health.Seconds(),
		Relaunch: sec(bp.relaunched, allStarted), First: sec(allStarted, first)}
	b.Decide = max(sec(bp.stepEnded, bp.relaunched)-b.Health, 0)
	if bp.faultStep > bp.resumeStep {
		b.RedoneSteps = bp.faultStep - bp.resumeStep
		b.Redone = float64(b.RedoneSteps) * bp.stepTime.Seconds()
	}
	return b
}

// reportBadput logs the breakdown, tells the observer (the report) and
// keeps it in the job's history.
func (r *runner) reportBadput(first time.Time) {
	b := badputOf(&r.sess.badput, first)
	parts := b.parts()
	big, bigName := 0.0, ""
	for _, p := range parts {
		if p.v > big {
			big, bigName = p.v, p.name
		}
	}
	r.logf("restart %d badput %s (largest: %s)", r.sess.restarts, b, bigName)
	r.sess.badputs = append(r.sess.badputs, b)
	m := map[string]float64{}
	for _, p := range parts {
		m[p.name] = p.v
	}
	r.observe(obs.Event{Kind: obs.KindBadput, Badput: m, Step: int64(b.RedoneSteps)})
	if r.ckpt.store != nil {
		if err := r.ckpt.store.History().Append(checkpoint.Event{Type: "badput", JobID: r.alloc.JobID, Restart: r.alloc.RestartCount, Badput: m}); err != nil {
			r.logf("warning: %v", err)
		}
	}
}

type badputPart struct {
	name string
	v    float64
}

func (b Badput) parts() []badputPart {
	return []badputPart{{"detect", b.Detect}, {"stop", b.Stop}, {"decide", b.Decide}, {"health", b.Health},
		{"relaunch", b.Relaunch}, {"first_step", b.First}, {"redone", b.Redone}}
}

// logBadputSummary is the run's summary of its restarts inside the job:
// their badput in all, and each part's share.
func (r *runner) logBadputSummary() {
	bs := r.sess.badputs
	if len(bs) == 0 {
		return
	}
	var sum Badput
	for _, b := range bs {
		sum.Detect += b.Detect
		sum.Stop += b.Stop
		sum.Decide += b.Decide
		sum.Health += b.Health
		sum.Relaunch += b.Relaunch
		sum.First += b.First
		sum.Redone += b.Redone
		sum.RedoneSteps += b.RedoneSteps
	}
	r.logf("restarts inside the job: %d, badput %s in all (mean %.1f s a restart)", len(bs), sum, sum.Total()/float64(len(bs)))
}
