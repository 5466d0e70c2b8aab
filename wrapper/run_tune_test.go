package main

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/trainrun/trainrun/internal/calib"
	"github.com/trainrun/trainrun/wrapper/internal/launch"
	"github.com/trainrun/trainrun/wrapper/internal/run"
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
	o := runOptions{ckptSignal: "USR2", compress: "no", tune: tuneOptions{tune: "4:2"}}
	if err := o.validate(); err == nil || !strings.Contains(err.Error(), "--tune") {
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
	if !r.endTrial(stepResult{Reason: run.TuneDone, WaitErr: exitErr(t, "137")}) {
		t.Fatal("a trial the controller ended is a trial's end")
	}
	var tr run.Trial
	r.trialOutcome(r.sess.tune, &tr)
	if !tr.Measured() || tr.Observed.StepS < 0.29 || tr.Observed.StepS > 0.31 {
		t.Errorf("killed once measured: %+v, failed %q; want 0.3 s", tr.Observed, tr.Failed)
	}

	r.sess.tune = measured()
	r.endTrial(stepResult{Reason: run.None, WaitErr: exitErr(t, "1"), FirstFail: &launch.Event{Msg: launch.Msg{Rank: 1, Code: 1}}})
	tr = run.Trial{}
	r.trialOutcome(r.sess.tune, &tr)
	if tr.Measured() || !strings.Contains(tr.Failed, "rank 1 (node n1, GPU 1) failed first with exit 1") {
		t.Errorf("a crash: measured %+v, failed %q", tr.Observed, tr.Failed)
	}

	// Killed at its deadline without a report: the trainer does not report,
	// and the tune stops (silentTrainer); one that crashed is not that.
	r.sess.tune = &tuneState{rec: &calib.Recorder{}, steps: 10}
	r.endTrial(stepResult{Reason: run.TuneDone, WaitErr: exitErr(t, "137")})
	if !silentTrainer(r.sess.tune) {
		t.Error("a trial without progress reports until its deadline: want silentTrainer")
	}
	ms := measured()
	ms.res = &stepResult{Reason: run.TuneDone}
	if silentTrainer(ms) {
		t.Error("a trial that reported: not silent")
	}
	r.sess.tune = &tuneState{rec: &calib.Recorder{}, steps: 10}
	r.endTrial(stepResult{Reason: run.None, WaitErr: exitErr(t, "1")})
	if silentTrainer(r.sess.tune) {
		t.Error("a crash is not a silent trainer")
	}

	r.sess.tune = &tuneState{rec: &calib.Recorder{}, steps: 10}
	if r.endTrial(stepResult{Reason: run.Cancelled}) {
		t.Error("a cancellation during a trial must go to afterStep")
	}
	r.sess.tune = nil
	if r.endTrial(stepResult{Reason: run.None}) {
		t.Error("the run's own step is not a trial")
	}
}

// The dry run of --tune lists the candidates the trials would run: distinct
// parallel splits of the planner's best, each for the allocation's GPUs,
// and the budget (5% of no time limit: the no-limit default).
func TestRunTuneDryRunListsCandidates(t *testing.T) {
	m := slurmEnv4x8()
	m["SLURM_JOB_NODELIST"], m["SLURM_JOB_NUM_NODES"], m["SLURM_TASKS_PER_NODE"], m["SLURM_GPUS_ON_NODE"], m["SLURM_JOB_GPUS"] = "n1", "1", "4", "4", "0,1,2,3"
	m["TRAINRUN_JOB_DIR"] = t.TempDir()
	_, errb, err := cli{vars: m}.runRun([]string{"--dry-run", "--probe", "none", "--tune", "3:8", "--gpu", "h100-sxm",
		"--layers", "4", "--hidden", "256", "--heads", "8", "--vocab", "1024", "--seq-len", "128", "--global-batch", "16", "--", "true"}...)
	if err != nil {
		t.Fatalf("%v\n%s", err, errb)
	}
	if !strings.Contains(errb, "tune: 3 candidate(s), 8 steps each, within 10m0s") {
		t.Errorf("no candidates line:\n%s", errb)
	}
	seen := map[string]bool{}
	for _, l := range strings.Split(errb, "\n") {
		_, cfg, ok := strings.Cut(l, "tune: candidate ")
		if !ok {
			continue
		}
		f := strings.Split(cfg, ",")
		shape := f[0] + f[1] // "N: tp=..", "pp=.."
		if seen[shape[3:]] {
			t.Errorf("two candidates of one parallel split: %s", l)
		}
		seen[shape[3:]] = true
	}
	if len(seen) != 3 {
		t.Errorf("%d candidates listed, want 3:\n%s", len(seen), errb)
	}
}
