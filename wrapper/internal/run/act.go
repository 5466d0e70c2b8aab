// The decide and act phases of trainrun run: the step's outcome, Decide,
// and what its decision asks (history, finished marker, requeue, restart); the
// checkpoint bookkeeping they share.

package run

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/trainrun/trainrun/checkpoint"
	"github.com/trainrun/trainrun/internal/failclass"
	"github.com/trainrun/trainrun/internal/slurm"
	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
	"github.com/trainrun/trainrun/wrapper/internal/launch"
)

// stepResult is what the monitor hands on when srun has ended: how it
// ended, why the controller stopped it, and what the shims told.
type stepResult struct {
	WaitErr   error             // srun's wait error (nil: exit 0)
	Reason    StopReason        // why the controller stopped the step (None: it ended by itself)
	StopAt    time.Time         // when the stop was asked for or signalled (zero: none)
	TagAtStop string            // the latest committed tag then: only a later one is progress made for the stop
	Exits     map[int]int       // each rank's exit code, as its shim reported it
	FirstFail *launch.Event     // the first rank that exited non-zero (nil: none)
	Unheard   bool              // a stop request reached no training process (nor did Slurm's signal)
	Closed    map[int]time.Time // when the connection of each rank without an exit report closed (absent: still open)
	Fails     []failclass.Rank  // each failed rank's class as its shim named it, in the order the exits came
}

// afterStep commits what the step completed, decides (Decide) what the
// job does next, and does it. Only a checkpoint committed after res.TagAtStop
// is progress made for the stop (a background commit may have committed it
// before the step ended).
func (r *runner) afterStep(res stepResult, store ckptStore) error {
	reason, stopAt, tagAtStop := res.Reason, res.StopAt, res.TagAtStop
	r.badputStepEnded(res) // badput.go
	code, ok := slurm.ExitCode(res.WaitErr)
	if !ok {
		return withCode(exitcode.Slurm, fmt.Errorf("srun: %w", res.WaitErr))
	}
	o := r.outcome(code, reason, tagAtStop, res.Exits, res.FirstFail)
	o.Unheard = res.Unheard
	o.Latest, o.CommitErr = r.commitAfterStep(store, reason, stopAt, tagAtStop)
	o.SaveFailed, o.FailedNodes = r.saveFailedSince(stopAt), r.stepFailedNodes(code, reason, res)
	r.spareOutcome(&o)
	r.shrinkOutcome(&o)     // shrink.go
	r.classifyStep(&o, res) // failclass.go
	if o.CommitErr == nil && code == 0 && reason == None {
		r.compressKick(true) // a finished run compresses what it retains before it ends
	}
	if o.CheckpointStop() {
		took := time.Since(stopAt)
		r.logf("%s: step ended %.1f s after the request; latest checkpoint: %s", reason, took.Seconds(), cmp.Or(o.Latest, "none"))
		if reason.ForDeadline() && r.facts.lead > 0 && took > r.facts.lead*4/5 {
			r.logf("warning: checkpointing took %.0f s of the %s lead: raise --ckpt-lead (or the policy's CkptLead) before the next run is cut short", took.Seconds(), r.facts.lead)
		}
	}
	if (o.Failed() || o.DiskFailed()) && o.MaxFailures > 0 && r.ckpt.store != nil {
		o.HaveHistory = true
		if o.History, o.HistoryErr = r.ckpt.store.History().Load(); o.HistoryErr != nil {
			r.logf("warning: %v", o.HistoryErr)
		}
	}
	return r.act(Decide(o), store)
}

// outcome gathers what Decide reads, except the commit's result.
func (r *runner) outcome(code int, reason StopReason, tagAtStop string, exits map[int]int, firstFail *launch.Event) Outcome {
	o := Outcome{Code: code, Reason: reason, TagAtStop: tagAtStop, RankExits: exits, Command: r.step.cmdArgv[0], CkptDir: r.dirs.ckptDir,
		JobID: r.alloc.JobID, RestartCount: r.alloc.RestartCount, Requeue: r.alloc.Requeue, Interactive: !r.facts.job.IsBatch(), MaxRequeue: r.cfg.maxRequeue, MaxFailures: r.cfg.maxFailures,
		EndNear:  !r.alloc.EndTime.IsZero() && time.Until(r.alloc.EndTime) < 2*r.facts.lead,
		HangWhat: r.sess.hangWhat, Restarts: r.sess.restarts, MaxRestarts: r.cfg.fault.maxRestarts,
		SpikeWhat: r.sess.spike.what, SpikeStop: r.sess.spike.stop}
	if firstFail != nil {
		s := r.placed.Slots[firstFail.Rank]
		o.FirstFail = fmt.Sprintf("rank %d (node %s, GPU %d) failed first with exit %d", s.Rank, s.Node, s.GPU, firstFail.Code)
	}
	return o
}

// commitAfterStep commits the newest complete checkpoint, and measures it
// when it was made for the stop.
func (r *runner) commitAfterStep(store ckptStore, reason StopReason, stopAt time.Time, tagAtStop string) (string, error) {
	world := r.alloc.World()
	r.discardFailedSaves(store)
	latest, changed, err := store.CommitComplete(world)
	if err != nil || !changed {
		return latest, err
	}
	r.setLastTag(latest)
	r.logf("checkpoint %s complete (%d done markers) and committed as latest in %s", latest, world, r.dirs.ckptDir)
	r.prune()
	if reason != None && reason != Cancelled && !stopAt.IsZero() && latest != tagAtStop {
		r.recordCkpt(latest, string(reason), time.Since(stopAt))
		r.checkGrace("commit")
	}
	return latest, nil
}

// act does what the decision says: the history's end event, the finished
// marker, the requeue, the exit code.
func (r *runner) act(d Decision, store ckptStore) error {
	d = r.offTrackExit(d) // --stop-if-off-track (forecast.go)
	if !d.Restart {
		r.logBadputSummary() // badput.go
	}
	if d.Requeue {
		r.planResize(d) // resize.go: the next incarnation's size, in the end event
	}
	r.recordEnd(d.Cause, d.Tag, d.Record)
	if d.Finished {
		if sa, ok := unwrapStore(store); ok {
			if err := sa.s.MarkFinished(checkpoint.Finished{JobID: r.alloc.JobID, Restart: r.alloc.RestartCount, Tag: d.Tag, Run: r.dirs.runName}); err != nil {
				r.logf("warning: writing the finished marker: %v", err)
			}
		}
		msg := fmt.Sprintf("training finished (all %d ranks exited 0) in %.1f s", r.alloc.World(), time.Since(r.t0).Seconds())
		if d.Record != "" {
			msg += "; " + d.Record
		}
		r.logf("%s", msg)
	}
	if d.Restart {
		r.sess.spare.restartWhy = d.Err
		r.logf("%s", d.Err)
		return errRestartStep
	}
	if d.Requeue {
		excl, nodes := r.badNodesToExclude()
		if err := r.env.Slurm.Requeue(context.Background(), r.alloc.JobID); err != nil {
			return withCode(exitcode.Stopped, fmt.Errorf("%s, but requeueing failed: %v", d.Err, err))
		}
		r.logf("%s; requeued (restart %d of at most %d)", d.Err, r.alloc.RestartCount+1, r.cfg.maxRequeue)
		r.excludeBadNodes(excl, nodes)
		r.migrateRequeued() // migrate.go: the requeued job goes to the partition it moves to
		r.resizeRequeued()  // resize.go: the requeued job gets its new size
		return withCode(exitcode.Requeued, exitcode.ErrSilent)
	}
	if d.Exit == exitcode.OK {
		return nil
	}
	return withCode(d.Exit, errors.New(d.Err))
}

// recordStart and recordEnd keep the job's history in the checkpoint store:
// the requeue decisions read it.
func (r *runner) recordStart() {
	if r.ckpt.store == nil {
		return
	}
	if err := r.ckpt.store.History().Append(checkpoint.Event{Type: "start", JobID: r.alloc.JobID, Restart: r.alloc.RestartCount,
		Node: r.alloc.BatchNode, WorldSize: r.alloc.World(), ResumeFrom: tagOf(r.ckpt.resume), Container: r.containerHistory()}); err != nil {
		r.logf("warning: %v", err)
	}
}

func (r *runner) recordEnd(cause checkpoint.Cause, latest, msg string) {
	r.sess.endCause = cause // for the observer's end event
	if r.ckpt.store == nil {
		return
	}
	progress := int64(-1)
	if latest != "" {
		progress = checkpoint.StepOf(latest)
	}
	if err := r.ckpt.store.History().Append(checkpoint.Event{Type: "end", JobID: r.alloc.JobID, Restart: r.alloc.RestartCount,
		Node: r.alloc.BatchNode, Cause: cause, LastCommitted: latest, Progress: progress, Message: msg, FailedNodes: r.failedNodes(),
		FailureClass: string(r.sess.failClass.Class), FailureEvidence: r.sess.failClass.Evidence,
		ResizeNodes: r.sess.resize.v.Nodes * b2i(r.sess.resize.v.Resize), ResizeWhy: r.sess.resize.why()}); err != nil {
		r.logf("warning: %v", err)
	}
}

// recordCkpt keeps one measured checkpoint (request or signal -> committed)
// in the job's history, for the grace budget of this and later runs.
func (r *runner) recordCkpt(tag, why string, took time.Duration) {
	r.logf("checkpoint %s took %.2f s from the %s request to its commit", tag, took.Seconds(), why)
	if r.ckpt.store == nil {
		return
	}
	if err := r.ckpt.store.History().Append(checkpoint.Event{Type: "ckpt", JobID: r.alloc.JobID, Restart: r.alloc.RestartCount,
		Tag: tag, CkptSeconds: took.Seconds(), Why: why}); err != nil {
		r.logf("warning: %v", err)
	}
}

// checkGrace prints the grace budget (at start and after each measured
// commit) and applies a raised lead; it says whether the lead changed.
func (r *runner) checkGrace(when string) bool {
	var evs []checkpoint.Event
	if r.ckpt.store != nil {
		var err error
		if evs, err = r.ckpt.store.History().CkptTimes(); err != nil {
			r.logf("warning: %v", err)
		}
	}
	m, n := measuredCkpt(evs)
	lead := r.facts.lead
	if r.alloc.EndTime.IsZero() {
		lead = 0
	}
	adv := graceBudget(graceInput{Measured: m, Samples: n, Lead: lead, TimeLimit: r.alloc.TimeLimit, Adapt: r.cfg.leadAdapt, Limits: r.facts.grace})
	if when == "start" || adv.Need > 0 {
		r.logf("%s (at %s)", adv.Summary, when)
	}
	for _, w := range adv.Warnings {
		r.logf("warning: %s", w)
	}
	if adv.Raised {
		r.logf("grace budget: lead raised from %s to %s (CkptLeadAdapt=yes): trainrun's clock asks for the checkpoint at %s",
			r.facts.lead, adv.Lead, r.alloc.EndTime.Add(-adv.Lead).Format(time.TimeOnly))
		r.facts.lead = adv.Lead
		return true
	}
	return false
}

func (r *runner) setLastTag(t string) {
	r.sess.tagMu.Lock()
	r.sess.lastTag = t
	r.sess.tagMu.Unlock()
}

func (r *runner) getLastTag() string {
	r.sess.tagMu.Lock()
	defer r.sess.tagMu.Unlock()
	return r.sess.lastTag
}

// prune applies the retention (--ckpt-keep, --ckpt-keep-every) after a commit.
func (r *runner) prune() {
	if r.ckpt.store == nil || r.cfg.ckptKeep <= 0 {
		return
	}
	gone, err := r.ckpt.store.Prune(checkpoint.Retention{KeepLast: r.cfg.ckptKeep, KeepEvery: int64(r.cfg.ckptEvery)})
	if err != nil {
		r.logf("warning: pruning checkpoints: %v", err)
	} else if len(gone) > 0 {
		every := ""
		if r.cfg.ckptEvery > 0 {
			every = fmt.Sprintf(" and one per %d steps", r.cfg.ckptEvery)
		}
		r.logf("pruned %s (keeping the newest %d%s)", strings.Join(gone, ", "), r.cfg.ckptKeep, every)
	}
}
