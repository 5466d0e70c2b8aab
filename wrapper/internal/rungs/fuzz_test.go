package rungs

import (
	"math"
	"os"
	"path/filepath"
	"testing"
)

// FuzzValues: a trial's rung record (a file in the shared sweep directory,
// written by every trial's controller) reads without a panic; what Values
// returns is only the records it could parse, each a number.
func FuzzValues(f *testing.F) {
	f.Add([]byte("10 2.5\n"))
	f.Add([]byte("10 NaN"))
	f.Add([]byte("x y z"))
	f.Add([]byte("10 1e400"))
	f.Add([]byte("10 -Inf"))
	f.Fuzz(func(t *testing.T, b []byte) {
		dir := t.TempDir()
		if err := Record(dir, 0, 1, 10, 1.5); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(rungDir(dir, 0), "trial-2"), b, 0o644); err != nil {
			t.Fatal(err)
		}
		vs, err := Values(dir, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(vs) < 1 || len(vs) > 2 {
			t.Fatalf("%d values from two records", len(vs))
		}
		for _, v := range vs {
			if math.IsInf(v, 0) {
				t.Fatalf("an infinite metric %v read as a trial's value", v)
			}
		}
	})
}

// FuzzForecasts: a trial's forecast record reads without a panic, and
// what Forecasts returns are finite bands in order.
func FuzzForecasts(f *testing.F) {
	f.Add([]byte("20 2.1 2.2 2.3\n"))
	f.Add([]byte("20 2.3 2.2 2.1"))
	f.Add([]byte("20 NaN 2 3"))
	f.Add([]byte("x 1 2 3"))
	f.Add([]byte("20 -Inf 1 2"))
	f.Fuzz(func(t *testing.T, b []byte) {
		dir := t.TempDir()
		if err := RecordForecast(dir, ForecastRecord{Trial: 1, Step: 10, Lo: 1, Mid: 2, Hi: 3}); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(filepath.Dir(forecastPath(dir, 0)), "trial-2"), b, 0o644); err != nil {
			t.Fatal(err)
		}
		rs, err := Forecasts(dir)
		if err != nil || len(rs) < 1 || len(rs) > 2 {
			t.Fatalf("%d records from two files: %v", len(rs), err)
		}
		for _, r := range rs {
			if math.IsInf(r.Lo, 0) || math.IsInf(r.Hi, 0) || math.IsNaN(r.Mid) || !(r.Lo <= r.Mid && r.Mid <= r.Hi) {
				t.Fatalf("record %+v read", r)
			}
		}
	})
}
