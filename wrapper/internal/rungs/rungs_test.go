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
