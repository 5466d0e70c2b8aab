package obs

import (
	"cmp"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/trainrun/trainrun/internal/units"
)

// Report is a run's life across its incarnations, folded from the event
// log.
type Report struct {
	JobID, JobName, Partition string
	Run, Sweep                string // the run's name and its sweep's (newest start event)
	Start                     *Start // of the newest incarnation
	Incarnations              []Incarnation
	Checkpoints               []CkptRecord
	Interrupts                []Interrupt
	Progress                  []Event // progress samples, in time order
	First, Last               time.Time
	FailedSaves               []FailedSave // checkpoints the disk refused
	Health                    []Event      // nodes that failed the health pass (KindHealth)
	Badput                    []Event      // restarts' breakdowns (KindBadput)
	Goodput                   Goodput
	Hangs                     []Hang      `json:",omitempty"` // the run directory's hangs/ (ReadHangs; BuildReport leaves it empty)
	LossSpikes                []LossSpike `json:",omitempty"` // the loss-spike events (lossspike.go)
	Migrations                []Migration `json:",omitempty"` // the moves to another partition (migrate.go)
	Resizes                   []Resize    `json:",omitempty"` // the requeues that changed the job's node count (resize.go)
}

// Incarnation is one run of the job.
type Incarnation struct {
	Restart    int
	Start, End time.Time // End zero: no end recorded (still running, or killed)
	Cause      string    // EndFinished, ...; "" when killed
	Crash      string
	Exit       int
	Message    string
	Requeued   bool // a failed incarnation that trainrun requeued
	ResumeFrom string
	Interrupt  string    // first interruption's cause, "" if none
	StoppedAt  time.Time // when training stopped (the interruption, else End)
	// Lost is the work lost: from the newest checkpoint's state (or the
	// start) to StoppedAt; 0 for a finished incarnation.
	Lost        time.Duration
	FirstStep   int64 // -1 if no progress was reported
	LastStep    int64
	LastTokens  int64
	GPUs        int          // from its start
	Fault       string       // a failure's cause (Fault*), "" if none
	FailedNodes []FailedNode // the nodes its failure points to
	InJob       bool         // it began with a restart inside the allocation (KindRestart), not a start
	// FailureClass and FailureEvidence: its failed step's class and the
	// line that says so (Event's), "" if none.
	FailureClass, FailureEvidence string
}

// CkptRecord is one committed checkpoint.
type CkptRecord struct {
	Ckpt
	Restart  int
	Time     time.Time // committed
	AskedAt  time.Time // the request or SIGTERM it answered (zero if unasked)
	Captured time.Time // about when its training state was taken
}

// Interrupt is one interruption.
type Interrupt struct {
	Restart int
	Time    time.Time
	Cause   string
}

// Wait is the gap between an incarnation's end and the next one's start
// (the requeue wait: Slurm's requeue delay and the queue).
type Wait struct{ From, To time.Time }

// BuildReport folds events (ReadEvents) into a report.
func BuildReport(evs []Event) *Report {
	f := &reportFold{r: &Report{}}
	for _, e := range evs {
		f.add(e)
	}
	f.closeInc(f.lastSeen)
	f.r.Goodput = f.r.buildGoodput()
	return f.r
}

// reportFold is BuildReport's state between events: the incarnation being
// read, when its state was last captured (a checkpoint) and last asked to
// be saved, and the last event seen.
type reportFold struct {
	r                         *Report
	cur                       *Incarnation
	captured, asked, lastSeen time.Time
}

// closeInc ends the incarnation being read at end (its last sign of life
// when it has no end event) and counts the work it lost since its last
// captured state.
func (f *reportFold) closeInc(end time.Time) {
	cur := f.cur
	if cur == nil {
		return
	}
	if cur.End.IsZero() {
		cur.StoppedAt = end // last sign of life
	}
	if cur.Cause != EndFinished && !cur.StoppedAt.IsZero() {
		from := cur.Start
		if f.captured.After(from) {
			from = f.captured
		}
		cur.Lost = max(0, cur.StoppedAt.Sub(from))
	}
	f.r.Incarnations = append(f.r.Incarnations, *cur)
	f.cur = nil
}

// add folds one event in.
func (f *reportFold) add(e Event) {
	r := f.r
	if r.First.IsZero() || e.Time.Before(r.First) {
		r.First = e.Time
	}
	if e.Time.After(r.Last) {
		r.Last = e.Time
	}
	if r.JobID == "" {
		r.JobID = e.JobID
	}
	switch e.Kind {
	case KindHealth: // before a step: no incarnation of its own
		r.Health = append(r.Health, e)
		return
	case KindBadput:
		r.Badput = append(r.Badput, e)
		return
	}
	if e.Kind == KindStart || f.cur == nil {
		f.closeInc(f.lastSeen)
		f.cur = &Incarnation{Restart: e.Restart, Start: e.Time, FirstStep: -1, LastStep: -1}
		f.asked = time.Time{}
	}
	f.lastSeen = e.Time
	f.apply(e)
}

// apply is what an event of an incarnation says about it and the run.
func (f *reportFold) apply(e Event) {
	r, cur := f.r, f.cur
	switch e.Kind {
	case KindStart:
		if s := e.Start; s != nil {
			r.Start = s
			cur.ResumeFrom, cur.GPUs = s.ResumeFrom, s.GPUs
			r.JobName, r.Partition = cmp.Or(s.JobName, r.JobName), cmp.Or(s.Partition, r.Partition)
			r.Run, r.Sweep = cmp.Or(s.Run, r.Run), cmp.Or(s.Sweep, r.Sweep)
		}
	case KindCkptRequest:
		f.asked = e.Time
	case KindInterrupt:
		r.Interrupts = append(r.Interrupts, Interrupt{Restart: cur.Restart, Time: e.Time, Cause: e.Cause})
		if cur.Interrupt == "" {
			cur.Interrupt, cur.StoppedAt = e.Cause, e.Time
			if f.asked.IsZero() || e.Cause == InterruptPreempted {
				f.asked = e.Time
			}
		}
	case KindCkptCommit:
		if e.Ckpt == nil {
			return
		}
		c := ckptRecord(e, cur.Restart)
		f.captured = c.Captured
		r.Checkpoints = append(r.Checkpoints, c)
	case KindCkptFail:
		if diskCauses[e.Cause] {
			r.FailedSaves = append(r.FailedSaves, FailedSave{Restart: cur.Restart, Time: e.Time, Cause: e.Cause, Message: e.Message})
		}
	case KindProgress:
		r.Progress = append(r.Progress, e)
		if cur.FirstStep < 0 {
			cur.FirstStep = e.Step
		}
		cur.LastStep, cur.LastTokens = e.Step, e.Tokens
	case KindLossSpike:
		r.addLossSpike(e, cur.Restart)
	case KindMigrate:
		r.addMigration(e, cur.Restart)
	case KindResize:
		r.addResize(e, cur.Restart)
	case KindRestart:
		cur.endRestarted(e)
		f.closeInc(e.Time)
		f.cur, f.asked = restartedInc(e), time.Time{}
	case KindEnd:
		cur.End, cur.Cause, cur.Crash, cur.Exit, cur.Message, cur.Requeued = e.Time, e.Cause, e.Crash, e.Exit, e.Message, e.Requeued
		cur.Fault, cur.FailedNodes = e.Fault, e.FailedNodes
		cur.FailureClass, cur.FailureEvidence = e.FailureClass, e.FailureEvidence
		if cur.StoppedAt.IsZero() {
			cur.StoppedAt = e.Time
		}
		f.closeInc(e.Time)
	}
}

// ckptRecord is the checkpoint a KindCkptCommit event (with its Ckpt)
// records: when it was asked for and when its state was captured, from
// its completion less the save, else from the commit less commit and save.
func ckptRecord(e Event, restart int) CkptRecord {
	c := CkptRecord{Ckpt: *e.Ckpt, Restart: restart, Time: e.Time}
	if c.Save > 0 && !c.CompleteAt.IsZero() {
		c.AskedAt = c.CompleteAt.Add(-c.Save)
	}
	if !c.CompleteAt.IsZero() {
		c.Captured = c.CompleteAt.Add(-c.Save)
	} else {
		c.Captured = e.Time.Add(-c.Commit - c.Save)
	}
	return c
}

// endRestarted ends the incarnation's step at a restart inside the
// allocation (KindRestart).
func (in *Incarnation) endRestarted(e Event) {
	in.End, in.Cause, in.Message, in.Fault, in.FailedNodes = e.Time, EndRestarted, e.Message, e.Fault, e.FailedNodes
	in.FailureClass, in.FailureEvidence = e.FailureClass, e.FailureEvidence
	if in.StoppedAt.IsZero() {
		in.StoppedAt = e.Time
	}
}

// restartedInc is the incarnation a restart inside the allocation begins:
// the same restart count, its own start.
func restartedInc(e Event) *Incarnation {
	in := &Incarnation{Restart: e.Restart, Start: e.Time, FirstStep: -1, LastStep: -1, InJob: true}
	if s := e.Start; s != nil {
		in.ResumeFrom, in.GPUs = s.ResumeFrom, s.GPUs
	}
	return in
}

// Waits are the gaps between incarnations.
func (r *Report) Waits() []Wait {
	var w []Wait
	for i := 1; i < len(r.Incarnations); i++ {
		prev := r.Incarnations[i-1]
		end := prev.End
		if end.IsZero() {
			end = prev.StoppedAt
		}
		if !end.IsZero() && r.Incarnations[i].Start.After(end) {
			w = append(w, Wait{end, r.Incarnations[i].Start})
		}
	}
	return w
}

// Totals are the run's sums.
type Totals struct {
	Wall, Running, Waiting, Lost, Saving, Committing time.Duration
	Steps                                            int64 // steps the run advanced (final step - first step reported + 1 step of the first)
	FinalStep                                        int64
	Tokens                                           int64
	Finished                                         bool
}

// Totals sums the report.
func (r *Report) Totals() Totals {
	var t Totals
	t.Wall = r.Last.Sub(r.First)
	for _, in := range r.Incarnations {
		end := in.End
		if end.IsZero() {
			end = in.StoppedAt
		}
		t.Running += end.Sub(in.Start)
		t.Lost += in.Lost
		t.Finished = t.Finished || in.Cause == EndFinished
	}
	for _, w := range r.Waits() {
		t.Waiting += w.To.Sub(w.From)
	}
	for _, c := range r.Checkpoints {
		t.Saving += c.Save
		t.Committing += c.Commit
	}
	if n := len(r.Progress); n > 0 {
		first, last := r.Progress[0], r.Progress[n-1]
		base := int64(0)
		if len(r.Incarnations) > 0 && r.Incarnations[0].ResumeFrom != "" {
			base = first.Step
		}
		t.FinalStep, t.Steps, t.Tokens = last.Step, last.Step-base, last.Tokens
	}
	return t
}

// EndText says how an incarnation ended, e.g. "requeued after preempted".
func (in Incarnation) EndText() string {
	c := in.Cause
	switch {
	case c == "":
		return "no end recorded: still running, or killed (SIGKILL, a lost node)" // report cannot tell without Slurm
	case c == EndCrash:
		c = "failed: " + cmp.Or(in.Crash, CrashStepFailed)
	case c == EndRestarted:
		c = "restarted inside the job after " + cmp.Or(in.Fault, FaultCrash)
	}
	if in.Interrupt != "" && c != EndFinished {
		c += " after " + in.Interrupt
	}
	if in.Requeued && in.Cause != EndRequeued {
		c += ", requeued"
	}
	return c
}

// WriteText prints the report for a person: a header, then one section
// each for incarnations, checkpoints, time, faults and throughput.
func (r *Report) WriteText(w io.Writer) {
	t := r.Totals()
	r.writeHeader(w, t)
	r.writeIncarnations(w, t)
	r.writeCheckpoints(w)
	fmt.Fprintf(w, "\ntime: %s running, %s waiting in requeue, %s of work lost, %s saving and %s committing checkpoints\n",
		units.Duration(t.Running), units.Duration(t.Waiting), units.Duration(t.Lost), units.Duration(t.Saving), units.Duration(t.Committing))
	r.writeFaults(w)
	r.writeThroughput(w, t)
	r.writeHangs(w)
	r.writeLossSpikes(w)
	r.writeMigrations(w)
	r.writeResizes(w)
}

// writeHeader prints the job line and, when the start was recorded, the
// layout it ran with.
func (r *Report) writeHeader(w io.Writer, t Totals) {
	name := ""
	if r.JobName != "" {
		name = " (" + r.JobName + ")"
	}
	part := ""
	if r.Partition != "" {
		part = " on " + r.Partition
	}
	if r.Sweep != "" {
		part += ", run " + r.Run + " of sweep " + r.Sweep
	}
	status := "not finished"
	if t.Finished {
		status = "finished"
	}
	fmt.Fprintf(w, "job %s%s%s: %d incarnation(s), %s from first start to last event, %s\n", r.JobID, name, part, len(r.Incarnations), units.Duration(t.Wall), status)
	if s := r.Start; s != nil && len(s.Layout) > 0 {
		var parts []string
		for _, k := range layoutKeys(s.Layout) {
			parts = append(parts, fmt.Sprintf("%s=%d", k, s.Layout[k]))
		}
		gpu := ""
		if s.GPUType != "" {
			gpu = " (" + s.GPUType + ")"
		}
		fmt.Fprintf(w, "layout %s on %d GPUs, %d nodes%s\n", strings.Join(parts, " "), s.GPUs, s.Nodes, gpu)
	}
	if s := r.Start; s != nil && s.ContainerImage != "" {
		fmt.Fprintf(w, "container %s (%s)\n", s.ContainerImage, s.ContainerRuntime)
	}
}

// writeIncarnations prints one row per incarnation, the messages of those
// that did not end in a plain requeue, and the waits between them.
func (r *Report) writeIncarnations(w io.Writer, t Totals) {
	fmt.Fprintln(w, "\nincarnations:")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  restart\tstarted\tran\tended\tsteps\tlost\tresumed from")
	for _, in := range r.Incarnations {
		end := in.End
		if end.IsZero() {
			end = in.StoppedAt
		}
		steps := "-"
		if in.FirstStep >= 0 {
			steps = fmt.Sprintf("%d..%d", in.FirstStep, in.LastStep)
		}
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\t%s\n", in.Restart, in.Start.UTC().Format("2006-01-02 15:04:05Z"), units.Duration(end.Sub(in.Start)),
			in.EndText(), steps, units.Duration(in.Lost), cmp.Or(in.ResumeFrom, "-"))
	}
	tw.Flush()
	for _, in := range r.Incarnations {
		if in.Message != "" && in.Cause != EndRequeued {
			fmt.Fprintf(w, "  restart %d: %s\n", in.Restart, in.Message)
		}
	}
	if ws := r.Waits(); len(ws) > 0 {
		var ds []string
		for _, x := range ws {
			ds = append(ds, units.Duration(x.To.Sub(x.From)))
		}
		fmt.Fprintf(w, "requeue waits: %s (total %s)\n", strings.Join(ds, ", "), units.Duration(t.Waiting))
	}
}

// writeCheckpoints prints the count of committed checkpoints and a row for each.
func (r *Report) writeCheckpoints(w io.Writer) {
	fmt.Fprintf(w, "\ncheckpoints: %d committed\n", len(r.Checkpoints))
	if len(r.Checkpoints) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  tag\tstep\tsize\tsave\tcommit\tcommitted\trestart")
	for _, c := range r.Checkpoints {
		save := "-"
		if c.Save > 0 {
			save = units.Duration(c.Save)
		}
		fmt.Fprintf(tw, "  %s\t%d\t%s\t%s\t%s\t%s\t%d\n", c.Tag, c.Step, units.Bytes(c.Bytes), save, units.Duration(c.Commit), c.Time.UTC().Format("15:04:05Z"), c.Restart)
	}
	tw.Flush()
}

// writeThroughput compares the predicted step time with the one observed
// while training and the one the whole run achieved.
func (r *Report) writeThroughput(w io.Writer, t Totals) {
	fmt.Fprintln(w, "\nthroughput:")
	pred := 0.0
	if r.Start != nil {
		pred = r.Start.StepSeconds
	}
	if pred > 0 {
		fmt.Fprintf(w, "  predicted: %.3g s/step, MFU %.1f%%\n", pred, 100*r.Start.MFU)
	} else {
		fmt.Fprintln(w, "  predicted: none (the layout was pinned without a model)")
	}
	if obs := r.observedStep(); obs > 0 {
		fmt.Fprintf(w, "  observed while training (newest incarnation): %.3g s/step", obs)
		if pred > 0 {
			fmt.Fprintf(w, " (%.0f%% of predicted speed, MFU %.1f%%)", 100*pred/obs, 100*r.Start.MFU*pred/obs)
		}
		fmt.Fprintln(w)
	}
	if t.Steps > 0 && t.Wall > 0 {
		eff := t.Wall.Seconds() / float64(t.Steps)
		fmt.Fprintf(w, "  effective over the run: %.3g s/step (%d steps in %s, with waits, losses and checkpoints)", eff, t.Steps, units.Duration(t.Wall))
		if pred > 0 {
			fmt.Fprintf(w, ": %.0f%% of predicted", 100*pred/eff)
		}
		fmt.Fprintln(w)
	} else {
		fmt.Fprintln(w, "  observed: none (the trainer reported no progress: see Checkpointer.report_progress)")
	}
}

// observedStep is the step time of the newest incarnation that reported
// at least two steps.
func (r *Report) observedStep() float64 {
	for i := len(r.Incarnations) - 1; i >= 0; i-- {
		in := r.Incarnations[i]
		var ps []Event
		for _, p := range r.Progress {
			if p.Restart == in.Restart && !p.Time.Before(in.Start) {
				ps = append(ps, p)
			}
		}
		sort.Slice(ps, func(a, b int) bool { return ps[a].Time.Before(ps[b].Time) })
		if len(ps) >= 2 && ps[len(ps)-1].Step > ps[0].Step {
			return ps[len(ps)-1].Time.Sub(ps[0].Time).Seconds() / float64(ps[len(ps)-1].Step-ps[0].Step)
		}
	}
	return 0
}
