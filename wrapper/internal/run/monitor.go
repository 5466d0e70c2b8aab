package run

import (
	"cmp"
	"context"
	"github.com/trainrun/trainrun/internal/failclass"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/trainrun/trainrun/checkpoint"
	"github.com/trainrun/trainrun/internal/slurm"
	"github.com/trainrun/trainrun/wrapper/internal/jobdir"
	"github.com/trainrun/trainrun/wrapper/internal/launch"
	"github.com/trainrun/trainrun/wrapper/obs"
)

// monitor is the launch phase's event loop: it starts the step, and reacts
// to each event (a signal to trainrun, the own clock, a commit tick, a
// checkpoint request, a shim's message, the job's state, the step's end)
// with one method. What it learns becomes the step's outcome (afterStep).
type monitor struct {
	r     *runner
	ctl   *launch.Server
	store ckptStore
	proc  *os.Process // srun
	world int

	started time.Time
	clockT  *time.Timer // the own clock: EndTime - lead (nil: no end time)

	stopState        // why and how the step is being stopped (stop.go)
	hello        int // shims that said hello
	exits        map[int]int
	firstFail    *launch.Event
	fails        []failclass.Rank // each failed rank's class, in the order their exits came (failclass.go)
	lostCut      bool             // the step was killed for a lost node (lostwait.go)
	stepID       string           // from the shims' hello: SLURM_STEP_ID
	stateCh      chan string
	committed    chan string
	commitMu     sync.Mutex // one commit at a time
	commitTick   *time.Ticker
	requestTick  *time.Ticker
	stepFinished chan error
	hw           *hangWatch // hang and straggler detection (nil: --hang-timeout off)
}

// launch runs the step and decides what comes after it.
func (r *runner) launch(ctx context.Context, ctl *launch.Server, store ckptStore) error {
	sigc := make(chan os.Signal, 8)
	signal.Notify(sigc, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCONT, syscall.SIGHUP)
	defer signal.Stop(sigc)

	m := &monitor{r: r, ctl: ctl, store: store, world: r.alloc.World(), exits: map[int]int{},
		stateCh: make(chan string, 1), committed: make(chan string, 4), stepFinished: make(chan error, 1)}
	m.hw = newHangWatch(r.cfg.hang, m.world, r.logf)
	if err := m.start(); err != nil {
		return err
	}
	var clock <-chan time.Time
	if m.clockT != nil {
		defer m.clockT.Stop()
		clock = m.clockT.C
	}
	// Checkpoints the trainers complete while running (their own schedule, or
	// a request to continue) are committed in the background.
	m.commitTick, m.requestTick = time.NewTicker(15*time.Second), time.NewTicker(time.Second)
	defer m.commitTick.Stop()
	defer m.requestTick.Stop()
	m.resetRequest()
	for {
		select {
		case s := <-sigc:
			m.onSignal(s)
		case <-clock:
			m.requestCkpt(TimeLimit)
		case <-m.commitTick.C:
			m.commitBG()
		case tag := <-m.committed:
			m.onCommitted(tag)
		case <-m.requestTick.C:
			m.onRequestTick()
		case ev := <-ctl.Events:
			m.onShim(ev)
		case st := <-m.stateCh:
			m.onJobState(st)
		case err := <-m.stepFinished:
			m.commitMu.Lock() // no background commit may run beside the final one
			defer m.commitMu.Unlock()
			m.drainEnds()
			if r.endTrial(m.result(err)) { // a --tune trial's step (run_tune.go)
				return errTuneTrial
			}
			return r.afterStep(m.result(err), store)
		}
	}
}

// result is how the step ended, srun's wait error err with what the
// monitor learnt.
func (m *monitor) result(err error) stepResult {
	return stepResult{WaitErr: err, Reason: m.reason, StopAt: m.stopAt, TagAtStop: m.tagAtStop,
		Exits: m.exits, FirstFail: m.firstFail, Unheard: m.unheard(), Closed: m.closedSilent(), Fails: m.fails}
}

// closedSilent is when the connection of each rank that reported no exit
// closed (stepFailedNodes tells a lost node from one srun cleared).
func (m *monitor) closedSilent() map[int]time.Time {
	out := map[int]time.Time{}
	for rank := range m.world {
		if _, ok := m.exits[rank]; ok {
			continue
		}
		if t, ok := m.ctl.ClosedAt(rank); ok {
			out[rank] = t
		}
	}
	return out
}

// drainEnds takes in the exits and deliveries the shims sent before srun
// ended that the loop has not read yet (its select picks any ready case).
func (m *monitor) drainEnds() {
	for {
		select {
		case ev := <-m.ctl.Events:
			if ev.Kind == launch.Exit || ev.Kind == launch.Delivered {
				m.onShim(ev)
			}
		default:
			return
		}
	}
}

// start starts srun in its own process group, and the own clock.
func (m *monitor) start() error {
	r := m.r
	if e := r.early; e != nil {
		r.early = nil
		e.handOver(m)
		m.startClock()
		return nil
	}
	m.started = time.Now()
	var err error
	if m.proc, err = r.startSrun(r.step.srunArgv, r.step.srunEnv, m.stepFinished); err != nil {
		return err
	}
	m.startClock()
	return nil
}

// startClock starts the own clock: a checkpoint request --ckpt-lead before
// the job's end.
func (m *monitor) startClock() {
	r := m.r
	if !r.alloc.EndTime.IsZero() {
		d := time.Until(r.alloc.EndTime.Add(-r.facts.lead))
		if d < 0 {
			d = 0
			r.logf("warning: the job ends at %s, within --ckpt-lead %s: asking for a checkpoint at once", r.alloc.EndTime.Format(time.TimeOnly), r.facts.lead)
		}
		m.clockT = time.NewTimer(d)
	}
}

// onSignal: USR1/USR2 to trainrun ask for a checkpoint and stop; INT and
// HUP stop the step (a second one kills it). SIGTERM is Slurm's word at the
// time limit, at preemption and at scancel alike, so the job's record says
// which (onTerm); a second SIGTERM stops the step.
func (m *monitor) onSignal(s os.Signal) {
	switch s {
	case syscall.SIGUSR1, syscall.SIGUSR2:
		m.requestCkpt(Signal)
	case syscall.SIGTERM:
		m.onTerm()
	case syscall.SIGINT, syscall.SIGHUP:
		m.stopStep(Cancelled)
	}
}

// onTerm: SIGTERM to trainrun itself (stopState.term).
func (m *monitor) onTerm() {
	m.do(m.term(time.Now(), m.r.alloc.EndTime, m.r.getLastTag()))
}

// askJobState asks slurmctld, in the background, for the job's state;
// onJobState reads the answer (stopState.askState asks once per step).
func (m *monitor) askJobState() {
	r := m.r
	go func() {
		st := ""
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if ji, err := r.env.Slurm.Job(ctx, r.alloc.JobID); err == nil {
			st = jobState(ji.State, ji.Restarts, r.alloc.RestartCount)
		} else if !slurm.KilledByTERM(err) { // scancel's SIGTERM reached scontrol too: not news
			r.logf("warning: asking Slurm for the job's state: %v", err)
		}
		m.stateCh <- st
	}()
}

// onCommitted: a background commit committed tag; a "continue" request is
// served by it.
func (m *monitor) onCommitted(tag string) {
	askedAt, served := m.commitServed()
	if !served {
		return
	}
	m.resetRequest()
	if !askedAt.IsZero() {
		m.r.recordCkpt(tag, "request-continue", time.Since(askedAt))
		m.regrace()
	}
}

// onRequestTick: every second, the trainers' progress and the mailbox of
// `trainrun ckpt request`.
func (m *monitor) onRequestTick() {
	r := m.r
	if m.continuing {
		m.commitBG() // commit (and measure) a requested checkpoint within a second
	} else if m.commitMu.TryLock() {
		r.discardFailedSaves(m.store) // a save the disk refused: free its bytes before the next save
		m.commitMu.Unlock()
	}
	r.pollProgress()
	m.tuneTick(time.Now()) // a --tune trial ends once measured (run_tune.go)
	m.checkHealth(time.Now())
	m.actOnLossSpike()         // --loss-spike-action (lossspike.go)
	m.cutLostWait(time.Now())  // lostwait.go
	m.checkMigrate(time.Now()) // --migrate (migrate.go)
	req, err := m.store.TakeRequest()
	if err != nil {
		r.logf("warning: %v", err)
	}
	if req == nil || m.reason != None {
		return
	}
	by := "request" + cmp.Or(" by "+req.By, "")
	switch req.Then {
	case "continue":
		m.do(m.requestContinue(by, time.Now()))
	case "stop":
		m.requestCkpt(Requested)
	default:
		m.requestCkpt(Signal)
	}
}

// onShim handles a shim's message.
func (m *monitor) onShim(ev launch.Event) {
	switch ev.Kind {
	case launch.Hello:
		m.onHello(ev)
	case launch.Signal:
		m.onShimSignal(ev)
	case launch.Beat:
		m.onBeat(ev)
	case launch.Delivered:
		m.delivered(ev.CkptID)
	case launch.Exit:
		m.exits[ev.Rank] = ev.Code
		if ev.Code != 0 && m.firstFail == nil {
			e := ev
			m.firstFail = &e
		}
		if ev.Code != 0 {
			m.fails = append(m.fails, failclass.Rank{Rank: ev.Rank, Result: failclass.FromWire(ev.Class, ev.Evidence)})
		}
	}
}

func (m *monitor) onHello(ev launch.Event) {
	r := m.r
	m.hello++
	if m.stepID == "" {
		m.stepID = ev.StepID
	}
	// A rank that connects after a stop request still gets it (the shim acts
	// once per request id).
	if m.ckptID > 0 && m.reason.AskedTrainers() {
		m.ctl.SendTo(ev.Rank, launch.Msg{Kind: launch.Ckpt, CkptID: m.ckptID})
	}
	if m.hello == m.world {
		r.badputAllStarted() // badput.go
		r.logf("all %d ranks started %.2f s after srun (trainrun: %.2f s to query Slurm and probe, %.2f s to launch srun)",
			m.world, time.Since(m.started).Seconds(), r.facts.tQuery.Seconds(), r.step.tReady.Seconds())
	}
}

// onShimSignal: a signal reached the step (not trainrun): stopState.stepSignal.
func (m *monitor) onShimSignal(ev launch.Event) {
	m.do(m.stepSignal(ev.Signal, m.r.ckptSignalName(), ev.Rank, m.firstFail != nil, time.Now(), m.r.getLastTag()))
}

// onJobState: why Slurm's SIGTERM came, from the job's state
// (stopState.jobState).
func (m *monitor) onJobState(st string) {
	m.do(m.jobState(st, time.Now(), m.r.alloc.EndTime))
}

// slurmRequeued is the state jobState gives a job Slurm has requeued itself
// while it still completes (scontrol shows COMPLETING either way).
const slurmRequeued = "REQUEUED"

// jobState is the job's state as termCause reads it: scontrol shows
// COMPLETING while a cancelled, timed-out or requeued job's steps end (the
// flag hides the state under it). Restarts tells a requeue by Slurm (a
// preemption past its grace time, `scontrol requeue`) from the rest: it
// counts up at once. Seen on the harness's Slurm 22.05: scancel gives
// COMPLETING with Restarts unchanged, scontrol requeue COMPLETING with
// Restarts one more.
func jobState(state string, restarts, ownRestart int) string {
	if state == "COMPLETING" && restarts > ownRestart {
		return slurmRequeued
	}
	return state
}

// termCause reads why SIGTERM came from the job's state st (jobState; ""
// when Slurm could not be asked), its end time, whether trainrun is already
// stopping the step itself, and whether trainrun itself got the signal
// (own): CANCELLED, or COMPLETING after trainrun's own stop, is a
// cancellation; TIMEOUT or DEADLINE, or an end time reached (5 s of clock
// skew allowed), the time limit; COMPLETING otherwise is a cancellation too
// (a preemption's SIGTERM comes while the job stays RUNNING through its
// grace time; CI once saw the step's TERM of a scancel, COMPLETING, read as
// a preemption and the cancelled job requeued); a requeue by Slurm is a
// preemption; otherwise a SIGTERM to trainrun is a cancellation, and one
// that reached only the step a preemption.
func termCause(st string, end, now time.Time, stopping, own bool) StopReason {
	switch {
	case st == "CANCELLED" || st == "COMPLETING" && stopping:
		return Cancelled
	case st == "TIMEOUT" || st == "DEADLINE" || !end.IsZero() && now.After(end.Add(-5*time.Second)):
		return TermLimit
	case st == "COMPLETING":
		return Cancelled
	case st == slurmRequeued:
		return Preempted
	case own:
		return Cancelled
	default:
		return Preempted
	}
}

// regrace: after a measured checkpoint, the grace budget may raise the lead
// (CkptLeadAdapt): the own clock then asks earlier.
func (m *monitor) regrace() {
	r := m.r
	if r.checkGrace("commit") && m.clockT != nil && m.reason == None {
		m.clockT.Reset(max(time.Until(r.alloc.EndTime.Add(-r.facts.lead)), 0))
	}
}

func (m *monitor) markStop() { m.mark(m.r.getLastTag()) }

// do carries out a stop transition's actions, in order.
func (m *monitor) do(acts []stopAction) {
	r := m.r
	for _, a := range acts {
		switch a.kind {
		case actLog:
			r.logf("%s", a.text)
		case actInterrupt:
			r.observeInterrupt(a.reason)
		case actAsk:
			m.sendAsk(a.id, a.why, a.then)
		case actAskState:
			m.askJobState()
		case actTermStep:
			r.logf("%s: stopping the step (SIGTERM to srun; a second interrupt kills it)", a.reason)
			m.proc.Signal(syscall.SIGTERM)
		case actKillStep:
			r.logf("%s: killing the step", a.reason)
			m.killStep()
		}
	}
}

// sendAsk tells every training process to checkpoint (request id); then
// says whether they stop afterwards (written first to launch/ckpt-request,
// which the client reads when the signal arrives).
func (m *monitor) sendAsk(id int, why, then string) {
	r := m.r
	if err := launch.WriteRequest(r.dirs.in(jobdir.Launch), id, then); err != nil {
		r.logf("warning: writing the checkpoint request: %v", err)
	}
	r.observe(obs.Event{Kind: obs.KindCkptRequest, Why: why})
	n := m.ctl.Broadcast(launch.Msg{Kind: launch.Ckpt, CkptID: id})
	r.logf("%s: asked %d of %d training processes for a checkpoint (signal %s, then %s)", why, n, m.world, strings.ToUpper(r.cfg.ckptSignal), then)
}

func (m *monitor) requestCkpt(why StopReason) {
	m.do(m.request(why, time.Now(), m.r.getLastTag()))
}

// resetRequest: a checkpoint signal that does not come from trainrun
// (Slurm's --signal=USR2@T to the step) means stop: once a "continue"
// request is served, the request file says stop again.
func (m *monitor) resetRequest() {
	launch.WriteRequest(m.r.dirs.in(jobdir.Launch), m.ckptID, "stop")
}

// commitBG commits complete checkpoints in the background, one commit at a
// time.
func (m *monitor) commitBG() {
	if !m.commitMu.TryLock() {
		return
	}
	r := m.r
	go func() {
		defer m.commitMu.Unlock()
		r.discardFailedSaves(m.store)
		if tag, changed, err := m.store.CommitComplete(m.world); err != nil {
			if checkpoint.DiskCause(err) == "" { // a disk fault is reported once (commitDiskFault)
				r.logf("warning: %v", err)
			}
		} else if changed {
			r.setLastTag(tag)
			r.logf("checkpoint %s complete and committed as latest", tag)
			r.prune()
			r.compressKick(false)
			select {
			case m.committed <- tag:
			default:
			}
		}
	}()
}

// stopStep: the first interrupt sends SIGTERM to srun, the next kills the
// step (stopState.interrupt).
func (m *monitor) stopStep(why StopReason) { m.do(m.interrupt(why)) }

// killStep kills the step at once: scancel of the step within 10 s, then
// SIGKILL to srun's process group.
func (m *monitor) killStep() {
	r := m.r
	if m.stepID != "" {
		c, cancel := context.WithTimeout(context.Background(), 10*time.Second) // the SIGKILL below must not wait long
		_ = r.env.Slurm.KillStep(c, r.alloc.JobID, m.stepID)
		cancel()
	}
	syscall.Kill(-m.proc.Pid, syscall.SIGKILL)
}
