package main

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/trainrun/trainrun/checkpoint"
	"github.com/trainrun/trainrun/internal/slurm"
	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
	"github.com/trainrun/trainrun/wrapper/internal/launch"
	"github.com/trainrun/trainrun/wrapper/internal/run"
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

	reason       run.StopReason // why the step is being stopped (run.None, ...)
	stopAt       time.Time      // when it was
	termAt       time.Time      // when Slurm's SIGTERM first reached the step or trainrun
	stepTerm     bool           // a shim saw SIGTERM: Slurm signalled the step's tasks
	ownTerm      bool           // trainrun itself got SIGTERM
	stateAsked   bool           // the job's state was asked for (once per step)
	stateDone    bool           // and its answer was read (onJobState)
	lastState    string         // that answer
	tagAtStop    string         // the latest committed when the stop was first asked for or signalled
	stopMarked   bool
	ckptID       int       // the last checkpoint request's id
	stopReqID    int       // the id of the first request to checkpoint and stop (0: none)
	heard        bool      // a stop request or Slurm's signal reached a training process
	askedAt      time.Time // the last "continue" request, until its commit
	continuing   bool      // a "continue" request is being served
	hello        int       // shims that said hello
	exits        map[int]int
	firstFail    *launch.Event
	killing      int    // interrupts that stopped the step
	stepID       string // from the shims' hello: SLURM_STEP_ID
	stateCh      chan string
	committed    chan string
	commitMu     sync.Mutex // one commit at a time
	commitTick   *time.Ticker
	requestTick  *time.Ticker
	stepFinished chan error
	hw           *hangWatch // hang and straggler detection (nil: --hang-timeout off)
	stackID      int        // the last stack-dump request's id
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
			m.requestCkpt(run.TimeLimit)
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
			return r.afterStep(m.result(err), store)
		}
	}
}

// result is how the step ended, srun's wait error err with what the
// monitor learnt.
func (m *monitor) result(err error) stepResult {
	return stepResult{WaitErr: err, Reason: m.reason, StopAt: m.stopAt, TagAtStop: m.tagAtStop,
		Exits: m.exits, FirstFail: m.firstFail, Unheard: m.stopReqID > 0 && !m.heard}
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
	cmd := slurm.StepCommand(r.srunArgv[1:])
	cmd.Env = append(os.Environ(), r.srunEnv...)
	cmd.Stdout, cmd.Stderr = r.env.stdout, r.env.stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	m.started = time.Now()
	if err := cmd.Start(); err != nil {
		return withCode(exitcode.Slurm, fmt.Errorf("starting srun: %w", err))
	}
	m.proc = cmd.Process
	go func() { m.stepFinished <- cmd.Wait() }()
	m.startClock()
	return nil
}

// startClock starts the own clock: a checkpoint request --ckpt-lead before
// the job's end.
func (m *monitor) startClock() {
	r := m.r
	if !r.alloc.EndTime.IsZero() {
		d := time.Until(r.alloc.EndTime.Add(-r.lead))
		if d < 0 {
			d = 0
			r.logf("warning: the job ends at %s, within --ckpt-lead %s: asking for a checkpoint at once", r.alloc.EndTime.Format(time.TimeOnly), r.lead)
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
		m.requestCkpt(run.Signal)
	case syscall.SIGTERM:
		m.onTerm()
	case syscall.SIGINT, syscall.SIGHUP:
		m.stopStep(run.Cancelled)
	}
}

// onTerm: SIGTERM to trainrun itself (the batch step). At the time limit
// Slurm's SIGTERM used to be read as a cancellation: it arrived while the
// checkpoint the own clock had asked for was being written, the run was
// reported cancelled and never requeued (issue 21). Now the job's record
// decides (onJobState): the time limit keeps the run going to its requeue;
// anything else is a cancellation, as before.
func (m *monitor) onTerm() {
	if m.ownTerm || m.killing > 0 {
		m.stopStep(run.Cancelled) // a second SIGTERM: someone insists
		return
	}
	m.ownTerm = true
	if m.termAt.IsZero() {
		m.termAt = time.Now()
	}
	m.markStop()
	if m.stateDone {
		// The step's SIGTERM came first and Slurm's answer is in: read it
		// again as trainrun's own SIGTERM.
		if termCause(m.lastState, m.r.alloc.EndTime, time.Now(), false, true) == run.Cancelled {
			m.stopStep(run.Cancelled)
		} else {
			m.r.logf("SIGTERM to trainrun at the time limit: the %s checkpoint is committed, then the job is requeued", cmp.Or(m.reason, run.TermLimit))
		}
		return
	}
	m.r.logf("SIGTERM to trainrun: asking Slurm why (time limit or cancellation)")
	m.askJobState()
}

// askJobState asks slurmctld, once per step and in the background, for the
// job's state; onJobState reads the answer.
func (m *monitor) askJobState() {
	if m.stateAsked {
		return
	}
	m.stateAsked = true
	r := m.r
	go func() {
		st := ""
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if ji, err := r.env.slurm.Job(ctx, r.alloc.JobID); err == nil {
			st = jobState(ji.State, ji.Restarts, r.alloc.RestartCount)
		} else {
			r.logf("warning: asking Slurm for the job's state: %v", err)
		}
		m.stateCh <- st
	}()
}

// onCommitted: a background commit committed tag; a "continue" request is
// served by it.
func (m *monitor) onCommitted(tag string) {
	if !m.continuing || m.reason != run.None {
		return
	}
	m.continuing = false
	m.resetRequest()
	if !m.askedAt.IsZero() {
		m.r.recordCkpt(tag, "request-continue", time.Since(m.askedAt))
		m.askedAt = time.Time{}
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
	m.checkHealth(time.Now())
	req, err := m.store.TakeRequest()
	if err != nil {
		r.logf("warning: %v", err)
	}
	if req == nil || m.reason != run.None {
		return
	}
	by := "request" + cmp.Or(" by "+req.By, "")
	switch req.Then {
	case "continue":
		m.ask(by, "continue")
		m.continuing = true
	case "stop":
		m.requestCkpt(run.Requested)
	default:
		m.requestCkpt(run.Signal)
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
		if m.stopReqID > 0 && ev.CkptID >= m.stopReqID {
			m.heard = true
		}
	case launch.Exit:
		m.exits[ev.Rank] = ev.Code
		if ev.Code != 0 && m.firstFail == nil {
			e := ev
			m.firstFail = &e
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
		r.logf("all %d ranks started %.2f s after srun (trainrun: %.2f s to query Slurm and probe, %.2f s to launch srun)",
			m.world, time.Since(m.started).Seconds(), r.tQuery.Seconds(), r.tReady.Seconds())
	}
}

// onShimSignal: a signal reached the step (not trainrun).
func (m *monitor) onShimSignal(ev launch.Event) {
	r := m.r
	if sig := ev.Signal; sig == r.ckptSignalName() && sig != "TERM" && m.reason == run.None {
		// Slurm signalled the step itself (--signal=USR2@T without B:, or
		// scancel --signal): it reached every trainer.
		m.reason, m.stopAt, m.heard = run.Signal, time.Now(), true
		m.markStop()
		r.logf("SIG%s from Slurm reached the step (rank %d): the trainers checkpoint and stop; nothing more is sent", sig, ev.Rank)
	}
	// A SIGTERM after a rank failed is srun's --kill-on-bad-exit ending the
	// other tasks, not Slurm's word: no preemption (seen in the crash e2e).
	if ev.Signal == "TERM" && !m.stepTerm && m.firstFail == nil {
		m.stepTerm, m.heard = true, true
		if m.termAt.IsZero() {
			m.termAt = time.Now()
		}
		m.markStop()
		// Slurm signalled the whole step. Ask slurmctld why: a cancelled job
		// is CANCELLED, a timed-out one TIMEOUT; a preempted one stays RUNNING.
		m.askJobState()
	}
}

// onJobState: why Slurm's SIGTERM came, from the job's state (termCause).
// A cancellation wins over any stop already under way; a time limit or a
// preemption keeps a stop the own clock or a request already asked for
// (its checkpoint is in flight, and its commit leads to the requeue).
func (m *monitor) onJobState(st string) {
	r := m.r
	m.stateDone, m.lastState = true, st
	cause := termCause(st, r.alloc.EndTime, time.Now(), m.killing > 0, m.ownTerm)
	switch {
	case cause == run.Cancelled:
		if m.ownTerm {
			m.stopStep(run.Cancelled) // SIGTERM to srun, as a cancellation always did
			return
		}
		m.reason = run.Cancelled
	case m.reason != run.None:
		r.logf("SIGTERM from Slurm (job %s) while the %s checkpoint is under way: it is committed, then the job is requeued", cmp.Or(st, "state unknown"), m.reason)
	case cause == run.TermLimit:
		m.reason, m.stopAt = run.TermLimit, time.Now()
		r.logf("time limit (job %s): the trainers checkpoint on SIGTERM; it is committed, then the job is requeued", cmp.Or(st, "state unknown"))
		if m.ownTerm && m.ckptID == 0 {
			m.ask(string(m.reason), "stop") // Slurm's SIGTERM may reach the trainers later than trainrun
		}
	default:
		m.reason, m.stopAt = run.Preempted, m.termAt
		r.logf("preempted (SIGTERM from Slurm to the step, job %s): the trainers checkpoint on SIGTERM; nothing more is sent to them", cmp.Or(st, "state unknown"))
	}
	r.observeInterrupt(m.reason)
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
func termCause(st string, end, now time.Time, stopping, own bool) run.StopReason {
	switch {
	case st == "CANCELLED" || st == "COMPLETING" && stopping:
		return run.Cancelled
	case st == "TIMEOUT" || st == "DEADLINE" || !end.IsZero() && now.After(end.Add(-5*time.Second)):
		return run.TermLimit
	case st == "COMPLETING":
		return run.Cancelled
	case st == slurmRequeued:
		return run.Preempted
	case own:
		return run.Cancelled
	default:
		return run.Preempted
	}
}

// regrace: after a measured checkpoint, the grace budget may raise the lead
// (CkptLeadAdapt): the own clock then asks earlier.
func (m *monitor) regrace() {
	r := m.r
	if r.checkGrace("commit") && m.clockT != nil && m.reason == run.None {
		m.clockT.Reset(max(time.Until(r.alloc.EndTime.Add(-r.lead)), 0))
	}
}

func (m *monitor) markStop() {
	if !m.stopMarked {
		m.stopMarked, m.tagAtStop = true, m.r.getLastTag()
	}
}

// ask tells every training process, once, to checkpoint; then says whether
// they stop afterwards (written first to launch/ckpt-request, which the
// client reads when the signal arrives).
func (m *monitor) ask(why, then string) {
	r := m.r
	m.ckptID++
	if then == "stop" && m.stopReqID == 0 {
		m.stopReqID = m.ckptID
	}
	line := fmt.Sprintf("%d %s\n", m.ckptID, then)
	if err := launch.WriteFileAtomic(filepath.Join(r.jobDir, "launch", ckptRequestFile), []byte(line), 0o644); err != nil {
		r.logf("warning: writing the checkpoint request: %v", err)
	}
	if then == "continue" {
		m.askedAt = time.Now()
	}
	r.observe(obs.Event{Kind: obs.KindCkptRequest, Why: why})
	n := m.ctl.Broadcast(launch.Msg{Kind: launch.Ckpt, CkptID: m.ckptID})
	r.logf("%s: asked %d of %d training processes for a checkpoint (signal %s, then %s)", why, n, m.world, strings.ToUpper(r.cfg.ckptSignal), then)
}

func (m *monitor) requestCkpt(why run.StopReason) {
	if m.reason != run.None {
		return
	}
	m.reason, m.stopAt = why, time.Now()
	m.r.observeInterrupt(why)
	m.markStop()
	m.ask(string(why), "stop")
}

// resetRequest: a checkpoint signal that does not come from trainrun
// (Slurm's --signal=USR2@T to the step) means stop: once a "continue"
// request is served, the request file says stop again.
func (m *monitor) resetRequest() {
	launch.WriteFileAtomic(filepath.Join(m.r.jobDir, "launch", ckptRequestFile), []byte(fmt.Sprintf("%d stop\n", m.ckptID)), 0o644)
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
// step.
func (m *monitor) stopStep(why run.StopReason) {
	r := m.r
	if m.reason == run.None || m.reason.ForDeadline() { // an interrupt replaces a stop made for the deadline
		m.reason = why
	}
	r.observeInterrupt(why)
	m.killing++
	if m.killing == 1 {
		r.logf("%s: stopping the step (SIGTERM to srun; a second interrupt kills it)", why)
		m.proc.Signal(syscall.SIGTERM)
		return
	}
	r.logf("%s: killing the step", why)
	if m.stepID != "" {
		c, cancel := context.WithTimeout(context.Background(), 10*time.Second) // the SIGKILL below must not wait long
		_ = r.env.slurm.KillStep(c, r.alloc.JobID, m.stepID)
		cancel()
	}
	syscall.Kill(-m.proc.Pid, syscall.SIGKILL)
}
