package checkpoint

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/trainrun/trainrun/internal/atomicfile"
	"github.com/trainrun/trainrun/internal/safefs"
)

// Cause is how an incarnation of the job ended.
type Cause string

const (
	CausePreempted Cause = "preempted"
	CauseTimeLimit Cause = "timelimit"
	CauseNodeFail  Cause = "node-fail"
	CauseCrash     Cause = "crash"
	CauseFinished  Cause = "finished"
	CauseCancelled Cause = "cancelled"
	// CauseDisk: a checkpoint the run needed could not be saved or
	// committed (full, over-quota or failing file system); the job is
	// requeued from the previous latest.
	CauseDisk Cause = "disk"
	// CauseHang: ranks stopped making progress (hang detection).
	CauseHang Cause = "hang"
	// CauseLossSpike: trainrun killed the step for a loss spike or NaN
	// (--loss-spike-action rollback or stop, issue 31).
	CauseLossSpike Cause = "loss-spike"
	// CauseMigrated: trainrun checkpointed the job and requeued it into
	// another of its partitions, where it finishes sooner (--migrate).
	CauseMigrated Cause = "migrated"
	// CauseStraggler: a failed node only, never an end: a rank whose step
	// time stayed well above its peers' (recorded under the policy's
	// StragglerAction=exclude).
	CauseStraggler Cause = "straggler"
	// CauseNodeFault: a failed node only, never an end: the node of the
	// rank whose failure's class the policy excludes on (RestartOn=
	// hardware=exclude, nccl=exclude: an XID, an ECC error, a collective's
	// error of its own; issue 31).
	CauseNodeFault Cause = "node-fault"
)

// FailedNode is a node a failure points to: the first failing rank's node
// (CauseCrash), a node lost with the job's processes on it (CauseNodeFail),
// the node of a hung or straggling rank (CauseHang; Detail says which rank
// and GPU). Which of them a requeued job excludes is the run controller's
// decision (wrapper/internal/run.JudgeNodes): only evidence against the
// node, never a crash.
type FailedNode struct {
	Node   string `json:"node"`
	Cause  Cause  `json:"cause"`
	Detail string `json:"detail,omitempty"` // e.g. "rank 3 (GPU 1) exited 1 first"
	Exit   int    `json:"exit,omitempty"`   // CauseCrash: the rank's exit code (128+n for signal n)
	State  string `json:"state,omitempty"`  // CauseHang: the /proc state letter of the suspect's process (D: in the kernel)
}

// Event is one line of .trainrun/history.jsonl. An incarnation writes a
// "start" event when it begins and an "end" event when it ends; an
// incarnation killed too hard to write its end has a start only. A "ckpt"
// event records how long one checkpoint took, from the request (or Slurm's
// signal) to its commit: the grace-budget checks read them.
type Event struct {
	Time    time.Time `json:"time"`
	Type    string    `json:"type"` // "start", "end" or "ckpt"
	JobID   string    `json:"job_id"`
	Restart int       `json:"restart"` // SLURM_RESTART_COUNT
	Node    string    `json:"node,omitempty"`
	// start events
	WorldSize  int    `json:"world_size,omitempty"`
	ResumeFrom string `json:"resume_from,omitempty"` // the tag resumed from, "" on a first start
	Container  string `json:"container,omitempty"`   // the image the ranks ran in and how: "IMAGE (pyxis|podman|apptainer|enroot)"
	// end events
	Cause         Cause        `json:"cause,omitempty"`
	LastCommitted string       `json:"last_committed,omitempty"` // newest committed tag at the end
	Progress      int64        `json:"progress,omitempty"`       // its step (StepOf), -1 if unknown
	Message       string       `json:"message,omitempty"`
	FailedNodes   []FailedNode `json:"failed_nodes,omitempty"`
	// FailureClass: a failed step's class (oom, nccl, hardware, user,
	// signal, unknown: internal/failclass) and the line that says so.
	FailureClass    string `json:"failure_class,omitempty"`
	FailureEvidence string `json:"failure_evidence,omitempty"`
	// ResizeNodes: the controller gave the requeued job this many nodes
	// for its next incarnation (issue 34: data parallelism resized within
	// the job's --min-gpus/--max-gpus), ResizeWhy its figures; 0: the
	// same size.
	ResizeNodes int    `json:"resize_nodes,omitempty"`
	ResizeWhy   string `json:"resize_why,omitempty"`
	// ckpt events
	Tag         string  `json:"tag,omitempty"`          // the committed checkpoint
	CkptSeconds float64 `json:"ckpt_seconds,omitempty"` // request or signal -> committed
	Why         string  `json:"why,omitempty"`          // what asked for it (time-limit, preempted, ...)
	// badput events (issue 31): where a restart inside the allocation's
	// time went, in seconds by part (detect, stop, decide, health,
	// relaunch, first_step, redone).
	Badput map[string]float64 `json:"badput,omitempty"`
}

// Incarnation is one run of the job (one value of SLURM_RESTART_COUNT),
// folded from its events.
type Incarnation struct {
	JobID      string
	Restart    int
	WorldSize  int
	ResumeFrom string
	Start, End time.Time // End is zero if no end event was written
	Cause      Cause     // "" if no end event was written (killed hard: count it as a crash)
	// LastCommitted and Progress are from the end event.
	LastCommitted string
	Progress      int64
	Message       string
	FailedNodes   []FailedNode
	// FailureClass and FailureEvidence are the end's (Event's).
	FailureClass, FailureEvidence string
	// ResizeNodes and ResizeWhy are the end's: the next incarnation's size
	// when the controller resized the requeued job (0: the same).
	ResizeNodes int
	ResizeWhy   string
}

// History is the store's job history file.
type History struct{ s *Store }

// History returns the store's history.
func (s *Store) History() History { return History{s} }

// Append adds one event durably (one write with O_APPEND, then fsync). The
// controller is the only writer; a torn last line left by a kill is skipped
// by Load.
func (h History) Append(e Event) error {
	if err := h.s.mkMeta(); err != nil {
		return err
	}
	if e.Time.IsZero() {
		e.Time = h.s.opts.Now().UTC()
	}
	if e.Type != "start" && e.Type != "end" && e.Type != "ckpt" && e.Type != "badput" {
		return fmt.Errorf("history event type %q; use start, end or ckpt", e.Type)
	}
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	p := h.s.historyPath()
	if err := atomicfile.AppendLine(p, b, 0o644, false); err != nil {
		return fmt.Errorf("history: %w", err)
	}
	return nil
}

// Events reads every event, skipping lines that do not parse (a torn write).
func (h History) Events() ([]Event, error) {
	b, err := safefs.ReadFile(h.s.historyPath(), maxHistoryBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("history %s: %w", h.s.historyPath(), err)
	}
	var out []Event
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var e Event
		if json.Unmarshal(sc.Bytes(), &e) == nil && (e.Type == "start" || e.Type == "end" || e.Type == "ckpt") {
			out = append(out, e)
		}
	}
	return out, sc.Err()
}

// Load folds the events into incarnations, in the order they started.
func (h History) Load() ([]Incarnation, error) {
	evs, err := h.Events()
	if err != nil {
		return nil, err
	}
	var out []Incarnation
	find := func(job string, restart int) int {
		for i := len(out) - 1; i >= 0; i-- {
			if out[i].JobID == job && out[i].Restart == restart {
				return i
			}
		}
		return -1
	}
	for _, e := range evs {
		if e.Type == "ckpt" {
			continue
		}
		i := find(e.JobID, e.Restart)
		if e.Type == "start" || i < 0 {
			out = append(out, Incarnation{JobID: e.JobID, Restart: e.Restart, Progress: -1})
			i = len(out) - 1
		}
		in := &out[i]
		switch e.Type {
		case "start":
			in.Start, in.WorldSize, in.ResumeFrom = e.Time, e.WorldSize, e.ResumeFrom
		case "end":
			in.End, in.Cause, in.LastCommitted, in.Progress, in.Message = e.Time, e.Cause, e.LastCommitted, e.Progress, e.Message
			in.FailedNodes = e.FailedNodes
			in.FailureClass, in.FailureEvidence = e.FailureClass, e.FailureEvidence
			in.ResizeNodes, in.ResizeWhy = e.ResizeNodes, e.ResizeWhy
		}
	}
	return out, nil
}

// CkptTimes returns the "ckpt" events, oldest first: how long each measured
// checkpoint took from its request to its commit.
func (h History) CkptTimes() ([]Event, error) {
	evs, err := h.Events()
	if err != nil {
		return nil, err
	}
	var out []Event
	for _, e := range evs {
		if e.Type == "ckpt" {
			out = append(out, e)
		}
	}
	return out, nil
}

// FailuresWithoutProgress counts the incarnations at the end of incs that
// failed (crash, node-fail, disk, hang, or killed before writing an end) without moving
// training past the best step committed by any incarnation before them. The
// controller stops requeueing when it reaches the policy's limit.
func FailuresWithoutProgress(incs []Incarnation) int {
	best := make([]int64, len(incs)+1) // best[i]: highest progress of incs[:i]
	best[0] = -1
	for i, in := range incs {
		best[i+1] = max(best[i], in.Progress)
	}
	n := 0
	for i := len(incs) - 1; i >= 0; i-- {
		in := incs[i]
		failed := in.Cause == CauseCrash || in.Cause == CauseNodeFail || in.Cause == CauseDisk || in.Cause == CauseHang || in.Cause == ""
		if !failed || in.Progress > best[i] {
			return n
		}
		n++
	}
	return n
}

// FailuresBeforeResume is FailuresWithoutProgress for a run about to start
// from the checkpoint tagged resume: a resume point past every step the
// history's runs ended at is progress none of them could record (a
// node-local checkpoint the job epilog drained after they died, which this
// run's store then committed), so the failures before it are no crash loop.
func FailuresBeforeResume(incs []Incarnation, resume string) int {
	if step := StepOf(resume); resume != "" && step >= 0 && !slices.ContainsFunc(incs, func(in Incarnation) bool { return in.Progress >= step }) {
		return 0
	}
	return FailuresWithoutProgress(incs)
}

// Finished is the content of .trainrun/finished.
type Finished struct {
	Time    time.Time `json:"time"`
	JobID   string    `json:"job_id"`
	Restart int       `json:"restart"`
	Tag     string    `json:"tag,omitempty"` // the final committed checkpoint, if any
	Run     string    `json:"run,omitempty"` // the run's name (trainrun run --name); empty before names existed
}

// MarkFinished records, durably, that the run finished: it must never be
// requeued again.
func (s *Store) MarkFinished(f Finished) error {
	if err := s.mkMeta(); err != nil {
		return err
	}
	if f.Time.IsZero() {
		f.Time = s.opts.Now().UTC()
	}
	b, err := json.Marshal(f)
	if err != nil {
		return err
	}
	return s.writeFileAtomic(s.finishedPath(), append(b, '\n'), "finished")
}

// Finished reads the finished marker; ok is false when the run has not finished.
func (s *Store) Finished() (f Finished, ok bool, err error) {
	b, err := safefs.ReadFile(s.finishedPath(), maxSmallFile)
	if errors.Is(err, fs.ErrNotExist) {
		return f, false, nil
	}
	if err != nil {
		return f, false, err
	}
	// An unreadable marker still means finished: it is written atomically,
	// so only a person editing it can break it, and requeueing a finished run
	// is the worse mistake.
	_ = json.Unmarshal(b, &f)
	return f, true, nil
}

// Request is a checkpoint request written by `trainrun ckpt request` into
// .trainrun/request; the controller polls for it (TakeRequest).
type Request struct {
	Time time.Time `json:"time"`
	// Then is what to do after the checkpoint: "continue" (keep
	// training), "stop" (exit, no requeue) or "requeue".
	Then   string `json:"then"`
	By     string `json:"by,omitempty"` // user@host
	Reason string `json:"reason,omitempty"`
}

// RequestThen lists the accepted values of Request.Then.
var RequestThen = []string{"continue", "stop", "requeue"}

// PutRequest writes a request atomically (a later one replaces an earlier
// one not yet taken).
func (s *Store) PutRequest(r Request) error {
	ok := false
	for _, t := range RequestThen {
		ok = ok || r.Then == t
	}
	if !ok {
		return fmt.Errorf("checkpoint request: then=%q; use continue, stop or requeue", r.Then)
	}
	if err := s.mkMeta(); err != nil {
		return err
	}
	if r.Time.IsZero() {
		r.Time = s.opts.Now().UTC()
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return s.writeFileAtomic(s.requestPath(), append(b, '\n'), "request")
}

// TakeRequest removes and returns the pending request, if any (nil when
// none). It renames the file away first, so a request is taken once even if
// the controller is killed meanwhile.
func (s *Store) TakeRequest() (*Request, error) {
	taken := filepath.Join(s.dir, metaDir, fmt.Sprintf("request.taken%s%d", tmpInfix, s.opts.Now().UnixNano()))
	if err := os.Rename(s.requestPath(), taken); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("take checkpoint request %s: %w", s.requestPath(), err)
	}
	b, err := safefs.ReadFile(taken, maxSmallFile)
	os.Remove(taken)
	if err != nil {
		return nil, err
	}
	var r Request
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("checkpoint request %s is not valid JSON: %v", s.requestPath(), err)
	}
	return &r, nil
}
