// Package health decides, from the shims' beats, whether the training step
// is hung and which ranks straggle. It is pure: the controller feeds it
// beats and the time, and acts on what it returns.
//
// Timeouts (NVIDIA's resiliency extension has the same three): until a
// rank's first step, Startup; in steady training, Multiple times the high
// percentile (Percentile) of the step times observed so far, at least Floor
// (or Fixed when --hang-timeout gives one); while the trainer writes a
// checkpoint (the client's save phase, or a checkpoint trainrun asked for),
// Save. A rank is armed only once it has sent a beat from the trainer client:
// a trainer without it is never judged hung (its silence says nothing).
package health

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"
)

// Defaults of Config (Auto).
const (
	DefaultStartup    = 15 * time.Minute // first step: imports, rendezvous, data loading, compilation
	DefaultFloor      = time.Minute      // the steady timeout is never shorter
	DefaultMultiple   = 4.0              // × the high percentile of step times
	DefaultPercentile = 0.99
	DefaultSave       = 10 * time.Minute // a checkpoint write, without measured saves
	MinSamples        = 5                // step times needed before the steady timeout applies
	maxSamples        = 512              // step times kept (a ring)
)

// Config holds the timeouts.
type Config struct {
	Startup    time.Duration
	Floor      time.Duration
	Multiple   float64
	Percentile float64
	Save       time.Duration
	Fixed      time.Duration // --hang-timeout D: the steady timeout (0: auto)
}

// Auto is the configuration of --hang-timeout auto; fixed > 0 is
// --hang-timeout D. A fixed timeout longer than the startup or save one
// raises them too (a user who says 20m means at least 20m everywhere).
func Auto(fixed time.Duration) Config {
	c := Config{Startup: DefaultStartup, Floor: DefaultFloor, Multiple: DefaultMultiple, Percentile: DefaultPercentile, Save: DefaultSave, Fixed: fixed}
	c.Startup, c.Save = max(c.Startup, fixed), max(c.Save, fixed)
	return c
}

// Beat is one rank's liveness as its shim saw it.
type Beat struct {
	Rank     int
	Step     int64         // last step reported; -1 none yet
	Age      time.Duration // since the step last advanced (since the trainer's start when none)
	StepTime time.Duration // its recent step time (0 unknown)
	State    string        // /proc state letter: R S D T t Z X, "-" unknown
	Saving   bool          // the trainer is writing a checkpoint
}

type rankState struct {
	Beat
	advancedAt time.Time // when the step last advanced, by the controller's clock
	lastStep   int64     // the step that advanced at advancedAt
}

// Tracker follows every rank of one step.
type Tracker struct {
	cfg     Config
	ranks   map[int]*rankState
	samples []time.Duration // step times, a ring of maxSamples
	next    int
	fired   bool

	slow     map[int]int  // consecutive straggling checks per rank
	reported map[int]bool // stragglers already reported
}

// New is a tracker for one step.
func New(cfg Config) *Tracker { return &Tracker{cfg: cfg, ranks: map[int]*rankState{}} }

// Observe takes a beat received at now.
func (t *Tracker) Observe(b Beat, now time.Time) {
	s := t.ranks[b.Rank]
	if s == nil {
		s = &rankState{lastStep: math.MinInt64}
		t.ranks[b.Rank] = s
	}
	if b.Step != s.lastStep {
		s.lastStep, s.advancedAt = b.Step, now.Add(-b.Age)
		if b.Step >= 0 && b.StepTime > 0 {
			t.addSample(b.StepTime)
		}
	}
	s.Beat = b
}

func (t *Tracker) addSample(d time.Duration) {
	if len(t.samples) < maxSamples {
		t.samples = append(t.samples, d)
		return
	}
	t.samples[t.next] = d
	t.next = (t.next + 1) % maxSamples
}

// Steady is the steady-state timeout now: Fixed, or Multiple × the
// Percentile of the observed step times, at least Floor; 0 while fewer than
// MinSamples step times are known (the startup timeout still applies).
func (t *Tracker) Steady() time.Duration {
	if t.cfg.Fixed > 0 {
		return t.cfg.Fixed
	}
	if len(t.samples) < MinSamples {
		return 0
	}
	s := slices.Clone(t.samples)
	slices.Sort(s)
	i := min(int(math.Ceil(t.cfg.Percentile*float64(len(s))))-1, len(s)-1)
	return max(time.Duration(t.cfg.Multiple*float64(s[max(i, 0)])), t.cfg.Floor)
}

// timeout is a rank's timeout, and which one it is; steady is Steady().
func (t *Tracker) timeout(s *rankState, saving bool, steady time.Duration) (time.Duration, string) {
	switch {
	case s.Saving || saving:
		return t.cfg.Save, "checkpoint save"
	case s.Step < 0:
		return t.cfg.Startup, "start-up (no step yet)"
	}
	if steady > 0 {
		return steady, "steady"
	}
	return t.cfg.Startup, "start-up (first steps)"
}

// Stalled is one rank that made no progress within its timeout.
type Stalled struct {
	Rank    int
	Step    int64
	Since   time.Duration // no progress for this long
	State   string
	Timeout time.Duration
	Which   string // the timeout: steady, start-up, checkpoint save
	Suspect bool   // most likely the cause: stopped or in uninterruptible sleep, or the least advanced
}

// Hang is the step's hang: the ranks that stalled, suspects first.
type Hang struct {
	Stalled []Stalled
}

// Suspects are the ranks the hang most likely started from.
func (h *Hang) Suspects() []Stalled {
	var out []Stalled
	for _, s := range h.Stalled {
		if s.Suspect {
			out = append(out, s)
		}
	}
	return out
}

// Check says whether the step hangs at now: any armed rank past its
// timeout. saving says a checkpoint trainrun asked for is being written
// (the save timeout applies to every rank). A hang is reported once.
func (t *Tracker) Check(now time.Time, saving bool) *Hang {
	if t.fired {
		return nil
	}
	// The first rank past its timeout fires the hang; the ranks half-way
	// there, or in a bad state, stalled with it: the controller's picture
	// of each rank is up to a beat interval old, and the rank that stopped
	// may have reported its last step a moment after the ones that wait.
	var h Hang
	steady, expired := t.Steady(), false
	for r, s := range t.ranks {
		d, which := t.timeout(s, saving, steady)
		since := now.Sub(s.advancedAt)
		if d <= 0 || since <= d/2 && !badState(s.State) {
			continue
		}
		expired = expired || since > d
		h.Stalled = append(h.Stalled, Stalled{Rank: r, Step: s.Step, Since: since, State: s.State, Timeout: d, Which: which})
	}
	if !expired {
		return nil
	}
	t.fired = true
	markSuspects(h.Stalled)
	return &h
}

// markSuspects: ranks stopped (T, t), in uninterruptible sleep (D) or dead
// (Z, X) are the suspects; without any, the least advanced ranks (lowest
// step, then longest without progress): in a collective the healthy ranks
// wait one step ahead of, or level with, the one that stopped.
func markSuspects(st []Stalled) {
	bad := badState
	slices.SortFunc(st, func(a, b Stalled) int {
		return cmp.Or(cmpBool(bad(b.State), bad(a.State)), cmp.Compare(a.Step, b.Step), cmp.Compare(b.Since, a.Since), cmp.Compare(a.Rank, b.Rank))
	})
	any := false
	for i := range st {
		if bad(st[i].State) {
			st[i].Suspect, any = true, true
		}
	}
	if any {
		return
	}
	for i := range st {
		st[i].Suspect = st[i].Step == st[0].Step
	}
}

// badState: stopped, in uninterruptible sleep, or dead.
func badState(s string) bool { return s == "T" || s == "t" || s == "D" || s == "Z" || s == "X" }

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// StateName says what a /proc state letter means.
func StateName(s string) string {
	switch s {
	case "R":
		return "running"
	case "S":
		return "sleeping"
	case "D":
		return "in uninterruptible sleep (D: stuck in the kernel, often a driver or file system)"
	case "T", "t":
		return "stopped (T)"
	case "Z", "X":
		return "exited"
	}
	return "state unknown"
}

// Describe is the stall in words, for the log.
func (s Stalled) Describe() string {
	step := fmt.Sprintf("at step %d", s.Step)
	if s.Step < 0 {
		step = "before its first step"
	}
	return fmt.Sprintf("%s, no progress for %.0f s (%s timeout %.0f s), process %s", step, s.Since.Seconds(), s.Which, s.Timeout.Seconds(), StateName(s.State))
}
