package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/trainrun/trainrun/checkpoint"
	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
	"github.com/trainrun/trainrun/wrapper/internal/losshist"
	"github.com/trainrun/trainrun/wrapper/internal/run"
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

func TestForecastVerdicts(t *testing.T) {
	dir := forecastStore(t)
	for _, c := range []struct {
		target  string
		verdict string
	}{{"2.45", "on-track"}, {"2.2", "off-track"}} {
		code, out, errOut := cli{}.run("forecast", dir, "--tokens", "10B", "--target-loss", c.target, "--format", "json")
		if code != 0 {
			t.Fatalf("target %s: exit %d: %s", c.target, code, errOut)
		}
		var doc struct {
			Verdict string             `json:"verdict"`
			PReach  float64            `json:"p_reach"`
			Loss    map[string]float64 `json:"loss"`
		}
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatalf("json: %v\n%s", err, out)
		}
		if doc.Verdict != c.verdict {
			t.Errorf("target %s: verdict %q (P %.2f), want %q", c.target, doc.Verdict, doc.PReach, c.verdict)
		}
		if m := doc.Loss["mid"]; math.Abs(m-2.3)/2.3 > 0.02 || doc.Loss["lo"] > 2.3 || doc.Loss["hi"] < 2.3 {
			t.Errorf("loss at 10B %v, want about 2.3 inside the band", doc.Loss)
		}
	}
}

func TestForecastTableAndSVG(t *testing.T) {
	dir := forecastStore(t)
	svg := filepath.Join(t.TempDir(), "f.svg")
	code, out, errOut := cli{}.run("forecast", dir, "--tokens", "10B", "--target-loss", "2.45", "--svg", svg)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"fit ", "noise ", "verdict      on-track", "target 2.45"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	b, err := os.ReadFile(svg)
	if err != nil || !strings.Contains(string(b), "<polygon") || !strings.Contains(string(b), "target 2.45") {
		t.Fatalf("svg: %v\n%.300s", err, b)
	}
	if rsvg, err := exec.LookPath("rsvg-convert"); err == nil {
		png := filepath.Join(t.TempDir(), "f.png")
		if b, err := exec.Command(rsvg, "-o", png, svg).CombinedOutput(); err != nil {
			t.Errorf("rsvg-convert: %v\n%s", err, b)
		}
		if fi, err := os.Stat(png); err != nil || fi.Size() < 1000 {
			t.Errorf("rendered png: %v", err)
		}
	}
}

func TestForecastErrors(t *testing.T) {
	empty := t.TempDir()
	for _, c := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"no args", nil, exitcode.Usage, "needs one run"},
		{"target without tokens", []string{empty, "--target-loss", "2"}, exitcode.Usage, "--target-loss needs --tokens"},
		{"bad tokens", []string{empty, "--tokens", "lots"}, exitcode.Usage, "--tokens \"lots\""},
		{"no history", []string{empty}, exitcode.Usage, "no loss history"},
		{"bad format", []string{empty, "--format", "xml"}, exitcode.Usage, "--format"},
	} {
		code, _, errOut := cli{}.run(append([]string{"forecast"}, c.args...)...)
		if code != c.code || !strings.Contains(errOut, c.msg) {
			t.Errorf("%s: exit %d, %q; want %d and %q", c.name, code, errOut, c.code, c.msg)
		}
	}
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
	r := &runner{env: &runEnv{stderr: &log}, dirs: runDirs{ckptDir: dir}, ckpt: runStore{store: st}, sess: session{obs: rec}}
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
	d := r.offTrackExit(run.Decision{Exit: exitcode.Stopped, Tag: "step-500"})
	if d.Exit != exitcode.OffTrack || !strings.Contains(d.Err, "off track") {
		t.Errorf("decision %+v, want exit %d", d, exitcode.OffTrack)
	}
	if d := (&runner{}).offTrackExit(run.Decision{Exit: exitcode.Stopped}); d.Exit != exitcode.Stopped {
		t.Errorf("a stop without the watch changed its exit to %d", d.Exit)
	}
}

func TestForecastWatchBadInput(t *testing.T) {
	for _, c := range []struct{ target, tokens, ckpt, msg string }{
		{"fast", "10B", "/x", "--target-loss \"fast\""},
		{"2", "", "/x", "needs --tokens"},
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

func TestScalingCommand(t *testing.T) {
	law := func(n, d float64) float64 { return 1.69 + 406.4/math.Pow(n, 0.34) + 410.7/math.Pow(d, 0.28) }
	r := rand.New(rand.NewPCG(5, 5))
	args := []string{"scaling", "--params", "1.3B", "--tokens", "26B", "--format", "json"}
	for _, n := range []float64{125e6, 350e6, 760e6} {
		p := filepath.Join(t.TempDir(), "metrics.jsonl")
		w := losshist.Open(p)
		for s := int64(1); s <= 200; s++ {
			d := 20 * n * float64(s) / 200
			w.Append(losshist.Entry{Step: s, Tokens: int64(d), Metrics: map[string]float64{"loss": law(n, d) * (1 + 0.004*r.NormFloat64())}})
		}
		args = append(args, p+"="+strconv.FormatFloat(n, 'g', -1, 64))
	}
	code, out, errOut := cli{}.run(args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var doc struct {
		Loss map[string]float64 `json:"loss"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	truth := law(1.3e9, 26e9)
	if e := math.Abs(doc.Loss["mid"]-truth) / truth; e > 0.03 {
		t.Errorf("predicted %v, true %.4f: error %.2f%%", doc.Loss, truth, 100*e)
	}
	code, _, errOut = (cli{}).run("scaling", "x=1B", "--params", "7B")
	if code != exitcode.Usage || !strings.Contains(errOut, "--tokens") {
		t.Errorf("missing --tokens: exit %d %q", code, errOut)
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
		return &runner{env: &runEnv{stderr: io.Discard, getenv: func(k string) string { return vars[k] }}, ckpt: runStore{store: st}}, st
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
	off := &runner{env: &runEnv{stderr: io.Discard, getenv: func(string) string { return "" }}}
	off.earlyStop(100, map[string]float64{"loss": 9}) // not a sweep trial: nothing, no panic
}

// The controller's progress poll keeps the loss history, also when the
// progress reader was made at the run's start (observeStart).
func TestPollProgressKeepsLossHistory(t *testing.T) {
	job, ckpt := t.TempDir(), t.TempDir()
	os.MkdirAll(filepath.Join(job, jobLaunchDir), 0o755)
	r := &runner{env: &runEnv{stderr: io.Discard, getenv: func(string) string { return "" }}, dirs: runDirs{jobDir: job, ckptDir: ckpt}}
	prog := filepath.Join(job, jobLaunchDir, "progress")
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

// Too early to forecast: the verdict says why, and the SVG still draws the
// curve.
func TestForecastTooEarly(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, ".trainrun"), 0o755)
	w := losshist.Open(losshist.Path(dir))
	for s := int64(1); s <= 8; s++ {
		w.Append(losshist.Entry{Step: s, Tokens: s * 1000, Metrics: map[string]float64{"loss": 3 - 0.1*float64(s)}})
	}
	svg := filepath.Join(t.TempDir(), "f.svg")
	code, out, errOut := cli{}.run("forecast", dir, "--tokens", "1M", "--target-loss", "2", "--svg", svg)
	if code != 0 || !strings.Contains(out, "too-early") {
		t.Fatalf("exit %d: %s%s", code, out, errOut)
	}
	if b, err := os.ReadFile(svg); err != nil || !strings.Contains(string(b), "too early") || strings.Contains(string(b), "NaN") || strings.Contains(string(b), "Inf") {
		t.Fatalf("svg: %v\n%s", err, b)
	}
}
