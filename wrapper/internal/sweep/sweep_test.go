package sweep

import (
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/trainrun/trainrun/internal/forecast"
)

func mustGrid(t *testing.T, s string) Param {
	t.Helper()
	p, err := ParseGrid(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestExpandGrid3x2(t *testing.T) {
	trials, err := Expand([]Param{mustGrid(t, "lr=0.01,0.05,0.2"), mustGrid(t, "mom=0,0.9")}, 0, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []map[string]string{
		{"lr": "0.01", "mom": "0"}, {"lr": "0.01", "mom": "0.9"}, {"lr": "0.05", "mom": "0"},
		{"lr": "0.05", "mom": "0.9"}, {"lr": "0.2", "mom": "0"}, {"lr": "0.2", "mom": "0.9"},
	}
	if len(trials) != 6 {
		t.Fatalf("%d trials, want 6", len(trials))
	}
	for i, tr := range trials {
		if tr.Index != i || !reflect.DeepEqual(tr.Params, want[i]) {
			t.Errorf("trial %d = %+v, want %v", i, tr, want[i])
		}
	}
}

func TestExpandRandomIsSeededAndInRange(t *testing.T) {
	r, err := ParseRange("lr=1e-5:1e-2:log")
	if err != nil {
		t.Fatal(err)
	}
	a, err := Expand([]Param{mustGrid(t, "bs=8,16")}, 5, []Range{r}, 7)
	if err != nil || len(a) != 10 {
		t.Fatalf("%d trials, %v", len(a), err)
	}
	b, _ := Expand([]Param{mustGrid(t, "bs=8,16")}, 5, []Range{r}, 7)
	c, _ := Expand([]Param{mustGrid(t, "bs=8,16")}, 5, []Range{r}, 8)
	if !reflect.DeepEqual(a, b) {
		t.Error("the same seed gave two sweeps")
	}
	if reflect.DeepEqual(a, c) {
		t.Error("another seed gave the same sweep")
	}
	lows := 0
	for _, tr := range a {
		v, err := strconv.ParseFloat(tr.Params["lr"], 64)
		if err != nil || v < 1e-5 || v >= 1e-2*1.001 {
			t.Errorf("lr %q out of [1e-5, 1e-2)", tr.Params["lr"])
		}
		if v < 3e-4 {
			lows++
		}
	}
	if lows == 0 || lows == len(a) {
		t.Errorf("log sampling: %d of %d below the geometric middle", lows, len(a))
	}
}

func TestParseErrorsNameTheInput(t *testing.T) {
	for _, bad := range []string{"lr", "lr=", "lr=1,,2", "lr=1,1", "1x=2", "tp=1,2", "resume=a"} {
		if _, err := ParseGrid(bad); err == nil || !strings.Contains(err.Error(), "--grid") {
			t.Errorf("ParseGrid(%q) = %v", bad, err)
		}
	}
	for _, bad := range []string{"lr=1", "lr=2:1", "lr=0:1:log", "lr=a:b", "lr=1:2:sqrt"} {
		if _, err := ParseRange(bad); err == nil || !strings.Contains(err.Error(), "--range") {
			t.Errorf("ParseRange(%q) = %v", bad, err)
		}
	}
	if _, err := Expand(nil, 0, nil, 0); err == nil {
		t.Error("an empty sweep expanded")
	}
	if _, err := Expand([]Param{mustGrid(t, "a=1,2"), mustGrid(t, "a=3")}, 0, nil, 0); err == nil {
		t.Error("a key swept twice")
	}
	big := Param{Key: "x"}
	for i := 0; i < 1001; i++ {
		big.Values = append(big.Values, strconv.Itoa(i))
	}
	if _, err := Expand([]Param{big}, 0, nil, 0); err == nil || !strings.Contains(err.Error(), "MaxArraySize") {
		t.Errorf("1001 trials: %v", err)
	}
}

func TestSubstituteKeepsRunTemplates(t *testing.T) {
	out, unused := Substitute([]string{"python", "t.py", "--lr={lr}", "--tp", "{tp}", "--resume", "{resume}"}, map[string]string{"lr": "0.1", "wd": "0"})
	if !reflect.DeepEqual(out, []string{"python", "t.py", "--lr=0.1", "--tp", "{tp}", "--resume", "{resume}"}) {
		t.Errorf("got %q", out)
	}
	if !reflect.DeepEqual(unused, []string{"wd"}) {
		t.Errorf("unused %v", unused)
	}
	if EnvName("lr") != "TRAINRUN_SWEEP_LR" || ArraySpec(6, 2) != "0-5%2" || ArraySpec(3, 0) != "0-2" || ArraySpec(3, 5) != "0-2" {
		t.Error("EnvName or ArraySpec")
	}
}

func TestStateOf(t *testing.T) {
	cases := []struct {
		f           TrialFacts
		state, want string
	}{
		{TrialFacts{InSlurm: true, State: "PENDING", Reason: "JobArrayTaskLimit"}, Pending, "JobArrayTaskLimit"},
		{TrialFacts{InSlurm: true, State: "PENDING", Reason: "BeginTime", Restarts: 1}, Requeued, "BeginTime"},
		{TrialFacts{InSlurm: true, State: "RUNNING"}, Running, ""},
		{TrialFacts{InSlurm: true, State: "PREEMPTED"}, Preempted, ""},
		{TrialFacts{InSlurm: true, State: "REQUEUED"}, Requeued, ""},
		{TrialFacts{InSlurm: true, State: "COMPLETED", Finished: true}, Finished, ""},
		{TrialFacts{InSlurm: true, State: "COMPLETED", ExitCode: "0:0"}, Failed, "recorded no finish"},
		{TrialFacts{InSlurm: true, State: "FAILED", ExitCode: "5:0", Reason: "NonZeroExitCode"}, Failed, "FAILED, exit 5:0, NonZeroExitCode"},
		{TrialFacts{InSlurm: true, State: "TIMEOUT"}, Failed, "TIMEOUT"},
		{TrialFacts{Finished: true}, Finished, ""},
		{TrialFacts{}, Failed, "no longer knows"},
	}
	for _, c := range cases {
		s, r := StateOf(c.f)
		if s != c.state || !strings.Contains(r, c.want) {
			t.Errorf("StateOf(%+v) = %s %q, want %s %q", c.f, s, r, c.state, c.want)
		}
	}
}

func TestBest(t *testing.T) {
	rows := []TrialStatus{
		{Index: 0, Metric: map[string]float64{"loss": 0.5}},
		{Index: 1, Metric: map[string]float64{"loss": math.NaN()}},
		{Index: 2, Metric: map[string]float64{"loss": 0.2}},
		{Index: 3, Metric: map[string]float64{"acc": 9}},
		{Index: 4, Metric: map[string]float64{"loss": 0.9}},
	}
	if b, ok := Best(rows, "loss", false); !ok || b.Index != 2 {
		t.Errorf("lowest loss: %+v %v", b, ok)
	}
	if b, ok := Best(rows, "loss", true); !ok || b.Index != 4 {
		t.Errorf("highest loss: %+v %v", b, ok)
	}
	if _, ok := Best(rows, "ppl", false); ok {
		t.Error("a best by a metric no trial reported")
	}
	c := Counts([]TrialStatus{{State: Running}, {State: Running}, {State: Finished}})
	if c[Running] != 2 || c[Finished] != 1 || c[Pending] != 0 || len(c) != 7 {
		t.Errorf("Counts = %v", c)
	}
}

// Review t4, F8: lr and LR were both TRAINRUN_SWEEP_LR (one lost), and the
// keys dir and trial overwrote the script's own TRAINRUN_SWEEP_DIR and
// TRAINRUN_SWEEP_TRIAL.
func TestKeysCollidingAsVariablesRefused(t *testing.T) {
	lr, err := ParseGrid("lr=1e-4,3e-4")
	if err != nil {
		t.Fatal(err)
	}
	LR, err := ParseGrid("LR=1,2")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Expand([]Param{lr, LR}, 0, nil, 1); err == nil || !strings.Contains(err.Error(), "TRAINRUN_SWEEP_LR") {
		t.Errorf("lr and LR: %v", err)
	}
	if _, err := Expand([]Param{lr}, 2, []Range{{Key: "Lr", Lo: 1, Hi: 2}}, 1); err == nil {
		t.Error("--grid lr and --range Lr accepted")
	}
	for _, k := range []string{"dir", "TRIAL", "Dir"} {
		if _, err := ParseGrid(k + "=a,b"); err == nil || !strings.Contains(err.Error(), "sets itself") {
			t.Errorf("key %s: %v", k, err)
		}
	}
}

// Review t4, F9: a control character in a swept value made the SVG
// invalid XML; it is still escaped markup.
func TestSVGIsXMLWhateverTheValues(t *testing.T) {
	rows := []TrialStatus{
		{Index: 0, Params: map[string]string{"opt": "a\x0cb\x00<script>", "lr": "1"}, Metric: map[string]float64{"loss": 1}},
		{Index: 1, Params: map[string]string{"opt": "\xff\"&'", "lr": "2"}, Metric: map[string]float64{"loss": 2}},
	}
	svg := SVG("t\x1b[2J", []string{"opt", "lr"}, rows, "loss")
	d := xml.NewDecoder(strings.NewReader(svg))
	for {
		_, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not XML: %v\n%s", err, svg)
		}
	}
	if strings.Contains(svg, "<script>") {
		t.Error("markup from a value reached the SVG")
	}
}

// Issue 30: the metric's axis is labelled and readable: ticks with values,
// the metric's name, a log scale when one diverged trial would squash the
// others, tick labels that stay left of their panel and clear of the
// previous one, and each point marked with its trial.
func TestSVGAxesLabelled(t *testing.T) {
	rows := []TrialStatus{
		{Index: 0, Params: map[string]string{"lr": "1e-4", "wd": "0"}, Metric: map[string]float64{"loss": 2.31}},
		{Index: 1, Params: map[string]string{"lr": "3e-4", "wd": "0.1"}, Metric: map[string]float64{"loss": 2.17}},
		{Index: 2, Params: map[string]string{"lr": "1e-3", "wd": "0"}, Metric: map[string]float64{"loss": 2.05}},
		{Index: 3, Params: map[string]string{"lr": "3e-2", "wd": "0.1"}, Metric: map[string]float64{"loss": 0.000123456}},
		{Index: 4, Params: map[string]string{"lr": "1e-1", "wd": "0"}, Metric: map[string]float64{"loss": 41.7}}, // diverged
	}
	svg := SVG("s", []string{"lr", "wd"}, rows, "loss")
	for _, want := range []string{"loss (log scale)", "lr (log scale)", `rotate(-90`, ">0.001<", ">10<"} {
		if !strings.Contains(svg, want) {
			t.Errorf("SVG lacks %q", want)
		}
	}
	for i := range rows {
		if !strings.Contains(svg, fmt.Sprintf(`fill="#555">%d</text>`, i)) {
			t.Errorf("trial %d's point is not labelled", i)
		}
	}
	// Tick labels (right-aligned at x) of the second panel: at 7 px a
	// character they must start right of the first panel's right edge.
	firstRight := svgLeft + svgPanelW
	re := regexp.MustCompile(`<text x="([0-9.]+)" y="[0-9.]+" text-anchor="end" font-size="11">([^<]+)</text>`)
	n := 0
	for _, m := range re.FindAllStringSubmatch(svg, -1) {
		x, _ := strconv.ParseFloat(m[1], 64)
		if x < firstRight {
			continue // the first panel's
		}
		n++
		if start := x - 7*float64(len(m[2])); start <= firstRight {
			t.Errorf("tick label %q spans %.0f..%.0f, into the first panel (right edge %.0f)", m[2], start, x, firstRight)
		}
	}
	if n < 3 || n > 2*svgTicks {
		t.Errorf("%d tick labels on the second panel, want about %d", n, svgTicks)
	}
	// Round values: 1, 2 or 5 times a power of ten.
	for _, m := range re.FindAllStringSubmatch(svg, -1) {
		v, err := strconv.ParseFloat(m[2], 64)
		if d := v / math.Pow(10, math.Floor(math.Log10(v))); err != nil || math.Abs(d-1) > 1e-9 && math.Abs(d-2) > 1e-9 && math.Abs(d-5) > 1e-9 {
			t.Errorf("tick %q is not a round value", m[2])
		}
	}
	// A metric spanning less than 10x stays linear.
	if lin := SVG("s", []string{"lr"}, rows[:3], "loss"); strings.Contains(lin, "loss (log scale)") {
		t.Error("a 1.1x spread drawn on a log axis")
	}
}

func TestEarlyStopASHA(t *testing.T) {
	e, ok, err := ParseEarlyStop("asha:3:10")
	if err != nil || !ok || e.Eta != 3 || e.MinSteps != 10 {
		t.Fatalf("parse: %+v %v %v", e, ok, err)
	}
	for step, rung := range map[int64]int{9: -1, 10: 0, 29: 0, 30: 1, 90: 2, 269: 2, 270: 3} {
		if got := e.Rung(step); got != rung {
			t.Errorf("Rung(%d) = %d, want %d", step, got, rung)
		}
	}
	if e.RungStep(2) != 90 {
		t.Errorf("RungStep(2) = %d", e.RungStep(2))
	}
	for _, bad := range []string{"hyperband", "asha:1", "asha:3:0", "asha:x", "asha:3:5:7"} {
		if _, _, err := ParseEarlyStop(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	// 6 trials at a rung, eta 3: the best 2 continue.
	at := []float64{3, 1, 2, 5, 4, 6}
	for _, c := range []struct {
		v    float64
		want bool
	}{{1, true}, {2, true}, {3, false}, {6, false}} {
		if got := e.Continue(c.v, at, false); got != c.want {
			t.Errorf("Continue(%v) = %v, want %v", c.v, got, c.want)
		}
	}
	if !e.Continue(6, at, true) || e.Continue(1, at, true) {
		t.Error("maximize ranks the other way")
	}
	if !e.Continue(9, []float64{9}, false) {
		t.Error("the first trial at a rung stopped")
	}
	if st, _ := StateOf(TrialFacts{InSlurm: true, State: "FAILED", ExitCode: "7:0", StoppedEarly: true}); st != StoppedEarly {
		t.Errorf("state %s, want %s", st, StoppedEarly)
	}
}

func TestEarlyStopForecast(t *testing.T) {
	e, ok, err := ParseEarlyStop("forecast")
	if err != nil || !ok || !e.Forecast() || e.P != 0.05 || e.MinSteps != 100 || e.Budget != 0 {
		t.Fatalf("parse: %+v %v %v", e, ok, err)
	}
	e, _, err = ParseEarlyStop("forecast:0.1:20:90")
	if err != nil || e.P != 0.1 || e.MinSteps != 20 || e.Budget != 90 || e.String() != "forecast:0.1:20:90" {
		t.Fatalf("parse: %+v %v (%s)", e, err, e.String())
	}
	if back, _, err := ParseEarlyStop(e.String()); err != nil || back != e {
		t.Errorf("String does not read back: %+v %v", back, err)
	}
	if e.Rung(1000) != -1 {
		t.Error("the forecast rule has rungs")
	}
	for _, bad := range []string{"forecast:0", "forecast:0.5", "forecast:x", "forecast:0.05:0", "forecast:0.05:10:0", "forecast:0.05:10:90:1"} {
		if _, _, err := ParseEarlyStop(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	best := forecast.Band{Lo: 1.9, Mid: 2, Hi: 2.1}
	for _, c := range []struct {
		mine   forecast.Band
		lo, hi float64
		why    string
	}{
		{forecast.Band{Lo: 1.9, Mid: 2, Hi: 2.1}, 0.49, 0.51, "the same forecast: even"},
		{forecast.Band{Lo: 2.4, Mid: 2.5, Hi: 2.6}, 0, 0.001, "five half-widths above: hopeless"},
		{forecast.Band{Lo: 1.5, Mid: 2.1, Hi: 2.7}, 0.3, 0.45, "above, but a wide band"},
		{forecast.Band{Lo: 1.7, Mid: 1.8, Hi: 1.9}, 0.9, 1, "below"},
		{forecast.Band{Lo: 3, Mid: 3, Hi: 3}, 0, 0.001, "observed, above"},
	} {
		if p := Chance(c.mine, best, 0.8); p < c.lo || p > c.hi {
			t.Errorf("%s: Chance %v, want in [%v, %v]", c.why, p, c.lo, c.hi)
		}
	}
	exact := forecast.Band{Lo: 2, Mid: 2, Hi: 2}
	if Chance(exact, exact, 0.8) != 0.5 || Chance(forecast.Band{Lo: 1, Mid: 1, Hi: 1}, exact, 0.8) != 1 || Chance(forecast.Band{Lo: math.NaN(), Mid: math.NaN(), Hi: math.NaN()}, exact, 0.8) != 0 {
		t.Error("bands without spread")
	}
	// One band width apart at 80%: z = 1.2816 per half-width each side,
	// d = 2 half-widths, s = sqrt(2) half-widths/z: P = Φ(-2z/sqrt2) = 0.035.
	if p := Chance(forecast.Band{Lo: 2.1, Mid: 2.2, Hi: 2.3}, best, 0.8); math.Abs(p-0.0349) > 0.001 {
		t.Errorf("Chance %v, want 0.035", p)
	}
}
