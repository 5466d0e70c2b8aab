package run

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/trainrun/trainrun/checkpoint"
)

// The killed step restarts inside the allocation, or stops the run; a
// spike never requeues the job or writes the finished marker.
func TestDecideLossSpike(t *testing.T) {
	o := Outcome{Reason: LossSpike, Code: 137, SpikeWhat: "loss spike: loss NaN at step 57", Latest: "step-60"}
	d := Decide(o)
	if !d.Restart || d.Requeue || d.Finished || d.Cause != checkpoint.CauseLossSpike || !strings.Contains(d.Err, "rolling back") {
		t.Errorf("rollback: %+v", d)
	}
	o.SpikeStop = true
	d = Decide(o)
	if d.Restart || d.Requeue || d.Finished || d.Exit == 0 || !strings.Contains(d.Err, "the run stops") {
		t.Errorf("stop: %+v", d)
	}
}

// judgeLoss: report logs and goes on; rollback marks the step for the
// kill with the window from the last fine value to the spike; after N
// rollbacks the run stops; a skipped step is not judged.
func TestJudgeLoss(t *testing.T) {
	var log bytes.Buffer
	r := &runner{env: &Deps{Stderr: &log}}
	r.cfg.spike = spikeOptions{rule: "nan", action: "rollback:1"}
	r.judgeLoss(10, map[string]float64{"loss": 1})
	r.judgeLoss(11, map[string]float64{"other": math.NaN()})
	if r.sess.spike.pending != nil {
		t.Fatal("a fine loss, or another metric, is a spike")
	}
	r.judgeLoss(14, map[string]float64{"loss": math.NaN()})
	s := &r.sess.spike
	if s.pending == nil || s.window.Lo != 11 || s.window.Hi != 14 || s.stop || !strings.Contains(s.what, "loss NaN at step 14") {
		t.Fatalf("after a NaN: %+v", s)
	}
	if !strings.Contains(log.String(), "the last fine value was at step 10") {
		t.Errorf("log: %s", log.String())
	}
	// As rollbackResume leaves it (no store here): one rollback done.
	s.pending, s.rollbacks = nil, 1
	s.skip = s.skip.Add(11, 14)
	s.det.Reset(10)
	r.judgeLoss(12, map[string]float64{"loss": math.NaN()}) // a skipped step reports nothing to judge
	if s.pending != nil {
		t.Fatal("a skipped step was judged")
	}
	r.judgeLoss(20, map[string]float64{"loss": math.Inf(1)})
	if s.pending == nil || !s.stop || !strings.Contains(log.String(), "1 rollback(s) done already") {
		t.Errorf("past the rollbacks: %+v\n%s", s, log.String())
	}
	renv := rankEnv{Common: map[string]string{}}
	t.Setenv("TRAINRUN_SKIP_STEPS", "30-31")
	r.addSkipStepsEnv(&renv)
	if renv.Common["TRAINRUN_SKIP_STEPS"] != "11-14,30-31" {
		t.Errorf("TRAINRUN_SKIP_STEPS = %q", renv.Common["TRAINRUN_SKIP_STEPS"])
	}
}
