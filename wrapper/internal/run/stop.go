// The monitor's stop state machine: why the step is being stopped, and
// what each stop event (a signal to trainrun or to the step, the job's
// state, the own clock, a request, a hang) changes and asks for.

package run

import (
	"cmp"
	"fmt"
	"time"
)

// stopState is the step's stop state. Its methods are the transitions:
// each takes one event with the facts it needs (the time, the job's end, the
// latest committed tag) and returns the actions, in order, that the monitor
// carries out (monitor.do). They do no I/O, so TestStopState drives them
// through event sequences.
type stopState struct {
	reason     StopReason // why the step is being stopped (None: it is not)
	stopAt     time.Time  // when it was
	termAt     time.Time  // when Slurm's SIGTERM first reached the step or trainrun
	stepTerm   bool       // a shim saw SIGTERM: Slurm signalled the step's tasks
	ownTerm    bool       // trainrun itself got SIGTERM
	stateAsked bool       // the job's state was asked for (once per step)
	stateDone  bool       // and its answer was read (jobState)
	lastState  string     // that answer
	tagAtStop  string     // the latest committed when the stop was first asked for or signalled
	stopMarked bool
	ckptID     int       // the last checkpoint request's id
	stopReqID  int       // the id of the first request to checkpoint and stop (0: none)
	heard      bool      // a stop request or Slurm's signal reached a training process
	askedAt    time.Time // the last "continue" request, until its commit
	continuing bool      // a "continue" request is being served
	killing    int       // interrupts that stopped the step
}

// stopActionKind is what the monitor does for one stopAction.
type stopActionKind int

const (
	actLog       stopActionKind = iota // log text
	actInterrupt                       // tell the observer of the interruption reason (once per cause)
	actAsk                             // ask every trainer for checkpoint id, then `then` (why: for the log)
	actAskState                        // ask slurmctld for the job's state (its answer is the jobState event)
	actTermStep                        // SIGTERM to srun (reason: for the log)
	actKillStep                        // kill the step at once
)

// stopAction is one thing a transition asks the monitor to do.
type stopAction struct {
	kind      stopActionKind
	reason    StopReason
	why, then string
	id        int
	text      string
}

func logAction(format string, a ...any) stopAction {
	return stopAction{kind: actLog, text: fmt.Sprintf(format, a...)}
}

// mark keeps the latest committed tag when the stop is first asked for or
// signalled: only a checkpoint committed after it is progress made for it.
func (s *stopState) mark(tag string) {
	if !s.stopMarked {
		s.stopMarked, s.tagAtStop = true, tag
	}
}

// unheard: a stop request reached no training process, nor did Slurm's
// signal.
func (s *stopState) unheard() bool { return s.stopReqID > 0 && !s.heard }

// interrupt: SIGINT or SIGHUP, a second SIGTERM, a cancellation. The first
// interrupt sends SIGTERM to srun, the next kills the step; it replaces a
// stop made for the deadline.
func (s *stopState) interrupt(why StopReason) []stopAction {
	if s.reason == None || s.reason.ForDeadline() {
		s.reason = why
	}
	s.killing++
	kind := actTermStep
	if s.killing > 1 {
		kind = actKillStep
	}
	return []stopAction{{kind: actInterrupt, reason: why}, {kind: kind, reason: why}}
}

// term: SIGTERM to trainrun itself (the batch step). At the time limit
// Slurm's SIGTERM used to be read as a cancellation: it arrived while the
// checkpoint the own clock had asked for was being written, the run was
// reported cancelled and never requeued (issue 21). Now the job's record
// decides (jobState): the time limit keeps the run going to its requeue;
// anything else is a cancellation, as before.
func (s *stopState) term(now, end time.Time, tag string) []stopAction {
	if s.ownTerm || s.killing > 0 {
		return s.interrupt(Cancelled) // a second SIGTERM: someone insists
	}
	s.ownTerm = true
	if s.termAt.IsZero() {
		s.termAt = now
	}
	s.mark(tag)
	if s.stateDone {
		// The step's SIGTERM came first and Slurm's answer is in: read it
		// again as trainrun's own SIGTERM.
		if termCause(s.lastState, end, now, false, true) == Cancelled {
			return s.interrupt(Cancelled)
		}
		return []stopAction{logAction("SIGTERM to trainrun at the time limit: the %s checkpoint is committed, then the job is requeued", cmp.Or(s.reason, TermLimit))}
	}
	return append([]stopAction{logAction("SIGTERM to trainrun: asking Slurm why (time limit or cancellation)")}, s.askState()...)
}

// askState asks for the job's state once per step.
func (s *stopState) askState() []stopAction {
	if s.stateAsked {
		return nil
	}
	s.stateAsked = true
	return []stopAction{{kind: actAskState}}
}

// stepSignal: a shim saw signal sig (ckptSig is the checkpoint signal's
// name) reach rank; rankFailed says a rank already exited non-zero.
func (s *stopState) stepSignal(sig, ckptSig string, rank int, rankFailed bool, now time.Time, tag string) []stopAction {
	var acts []stopAction
	if sig == ckptSig && sig != "TERM" && s.reason == None {
		// Slurm signalled the step itself (--signal=USR2@T without B:, or
		// scancel --signal): it reached every trainer.
		s.reason, s.stopAt, s.heard = Signal, now, true
		s.mark(tag)
		acts = append(acts, logAction("SIG%s from Slurm reached the step (rank %d): the trainers checkpoint and stop; nothing more is sent", sig, rank))
	}
	// A SIGTERM after a rank failed is srun's --kill-on-bad-exit ending the
	// other tasks, not Slurm's word: no preemption (seen in the crash e2e).
	if sig == "TERM" && !s.stepTerm && !rankFailed {
		s.stepTerm, s.heard = true, true
		if s.termAt.IsZero() {
			s.termAt = now
		}
		s.mark(tag)
		// Slurm signalled the whole step. Ask slurmctld why: a cancelled job
		// is CANCELLED, a timed-out one TIMEOUT; a preempted one stays RUNNING.
		acts = append(acts, s.askState()...)
	}
	return acts
}

// jobState: why Slurm's SIGTERM came, from the job's state st (termCause;
// end is the job's end time). A cancellation wins over any stop already
// under way; a time limit or a preemption keeps a stop the own clock or a
// request already asked for (its checkpoint is in flight, and its commit
// leads to the requeue).
func (s *stopState) jobState(st string, now, end time.Time) []stopAction {
	s.stateDone, s.lastState = true, st
	cause := termCause(st, end, now, s.killing > 0, s.ownTerm)
	state := cmp.Or(st, "state unknown")
	var acts []stopAction
	switch {
	case cause == Cancelled:
		if s.ownTerm {
			return s.interrupt(Cancelled) // SIGTERM to srun, as a cancellation always did
		}
		s.reason = Cancelled
	case s.reason != None:
		acts = append(acts, logAction("SIGTERM from Slurm (job %s) while the %s checkpoint is under way: it is committed, then the job is requeued", state, s.reason))
	case cause == TermLimit:
		s.reason, s.stopAt = TermLimit, now
		acts = append(acts, logAction("time limit (job %s): the trainers checkpoint on SIGTERM; it is committed, then the job is requeued", state))
		if s.ownTerm && s.ckptID == 0 {
			acts = append(acts, s.ask(string(s.reason), "stop", now)) // Slurm's SIGTERM may reach the trainers later than trainrun
		}
	default:
		s.reason, s.stopAt = Preempted, s.termAt
		acts = append(acts, logAction("preempted (SIGTERM from Slurm to the step, job %s): the trainers checkpoint on SIGTERM; nothing more is sent to them", state))
	}
	return append(acts, stopAction{kind: actInterrupt, reason: s.reason})
}

// ask asks every trainer, once, for a checkpoint, then `then` (stop or
// continue).
func (s *stopState) ask(why, then string, now time.Time) stopAction {
	s.ckptID++
	if then == "stop" && s.stopReqID == 0 {
		s.stopReqID = s.ckptID
	}
	if then == "continue" {
		s.askedAt = now
	}
	return stopAction{kind: actAsk, why: why, then: then, id: s.ckptID}
}

// request: the own clock, a signal to trainrun or a request asks the
// trainers to checkpoint and stop, unless a stop is under way.
func (s *stopState) request(why StopReason, now time.Time, tag string) []stopAction {
	if s.reason != None {
		return nil
	}
	s.reason, s.stopAt = why, now
	acts := []stopAction{{kind: actInterrupt, reason: why}}
	s.mark(tag)
	return append(acts, s.ask(string(why), "stop", now))
}

// requestContinue: `trainrun ckpt request --then continue` by by.
func (s *stopState) requestContinue(by string, now time.Time) []stopAction {
	a := s.ask(by, "continue", now)
	s.continuing = true
	return []stopAction{a}
}

// commitServed: a background commit committed a checkpoint; served says it
// served a "continue" request, asked at askedAt (zero: not measured).
func (s *stopState) commitServed() (askedAt time.Time, served bool) {
	if !s.continuing || s.reason != None {
		return time.Time{}, false
	}
	s.continuing = false
	askedAt, s.askedAt = s.askedAt, time.Time{}
	return askedAt, true
}

// delivered: a shim delivered checkpoint request id to its process.
func (s *stopState) delivered(id int) {
	if s.stopReqID > 0 && id >= s.stopReqID {
		s.heard = true
	}
}

// hung: the hang's stack dumps are in; the step is killed at once (a
// stopped or deadlocked trainer cannot act on SIGTERM).
func (s *stopState) hung() []stopAction {
	s.reason = Hang
	s.killing++
	return []stopAction{{kind: actInterrupt, reason: Hang}, {kind: actKillStep, reason: Hang}}
}
