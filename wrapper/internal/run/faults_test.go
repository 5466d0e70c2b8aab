package run

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trainrun/trainrun/checkpoint"
	"github.com/trainrun/trainrun/internal/slurm"
	"github.com/trainrun/trainrun/wrapper/internal/launch"
)

func faultRunner(t *testing.T, log *bytes.Buffer) *runner {
	var slots []rankSlot
	for i, n := range []string{"n1", "n1", "n2", "n2"} {
		slots = append(slots, rankSlot{Rank: i, Node: n, GPU: i % 2})
	}
	return &runner{env: &Deps{Stderr: log}, placed: placed{Slots: slots}, alloc: &slurm.Allocation{JobID: "77", Nodes: []string{"n1", "n2"}, TasksPerNode: 2}}
}

// A node none of whose ranks reported an exit is lost; otherwise the first
// failing rank's node is blamed, as a crash.
func TestStepFailedNodes(t *testing.T) {
	var log bytes.Buffer
	var r *runner
	t0 := time.Now()
	fail := &launch.Event{Msg: launch.Msg{Rank: 0, Code: 1}, At: t0}
	// n2's connections still open, or one closed before rank 0's failure:
	// the node is lost.
	for _, closed := range []map[int]time.Time{nil, {2: t0.Add(-time.Second), 3: t0.Add(time.Second)}} {
		log.Reset()
		r = faultRunner(t, &log)
		got := r.stepFailedNodes(1, None, stepResult{Exits: map[int]int{0: 1, 1: 1}, FirstFail: fail, Closed: closed})
		if len(got) != 1 || got[0].Node != "n2" || got[0].Cause != checkpoint.CauseNodeFail || !strings.Contains(got[0].Detail, "ranks 2,3") {
			t.Fatalf("lost node (closed %v): %+v", closed, got)
		}
		if !strings.Contains(log.String(), "node n2: node-fail") {
			t.Errorf("log: %s", log.String())
		}
	}
	// Every connection of n2 closed after rank 0 failed: srun ended those
	// ranks with the step (chaos seed 7545823044724849540: rank 0's
	// rendezvous port was taken); rank 0's failure is the evidence.
	log.Reset()
	r = faultRunner(t, &log)
	got := r.stepFailedNodes(1, None, stepResult{Exits: map[int]int{0: 1, 1: 1}, FirstFail: fail,
		Closed: map[int]time.Time{2: t0.Add(time.Millisecond), 3: t0.Add(2 * time.Millisecond)}})
	if len(got) != 1 || got[0].Node != "n1" || got[0].Cause != checkpoint.CauseCrash {
		t.Fatalf("srun cleared n2: %+v", got)
	}
	if !strings.Contains(log.String(), "node n2: ranks 2,3 reported no exit, but their connections closed after rank 0's failure") {
		t.Errorf("log: %s", log.String())
	}
	r = faultRunner(t, &log)
	got = r.stepFailedNodes(1, None, stepResult{Exits: map[int]int{0: 0, 1: 0, 2: 0, 3: 134}, FirstFail: &launch.Event{Msg: launch.Msg{Rank: 3, Code: 134}}})
	if len(got) != 1 || got[0].Node != "n2" || got[0].Cause != checkpoint.CauseCrash || got[0].Detail != "rank 3 (GPU 1) failed first with exit 134" {
		t.Fatalf("crash: %+v", got)
	}
	// A cancelled or successful step, or one no rank reported from, blames no node.
	for _, c := range []struct {
		code   int
		reason StopReason
		exits  map[int]int
	}{{0, None, map[int]int{0: 0}}, {143, Cancelled, map[int]int{0: 143}}, {1, None, nil}} {
		r = faultRunner(t, &log)
		if got := r.stepFailedNodes(c.code, c.reason, stepResult{Exits: c.exits}); len(got) != 0 {
			t.Errorf("%+v blamed %+v", c, got)
		}
	}
}

// After the requeue, the history's lost node is added to the job's
// exclusions, through scontrol update.
func TestExcludeBadNodes(t *testing.T) {
	var log bytes.Buffer
	r := faultRunner(t, &log)
	s, err := checkpoint.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	r.ckpt.store = s
	if err := s.History().Append(checkpoint.Event{Type: "end", JobID: "77", Cause: checkpoint.CauseNodeFail,
		FailedNodes: []checkpoint.FailedNode{{Node: "n2", Cause: checkpoint.CauseNodeFail}}}); err != nil {
		t.Fatal(err)
	}
	fake := &slurm.Canned{Out: map[string]string{
		"scontrol show job -o 77":                     "JobId=77 JobName=x JobState=RUNNING ReqNodeList=n[1-2] ExcNodeList=n9 NodeList=n[1-2]",
		"scontrol update jobid=77 ExcNodeList=n[2,9]": "",
	}}
	r.env.Slurm = slurm.Client{Run: fake.Run}
	r.excludeBadNodes(r.badNodesToExclude())
	if fmt.Sprint(fake.Calls) != "[scontrol show job -o 77 scontrol update jobid=77 ExcNodeList=n[2,9]]" {
		t.Errorf("calls %v", fake.Calls)
	}
	if !strings.Contains(log.String(), "the job asks for n2 by name (--nodelist=n[1-2])") {
		t.Errorf("no warning about the job's own request for n2: %s", log.String())
	}
	if !strings.Contains(log.String(), "excluding n2 from the requeued job (ExcNodeList=n[2,9])") || !strings.Contains(log.String(), "the requeued job excludes n2") || !strings.Contains(log.String(), "state=drain") {
		t.Errorf("log: %s", log.String())
	}
}

// A rank SIGKILLed from outside in two runs is no evidence against its
// node: nothing is excluded, no scontrol update runs, and the log says why
// (issue 35, chaos seed 1796298728052878726).
func TestExcludeBadNodesKeepsTwiceKilledNode(t *testing.T) {
	var log bytes.Buffer
	r := faultRunner(t, &log)
	s, err := checkpoint.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	r.ckpt.store = s
	for range 2 {
		if err := s.History().Append(checkpoint.Event{Type: "end", JobID: "77", Cause: checkpoint.CauseCrash,
			FailedNodes: []checkpoint.FailedNode{{Node: "n1", Cause: checkpoint.CauseCrash, Exit: 137, Detail: "rank 0 (GPU 0) failed first with exit 137"}}}); err != nil {
			t.Fatal(err)
		}
	}
	fake := &slurm.Canned{Out: map[string]string{}}
	r.env.Slurm = slurm.Client{Run: fake.Run}
	r.excludeBadNodes(r.badNodesToExclude())
	if len(fake.Calls) != 0 {
		t.Errorf("calls %v, want none", fake.Calls)
	}
	if !strings.Contains(log.String(), "node n1: kept in the requeued job: its rank failed first: exit 137, killed by SIGKILL") || strings.Contains(log.String(), "excluding") {
		t.Errorf("log: %s", log.String())
	}
}

// A failed save is discarded, reported with the file system, and counted
// once; a stop after it learns of it.
func TestDiscardFailedSavesReports(t *testing.T) {
	var log bytes.Buffer
	r := faultRunner(t, &log)
	dir := t.TempDir()
	s, err := checkpoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	r.ckpt.store, r.dirs.ckptDir = s, dir
	rec := &recorder{}
	r.sess.obs = rec
	for rank := 0; rank < 4; rank++ {
		p := checkpoint.FailedMarkerPath(s.TagDir("step-20"), rank, checkpoint.DiskFull)
		mustWrite(t, p)
	}
	r.discardFailedSaves(nil)
	if !strings.Contains(log.String(), "checkpoint step-20 was not saved: file system") || !strings.Contains(log.String(), "ranks 0,1,2,3 failed") {
		t.Errorf("log: %s", log.String())
	}
	if n := countEvents(rec, "ckpt-fail", checkpoint.DiskFull); n != 1 {
		t.Errorf("%d disk-full ckpt-fail events, want 1", n)
	}
	if r.saveFailedSince(r.sess.faults.saveFailAt) == "" {
		t.Error("the failed save is not visible to the stop")
	}
	r.discardFailedSaves(nil) // nothing left: no second report
	if n := countEvents(rec, "ckpt-fail", checkpoint.DiskFull); n != 1 {
		t.Errorf("%d disk-full ckpt-fail events after a second pass, want 1", n)
	}
}

func countEvents(r *recorder, kind, cause string) int {
	n := 0
	for _, e := range r.evs {
		if string(e.Kind) == kind && e.Cause == cause {
			n++
		}
	}
	return n
}

func mustWrite(t *testing.T, p string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

// The requeue's SIGTERM kills the first scontrol update: it is retried.
func TestExcludeBadNodesRetries(t *testing.T) {
	var log bytes.Buffer
	r := faultRunner(t, &log)
	var calls []string
	r.env.Slurm = slurm.Client{Run: func(ctx context.Context, name string, args ...string) ([]byte, error) {
		calls = append(calls, name+" "+strings.Join(args, " "))
		if len(calls) == 1 {
			return nil, errors.New("signal: terminated")
		}
		return nil, nil
	}}
	r.excludeBadNodes("n2", []string{"n2"})
	if len(calls) != 2 || calls[1] != "scontrol update jobid=77 ExcNodeList=n2" || !strings.Contains(log.String(), "the requeued job excludes n2") {
		t.Errorf("calls %q, log %s", calls, log.String())
	}
}

// A checkpoint complete but not committed yet when a later save fails is
// committed first: the message names it as the latest that stays.
func TestDiscardFailedSavesCommitsFirst(t *testing.T) {
	var log bytes.Buffer
	r := faultRunner(t, &log)
	dir := t.TempDir()
	s, err := checkpoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	r.ckpt.store, r.dirs.ckptDir = s, dir
	for rank := 0; rank < 4; rank++ {
		mustWrite(t, checkpoint.DoneMarkerPath(s.TagDir("step-10"), rank))
		mustWrite(t, checkpoint.FailedMarkerPath(s.TagDir("step-20"), rank, checkpoint.DiskFull))
	}
	r.discardFailedSaves(storeAdapter{s})
	if r.getLastTag() != "step-10" || !strings.Contains(log.String(), "the latest committed checkpoint stays step-10") {
		t.Errorf("latest %q; log: %s", r.getLastTag(), log.String())
	}
}
