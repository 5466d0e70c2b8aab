package run

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/trainrun/trainrun/checkpoint"
	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
	"github.com/trainrun/trainrun/wrapper/internal/health"
	"github.com/trainrun/trainrun/wrapper/internal/launch"
)

// Hang detection, restarts inside the allocation and stragglers (issue 21,
// part A). The shims' beats (internal/shim/beat.go) feed a health.Tracker; when it
// reports a hang the controller names the ranks that stopped, asks them for a
// stack dump, kills the step, and Decide restarts it inside the
// allocation (errRestartStep) from the latest committed checkpoint.

const (
	stackWait = 3 * time.Second // for the stack dumps to reach the log before the kill
	maxDumps  = 16              // stack dumps asked for at most (the suspects first)
)

// errRestartStep: the step is to be relaunched inside the allocation.
var errRestartStep = errors.New("restart the step inside the allocation")

// faultOptions are the flags of part A.
type faultOptions struct {
	hangTimeout string
	maxRestarts int
	spareNodes  int // --spare-nodes (spare.go)
}

func (o *faultOptions) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.hangTimeout, "hang-timeout", "auto", "a step whose ranks make no progress (Checkpointer.report_progress on every rank) for this long is hung: trainrun names the ranks that stopped, asks them for a stack dump, stops the step and restarts it from the latest checkpoint. auto: 15m until the first step, then 4x the p99 step time (at least 1m), 10m while a checkpoint is written; D (e.g. 90s): D once steps run (start-up and save at least D); off: no hang detection")
	fs.IntVar(&o.maxRestarts, "max-restarts", 2, "restart a failed or hung step inside the allocation (same job, no requeue) at most this many times, then requeue; a failure's restart counts toward --max-failures as a requeue does")
	fs.IntVar(&o.spareNodes, "spare-nodes", 0, "hold this many of the job's nodes idle beyond the layout's: the layout and the step use the others, and a step that loses a node restarts inside the job on the healthy ones with the same world size (submit with #SBATCH --no-kill)")
}

// hangConfig reads --hang-timeout: the tracker's configuration, or nil for off.
func hangConfig(s string) (*health.Config, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "auto", "":
		c := health.Auto(0)
		return &c, nil
	case "off", "0":
		return nil, nil
	}
	d, err := time.ParseDuration(s)
	if n, nerr := strconv.Atoi(s); nerr == nil { // a bare number is seconds, as in the policy
		d, err = time.Duration(n)*time.Second, nil
	}
	if err != nil || d < time.Second {
		return nil, usageErrorf("--hang-timeout %q: want auto, off or a duration of at least 1s such as 90s or 10m", s)
	}
	c := health.Auto(d)
	return &c, nil
}

// hangWatch is the monitor's hang and straggler state for one step.
type hangWatch struct {
	tr        *health.Tracker
	interval  time.Duration // the shims' beat interval: stragglers are checked this often
	nextCheck time.Time
	killAt    time.Time // a hang was found: kill the step then (after the stack dumps)
	evidence  int       // its hangs/<n>/ (0: none)
	asked     []int     // the ranks asked for evidence
}

// A fixed --hang-timeout shorter than three beat intervals is raised to
// that, and the log says so: a rank is judged by its shim's beats, and
// under load one beat late made the least advanced rank look hung instead
// of the stopped one (seen in CI with --hang-timeout 3s and 2 s beats).
func newHangWatch(cfg *health.Config, world int, logf func(string, ...any)) *hangWatch {
	if cfg == nil {
		return nil
	}
	iv := launch.BeatInterval(world)
	c := *cfg
	if least := 3 * iv; c.Fixed > 0 && c.Fixed < least {
		logf("--hang-timeout %s is shorter than three beats of the shims (%s each at %d ranks): using %s", c.Fixed, iv, world, least)
		c.Fixed = least
		c.Startup, c.Save = max(c.Startup, least), max(c.Save, least)
	}
	return &hangWatch{tr: health.New(c), interval: iv, nextCheck: time.Now().Add(iv)}
}

// rankFault is one rank a fault points to, for the log, the history and
// the report (part B records it): Kind is "hang" or "straggler".
type rankFault struct {
	Kind   string
	Rank   int
	Node   string
	GPU    int
	Detail string
	Ratio  float64 // straggler: its step time over its peers' median
}

func (f rankFault) String() string {
	return fmt.Sprintf("rank %d (node %s, GPU %d) %s", f.Rank, f.Node, f.GPU, f.Detail)
}

func (r *runner) fault(kind string, rank int, detail string, ratio float64, state string) rankFault {
	f := rankFault{Kind: kind, Rank: rank, Detail: detail, Ratio: ratio, GPU: -1}
	if rank >= 0 && rank < len(r.placed.Slots) {
		f.Node, f.GPU = r.placed.Slots[rank].Node, r.placed.Slots[rank].GPU
	}
	r.sess.rankFaults = append(r.sess.rankFaults, f)
	// The history's failed nodes (faults.go): a requeued job keeps out
	// the node a hang points to (a straggler's under StragglerAction=exclude),
	// and the report names it.
	switch {
	case f.Node == "":
	case kind == "hang":
		r.NoteFailedNode(checkpoint.FailedNode{Node: f.Node, Cause: checkpoint.CauseHang, Detail: f.String(), State: state})
	case kind == "straggler" && r.cfg.excludeStragglers:
		r.NoteFailedNode(checkpoint.FailedNode{Node: f.Node, Cause: checkpoint.CauseStraggler, Detail: f.String()})
	}
	return f
}

// onBeat takes a shim's beat.
func (m *monitor) onBeat(ev launch.Event) {
	m.r.badputBeat(ev) // badput.go
	if m.hw == nil {
		return
	}
	m.hw.tr.Observe(health.Beat{Rank: ev.Rank, Step: ev.Step, Age: time.Duration(ev.AgeMS) * time.Millisecond,
		StepTime: time.Duration(ev.StepMS) * time.Millisecond, State: ev.State, Saving: ev.Phase == launch.PhaseSave}, ev.At)
}

// checkHealth runs every second (onRequestTick): a hang found asks for
// stack dumps and kills the step stackWait later; stragglers are logged once
// per beat interval.
func (m *monitor) checkHealth(now time.Time) {
	hw := m.hw
	if hw == nil || m.killing > 0 {
		return
	}
	if !hw.killAt.IsZero() {
		if now.After(hw.killAt) {
			m.killHung()
		}
		return
	}
	if m.reason != None && !m.reason.AskedTrainers() {
		return // Slurm is ending the step (preemption, time limit, cancellation): nothing to restart
	}
	if h := hw.tr.Check(now, m.reason != None || m.continuing); h != nil {
		m.onHang(h)
		return
	}
	if now.After(hw.nextCheck) {
		hw.nextCheck = now.Add(hw.interval)
		for _, s := range hw.tr.Stragglers() {
			f := m.r.fault("straggler", s.Rank, fmt.Sprintf("straggles: %.2f s per step, %.1fx its peers' median %.2f s", s.StepTime.Seconds(), s.Ratio, s.PeerMedian.Seconds()), s.Ratio, "")
			m.r.logf("straggler: %s", f)
		}
	}
}

// onHang logs the ranks that stopped, asks the suspects for a stack dump,
// and schedules the kill.
func (m *monitor) onHang(h *health.Hang) {
	r := m.r
	sus := h.Suspects()
	var names []string
	for _, s := range sus {
		f := r.fault("hang", s.Rank, "stopped "+s.Describe(), 0, s.State)
		names = append(names, f.String())
	}
	r.sess.hangWhat = strings.Join(names, "; ")
	r.logf("hang: %d of %d ranks made no progress; the hang points to %s", len(h.Stalled), m.world, r.sess.hangWhat)
	for _, s := range h.Stalled[:min(len(h.Stalled), 8)] {
		if !s.Suspect {
			node := "?"
			if s.Rank >= 0 && s.Rank < len(r.placed.Slots) {
				node = r.placed.Slots[s.Rank].Node
			}
			r.logf("hang: also waiting: rank %d (node %s) %s", s.Rank, node, s.Describe())
		}
	}
	// A numbered hangs/<n>/ gets every asked rank's evidence (hangevidence.go);
	// without one (0) the shims dump the stacks into the log only.
	m.hw.evidence, m.hw.asked = r.newHangDir(), nil
	ask := maxDumps
	if m.hw.evidence > 0 {
		ask = maxEvidence
	}
	n := 0
	for _, s := range h.Stalled[:min(len(h.Stalled), ask)] {
		if m.ctl.SendTo(s.Rank, launch.Msg{Kind: launch.Stack, CkptID: max(m.hw.evidence, 1)}) {
			n++
			m.hw.asked = append(m.hw.asked, s.Rank)
		}
	}
	r.logf("hang: asked %d rank(s) for a Python stack dump (SIG%s, faulthandler); stopping the step in %s and restarting from the latest checkpoint", n, launch.StackSignal, stackWait)
	m.hw.killAt = time.Now().Add(stackWait)
	m.markStop()
}

// killHung kills the hung step at once: a stopped or deadlocked trainer
// cannot act on SIGTERM, and the healthy ranks would take it for a
// checkpoint request whose collective never completes.
func (m *monitor) killHung() {
	m.r.summariseHang(m.hw.evidence, m.hw.asked, m.r.sess.hangWhat)
	m.do(m.hung())
}

// restartStep prepares the relaunch after a hang or a failure: the latest
// committed checkpoint is resumed from, with the same placement, or with
// spare nodes in the place of lost ones (replaceLostNodes).
func (r *runner) restartStep(f runFacts, store *observedStore) (rankEnv, error) {
	r.sess.restarts++
	r.sess.hangWhat = ""
	latest, notes, err := store.Latest()
	if err != nil {
		return rankEnv{}, withCode(exitcode.Checkpoint, fmt.Errorf("checkpoint store %s: %w", r.dirs.ckptDir, err))
	}
	if latest, err = r.rollbackResume(store, latest); err != nil { // a loss spike's rollback (lossspike.go)
		return rankEnv{}, err
	}
	for _, n := range notes {
		r.logf("warning: %s", n)
	}
	r.ckpt.resume = latest
	r.setLastTag(tagOf(latest))
	r.badputRestart(tagOf(latest))              // badput.go
	r.healthBeforeRestart(context.Background()) // health.go
	if _, err := r.replaceLostNodes(f); err != nil {
		return rankEnv{}, err
	}
	r.observeRestart(latest)
	r.logf("restart %d of --max-restarts %d inside job %s: relaunching the step from %s", r.sess.restarts, r.cfg.fault.maxRestarts, r.alloc.JobID, orDash(tagOf(latest)))
	step, renv, err := r.prepare(f)
	if err != nil {
		return renv, err
	}
	r.step = step
	r.badputRelaunch()
	return renv, nil
}
