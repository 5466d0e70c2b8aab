package rungs

import (
	"math"
	"slices"
	"testing"
)

func TestRecordValuesStopped(t *testing.T) {
	d := t.TempDir()
	for i, v := range []float64{3, 1, math.NaN()} {
		if err := Record(d, 0, i, 10, v); err != nil {
			t.Fatal(err)
		}
	}
	Record(d, 0, 1, 12, 0.5) // trial 1 again: replaces
	vs, err := Values(d, 0)
	if err != nil || len(vs) != 3 {
		t.Fatalf("values %v, %v", vs, err)
	}
	if !slices.Contains(vs, 0.5) || slices.Contains(vs, 1) {
		t.Errorf("trial 1's record not replaced: %v", vs)
	}
	if Stopped(d, 0) {
		t.Fatal("stopped before marked")
	}
	if err := MarkStopped(d, 0, 0, 10, 3); err != nil || !Stopped(d, 0) || Stopped(d, 1) {
		t.Fatalf("MarkStopped: %v", err)
	}
}

func TestForecastRecords(t *testing.T) {
	d := t.TempDir()
	if _, err := Forecasts(d); err == nil {
		t.Fatal("no records read without error")
	}
	for _, r := range []ForecastRecord{{Trial: 0, Step: 20, Lo: 2, Mid: 2.1, Hi: 2.3}, {Trial: 3, Step: 30, Lo: 1.9, Mid: 2, Hi: 2}} {
		if err := RecordForecast(d, r); err != nil {
			t.Fatal(err)
		}
	}
	RecordForecast(d, ForecastRecord{Trial: 0, Step: 25, Lo: 1.8, Mid: 1.85, Hi: 1.9}) // replaces trial 0's
	RecordForecast(d, ForecastRecord{Trial: 4, Step: 25, Lo: 2, Mid: 1, Hi: 3})        // Lo above Mid: skipped
	rs, err := Forecasts(d)
	if err != nil || len(rs) != 2 {
		t.Fatalf("records %+v, %v", rs, err)
	}
	for _, r := range rs {
		if r.Trial == 0 && (r.Step != 25 || r.Mid != 1.85) || r.Trial == 3 && r.Lo != 1.9 {
			t.Errorf("record %+v", r)
		}
	}
}
