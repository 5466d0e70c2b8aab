package run

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/trainrun/trainrun/checkpoint"
	"github.com/trainrun/trainrun/checkpoint/checkpointtest"
	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
	"github.com/trainrun/trainrun/wrapper/obs"
)

// recorder keeps the events the controller reports.
type recorder struct{ evs []obs.Event }

func (r *recorder) Observe(e obs.Event)  { r.evs = append(r.evs, e) }
func (r *recorder) Close() time.Duration { return 0 }

func (r *recorder) kinds() string {
	var k []string
	for _, e := range r.evs {
		k = append(k, string(e.Kind))
	}
	return strings.Join(k, " ")
}

// How the controller's outcome becomes the end event (cause, crash, requeued).
func TestObserveEndClassifies(t *testing.T) {
	for _, tc := range []struct {
		name     string
		err      error
		recorded checkpoint.Cause
		kinds    string
		cause    string
		crash    string
		requeued bool
	}{
		{"finished", nil, checkpoint.CauseFinished, "end", obs.EndFinished, "", false},
		{"checkpointed and requeued", withCode(exitcode.Requeued, exitcode.ErrSilent), checkpoint.CausePreempted, "end", obs.EndRequeued, "", true},
		{"stopped", withCode(exitcode.Stopped, errors.New("cancelled")), checkpoint.CauseCancelled, "end", obs.EndStopped, "", false},
		{"requeue limit", withCode(exitcode.RequeueLimit, errors.New("limit")), checkpoint.CauseTimeLimit, "end", obs.EndLimit, "", false},
		{"step failed", withCode(exitcode.StepFailed, errors.New("rank 1 failed")), checkpoint.CauseCrash, "end", obs.EndCrash, obs.CrashStepFailed, false},
		{"failed and requeued (--max-failures)", withCode(exitcode.Requeued, exitcode.ErrSilent), checkpoint.CauseCrash, "end", obs.EndCrash, obs.CrashStepFailed, true},
		{"failures without progress", withCode(exitcode.RequeueLimit, errors.New("3 in a row")), checkpoint.CauseCrash, "end", obs.EndCrash, obs.CrashStepFailed, false},
		{"command not found", withCode(exitcode.NotFound, errors.New("not found")), checkpoint.CauseCrash, "end", obs.EndCrash, obs.CrashNotFound, false},
		{"no checkpoint after a stop", withCode(exitcode.Checkpoint, errors.New("no new complete checkpoint")), "", "ckpt-fail end", obs.EndCrash, obs.CrashCheckpoint, false},
		{"srun failed", withCode(exitcode.Slurm, errors.New("srun")), "", "end", obs.EndCrash, obs.CrashSlurm, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{}
			r := &runner{sess: session{obs: rec, endCause: tc.recorded}, dirs: runDirs{jobDir: t.TempDir()}}
			r.observeEnd(tc.err)
			if rec.kinds() != tc.kinds {
				t.Fatalf("events %q, want %q", rec.kinds(), tc.kinds)
			}
			e := rec.evs[len(rec.evs)-1]
			if e.Cause != tc.cause || e.Crash != tc.crash || e.Requeued != tc.requeued || e.Exit != exitcode.Of(tc.err) {
				t.Errorf("end %+v, want cause %s crash %q requeued %v exit %d", e, tc.cause, tc.crash, tc.requeued, exitcode.Of(tc.err))
			}
			if tc.err != nil && !errors.Is(tc.err, exitcode.ErrSilent) && e.Message == "" {
				t.Error("no message")
			}
		})
	}
}

// A commit through the controller's store reports the checkpoint's size,
// step, when its last rank finished and how long the commit took.
func TestObservedStoreReportsCommit(t *testing.T) {
	dir := t.TempDir()
	st, err := checkpoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	done := time.Now().Add(-3 * time.Second).Truncate(time.Second)
	for rank, size := range []int{1000, 2500} {
		ckpt := st.TagDir("step-120")
		checkpointtest.SaveRank(t, ckpt, rank, checkpointtest.File{Name: "rank" + strconv.Itoa(rank) + ".pt", Data: string(make([]byte, size))})
		os.Chtimes(checkpoint.DoneMarkerPath(ckpt, rank), done.Add(time.Duration(rank)*time.Second), done.Add(time.Duration(rank)*time.Second))
	}
	rec := &recorder{}
	r := &runner{sess: session{obs: rec}}
	s := &observedStore{ckptStore: storeAdapter{st}, st: st, r: r}
	tag, changed, err := s.CommitComplete(2)
	if err != nil || !changed || tag != "step-120" {
		t.Fatalf("CommitComplete: %q %v %v", tag, changed, err)
	}
	if rec.kinds() != "ckpt-commit" {
		t.Fatalf("events %q", rec.kinds())
	}
	c := rec.evs[0].Ckpt
	if c.Tag != "step-120" || c.Step != 120 || c.Bytes != 3500 || !c.CompleteAt.Equal(done.Add(time.Second)) || c.Commit <= 0 {
		t.Errorf("commit event %+v; want step-120, step 120, 3500 bytes, complete at %s (rank 1's marker)", c, done.Add(time.Second))
	}
	// Nothing new: no event.
	if _, changed, _ := s.CommitComplete(2); changed || len(rec.evs) != 1 {
		t.Errorf("a second CommitComplete reported again: %q", rec.kinds())
	}
}
