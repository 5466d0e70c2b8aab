package run

import (
	"math"
	"strings"
	"testing"
	"time"
)

// The breakdown's parts follow the controller's timestamps, and add up to
// the time from the fault to the first new step plus the redone steps.
func TestBadputOf(t *testing.T) {
	t0 := time.Unix(1e9, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	bp := restartClock{fault: at(0), detected: at(0.5), stepEnded: at(2), health: 1500 * time.Millisecond,
		relaunched: at(4), allStarted: at(6), faultStep: 13, resumeStep: 10, stepTime: 200 * time.Millisecond}
	b := badputOf(&bp, at(16))
	want := Badput{Detect: 0.5, Stop: 1.5, Decide: 0.5, Health: 1.5, Relaunch: 2, First: 10, Redone: 0.6, RedoneSteps: 3}
	for _, p := range [][2]float64{{b.Detect, want.Detect}, {b.Stop, want.Stop}, {b.Decide, want.Decide}, {b.Health, want.Health},
		{b.Relaunch, want.Relaunch}, {b.First, want.First}, {b.Redone, want.Redone}} {
		if math.Abs(p[0]-p[1]) > 1e-9 {
			t.Fatalf("badput %+v, want %+v", b, want)
		}
	}
	if b.RedoneSteps != 3 || math.Abs(b.Total()-(16+0.6)) > 1e-9 || !strings.Contains(b.String(), "first step 10.0 s") {
		t.Errorf("badput %+v total %.2f: %s", b, b.Total(), b)
	}
	// No hello seen before the first step: the relaunch ends with it.
	bp.allStarted = time.Time{}
	if b := badputOf(&bp, at(16)); b.Relaunch != 12 || b.First != 0 {
		t.Errorf("without every hello: %+v", b)
	}
}
