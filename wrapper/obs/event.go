package obs

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/trainrun/trainrun/internal/safefs"
)

// Kind is what happened.
type Kind string

const (
	// KindStart: an incarnation of the job began (the controller has a plan
	// and launches the step). Start is set.
	KindStart Kind = "start"
	// KindCkptRequest: trainrun asked the trainers for a checkpoint. Why is
	// set (time-limit, signal, request, ...).
	KindCkptRequest Kind = "ckpt-request"
	// KindCkptCommit: a checkpoint was committed. Ckpt is set.
	KindCkptCommit Kind = "ckpt-commit"
	// KindCkptFail: a checkpoint could not be completed or committed. Cause
	// is set (commit, incomplete, ...).
	KindCkptFail Kind = "ckpt-fail"
	// KindDrain: a drain of node-local checkpoint files to the durable store
	// finished. Drain is set.
	KindDrain Kind = "drain"
	// KindInterrupt: the run is being stopped from outside or by its clock.
	// Cause is one of the Interrupt* values.
	KindInterrupt Kind = "interrupt"
	// KindProgress: the trainer reported a step (see the progress protocol).
	KindProgress Kind = "progress"
	// KindEnd: the incarnation ends. Cause is one of the End* values; Exit,
	// Message and Requeued say more.
	KindEnd Kind = "end"
	// KindRestart: the step failed or hung and is relaunched inside the
	// same allocation, without a requeue (trainrun run --max-restarts): the
	// incarnation's step so far ends (Fault, FailedNodes, Message) and a new
	// one begins in the same job (Start: its ResumeFrom, Nodes, GPUs).
	KindRestart Kind = "restart"
	// KindHealth: a node failed the health pass before a step (issue 31)
	// and is kept out of it. FailedNodes names it, Cause is the failed
	// check (its Cause field too: gpus, ib, space, script), Why when the
	// pass ran ("before the first step", "before restart 1").
	KindHealth Kind = "health"
	// KindBadput: a restart inside the allocation reached its first new
	// step; Badput is where its time went, in seconds by part (detect,
	// stop, decide, health, relaunch, first_step, redone), Step the steps
	// redone.
	KindBadput Kind = "badput"
)

// Interruption causes (Event.Cause of KindInterrupt).
const (
	InterruptPreempted = "preempted"  // Slurm's SIGTERM while the job stays RUNNING
	InterruptTimeLimit = "time-limit" // trainrun's clock, or Slurm's SIGTERM at the limit
	InterruptSignal    = "signal"     // a signal to trainrun (#SBATCH --signal=B:USR1, scancel --signal)
	InterruptCancelled = "cancelled"  // scancel, Ctrl-C
	InterruptRequested = "requested"  // trainrun ckpt request --then stop
)

// End causes (Event.Cause of KindEnd).
const (
	EndFinished = "finished" // training finished; the run is over
	EndRequeued = "requeued" // checkpointed and requeued
	EndStopped  = "stopped"  // checkpointed (or cancelled) and stopped, no requeue
	EndLimit    = "requeue-limit"
	EndCrash    = "crash" // the step failed; Crash says how
	// EndRestarted: the step was restarted inside the allocation (a
	// KindRestart, not a KindEnd: report only).
	EndRestarted = "restarted"
)

// Crash causes (Event.Crash of a KindEnd with Cause EndCrash).
const (
	CrashStepFailed = "step-failed" // a task exited non-zero or was killed
	CrashNotFound   = "not-found"   // the training command is missing
	CrashCheckpoint = "checkpoint"  // no verifiable checkpoint where one was needed
	CrashSlurm      = "slurm"       // srun failed
	CrashKilled     = "killed"      // the controller was killed before it wrote an end (report only)
)

// Event is one line of JOBDIR/events.jsonl and the controller's message to
// the observer.
type Event struct {
	Time    time.Time `json:"time"`
	Kind    Kind      `json:"kind"`
	JobID   string    `json:"job_id,omitempty"`
	Restart int       `json:"restart"` // SLURM_RESTART_COUNT of the incarnation

	Start *Start `json:"start,omitempty"`
	Ckpt  *Ckpt  `json:"ckpt,omitempty"`
	Drain *Drain `json:"drain,omitempty"`
	// Forecast: KindForecast (forecast_metrics.go).
	Forecast *Forecast `json:"forecast,omitempty"`

	Why      string `json:"why,omitempty"`   // ckpt-request
	Cause    string `json:"cause,omitempty"` // ckpt-fail, interrupt, end
	Crash    string `json:"crash,omitempty"` // end with cause crash
	Exit     int    `json:"exit,omitempty"`  // end: trainrun's exit code
	Message  string `json:"message,omitempty"`
	Step     int64  `json:"step,omitempty"`   // progress
	Tokens   int64  `json:"tokens,omitempty"` // progress
	Requeued bool   `json:"requeued,omitempty"`
	// end: what a failure points to. Fault is the failure's cause (one of
	// the Fault* values); FailedNodes the nodes it blames.
	Fault       string       `json:"fault,omitempty"`
	FailedNodes []FailedNode `json:"failed_nodes,omitempty"`
	// end, restart: a failed step's class (oom, nccl, hardware, user,
	// signal, unknown: internal/failclass) and the line that says so.
	FailureClass    string `json:"failure_class,omitempty"`
	FailureEvidence string `json:"failure_evidence,omitempty"`
	// badput: seconds by part (KindBadput).
	Badput map[string]float64 `json:"badput,omitempty"`
	// migrate: the partitions the job moved from and to (KindMigrate).
	MigrateFrom string `json:"migrate_from,omitempty"`
	MigrateTo   string `json:"migrate_to,omitempty"`
	// resize: the requeued job's nodes before and for its next incarnation
	// (KindResize).
	ResizeFrom int `json:"resize_from_nodes,omitempty"`
	ResizeTo   int `json:"resize_to_nodes,omitempty"`
}

// Restart and failure causes (Event.Fault of a KindEnd; the cause label of
// trainrun_restarts_total, with the interruptions').
const (
	FaultHang  = "hang"  // ranks stopped making progress
	FaultNode  = "node"  // a node was lost with the job's processes
	FaultCrash = "crash" // a rank failed
	FaultDisk  = "disk"  // the checkpoint the stop needed could not be saved
)

// FailedNode is a node a failure points to (the job history's
// checkpoint.FailedNode): an admin drains it.
type FailedNode struct {
	Node   string `json:"node"`
	Cause  string `json:"cause"` // node-fail, hang, crash (the history's causes)
	Detail string `json:"detail,omitempty"`
}

// Start describes an incarnation as it begins.
type Start struct {
	Partition string `json:"partition,omitempty"`
	JobName   string `json:"job_name,omitempty"`
	Run       string `json:"run,omitempty"`   // trainrun run --name (or the derived name)
	Sweep     string `json:"sweep,omitempty"` // TRAINRUN_SWEEP: the sweep or branch set this run is a trial of
	// The container the ranks ran in (--container-image), and how: pyxis,
	// podman, apptainer or enroot; empty: on the host.
	ContainerImage   string `json:"container_image,omitempty"`
	ContainerRuntime string `json:"container_runtime,omitempty"`
	Nodes            int    `json:"nodes"`
	GPUs             int    `json:"gpus"`
	GPUType          string `json:"gpu_type,omitempty"`
	// Layout degrees, e.g. {"tp":4,"pp":2,"dp":4,...}.
	Layout map[string]int `json:"layout,omitempty"`
	// Predictions of the planner; zero when the layout was pinned and not
	// evaluated.
	StepSeconds     float64 `json:"pred_step_s,omitempty"`
	MFU             float64 `json:"pred_mfu,omitempty"`
	TokensPerSecond float64 `json:"pred_tokens_per_s,omitempty"` // whole job
	TokensPerStep   float64 `json:"tokens_per_step,omitempty"`
	// EndTime is the job's end by its time limit (zero if unlimited).
	EndTime time.Time `json:"end_time,omitempty"`
	// CkptLead is how long before EndTime trainrun asks for a checkpoint.
	CkptLead time.Duration `json:"ckpt_lead,omitempty"`
	// GraceBudget is the time a checkpoint may take after a preemption's
	// SIGTERM (the partition's GraceTime or the policy's budget; 0 unknown).
	GraceBudget time.Duration `json:"grace_budget,omitempty"`
	// MaxCkptAge is the policy's bound on the newest checkpoint's age (0 off).
	MaxCkptAge time.Duration `json:"max_ckpt_age,omitempty"`
	ResumeFrom string        `json:"resume_from,omitempty"`
	CkptDir    string        `json:"ckpt_dir,omitempty"`
}

// Ckpt is a committed checkpoint.
type Ckpt struct {
	Tag   string `json:"tag"`
	Step  int64  `json:"step,omitempty"`
	Bytes int64  `json:"bytes"`
	// CompleteAt is when the last rank marked its part done (the newest
	// done marker's modification time; zero if unknown).
	CompleteAt time.Time `json:"complete_at,omitempty"`
	// Save is from trainrun's request (or the preemption's SIGTERM) to
	// CompleteAt; the observer fills it in. 0 for a checkpoint the trainer
	// took on its own schedule. Commit is trainrun's verify and commit.
	Save   time.Duration `json:"save,omitempty"`
	Commit time.Duration `json:"commit"`
}

// Drain is one finished drain of node-local checkpoint files.
type Drain struct {
	Tag      string        `json:"tag"`
	Bytes    int64         `json:"bytes"`
	Duration time.Duration `json:"duration"`
}

// EventsFile is the event log's name in the job directory.
const EventsFile = "events.jsonl"

// appendEvent adds one line with O_APPEND and fsyncs it: the log outlives
// the process, and a later incarnation or `trainrun report` reads it. A torn
// last line (killed writer) is skipped by ReadEvents.
func appendEvent(path string, e Event) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	if fi, err := f.Stat(); err == nil && fi.Size() > 0 {
		if last, err := lastByte(path, fi.Size()); err == nil && last != '\n' {
			b = append([]byte{'\n'}, b...)
		}
	}
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func lastByte(path string, size int64) (byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	b := make([]byte, 1)
	_, err = f.ReadAt(b, size-1)
	return b[0], err
}

// MaxEventsBytes and MaxEvents bound what ReadEvents reads (a run that
// requeues hourly for a year logs tens of thousands of events); a line is
// at most 4 MiB.
const (
	MaxEventsBytes = 64 << 20
	MaxEvents      = 1 << 18
)

// ReadEvents reads JOBDIR/events.jsonl (a plain file, not a link or a FIFO,
// at most MaxEventsBytes); a missing file is no events, lines
// that do not parse are skipped (a torn write).
func ReadEvents(jobDir string) ([]Event, error) {
	evs, _, err := ReadEventsSkipped(jobDir)
	return evs, err
}

// ReadEventsSkipped is ReadEvents, and the line numbers of the lines it
// skipped as no event (a line torn by a crash, or one someone edited), so
// that `trainrun report` can say so instead of saying nothing (issue 30).
func ReadEventsSkipped(jobDir string) ([]Event, []int, error) {
	p := filepath.Join(jobDir, EventsFile)
	b, err := safefs.ReadFile(p, MaxEventsBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("event log %s: %w", p, err)
	}
	var out []Event
	var skipped []int
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for line := 1; sc.Scan(); line++ {
		var e Event
		if json.Unmarshal(sc.Bytes(), &e) == nil && e.Kind != "" {
			if len(out) == MaxEvents {
				return out, skipped, fmt.Errorf("event log %s: more than %d events; the report shows the first %d", p, MaxEvents, MaxEvents)
			}
			out = append(out, e)
		} else if len(bytes.TrimSpace(sc.Bytes())) > 0 {
			skipped = append(skipped, line)
		}
	}
	return out, skipped, sc.Err()
}
