package calib

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestSteadyMedianAfterWarmup(t *testing.T) {
	var s Steady
	t0 := time.Unix(1_800_000_000, 0)
	at := t0
	// Steps 0-1 are slow (compilation), then 2.0 s a step reported every
	// two steps, one straggling interval.
	s.Add(0, at)
	at = at.Add(30 * time.Second)
	s.Add(1, at)
	for step := int64(2); step <= 20; step += 2 {
		d := 4 * time.Second
		if step == 10 {
			d = 6 * time.Second
		}
		at = at.Add(d)
		s.Add(step, at)
	}
	o, ok, why := s.Summary()
	if !ok {
		t.Fatal(why)
	}
	if math.Abs(o.StepS-2.0) > 1e-9 || o.Steps != 18 {
		t.Errorf("median %.3f s over %d steps, want 2.000 s over 18 (warm-up left out)", o.StepS, o.Steps)
	}
	if o.Spread <= 0 {
		t.Errorf("spread %v: the straggling interval should show", o.Spread)
	}
	// A restart from an earlier checkpoint starts a new series.
	s.Add(5, at.Add(time.Minute))
	if _, ok, why := s.Summary(); ok || !strings.Contains(why, "fewer than") {
		t.Errorf("after a restart to step 5: ok %v, %q", ok, why)
	}
	var none Steady
	if _, ok, why := none.Summary(); ok || !strings.Contains(why, "report_progress") {
		t.Errorf("no progress: ok %v, %q", ok, why)
	}
}

func TestAppendLoadSkipsTornLine(t *testing.T) {
	p := filepath.Join(t.TempDir(), "ck", ".trainrun", StoreFile)
	r := Record{Plan: json.RawMessage(`{"plan":{"tp":1,"pp":1,"dp":8,"micro_batch":1}}`), Observed: Observed{StepS: 1.5, Steps: 10}, At: time.Unix(1_800_000_000, 0).UTC()}
	if err := Append(p, r); err != nil {
		t.Fatal(err)
	}
	f, _ := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"plan": {"tp"`) // a kill mid-write
	f.Close()
	if err := Append(p, r); err != nil {
		t.Fatal(err)
	}
	recs, bad, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || len(bad) != 1 || !strings.Contains(bad[0].Error(), ":2:") {
		t.Errorf("%d records, bad %v: want 2 and line 2 reported", len(recs), bad)
	}
	if err := (Record{Plan: r.Plan, Observed: Observed{StepS: -1}}).Validate(); err == nil || !strings.Contains(err.Error(), "step_s") {
		t.Errorf("negative step: %v", err)
	}
	if err := Append(filepath.Join(t.TempDir(), "x"), Record{Observed: Observed{StepS: 1}}); err == nil || !strings.Contains(err.Error(), `"plan"`) {
		t.Errorf("record without plan: %v", err)
	}
}

func TestRecorderSaysWhyOnce(t *testing.T) {
	dir := t.TempDir()
	r := &Recorder{Paths: []string{filepath.Join(dir, StoreFile)}, Template: Record{Plan: json.RawMessage(`{"plan":{}}`)}}
	if msg := r.Finish(time.Now()); !strings.Contains(msg, "no observation recorded") {
		t.Errorf("first Finish: %q", msg)
	}
	if msg := r.Finish(time.Now()); msg != "" {
		t.Errorf("second Finish said %q, want nothing", msg)
	}
	if _, err := os.Stat(filepath.Join(dir, StoreFile)); !os.IsNotExist(err) {
		t.Errorf("a run without progress wrote a record: %v", err)
	}
}
