package health

import (
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// steps feeds n steps of d to every rank of world, one beat per step.
func steps(tr *Tracker, world, n int, d time.Duration) time.Time {
	now := t0
	for i := 0; i < n; i++ {
		now = now.Add(d)
		for r := 0; r < world; r++ {
			tr.Observe(Beat{Rank: r, Step: int64(i + 1), StepTime: d, State: "S"}, now)
		}
	}
	return now
}

func TestSteadyTimeout(t *testing.T) {
	for _, c := range []struct {
		name  string
		cfg   Config
		n     int
		step  time.Duration
		want  time.Duration
		extra []time.Duration // more step times
	}{
		{"too few samples", Auto(0), 1, time.Second, 0, nil},
		{"floor", Auto(0), 10, time.Second, DefaultFloor, nil},
		{"multiple of p99", Auto(0), 10, 30 * time.Second, 120 * time.Second, nil},
		{"p99 is the slow tail", Auto(0), 200, 10 * time.Second, 4 * 50 * time.Second, []time.Duration{50 * time.Second, 50 * time.Second, 50 * time.Second}},
		{"fixed", Auto(3 * time.Second), 0, 0, 3 * time.Second, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr := New(c.cfg)
			now := steps(tr, 1, c.n, c.step)
			for i, d := range c.extra {
				now = now.Add(d)
				tr.Observe(Beat{Rank: 0, Step: int64(c.n + i + 1), StepTime: d}, now)
			}
			if got := tr.Steady(); got != c.want {
				t.Errorf("Steady() = %s, want %s", got, c.want)
			}
		})
	}
}

func TestCheck(t *testing.T) {
	step := 10 * time.Second
	for _, c := range []struct {
		name     string
		cfg      Config
		setup    func(tr *Tracker) time.Time // returns "now" of the last beat
		after    time.Duration               // check this long after it
		saving   bool
		wantHang bool
		suspects []int
	}{
		{"healthy", Auto(0), func(tr *Tracker) time.Time { return steps(tr, 4, 20, step) }, 30 * time.Second, false, false, nil},
		{"all stalled past the floor, one stopped", Auto(0), func(tr *Tracker) time.Time {
			now := steps(tr, 4, 20, step)
			tr.Observe(Beat{Rank: 2, Step: 20, Age: 5 * time.Second, State: "T"}, now.Add(5*time.Second))
			return now
		}, 61 * time.Second, false, true, []int{2}},
		{"no state: the least advanced rank", Auto(0), func(tr *Tracker) time.Time {
			now := steps(tr, 4, 20, step)
			for r := 0; r < 4; r++ {
				if r != 1 {
					tr.Observe(Beat{Rank: r, Step: 21, StepTime: step, State: "S"}, now.Add(step))
				}
			}
			return now.Add(step)
		}, 70 * time.Second, false, true, []int{1}},
		{"a saving rank gets the save timeout", Auto(0), func(tr *Tracker) time.Time {
			now := steps(tr, 2, 20, step)
			tr.Observe(Beat{Rank: 0, Step: 20, Age: 0, State: "D", Saving: true}, now)
			tr.Observe(Beat{Rank: 1, Step: 20, Age: 0, State: "S", Saving: true}, now)
			return now
		}, 5 * time.Minute, false, false, nil},
		{"a save past its timeout", Auto(0), func(tr *Tracker) time.Time {
			now := steps(tr, 2, 20, step)
			tr.Observe(Beat{Rank: 0, Step: 20, State: "D", Saving: true}, now)
			return now
		}, DefaultSave + time.Second, false, true, []int{0}},
		{"a requested checkpoint: save timeout for everyone", Auto(0), func(tr *Tracker) time.Time { return steps(tr, 2, 20, step) }, 5 * time.Minute, true, false, nil},
		{"start-up: no step yet", Auto(0), func(tr *Tracker) time.Time {
			tr.Observe(Beat{Rank: 0, Step: -1, State: "S"}, t0)
			tr.Observe(Beat{Rank: 1, Step: -1, State: "S"}, t0)
			return t0
		}, 14 * time.Minute, false, false, nil},
		{"start-up expired", Auto(0), func(tr *Tracker) time.Time {
			tr.Observe(Beat{Rank: 0, Step: -1, State: "S"}, t0)
			return t0
		}, DefaultStartup + time.Second, false, true, []int{0}},
		{"fixed timeout of a few seconds", Auto(3 * time.Second), func(tr *Tracker) time.Time { return steps(tr, 2, 2, time.Second) }, 4 * time.Second, false, true, []int{0, 1}},
		{"the stopped rank reported a moment later: still named", Auto(3 * time.Second), func(tr *Tracker) time.Time {
			tr.Observe(Beat{Rank: 0, Step: 14, State: "S"}, t0)
			tr.Observe(Beat{Rank: 1, Step: 14, State: "T"}, t0.Add(100*time.Millisecond))
			return t0
		}, 3050 * time.Millisecond, false, true, []int{1}},
		{"a rank half-way to its timeout is listed, not a suspect", Auto(4 * time.Second), func(tr *Tracker) time.Time {
			tr.Observe(Beat{Rank: 0, Step: 14, State: "S"}, t0)
			tr.Observe(Beat{Rank: 1, Step: 15, State: "S"}, t0.Add(2*time.Second))
			return t0
		}, 4100 * time.Millisecond, false, true, []int{0}},
		{"fixed timeout does not shorten start-up", Auto(3 * time.Second), func(tr *Tracker) time.Time {
			tr.Observe(Beat{Rank: 0, Step: -1, State: "S"}, t0)
			return t0
		}, time.Minute, false, false, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr := New(c.cfg)
			now := c.setup(tr)
			h := tr.Check(now.Add(c.after), c.saving)
			if (h != nil) != c.wantHang {
				t.Fatalf("Check = %+v, want hang %v", h, c.wantHang)
			}
			if h == nil {
				return
			}
			var got []int
			for _, s := range h.Suspects() {
				got = append(got, s.Rank)
			}
			if len(got) != len(c.suspects) {
				t.Fatalf("suspects %v, want %v (%+v)", got, c.suspects, h.Stalled)
			}
			for i := range got {
				if got[i] != c.suspects[i] {
					t.Fatalf("suspects %v, want %v (%+v)", got, c.suspects, h.Stalled)
				}
			}
			if tr.Check(now.Add(2*c.after), c.saving) != nil {
				t.Error("a hang is reported once")
			}
		})
	}
}

func TestAgeDatesTheLastAdvance(t *testing.T) {
	// A beat that arrives late (the shim's interval) carries the age of the
	// step: the controller counts from when the step really advanced.
	tr := New(Auto(10 * time.Second))
	tr.Observe(Beat{Rank: 0, Step: 5, Age: 8 * time.Second, State: "S"}, t0)
	if h := tr.Check(t0.Add(3*time.Second), false); h == nil || h.Stalled[0].Since != 11*time.Second {
		t.Fatalf("Check = %+v, want rank 0 stalled for 11 s", h)
	}
}

func TestStragglers(t *testing.T) {
	tr := New(Auto(0))
	beat := func(i int, slow time.Duration) {
		for r := 0; r < 4; r++ {
			d := 100 * time.Millisecond
			if r == 3 {
				d = slow
			}
			tr.Observe(Beat{Rank: r, Step: int64(i), StepTime: d}, t0.Add(time.Duration(i)*time.Second))
		}
	}
	var got []Straggler
	for i := 1; i <= StragglerChecks; i++ {
		beat(i, 200*time.Millisecond)
		got = append(got, tr.Stragglers()...)
	}
	if len(got) != 1 || got[0].Rank != 3 || got[0].Ratio != 2 || got[0].PeerMedian != 100*time.Millisecond {
		t.Fatalf("stragglers %+v, want rank 3 twice as slow", got)
	}
	beat(10, 250*time.Millisecond)
	if s := tr.Stragglers(); len(s) != 0 {
		t.Errorf("rank 3 reported again: %+v", s)
	}
	// A slow step now and then is no straggler.
	tr2 := New(Auto(0))
	tr = tr2
	for i := 1; i <= 10; i++ {
		slow := 100 * time.Millisecond
		if i%StragglerChecks == 0 {
			slow = time.Second
		}
		beat(i, slow)
		if s := tr.Stragglers(); len(s) != 0 {
			t.Fatalf("step %d: %+v reported", i, s)
		}
	}
}
