package run

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/trainrun/trainrun/checkpoint"
	"github.com/trainrun/trainrun/internal/failclass"
	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
)

// StopReason is why the controller stopped the step. Its text is part of
// the log, the history and the observer's events.
type StopReason string

// The stop reasons (None: the step ended by itself).
const (
	None      StopReason = ""
	TimeLimit StopReason = "time-limit"   // trainrun's own clock reached EndTime - lead
	Signal    StopReason = "signal"       // SIGUSR1/SIGUSR2 to trainrun (#SBATCH --signal=B:USR1, scancel --batch)
	Preempted StopReason = "preempted"    // Slurm's SIGTERM reached the step while the job stays RUNNING
	Cancelled StopReason = "cancelled"    // scancel / Ctrl-C
	TermLimit StopReason = "killed-limit" // Slurm's SIGTERM at the time limit (the own clock was too late)
	Requested StopReason = "request-stop" // trainrun ckpt request --then stop
	Hang      StopReason = "hang"         // no rank made progress within the hang timeout (wrapper/internal/health)
)

// AskedTrainers says that trainrun asked the trainers to checkpoint and
// stop (its own clock, a signal to trainrun, a stop request): the handshake,
// not Slurm's SIGTERM, ends the step, and a rank that connects late is asked
// too.
func (r StopReason) AskedTrainers() bool {
	return r == TimeLimit || r == Signal || r == Requested || r == Migrated
}

// ForDeadline says that the stop was made for the job's end (trainrun's own
// clock, or the advance signal of #SBATCH --signal): --ckpt-lead bounds its
// checkpoint, and an interrupt may still replace it.
func (r StopReason) ForDeadline() bool { return r == TimeLimit || r == Signal }

// Outcome is how the step ended, and what of the job and its policy the
// decision reads.
type Outcome struct {
	Code      int         // srun's exit code (128+n for signal n)
	Reason    StopReason  // why the controller stopped the step (None, TimeLimit, ...)
	Latest    string      // the latest committed checkpoint after the step ("" none)
	TagAtStop string      // the latest committed when the stop was first asked for
	RankExits map[int]int // the exit code of each rank that reported one
	FirstFail string      // who failed first ("rank 3 (node n1, GPU 3) failed first with exit 1"); "" unknown
	EndNear   bool        // the job's end time is known and less than two leads away
	// Unheard: the controller asked the trainers to checkpoint and stop,
	// and the signal reached none of them (a shim holds it until its
	// process catches it), nor did Slurm's: trainers that exited 0 then
	// finished by themselves.
	Unheard   bool
	CommitErr error // committing the latest checkpoint failed
	// SaveFailed says why the checkpoint asked for the stop could not be
	// saved (a full, over-quota or failing disk); "" if none failed.
	SaveFailed string
	// FailedNodes are the nodes the step's failure points to (lost, hung,
	// the first failing rank's): the history's end event records them.
	FailedNodes []checkpoint.FailedNode
	Command     string // the training command, for "not found"
	CkptDir     string // the checkpoint directory, for messages
	// The failed step's class (internal/failclass; zero when not failed or
	// hung), the rank it comes from in words ("" for a lost node), the
	// policy's action for it (RestartOn=), and with an OOM that stops the
	// planner's advice for a layout that fits.
	Class       failclass.Result
	ClassWho    string
	ClassAction failclass.Action
	OOMAdvice   string

	JobID        string
	RestartCount int    // SLURM_RESTART_COUNT
	Requeue      bool   // the job may be requeued (Requeue=1)
	Interactive  bool   // an interactive allocation (salloc, srun alone; BatchFlag=0): Slurm requeues batch jobs only
	MaxRequeue   int    // --max-requeue
	MaxFailures  int    // --max-failures; 0: never requeue after a failure
	HangWhat     string // Reason Hang: which ranks stopped ("rank 3 (node n1, GPU 3) ...")
	SpikeWhat    string // Reason LossSpike: the spike ("loss spike: loss NaN at step 57")
	SpikeStop    bool   // Reason LossSpike: the run stops (no rollback)
	CanShrink    bool   // the step may restart on fewer nodes than it lost (--shrink yes, TRAINRUN_RESHARD=dp; shrink.go)
	ShrinkTo     string // then: the shrunk layout, for the message
	Restarts     int    // steps restarted inside this allocation so far
	MaxRestarts  int    // --max-restarts: restart a failed or hung step inside the allocation this often, then requeue
	// SpareNodes is how many healthy nodes of the allocation the step does
	// not use (--spare-nodes, less those lost before): a step that lost
	// nodes restarts inside the allocation only when they can replace them.
	SpareNodes int
	// History is the job's history before this run's end is recorded
	// (Decide adds it); HistoryErr why it could not be read; without a
	// store (HaveHistory false) failures are not requeued.
	History     []checkpoint.Incarnation
	HistoryErr  error
	HaveHistory bool
}

// Decision is what the controller does after the step.
type Decision struct {
	Exit     int              // trainrun's exit code (with Requeue: if Slurm requeues, Requeued; else Stopped)
	Err      string           // the error to report; "" for none
	Cause    checkpoint.Cause // this run's end in the history
	Tag      string           // the end's last committed checkpoint
	Record   string           // the end's message
	Finished bool             // write the finished marker: never run again
	Requeue  bool             // ask Slurm to requeue the job; Err says what for
	Restart  bool             // relaunch the step inside this allocation from Tag; Err says what for
}

// Failed says whether the step failed (not stopped, not cancelled).
func (o Outcome) Failed() bool {
	return o.CommitErr == nil && o.Reason != Cancelled && o.Code != 0
}

// DiskFailed says whether a checkpoint the stop needed could not be saved or
// committed because of the disk: the job is then requeued from the previous
// latest (decideDisk), never failed for it.
func (o Outcome) DiskFailed() bool {
	if o.Reason == Cancelled {
		return false
	}
	if o.CommitErr != nil {
		return checkpoint.DiskCause(o.CommitErr) != ""
	}
	return o.SaveFailed != "" && o.Code == 0 && o.Reason != None && o.Reason != Requested && (o.Latest == "" || o.Latest == o.TagAtStop)
}

// CheckpointStop says whether the step ended for a checkpoint the
// controller asked for or Slurm signalled, and the trainers exited 0.
func (o Outcome) CheckpointStop() bool {
	return o.CommitErr == nil && o.Code == 0 && o.Reason != None && o.Reason != Cancelled && o.Reason != Requested && !o.Unheard
}

// Decide decides after the step. It reads only o.
func Decide(o Outcome) Decision {
	switch {
	case o.DiskFailed():
		return decideDisk(o)
	case o.CommitErr != nil:
		return Decision{Exit: exitcode.Checkpoint, Err: o.CommitErr.Error(), Cause: checkpoint.CauseCrash, Record: o.CommitErr.Error()}
	case o.Code == 0 && o.Unheard && o.Reason.AskedTrainers():
		return Decision{Exit: exitcode.OK, Cause: checkpoint.CauseFinished, Tag: o.Latest, Finished: true,
			Record: "the trainers ended before the " + string(o.Reason) + " checkpoint request reached one"}
	case o.Reason == Requested && o.Code == 0:
		return Decision{Exit: exitcode.Stopped, Err: fmt.Sprintf("checkpointed (latest %s) and stopped as requested", cmp.Or(o.Latest, "none")),
			Cause: checkpoint.CauseCancelled, Tag: o.Latest, Record: "stopped by trainrun ckpt request"}
	case o.Reason == Hang:
		return decideHang(o)
	case o.Reason == LossSpike:
		return decideLossSpike(o) // lossspike.go
	case o.Reason == Cancelled:
		return Decision{Exit: exitcode.Stopped, Err: fmt.Sprintf("cancelled; the step was stopped (srun exit %d)", o.Code),
			Cause: checkpoint.CauseCancelled, Tag: o.Latest, Record: "cancelled"}
	case o.Code != 0:
		return decideFailure(o)
	case o.Reason == None:
		return Decision{Exit: exitcode.OK, Cause: checkpoint.CauseFinished, Tag: o.Latest, Finished: true}
	}
	// Stopped for a checkpoint: the trainers exited 0.
	cause := checkpoint.CausePreempted
	if o.Reason == TimeLimit || o.Reason == TermLimit || o.Reason == Signal && o.EndNear {
		cause = checkpoint.CauseTimeLimit
	}
	if o.Reason == Migrated { // migrate.go
		cause = checkpoint.CauseMigrated
	}
	d := Decision{Cause: cause, Tag: o.Latest, Record: string(o.Reason)}
	if o.Latest == "" || o.Latest == o.TagAtStop {
		d.Exit = exitcode.Checkpoint
		d.Err = fmt.Sprintf("%s: the trainers exited 0 but no new complete checkpoint is in %s (each rank must create %s); not requeueing", o.Reason, o.CkptDir, checkpoint.DonePattern)
		return d
	}
	return requeue(d, o, string(o.Reason)+": checkpointed")
}

// decideFailure: a command not found stops; any other failure is restarted
// inside the allocation (restartAfterFailure) or requeued (the next run
// resumes from the latest committed checkpoint) unless --max-failures runs
// in a row failed without progress (a restart inside the allocation is a run
// here, as a requeue is: a crash loop stops), the job may not be requeued,
// or the requeue limit is reached.
func decideFailure(o Outcome) Decision {
	notFound := true
	for _, c := range o.RankExits {
		notFound = notFound && c == exitcode.NotFound
	}
	if o.Code == exitcode.NotFound && notFound {
		return Decision{Exit: exitcode.NotFound, Cause: checkpoint.CauseCrash, Tag: o.Latest, Record: "command not found",
			Err: fmt.Sprintf("the training command %q was not found on the nodes (see the tasks' messages above); install it on every node or give its full path", o.Command)}
	}
	what := fmt.Sprintf("srun exited with %d", o.Code)
	if o.FirstFail != "" {
		what = fmt.Sprintf("%s; srun exited with %d", o.FirstFail, o.Code)
	}
	if o.Reason != None {
		what += fmt.Sprintf(" after the %s checkpoint request", o.Reason)
	}
	for _, f := range o.FailedNodes {
		if f.Cause == checkpoint.CauseNodeFail { // the first failure seen is then only its echo
			what = fmt.Sprintf("node %s was lost (%s); %s", f.Node, f.Detail, what)
			break
		}
	}
	if o.Class.Class != "" {
		what += fmt.Sprintf("; failure class %s: %s", o.Class.Class, o.Class.Evidence)
	}
	d := Decision{Exit: exitcode.StepFailed, Err: what, Cause: failureCause(o.FailedNodes), Tag: o.Latest, Record: what}
	if o.ClassAction == failclass.Stop {
		return decideStopClass(d, o) // failclass.go
	}
	n, counted := failuresInARow(o)
	if !counted {
		return d
	}
	if n >= o.MaxFailures {
		d.Exit = exitcode.RequeueLimit
		d.Err = fmt.Sprintf("%s; %d run(s) in a row failed without progress (latest checkpoint %s): not requeueing (--max-failures %d)",
			what, n, cmp.Or(o.Latest, "none"), o.MaxFailures)
		return d
	}
	what += fmt.Sprintf(" (failure %d of at most %d in a row without progress)", n, o.MaxFailures)
	r, why := restartAfterFailure(d, o, what)
	if r.Restart {
		return r
	}
	return requeue(d, o, what+why)
}

// restartAfterFailure: a failed step (a rank crashed, a node was lost) is
// relaunched inside the allocation, without going back to the queue, while
// --max-restarts allows and the job's end is not near; a step that lost
// nodes only when spare nodes can take their place (the same world size),
// else it is requeued without them. Without a restart, why says what
// stopped it where that is not plain.
func restartAfterFailure(d Decision, o Outcome, what string) (_ Decision, why string) {
	lost := LostNodes(o.FailedNodes)
	switch {
	case o.MaxRestarts == 0:
		return d, ""
	case o.Restarts >= o.MaxRestarts:
		return d, fmt.Sprintf("; %d restart(s) inside the allocation used (--max-restarts %d)", o.Restarts, o.MaxRestarts)
	case o.EndNear: // a relaunch would be cut short
		return d, "; the job's end is near: not restarting inside the allocation"
	case len(lost) > o.SpareNodes && !o.CanShrink:
		return d, fmt.Sprintf("; %d node(s) lost and %d spare node(s) to take their place (--spare-nodes): requeueing without them", len(lost), o.SpareNodes)
	}
	d.Restart, d.Requeue = true, false
	on := ""
	switch {
	case len(lost) > o.SpareNodes: // CanShrink
		on = fmt.Sprintf(" on the healthy nodes, shrunk to %s (--shrink; %s lost)", o.ShrinkTo, strings.Join(lost, ","))
	case len(lost) > 0:
		on = fmt.Sprintf(" on the healthy nodes (%d spare node(s) take the place of %s)", len(lost), strings.Join(lost, ","))
	}
	d.Err = fmt.Sprintf("%s; restarting the step inside the allocation%s from %s (restart %d of --max-restarts %d)",
		what, on, cmp.Or(o.Latest, "the start"), o.Restarts+1, o.MaxRestarts)
	return d, ""
}

// LostNodes are the nodes the step may not use again, in order, each once:
// those the failure records as lost (CauseNodeFail), and those its failure
// class excludes (CauseNodeFault: RestartOn=CLASS=exclude). A spare takes
// the place of each.
func LostNodes(nodes []checkpoint.FailedNode) []string {
	var out []string
	for _, f := range nodes {
		if (f.Cause == checkpoint.CauseNodeFail || f.Cause == checkpoint.CauseNodeFault) && !slices.Contains(out, f.Node) {
			out = append(out, f.Node)
		}
	}
	return out
}

// decideHang: the controller stopped a hung step. It is restarted inside the
// allocation from the latest committed checkpoint while --max-restarts
// allows and the job's end is not near, then handled as a failure (requeued while --max-failures allows:
// the history counts a hang as a failure).
func decideHang(o Outcome) Decision {
	what := "hang: " + cmp.Or(o.HangWhat, "no progress within the hang timeout")
	if o.Restarts < o.MaxRestarts && !o.EndNear { // near the end a relaunch would be cut short: requeue
		return Decision{Exit: exitcode.StepFailed, Cause: checkpoint.CauseHang, Tag: o.Latest, Record: what, Restart: true,
			Err: fmt.Sprintf("%s; restarting the step inside the allocation from %s (restart %d of --max-restarts %d)", what, cmp.Or(o.Latest, "the start"), o.Restarts+1, o.MaxRestarts)}
	}
	o.FirstFail = what // decideFailure says why it is not restarted again
	o.Reason = None
	o.Code = max(o.Code, 1)
	d := decideFailure(o)
	d.Cause = checkpoint.CauseHang
	return d
}

// failureCause is the history's cause of a failed step: a lost node or a
// hang when a failed node says so, else a crash.
func failureCause(nodes []checkpoint.FailedNode) checkpoint.Cause {
	cause := checkpoint.CauseCrash
	for _, f := range nodes {
		switch f.Cause {
		case checkpoint.CauseNodeFail:
			return f.Cause
		case checkpoint.CauseHang:
			cause = f.Cause
		}
	}
	return cause
}

// decideDisk: the stop's checkpoint could not be saved or committed (a full,
// over-quota or failing disk). The previous latest is intact: requeue from it
// (the next run's save retries, its start commits a checkpoint left
// complete) unless --max-failures runs in a row got no further, the job may
// not be requeued or its limit is reached.
func decideDisk(o Outcome) Decision {
	why := o.SaveFailed
	if o.CommitErr != nil {
		why = o.CommitErr.Error()
	}
	what := fmt.Sprintf("%s: the checkpoint could not be saved (%s); the latest stays %s", cmp.Or(o.Reason, "end"), why, cmp.Or(o.TagAtStop, o.Latest, "none"))
	d := Decision{Exit: exitcode.Checkpoint, Err: what, Cause: checkpoint.CauseDisk, Tag: o.Latest, Record: what}
	if n, counted := failuresInARow(o); counted && n >= o.MaxFailures {
		d.Exit = exitcode.RequeueLimit
		d.Err = fmt.Sprintf("%s; %d run(s) in a row got no further: not requeueing (--max-failures %d)", what, n, o.MaxFailures)
		return d
	}
	return requeue(d, o, what+"; requeueing from it")
}

// failuresInARow is how many runs in a row, this one included, ended
// without progress; counted is false when --max-failures is off or the
// history could not be read (then no run is counted).
func failuresInARow(o Outcome) (n int, counted bool) {
	if o.MaxFailures <= 0 || !o.HaveHistory || o.HistoryErr != nil {
		return 0, false
	}
	return checkpoint.FailuresWithoutProgress(withEnd(o.History, o.JobID, o.RestartCount, o.Latest)), true
}

// requeue: requeue unless the job may not be or its limit is reached.
func requeue(d Decision, o Outcome, what string) Decision {
	switch {
	case o.Interactive:
		if d.Exit == exitcode.OK || d.Exit == exitcode.Requeued {
			d.Exit = exitcode.Stopped // a stop; a failure keeps its own code
		}
		d.Err = what + "; not requeueing: an interactive allocation (salloc, srun) cannot be requeued"
	case !o.Requeue:
		d.Exit, d.Err = exitcode.Stopped, what+"; the job may not be requeued (Requeue=0: submit with --requeue), stopping"
	case o.RestartCount >= o.MaxRequeue:
		d.Exit, d.Err = exitcode.RequeueLimit, fmt.Sprintf("%s; requeue limit reached (restart %d of --max-requeue %d), stopping", what, o.RestartCount, o.MaxRequeue)
	default:
		d.Exit, d.Err, d.Requeue = exitcode.Requeued, what, true
	}
	return d
}

// withEnd is the history as History.Load reads it once this run's crash end
// is recorded.
func withEnd(incs []checkpoint.Incarnation, job string, restart int, latest string) []checkpoint.Incarnation {
	out := append([]checkpoint.Incarnation(nil), incs...)
	i := -1
	for j := len(out) - 1; j >= 0; j-- {
		if out[j].JobID == job && out[j].Restart == restart {
			i = j
			break
		}
	}
	if i < 0 {
		out = append(out, checkpoint.Incarnation{JobID: job, Restart: restart, Progress: -1})
		i = len(out) - 1
	}
	progress := int64(-1)
	if latest != "" {
		progress = checkpoint.StepOf(latest)
	}
	in := &out[i]
	in.End, in.Cause, in.LastCommitted, in.Progress = time.Now(), checkpoint.CauseCrash, latest, progress // a hang counts the same
	return out
}
