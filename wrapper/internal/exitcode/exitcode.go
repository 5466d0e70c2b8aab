// Package exitcode is trainrun's one table of exit codes. Job scripts
// branch on these; `trainrun --help` prints them (wrapper/exitcodes.go holds
// the descriptions). Codes are stable: add new ones, never renumber.
package exitcode

import "errors"

const (
	OK           = 0 // success: the command did what was asked (a run finished)
	Failure      = 1 // internal error: a bug or an unexpected system failure
	Usage        = 2 // bad flags or bad input file: the message names the input and the fix
	NoFit        = 3 // no layout fits (or a pinned layout does not fit): the message says what would
	Slurm        = 4 // the allocation is unusable: not inside one, bad SLURM_* values, srun missing, no GPUs
	StepFailed   = 5 // the training step failed: a task exited non-zero or was killed
	Requeued     = 6 // checkpointed and requeued: the job will run again, the script should exit
	Stopped      = 7 // checkpointed and stopped: no requeue (policy, --no-requeue, or cancelled)
	RequeueLimit = 8 // gave up: requeue limit or repeated failures without progress
	Checkpoint   = 9 // a checkpoint could not be verified or committed
	// Added for issue 30 (exit codes by cause): input that is well-formed
	// but asks for something that cannot run, apart from NoFit ("more
	// memory would help"), because the fix differs.
	Layout     = 10 // the layout or batch cannot be split over the GPUs (divisibility): change the degrees, the batch or the GPU count
	Capability = 11 // the GPU or cluster lacks what the job asks for (fp8 without FP8 tensor cores, offload=nvme without --nvme-bw)
	// Added for issue 32: trainrun run --stop-if-off-track stopped the run
	// (checkpointed) because its loss forecast will not reach the target.
	OffTrack = 12
	// Added for issue 31 (failure classes): the step failed with the
	// trainer's own error (a Python exception that is not an OOM, NCCL or
	// hardware fault; bad arguments): stopped at once, no restart or
	// requeue, since the same error recurs from the same checkpoint.
	UserError   = 13
	NotFound    = 127 // the training command does not exist on the node
	Interrupted = 130 // interrupted by Ctrl-C / SIGTERM before the step started
)

// Error carries an exit code with an error. Wrap with With.
type Error struct {
	Code int
	Err  error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// With attaches an exit code to err (nil stays nil).
func With(code int, err error) error {
	if err == nil {
		return nil
	}
	return &Error{Code: code, Err: err}
}

// ErrHelpShown is returned after printing --help: exit 0, print nothing more.
var ErrHelpShown = errors.New("help shown")

// ErrSilent wraps an error already reported to the user.
var ErrSilent = errors.New("already reported")

// Of is err's exit code: OK for nil or ErrHelpShown, the code With attached,
// else Failure.
func Of(err error) int {
	if err == nil || errors.Is(err, ErrHelpShown) {
		return OK
	}
	var ee *Error
	if errors.As(err, &ee) {
		return ee.Code
	}
	return Failure
}
