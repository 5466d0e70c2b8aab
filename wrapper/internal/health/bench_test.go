package health

import (
	"testing"
	"time"
)

// The controller's work for a 16,384-rank step: each second it takes the
// beats that arrived (at most ~1,000: launch.BeatInterval spreads one per
// rank over 16.4 s) and checks every rank once. One iteration is one such
// second; its time is the share of one core the hang detection costs.
func BenchmarkControllerSecond16k(b *testing.B) {
	const world, perSecond = 16384, 1000
	tr := New(Auto(0))
	now := time.Unix(1e9, 0)
	for r := 0; r < world; r++ {
		tr.Observe(Beat{Rank: r, Step: 1, StepTime: 2 * time.Second, State: "S"}, now)
	}
	next := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		now = now.Add(time.Second)
		for j := 0; j < perSecond; j++ {
			r := next % world
			next++
			tr.Observe(Beat{Rank: r, Step: int64(2 + next/world), StepTime: 2 * time.Second, State: "S"}, now)
		}
		if h := tr.Check(now, false); h != nil {
			b.Fatalf("hang in a healthy step: %+v", h.Stalled[:1])
		}
		tr.Stragglers()
	}
}
