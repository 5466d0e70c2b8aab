package checkpoint

import (
	"os"
	"testing"
	"time"
)

func TestHistoryAppendLoadSurvivesTornLine(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	h := s.History()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	must(t, h.Append(Event{Time: t0, Type: "start", JobID: "42", Restart: 0, WorldSize: 8}))
	must(t, h.Append(Event{Time: t0.Add(time.Hour), Type: "end", JobID: "42", Restart: 0, Cause: CausePreempted, LastCommitted: "step-100", Progress: 100}))
	must(t, h.Append(Event{Time: t0.Add(2 * time.Hour), Type: "start", JobID: "42", Restart: 1, WorldSize: 8, ResumeFrom: "step-100"}))
	// The controller was killed in the middle of writing its end event.
	f, err := os.OpenFile(s.historyPath(), os.O_APPEND|os.O_WRONLY, 0)
	must(t, err)
	_, err = f.WriteString(`{"time":"2026-01-02T06:00:00Z","type":"end","job_id":"42","resta`)
	must(t, err)
	must(t, f.Close())
	must(t, h.Append(Event{Time: t0.Add(4 * time.Hour), Type: "start", JobID: "42", Restart: 2, WorldSize: 8, ResumeFrom: "step-100"}))

	incs, err := h.Load()
	must(t, err)
	if len(incs) != 3 {
		t.Fatalf("%d incarnations, want 3: %+v", len(incs), incs)
	}
	if incs[0].Cause != CausePreempted || incs[0].LastCommitted != "step-100" || !incs[0].End.Equal(t0.Add(time.Hour)) {
		t.Errorf("first = %+v", incs[0])
	}
	if incs[1].Cause != "" || incs[1].ResumeFrom != "step-100" || incs[2].Restart != 2 {
		t.Errorf("second/third = %+v / %+v", incs[1], incs[2])
	}
	if s.worldSize(0) != 8 {
		t.Errorf("world size from history = %d", s.worldSize(0))
	}
}

func TestFailuresWithoutProgress(t *testing.T) {
	t.Parallel()
	inc := func(c Cause, p int64) Incarnation { return Incarnation{Cause: c, Progress: p} }
	cases := []struct {
		name string
		incs []Incarnation
		want int
	}{
		{"none", nil, 0},
		{"preempted then crashed twice at start", []Incarnation{inc(CausePreempted, 100), inc(CauseCrash, 100), inc(CauseCrash, 100)}, 2},
		{"crash that made progress resets", []Incarnation{inc(CauseCrash, 100), inc(CauseCrash, 200)}, 0},
		{"killed without an end counts", []Incarnation{inc(CauseTimeLimit, 100), inc("", -1), inc(CauseNodeFail, 100)}, 2},
		{"a time limit ends the streak", []Incarnation{inc(CauseCrash, 1), inc(CauseTimeLimit, 1)}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := FailuresWithoutProgress(c.incs); got != c.want {
				t.Fatalf("= %d, want %d", got, c.want)
			}
		})
	}
}

func TestFinishedAndRequest(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	if _, ok, err := s.Finished(); ok || err != nil {
		t.Fatalf("Finished on a new store = %v %v", ok, err)
	}
	must(t, s.MarkFinished(Finished{JobID: "7", Tag: "step-9"}))
	f, ok, err := s.Finished()
	must(t, err)
	if !ok || f.Tag != "step-9" {
		t.Fatalf("Finished = %+v %v", f, ok)
	}
	if r, err := s.TakeRequest(); r != nil || err != nil {
		t.Fatalf("TakeRequest with none = %v %v", r, err)
	}
	if err := s.PutRequest(Request{Then: "explode"}); err == nil {
		t.Fatal("bad request accepted")
	}
	must(t, s.PutRequest(Request{Then: "stop", Reason: "maintenance"}))
	r, err := s.TakeRequest()
	must(t, err)
	if r == nil || r.Then != "stop" || r.Reason != "maintenance" {
		t.Fatalf("TakeRequest = %+v", r)
	}
	if r, _ := s.TakeRequest(); r != nil {
		t.Fatal("request taken twice")
	}
}

// A ckpt event is kept for the grace budget but does not make an
// incarnation of its own (a controller of a later restart may write it
// before its start event would be found).
func TestHistoryCkptEvents(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	h := s.History()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	must(t, h.Append(Event{Time: t0, Type: "start", JobID: "42", WorldSize: 4}))
	must(t, h.Append(Event{Time: t0.Add(time.Minute), Type: "ckpt", JobID: "42", Tag: "step-10", CkptSeconds: 3.5, Why: "time-limit"}))
	must(t, h.Append(Event{Time: t0.Add(2 * time.Minute), Type: "ckpt", JobID: "43", Restart: 1, Tag: "step-20", CkptSeconds: 4.25, Why: "preempted"}))
	incs, err := h.Load()
	must(t, err)
	if len(incs) != 1 {
		t.Fatalf("%d incarnations, want 1 (ckpt events fold into none): %+v", len(incs), incs)
	}
	cs, err := h.CkptTimes()
	must(t, err)
	if len(cs) != 2 || cs[0].CkptSeconds != 3.5 || cs[1].Tag != "step-20" || cs[1].Why != "preempted" {
		t.Errorf("CkptTimes = %+v", cs)
	}
	if err := h.Append(Event{Type: "bogus"}); err == nil {
		t.Error("Append accepted an unknown event type")
	}
}

// A resume point past every step the failed runs ended at (the epilog
// drained it after they died) is progress: the start is no crash loop.
func TestFailuresBeforeResume(t *testing.T) {
	failed := []Incarnation{{Cause: CausePreempted, Progress: 10}, {Cause: CauseCrash, Progress: 10}, {Cause: CauseCrash, Progress: 10}, {Progress: -1}}
	if n := FailuresWithoutProgress(failed); n != 3 {
		t.Fatalf("FailuresWithoutProgress = %d, want 3 (the premise)", n)
	}
	for resume, want := range map[string]int{"step-20": 0, "step-10": 3, "step-5": 3, "": 3, "best": 3} {
		if got := FailuresBeforeResume(failed, resume); got != want {
			t.Errorf("FailuresBeforeResume(%q) = %d, want %d", resume, got, want)
		}
	}
}
