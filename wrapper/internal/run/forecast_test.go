package run

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/trainrun/trainrun/checkpoint"
	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
	"github.com/trainrun/trainrun/wrapper/internal/jobdir"
	"github.com/trainrun/trainrun/wrapper/internal/losshist"
	"github.com/trainrun/trainrun/wrapper/internal/rungs"
	"github.com/trainrun/trainrun/wrapper/obs"
)

// forecastStore writes a store whose history follows L = 2 + 0.3·(D/1e10)^-0.35
// (2.3 at the 10B budget) with 0.5% noise, reported to 2B tokens.
func forecastStore(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, ".trainrun"), 0o755)
	w := losshist.Open(losshist.Path(dir))
	r := rand.New(rand.NewPCG(7, 7))
	for s := int64(1); s <= 500; s++ {
		d := float64(s) * 4e6
		loss := (2 + 0.3*math.Pow(d/1e10, -0.35)) * (1 + 0.005*r.NormFloat64())
		if err := w.Append(losshist.Entry{Step: s, Tokens: int64(d), Metrics: map[string]float64{"loss": loss}}); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// A run whose forecast is confidently off its target asks for a checkpoint
// and a stop, and the stop gets exit 12; the verdict's turn is an event
// the webhook hears.
func TestForecastWatchStopsOffTrack(t *testing.T) {
	dir := forecastStore(t)
	st, err := checkpoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	var log strings.Builder
	r := &runner{env: &Deps{Stderr: &log}, dirs: runDirs{ckptDir: dir}, ckpt: runStore{store: st}, sess: session{obs: rec}}
	r.cfg.obs.targetLoss, r.cfg.obs.stopOffTrack, r.cfg.plan.Tokens = "2.45", "0.9", "10B"
	if err := r.startForecast(); err != nil {
		t.Fatal(err)
	}
	r.forecastAtCommit() // on track: no stop
	if r.sess.fc.stoppedWhy != "" {
		t.Fatalf("stopped on track: %s", log.String())
	}
	r.sess.fc.target = 2.0 // the target moves below the forecast (2.3)
	r.forecastAtCommit()
	if len(rec.evs) != 2 || rec.evs[1].Forecast == nil || rec.evs[1].Forecast.Verdict != "off-track" || !rec.evs[1].Forecast.Changed {
		t.Fatalf("events %+v, want on-track then a changed off-track", rec.evs)
	}
	req, err := st.TakeRequest()
	if err != nil || req == nil || req.Then != "stop" {
		t.Fatalf("request %+v, %v: want a stop request", req, err)
	}
	d := r.offTrackExit(Decision{Exit: exitcode.Stopped, Tag: "step-500"})
	if d.Exit != exitcode.OffTrack || !strings.Contains(d.Err, "off track") {
		t.Errorf("decision %+v, want exit %d", d, exitcode.OffTrack)
	}
	if d := (&runner{}).offTrackExit(Decision{Exit: exitcode.Stopped}); d.Exit != exitcode.Stopped {
		t.Errorf("a stop without the watch changed its exit to %d", d.Exit)
	}
}

func TestForecastWatchBadInput(t *testing.T) {
	for _, c := range []struct{ target, tokens, ckpt, msg string }{
		{"fast", "10B", "/x", "--target-loss \"fast\""},
		{"2", "", "/x", "needs the run's budget"},
		{"2", "10B", "", "needs --ckpt-dir"},
		{"2", "10B", "/x", "--stop-if-off-track=1.5"},
	} {
		r := &runner{dirs: runDirs{ckptDir: c.ckpt}}
		r.cfg.obs.targetLoss, r.cfg.plan.Tokens = c.target, c.tokens
		if strings.Contains(c.msg, "1.5") {
			r.cfg.obs.stopOffTrack = "1.5"
		}
		if err := r.startForecast(); err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%+v: %v, want %q", c, err, c.msg)
		}
	}
	r := &runner{}
	r.cfg.obs.stopOffTrack, r.cfg.from = "0.9", map[string]source{"stop-if-off-track": {kind: fromFlag}}
	if err := r.startForecast(); err == nil || !strings.Contains(err.Error(), "needs --target-loss") {
		t.Errorf("--stop-if-off-track alone: %v", err)
	}
	r.cfg.from = map[string]source{"stop-if-off-track": {kind: fromPolicy, name: "StopIfOffTrack"}}
	if err := r.startForecast(); err != nil || r.sess.fc != nil {
		t.Errorf("the policy's StopIfOffTrack=yes without a target: %v", err)
	}
}

// A trial whose metric at a rung is outside the best 1/ETA stops: its
// record and stopped marker are in the sweep directory and its store has a
// stop request; one inside goes on.
func TestEarlyStopTrial(t *testing.T) {
	sdir := t.TempDir()
	for i, v := range []float64{1, 2, 3} {
		rungs.Record(sdir, 0, i, 10, v)
	}
	trial := func(idx string) (*runner, *checkpoint.Store) {
		st, err := checkpoint.Open(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		vars := map[string]string{"TRAINRUN_EARLY_STOP": "asha:3:10", "TRAINRUN_SWEEP_DIR": sdir, "TRAINRUN_SWEEP_TRIAL": idx, "TRAINRUN_SWEEP_METRIC": "loss"}
		return &runner{env: &Deps{Stderr: io.Discard, Getenv: func(k string) string { return vars[k] }}, ckpt: runStore{store: st}}, st
	}
	good, gst := trial("5")
	good.earlyStop(5, map[string]float64{"loss": 0.5}) // below the first rung: nothing
	good.earlyStop(11, map[string]float64{"loss": 0.5})
	if rungs.Stopped(sdir, 5) {
		t.Fatal("the best trial stopped")
	}
	if req, _ := gst.TakeRequest(); req != nil {
		t.Fatalf("the best trial was asked to stop: %+v", req)
	}
	bad, bst := trial("6")
	bad.earlyStop(12, map[string]float64{"loss": 2.5}) // 5 at the rung, keep 2: 0.5 and 1 are better
	if !rungs.Stopped(sdir, 6) {
		t.Fatal("a trial outside the best third went on")
	}
	if req, _ := bst.TakeRequest(); req == nil || req.Then != "stop" {
		t.Fatalf("request %+v, want stop", req)
	}
	// Promoted as the first at its rung, judged again when better trials
	// arrive there: the early pass does not last (asha:3:10, judged at most
	// every 5 steps).
	sdir2 := t.TempDir()
	vars2 := map[string]string{"TRAINRUN_EARLY_STOP": "asha:3:10", "TRAINRUN_SWEEP_DIR": sdir2, "TRAINRUN_SWEEP_TRIAL": "0", "TRAINRUN_SWEEP_METRIC": "loss"}
	est, err := checkpoint.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	early := &runner{env: &Deps{Stderr: io.Discard, Getenv: func(k string) string { return vars2[k] }}, ckpt: runStore{store: est}}
	early.earlyStop(10, map[string]float64{"loss": 3})
	if rungs.Stopped(sdir2, 0) {
		t.Fatal("the first trial at a rung stopped")
	}
	for i, v := range []float64{1, 2, 1.5, 2.5, 1.2} { // five better trials arrive at rung 0
		rungs.Record(sdir2, 0, i+1, 10, v)
	}
	early.earlyStop(12, map[string]float64{"loss": 2.9}) // under 5 steps since: not judged yet
	if rungs.Stopped(sdir2, 0) {
		t.Fatal("judged again before MinSteps/2 steps passed")
	}
	early.earlyStop(15, map[string]float64{"loss": 2.8})
	if !rungs.Stopped(sdir2, 0) {
		t.Fatal("an early pass outside the best third of its rung went on")
	}
	if req, _ := est.TakeRequest(); req == nil || req.Then != "stop" {
		t.Fatalf("request %+v, want stop", req)
	}
	off := &runner{env: &Deps{Stderr: io.Discard, Getenv: func(string) string { return "" }}}
	off.earlyStop(100, map[string]float64{"loss": 9}) // not a sweep trial: nothing, no panic
}

// The controller's progress poll keeps the loss history, also when the
// progress reader was made at the run's start (observeStart).
func TestPollProgressKeepsLossHistory(t *testing.T) {
	job, ckpt := t.TempDir(), t.TempDir()
	os.MkdirAll(filepath.Join(job, jobdir.Launch), 0o755)
	r := &runner{env: &Deps{Stderr: io.Discard, Getenv: func(string) string { return "" }}, dirs: runDirs{jobDir: job, ckptDir: ckpt}}
	prog := filepath.Join(job, jobdir.Launch, "progress")
	r.sess.progress = obs.NewProgressReader(prog)
	for s := 1; s <= 3; s++ {
		os.WriteFile(prog, []byte(fmt.Sprintf("%d %d 1700000000\n{\"loss\": %d}\n", s, 100*s, 10-s)), 0o644)
		r.pollProgress()
	}
	es, err := losshist.Read(losshist.Path(ckpt))
	if err != nil || len(es) != 3 || es[2].Metrics["loss"] != 7 || es[2].Tokens != 300 {
		t.Fatalf("history %+v, %v; want 3 reports", es, err)
	}
}

// --early-stop forecast: a trial whose curve (seeded noise) forecasts a
// final loss well above the best record stops, with its record and marker
// in the sweep directory and a stop request in its store; one forecast to
// beat it goes on, and so does every trial before MIN_STEPS.
func TestEarlyStopForecastTrial(t *testing.T) {
	sdir := t.TempDir()
	rungs.RecordForecast(sdir, rungs.ForecastRecord{Trial: 0, Step: 90, Lo: 2.25, Mid: 2.25, Hi: 2.25}) // finished: observed
	trial := func(idx string) (*runner, *checkpoint.Store) {
		st, err := checkpoint.Open(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		vars := map[string]string{"TRAINRUN_EARLY_STOP": "forecast:0.05:20:90", "TRAINRUN_SWEEP_DIR": sdir, "TRAINRUN_SWEEP_TRIAL": idx, "TRAINRUN_SWEEP_METRIC": "loss"}
		return &runner{env: &Deps{Stderr: io.Discard, Getenv: func(k string) string { return vars[k] }}, ckpt: runStore{store: st}}, st
	}
	rng := rand.New(rand.NewPCG(7, 7))
	feed := func(r *runner, q float64, upto int64) int64 {
		for s := int64(2); s <= upto; s += 2 {
			r.earlyStop(s, map[string]float64{"loss": q + 2/math.Sqrt(float64(s)) + 0.005*rng.NormFloat64()})
			if r.sess.esw.stopped {
				return s
			}
		}
		return 0
	}
	bad, bst := trial("1") // ends at 2.3 + 2/sqrt(90) = 2.51
	if at := feed(bad, 2.3, 18); at != 0 || rungs.Stopped(sdir, 1) {
		t.Fatalf("stopped at step %d, before MIN_STEPS 20", at)
	}
	at := feed(bad, 2.3, 60)
	if at == 0 || !rungs.Stopped(sdir, 1) {
		t.Fatal("a trial forecast 0.26 above the best went on")
	}
	if req, _ := bst.TakeRequest(); req == nil || req.Then != "stop" {
		t.Fatalf("request %+v, want stop", req)
	}
	t.Logf("the bad trial stopped at step %d", at)
	good, gst := trial("2") // ends at 2.0 + 0.21 = 2.21, below 2.25
	if at := feed(good, 2.0, 88); at != 0 || rungs.Stopped(sdir, 2) {
		t.Fatalf("the better trial stopped at step %d", at)
	}
	if req, _ := gst.TakeRequest(); req != nil {
		t.Fatalf("the better trial was asked to stop: %+v", req)
	}
	recs, _ := rungs.Forecasts(sdir)
	for _, rec := range recs {
		if rec.Trial == 2 && math.Abs(rec.Mid-2.21) > 0.03 {
			t.Errorf("trial 2's forecast %.3f, its law ends at 2.21", rec.Mid)
		}
	}
	feed(good, 2.0, 90)
	if recs, _ = rungs.Forecasts(sdir); !slices.ContainsFunc(recs, func(r rungs.ForecastRecord) bool { return r.Trial == 2 && r.Step == 90 && r.Lo == r.Hi }) {
		t.Errorf("trial 2 trained the budget, its record is not the observed value: %+v", recs)
	}
}

// The run's budget: --tokens; --train-steps in tokens at the plan's batch
// and sequence length, or in steps alone; recorded in the store once the
// flags are good, never by a dry run; bad values named.
func TestRunBudget(t *testing.T) {
	for _, c := range []struct {
		tokens, steps string
		gb, seq       int
		want          losshist.Budget
	}{
		{"2T", "", 0, 0, losshist.Budget{Tokens: 2e12, From: "--tokens 2T"}},
		{"", "1000", 512, 4096, losshist.Budget{Tokens: 1000 * 512 * 4096, Steps: 1000, From: "--train-steps 1000 × --global-batch 512 × --seq-len 4096"}},
		{"", "1000", 0, 4096, losshist.Budget{Steps: 1000, From: "--train-steps 1000"}},
		{"1e9", "1000", 512, 4096, losshist.Budget{Tokens: 1e9, Steps: 1000, From: "--tokens 1e9, --train-steps 1000"}},
	} {
		ckpt := t.TempDir()
		r := &runner{env: &Deps{Stderr: io.Discard}, dirs: runDirs{ckptDir: ckpt}}
		r.cfg.plan.Tokens, r.cfg.obs.trainSteps, r.cfg.plan.GlobalBatch, r.cfg.plan.SeqLen = c.tokens, c.steps, c.gb, c.seq
		r.cfg.obs.targetLoss = "2.5"
		if err := r.startForecast(); err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		got, ok, err := losshist.ReadBudget(ckpt)
		if err != nil || !ok || got != c.want || r.sess.fc.budget != c.want {
			t.Errorf("%+v: recorded %+v %v %v, want %+v", c, got, ok, err, c.want)
		}
	}
	dry := &runner{env: &Deps{Stderr: io.Discard}, dirs: runDirs{ckptDir: t.TempDir()}}
	dry.cfg.dryRun, dry.cfg.plan.Tokens = true, "2T"
	if err := dry.startForecast(); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := losshist.ReadBudget(dry.dirs.ckptDir); ok {
		t.Error("a dry run recorded its budget")
	}
	bad := &runner{env: &Deps{Stderr: io.Discard}, dirs: runDirs{ckptDir: t.TempDir()}}
	bad.cfg.obs.trainSteps = "many"
	if err := bad.startForecast(); err == nil || !strings.Contains(err.Error(), `--train-steps "many"`) {
		t.Errorf("--train-steps many: %v", err)
	}
	// In the history's unit: steps where no tokens are reported; steps at
	// the tokens per step the history shows where only steps are known.
	es := []losshist.Entry{{Step: 10, Tokens: 20000}, {Step: 20, Tokens: 40000}}
	steps := losshist.Budget{Steps: 1000, From: "--train-steps 1000"}
	if v, _, ok := steps.In(es, false); !ok || v != 2e6 {
		t.Errorf("steps in tokens: %v %v, want 2e6", v, ok)
	}
	if v, _, ok := steps.In(nil, true); !ok || v != 1000 {
		t.Errorf("steps by steps: %v %v", v, ok)
	}
	if _, _, ok := (losshist.Budget{Tokens: 1e9}).In(nil, true); ok {
		t.Error("a token budget read as steps")
	}
}
