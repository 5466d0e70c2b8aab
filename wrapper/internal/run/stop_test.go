package run

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// stopEvent is one event of a stop sequence, as the monitor delivers it.
type stopEvent func(s *stopState, now, end time.Time) []stopAction

func ownTerm(s *stopState, now, end time.Time) []stopAction { return s.term(now, end, "step-10") }

func stepTerm(s *stopState, now, _ time.Time) []stopAction {
	return s.stepSignal("TERM", "USR2", 0, false, now, "step-10")
}

func stepTermAfterFailure(s *stopState, now, _ time.Time) []stopAction {
	return s.stepSignal("TERM", "USR2", 1, true, now, "step-10")
}

func stepCkptSignal(s *stopState, now, _ time.Time) []stopAction {
	return s.stepSignal("USR2", "USR2", 3, false, now, "step-10")
}

func state(st string) stopEvent {
	return func(s *stopState, now, end time.Time) []stopAction { return s.jobState(st, now, end) }
}

func request(why StopReason) stopEvent {
	return func(s *stopState, now, _ time.Time) []stopAction { return s.request(why, now, "step-10") }
}

func interrupt(s *stopState, _, _ time.Time) []stopAction { return s.interrupt(Cancelled) }

func delivered(id int) stopEvent {
	return func(s *stopState, _, _ time.Time) []stopAction { s.delivered(id); return nil }
}

func hung(s *stopState, _, _ time.Time) []stopAction { return s.hung() }

// actionsString renders actions compactly: "askState", "interrupt:preempted",
// "ask:1:stop", "term:cancelled", "kill:hang", "log".
func actionsString(acts []stopAction) string {
	var out []string
	for _, a := range acts {
		switch a.kind {
		case actLog:
			out = append(out, "log")
		case actInterrupt:
			out = append(out, "interrupt:"+string(a.reason))
		case actAsk:
			out = append(out, fmt.Sprintf("ask:%d:%s", a.id, a.then))
		case actAskState:
			out = append(out, "askState")
		case actTermStep:
			out = append(out, "term:"+string(a.reason))
		case actKillStep:
			out = append(out, "kill:"+string(a.reason))
		}
	}
	return strings.Join(out, " ")
}

// The stop state machine through the sequences of events Slurm, the user
// and the trainers produce: what each event asks the monitor to do, and the
// reason the step ends with. The cases are the situations the e2e suite
// runs (preemption, time limit, scancel, signals, requests, hangs), without
// a cluster.
func TestStopState(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	farEnd, pastEnd := now.Add(time.Hour), now.Add(-time.Minute)
	for _, c := range []struct {
		name    string
		end     time.Time
		events  []stopEvent
		actions []string // per event
		reason  StopReason
		unheard bool
	}{
		{"preemption: the step's SIGTERM, then the job still RUNNING", farEnd,
			[]stopEvent{stepTerm, state("RUNNING")},
			[]string{"askState", "log interrupt:preempted"}, Preempted, false},
		{"time limit: trainrun's SIGTERM, then TIMEOUT; the trainers are asked as Slurm's TERM may reach them late", farEnd,
			[]stopEvent{ownTerm, state("TIMEOUT")},
			[]string{"log askState", "log ask:1:stop interrupt:killed-limit"}, TermLimit, true},
		{"the end time passed: a SIGTERM of an unknown state is the time limit", pastEnd,
			[]stopEvent{stepTerm, state("")},
			[]string{"askState", "log interrupt:killed-limit"}, TermLimit, false},
		{"scancel: trainrun's SIGTERM, then CANCELLED, stops srun", farEnd,
			[]stopEvent{ownTerm, state("CANCELLED")},
			[]string{"log askState", "interrupt:cancelled term:cancelled"}, Cancelled, false},
		{"scancel seen by the step only: CANCELLED is the reason, srun ends by itself", farEnd,
			[]stopEvent{stepTerm, state("CANCELLED")},
			[]string{"askState", "interrupt:cancelled"}, Cancelled, false},
		{"the own clock's checkpoint under way when Slurm's SIGTERM comes keeps its reason", farEnd,
			[]stopEvent{request(TimeLimit), ownTerm, state("TIMEOUT")},
			[]string{"interrupt:time-limit ask:1:stop", "log askState", "log interrupt:time-limit"}, TimeLimit, true},
		{"a cancellation wins over a stop under way", farEnd,
			[]stopEvent{request(TimeLimit), stepTerm, state("CANCELLED")},
			[]string{"interrupt:time-limit ask:1:stop", "askState", "interrupt:cancelled"}, Cancelled, false},
		{"a second SIGTERM insists: srun is stopped", farEnd,
			[]stopEvent{ownTerm, ownTerm},
			[]string{"log askState", "interrupt:cancelled term:cancelled"}, Cancelled, false},
		{"a second interrupt kills the step", farEnd,
			[]stopEvent{interrupt, interrupt},
			[]string{"interrupt:cancelled term:cancelled", "interrupt:cancelled kill:cancelled"}, Cancelled, false},
		{"an interrupt replaces a stop made for the deadline", farEnd,
			[]stopEvent{request(Signal), interrupt},
			[]string{"interrupt:signal ask:1:stop", "interrupt:cancelled term:cancelled"}, Cancelled, true},
		{"an interrupt keeps a stop request's reason", farEnd,
			[]stopEvent{request(Requested), interrupt},
			[]string{"interrupt:request-stop ask:1:stop", "interrupt:cancelled term:cancelled"}, Requested, true},
		{"the step's SIGTERM after a rank failed is srun's --kill-on-bad-exit: nothing", farEnd,
			[]stopEvent{stepTermAfterFailure},
			[]string{""}, None, false},
		{"Slurm's checkpoint signal to the step reached every trainer", farEnd,
			[]stopEvent{stepCkptSignal},
			[]string{"log"}, Signal, false},
		{"a stop request the shims delivered was heard", farEnd,
			[]stopEvent{request(Requested), delivered(1)},
			[]string{"interrupt:request-stop ask:1:stop", ""}, Requested, false},
		{"a second request while one is under way asks nothing", farEnd,
			[]stopEvent{request(Requested), request(TimeLimit)},
			[]string{"interrupt:request-stop ask:1:stop", ""}, Requested, true},
		{"the step's SIGTERM first, then trainrun's after the answer: RUNNING read again as trainrun's is a cancellation", farEnd,
			[]stopEvent{stepTerm, state("RUNNING"), ownTerm},
			[]string{"askState", "log interrupt:preempted", "interrupt:cancelled term:cancelled"}, Preempted, false},
		{"the step's SIGTERM first, then trainrun's after TIMEOUT: the time limit stands", farEnd,
			[]stopEvent{stepTerm, state("TIMEOUT"), ownTerm},
			[]string{"askState", "log interrupt:killed-limit", "log"}, TermLimit, false},
		{"a hang kills the step at once", farEnd,
			[]stopEvent{hung},
			[]string{"interrupt:hang kill:hang"}, Hang, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var s stopState
			for i, ev := range c.events {
				if got := actionsString(ev(&s, now, c.end)); got != c.actions[i] {
					t.Errorf("event %d: actions %q, want %q", i, got, c.actions[i])
				}
			}
			if s.reason != c.reason || s.unheard() != c.unheard {
				t.Errorf("reason %q unheard %v, want %q %v", s.reason, s.unheard(), c.reason, c.unheard)
			}
			if s.reason != None && s.reason != Cancelled && s.reason != Hang && (!s.stopMarked || s.tagAtStop != "step-10") {
				t.Errorf("a %s stop did not keep the latest tag (marked %v, %q)", s.reason, s.stopMarked, s.tagAtStop)
			}
		})
	}
}

// A preemption's stop time is Slurm's first SIGTERM, not the job state's
// answer; a time limit's is the answer.
func TestStopStateStopTime(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	var s stopState
	s.stepSignal("TERM", "USR2", 0, false, t0, "")
	s.jobState("RUNNING", t0.Add(2*time.Second), t0.Add(time.Hour))
	if !s.stopAt.Equal(t0) {
		t.Errorf("preempted: stop at %v, want the SIGTERM's %v", s.stopAt, t0)
	}
	s = stopState{}
	s.term(t0, t0.Add(time.Hour), "")
	s.jobState("TIMEOUT", t0.Add(2*time.Second), t0.Add(time.Hour))
	if !s.stopAt.Equal(t0.Add(2 * time.Second)) {
		t.Errorf("time limit: stop at %v, want the answer's %v", s.stopAt, t0.Add(2*time.Second))
	}
}

// A "continue" request is served by the next commit, once, and measured
// from when it was asked; a stop under way serves none.
func TestStopStateContinue(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	var s stopState
	if got := actionsString(s.requestContinue("request by alice", t0)); got != "ask:1:continue" {
		t.Fatalf("continue: %q", got)
	}
	if at, served := s.commitServed(); !served || !at.Equal(t0) {
		t.Errorf("first commit: served %v at %v, want served at %v", served, at, t0)
	}
	if _, served := s.commitServed(); served {
		t.Error("a second commit served the request again")
	}
	s.requestContinue("request", t0)
	s.request(TimeLimit, t0, "")
	if _, served := s.commitServed(); served {
		t.Error("a commit served a continue request while a stop is under way")
	}
	if s.unheard() != true || s.stopReqID != 3 {
		t.Errorf("stop request id %d (unheard %v), want the third request, unheard", s.stopReqID, s.unheard())
	}
}
