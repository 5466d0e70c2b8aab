package run

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/trainrun/trainrun/internal/calib"
	"github.com/trainrun/trainrun/wrapper/internal/launch"
)

func TestParseTuneBudget(t *testing.T) {
	for in, want := range map[string]time.Duration{"": 0, "auto": 0, "5": 5 * time.Minute, "2.5": 150 * time.Second, "90s": 90 * time.Second, "1h": time.Hour} {
		if got, err := parseTuneBudget("--tune-budget", in); err != nil || got != want {
			t.Errorf("parseTuneBudget(%q) = %s, %v; want %s", in, got, err, want)
		}
	}
	for _, in := range []string{"0", "-3", "soon", "0s"} {
		if _, err := parseTuneBudget("TRAINRUN_TUNE_BUDGET", in); err == nil || !strings.Contains(err.Error(), "TRAINRUN_TUNE_BUDGET") || !strings.Contains(err.Error(), in) {
			t.Errorf("parseTuneBudget(%q): %v, want an error naming the input and the value", in, err)
		}
	}
	o := Options{ckptSignal: "USR2", compress: "no", tune: tuneOptions{tune: "4:2"}}
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "--tune") {
		t.Errorf("validate --tune 4:2: %v", err)
	}
}

// exitErr is a real *exec.ExitError with the given code.
func exitErr(t *testing.T, code string) error {
	t.Helper()
	err := exec.Command("/bin/sh", "-c", "exit "+code).Run()
	if err == nil {
		t.Fatal("no exit error")
	}
	return err
}

// A trial's step end: killed once measured, it is a measurement; one that
// exited by itself non-zero (out of memory) is dropped with its first failed
// rank; a stop for another reason (a cancellation) is not a trial's end but
// the run's, which afterStep decides.
func TestTrialOutcome(t *testing.T) {
	r := &runner{placed: placed{Slots: []rankSlot{{Rank: 0, Node: "n1", GPU: 0}, {Rank: 1, Node: "n1", GPU: 1}}}}
	measured := func() *tuneState {
		ts := &tuneState{rec: &calib.Recorder{}, steps: 10}
		t0 := time.Unix(1_800_000_000, 0)
		for s := int64(1); s <= 10; s++ {
			ts.rec.Progress(s, t0.Add(time.Duration(s)*300*time.Millisecond))
		}
		return ts
	}
	r.sess.tune = measured()
	if !r.endTrial(stepResult{Reason: TuneDone, WaitErr: exitErr(t, "137")}) {
		t.Fatal("a trial the controller ended is a trial's end")
	}
	var tr Trial
	r.trialOutcome(r.sess.tune, &tr)
	if !tr.Measured() || tr.Observed.StepS < 0.29 || tr.Observed.StepS > 0.31 {
		t.Errorf("killed once measured: %+v, failed %q; want 0.3 s", tr.Observed, tr.Failed)
	}

	r.sess.tune = measured()
	r.endTrial(stepResult{Reason: None, WaitErr: exitErr(t, "1"), FirstFail: &launch.Event{Msg: launch.Msg{Rank: 1, Code: 1}}})
	tr = Trial{}
	r.trialOutcome(r.sess.tune, &tr)
	if tr.Measured() || !strings.Contains(tr.Failed, "rank 1 (node n1, GPU 1) failed first with exit 1") {
		t.Errorf("a crash: measured %+v, failed %q", tr.Observed, tr.Failed)
	}

	// Killed at its deadline without a report: the trainer does not report,
	// and the tune stops (silentTrainer); one that crashed is not that.
	r.sess.tune = &tuneState{rec: &calib.Recorder{}, steps: 10}
	r.endTrial(stepResult{Reason: TuneDone, WaitErr: exitErr(t, "137")})
	if !silentTrainer(r.sess.tune) {
		t.Error("a trial without progress reports until its deadline: want silentTrainer")
	}
	ms := measured()
	ms.res = &stepResult{Reason: TuneDone}
	if silentTrainer(ms) {
		t.Error("a trial that reported: not silent")
	}
	r.sess.tune = &tuneState{rec: &calib.Recorder{}, steps: 10}
	r.endTrial(stepResult{Reason: None, WaitErr: exitErr(t, "1")})
	if silentTrainer(r.sess.tune) {
		t.Error("a crash is not a silent trainer")
	}

	r.sess.tune = &tuneState{rec: &calib.Recorder{}, steps: 10}
	if r.endTrial(stepResult{Reason: Cancelled}) {
		t.Error("a cancellation during a trial must go to afterStep")
	}
	r.sess.tune = nil
	if r.endTrial(stepResult{Reason: None}) {
		t.Error("the run's own step is not a trial")
	}
}
