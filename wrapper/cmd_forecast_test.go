package main

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
	"github.com/trainrun/trainrun/wrapper/internal/losshist"
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

// Without --tokens, forecast takes the budget the run recorded in its
// store: tokens as recorded, or steps at the history's tokens per step;
// without a record, --target-loss asks for --tokens.
func TestForecastRecordedBudget(t *testing.T) {
	dir := forecastStore(t) // 4M tokens per step
	if code, _, errOut := (cli{}).run("forecast", dir, "--target-loss", "2.45"); code != exitcode.Usage || !strings.Contains(errOut, "--tokens") {
		t.Fatalf("no budget recorded: exit %d: %s", code, errOut)
	}
	for _, b := range []losshist.Budget{{Tokens: 1e10, From: "--tokens 10B"}, {Steps: 2500, From: "--train-steps 2500"}} {
		if err := losshist.WriteBudget(dir, b); err != nil {
			t.Fatal(err)
		}
		code, out, errOut := cli{}.run("forecast", dir, "--target-loss", "2.45", "--format", "json")
		if code != 0 {
			t.Fatalf("%+v: exit %d: %s", b, code, errOut)
		}
		var doc struct {
			Budget  float64 `json:"budget_tokens"`
			Verdict string  `json:"verdict"`
		}
		if err := json.Unmarshal([]byte(out), &doc); err != nil || doc.Budget != 1e10 || doc.Verdict != "on-track" || !strings.Contains(errOut, b.From) {
			t.Errorf("%+v: budget %v verdict %q (%v); stderr %s", b, doc.Budget, doc.Verdict, err, errOut)
		}
	}
	os.WriteFile(losshist.BudgetPath(dir), []byte(`{"tokens": -1}`), 0o644)
	if code, _, errOut := (cli{}).run("forecast", dir); code != exitcode.Usage || !strings.Contains(errOut, "budget.json") {
		t.Errorf("a bad budget file: exit %d: %s", code, errOut)
	}
}
