package run

import (
	"strings"
	"testing"
	"time"

	"github.com/trainrun/trainrun/internal/calib"
	"github.com/trainrun/trainrun/plan"
)

func TestParseTune(t *testing.T) {
	for in, want := range map[string]TuneSpec{"": {}, "0": {}, "none": {}, "4": {4, DefaultTuneSteps}, "4:10": {4, 10}, " 2:6 ": {2, 6}} {
		got, err := ParseTune("--tune", in)
		if err != nil || got != want {
			t.Errorf("ParseTune(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, in := range []string{"x", "-1", "4:", "4:5", "4:x", "17", "4:10:2"} {
		_, err := ParseTune("TRAINRUN_TUNE", in)
		if err == nil || !strings.Contains(err.Error(), "TRAINRUN_TUNE") || !strings.Contains(err.Error(), in) {
			t.Errorf("ParseTune(%q): error %v, want one naming the input and the value", in, err)
		}
	}
}

func TestTuneBudget(t *testing.T) {
	if b, from := TuneBudget(3*time.Minute, time.Hour); b != 3*time.Minute || from != "--tune-budget" {
		t.Errorf("given: %s from %s", b, from)
	}
	if b, from := TuneBudget(0, 2*time.Hour); b != 6*time.Minute || !strings.Contains(from, "5%") {
		t.Errorf("default of a 2 h job: %s from %q, want 6m0s (5%%)", b, from)
	}
	if b, _ := TuneBudget(0, 0); b != DefaultBudgetNoLimit {
		t.Errorf("no time limit: %s", b)
	}
}

func ev(tp, pp, mbs int, step float64) plan.Evaluation {
	e := plan.Evaluation{Layout: plan.Layout{TP: tp, PP: pp, VPP: 1, CP: 1, EP: 1, DP: 8 / (tp * pp), MicroBatch: mbs, Recompute: "none"}}
	e.Time.Step = step
	return e
}

func TestCandidatesPreferDistinctShapes(t *testing.T) {
	res := plan.Result{Plan: ptr(ev(1, 1, 2, 1.0)), Alternatives: []plan.Evaluation{
		ev(1, 1, 1, 1.1), // same shape as the plan: after the other shapes
		ev(2, 1, 1, 1.2),
		ev(2, 1, 1, 1.2), // a duplicate: once
		{Layout: plan.Layout{TP: 4, PP: 1, CP: 1, EP: 1, DP: 1}}, // 4 GPUs, not the 8 of the allocation
		ev(1, 2, 1, 1.3),
	}}
	got := Candidates(res, 4, 8)
	var cfgs []string
	for _, e := range got {
		cfgs = append(cfgs, e.Layout.Config())
	}
	want := []string{ev(1, 1, 2, 0).Layout.Config(), ev(2, 1, 1, 0).Layout.Config(), ev(1, 2, 1, 0).Layout.Config(), ev(1, 1, 1, 0).Layout.Config()}
	if strings.Join(cfgs, " ") != strings.Join(want, " ") {
		t.Errorf("candidates\n %v\nwant\n %v", cfgs, want)
	}
	if n := len(Candidates(res, 2, 8)); n != 2 {
		t.Errorf("k=2: %d candidates", n)
	}
}

func TestTrialDeadlineAndTick(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	end := t0.Add(4 * time.Minute)
	// Four left, each expected at 20 s: an even share (60 s) beats 2x the cost.
	if d := TrialDeadline(t0, end, 20*time.Second, 4); d != t0.Add(time.Minute) {
		t.Errorf("deadline %s, want +1m", d.Sub(t0))
	}
	// The last one may use what is left.
	if d := TrialDeadline(t0, end, 20*time.Second, 1); d != end {
		t.Errorf("last: deadline %s, want the budget's end", d.Sub(t0))
	}
	// Never past the budget's end.
	if d := TrialDeadline(t0, end, 5*time.Minute, 3); d != end {
		t.Errorf("costly: deadline %s", d.Sub(t0))
	}
	dl := t0.Add(time.Minute)
	for _, c := range []struct {
		span     int64
		measured bool
		now      time.Time
		want     TrialAction
	}{{3, true, t0, TrialGoOn}, {9, false, t0, TrialGoOn}, {9, true, t0, TrialDone}, {2, false, dl, TrialTimeOut}, {12, true, dl, TrialDone}} {
		if got := TrialTick(10, c.span, c.measured, c.now, dl); got != c.want {
			t.Errorf("TrialTick(10, %d, %t, +%s) = %d, want %d", c.span, c.measured, c.now.Sub(t0), got, c.want)
		}
	}
}

func TestPickRecordsAndTable(t *testing.T) {
	tmpl := calib.Record{Plan: []byte(`{"plan":{}}`), GPU: "h100-sxm", Nodes: 1, Software: map[string]string{"trainrun": "dev"}}
	trials := []Trial{
		{Eval: ev(1, 1, 1, 0.10), Observed: calib.Observed{StepS: 0.50, Steps: 7}, Took: 20 * time.Second, Record: tmpl},
		{Eval: ev(2, 1, 1, 0.12), Failed: "rank 3 failed first with exit 1", Took: 5 * time.Second, Record: tmpl},
		{Eval: ev(1, 2, 1, 0.13), Observed: calib.Observed{StepS: 0.20, Steps: 7}, Took: 15 * time.Second, Record: tmpl},
		{Eval: ev(2, 2, 1, 0.14), Observed: calib.Observed{StepS: 0.20, Steps: 7}, Took: 15 * time.Second, Record: tmpl}, // a tie: the planner's order wins
		{Eval: ev(4, 1, 1, 0.15), Failed: "not run: the budget ran out", Record: tmpl},
	}
	w := Pick(trials)
	if w != 2 {
		t.Fatalf("Pick = %d, want 2 (the fastest measured; the earlier of a tie)", w)
	}
	if Pick(trials[1:2]) != -1 {
		t.Error("Pick of failed trials only: want -1")
	}
	at := time.Unix(1_800_000_000, 0)
	recs := Records(trials, w, 10, at)
	if len(recs) != 4 {
		t.Fatalf("%d records, want 4 (the one not run has none)", len(recs))
	}
	for i, r := range recs {
		if err := r.Validate(); err != nil {
			t.Errorf("record %d: %v", i, err)
		}
		if r.Tune == nil || r.Tune.Index != i+1 || r.Tune.Of != 5 || r.Tune.Steps != 10 || r.Tune.Chosen != (i == 2) {
			t.Errorf("record %d: tune %+v", i, r.Tune)
		}
	}
	if recs[1].Measured() || recs[1].Observed.StepS != 0 || recs[1].Tune.Failed == "" {
		t.Errorf("failed trial's record: %+v %+v", recs[1].Observed, recs[1].Tune)
	}
	if !recs[2].Measured() || recs[2].Observed.StepS != 0.20 {
		t.Errorf("measured trial's record: %+v", recs[2].Observed)
	}
	recs[0].Software["x"] = "y"
	if tmpl.Software["x"] != "" {
		t.Error("records share the template's software map")
	}
	tab := strings.Join(Table(trials, w), "\n")
	for _, want := range []string{"* 3", "0.200 s", "dropped: rank 3", "+54%", "dropped: not run"} {
		if !strings.Contains(tab, want) {
			t.Errorf("table lacks %q:\n%s", want, tab)
		}
	}
	if c := Cost(70*time.Second, 4*time.Minute, time.Hour, Ran(trials), len(trials)); !strings.Contains(c, "4 of 5") || !strings.Contains(c, "1m10s of the 4m0s budget") || !strings.Contains(c, "1.9%") {
		t.Errorf("cost line %q", c)
	}
}

func TestFailure(t *testing.T) {
	if f := Failure(137, "rank 0 failed first with exit 137", TuneDone, "2 steps"); !strings.Contains(f, "budget") {
		t.Errorf("a trial the controller ended is over its time, not a crash: %q", f)
	}
	if f := Failure(1, "rank 2 (node n1, GPU 2) failed first with exit 1", None, ""); !strings.Contains(f, "rank 2") {
		t.Errorf("crash: %q", f)
	}
	if f := Failure(0, "", Hang, ""); !strings.Contains(f, "hung") {
		t.Errorf("hang: %q", f)
	}
}
