package health

import (
	"slices"
	"time"
)

// A rank straggles when its step time is at least StragglerRatio times its
// peers' median in StragglerChecks checks in a row (one check per beat
// interval: a slow step now and then is not a straggler).
const (
	StragglerRatio  = 1.5
	StragglerChecks = 3
	minPeers        = 2
)

// Straggler is a rank whose step time stays well above its peers'.
type Straggler struct {
	Rank       int
	StepTime   time.Duration
	PeerMedian time.Duration
	Ratio      float64 // StepTime / PeerMedian
}

// Stragglers checks the ranks' latest step times and returns the ranks that
// just became stragglers (each is returned once until it recovers). In
// lock-step data parallelism every rank waits for the slowest in the
// gradient all-reduce, so their step times agree and a slow GPU shows in
// none of them: what this sees are ranks that are not synchronised every
// step (pipeline stages, asynchronous or local-SGD trainers, independent
// replicas).
func (t *Tracker) Stragglers() []Straggler {
	if t.slow == nil {
		t.slow, t.reported = map[int]int{}, map[int]bool{}
	}
	var times []time.Duration
	for _, s := range t.ranks {
		if s.StepTime > 0 && s.Step >= 0 {
			times = append(times, s.StepTime)
		}
	}
	if len(times) < minPeers+1 {
		return nil
	}
	slices.Sort(times)
	med := times[len(times)/2]
	if med <= 0 {
		return nil
	}
	var out []Straggler
	for r, s := range t.ranks {
		ratio := float64(s.StepTime) / float64(med)
		if s.Step < 0 || ratio < StragglerRatio {
			t.slow[r], t.reported[r] = 0, false
			continue
		}
		t.slow[r]++
		if t.slow[r] >= StragglerChecks && !t.reported[r] {
			t.reported[r] = true
			out = append(out, Straggler{Rank: r, StepTime: s.StepTime, PeerMedian: med, Ratio: ratio})
		}
	}
	slices.SortFunc(out, func(a, b Straggler) int { return a.Rank - b.Rank })
	return out
}
