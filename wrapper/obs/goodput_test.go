package obs

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// Two incarnations at 1 s/step on 2 GPUs: the first runs steps 0..20, has
// step-10 committed and loses its node at 25 s; the second resumes from
// step-10 (10 steps redone), has one save refused by a full disk, and
// finishes at step 40. Productive: (10 + 30) steps x 1 s x 2 GPUs = 80 GPU
// s; allocated: (25 + 31) s x 2 GPUs = 112 GPU s.
func goodputEvents() []Event {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	return []Event{
		{Time: at(0), Kind: KindStart, JobID: "9", Restart: 0, Start: &Start{GPUs: 2, Nodes: 2}},
		{Time: at(1), Kind: KindProgress, Restart: 0, Step: 1},
		{Time: at(11), Kind: KindCkptCommit, Restart: 0, Ckpt: &Ckpt{Tag: "step-10", Step: 10, Bytes: 100}},
		{Time: at(20), Kind: KindProgress, Restart: 0, Step: 20},
		{Time: at(25), Kind: KindEnd, Restart: 0, Cause: EndCrash, Crash: CrashStepFailed, Exit: 3, Requeued: true, Fault: FaultNode,
			FailedNodes: []FailedNode{{Node: "n2", Cause: "node-fail", Detail: "ranks 2,3 never reported an exit"}}},
		{Time: at(30), Kind: KindStart, JobID: "9", Restart: 1, Start: &Start{GPUs: 2, Nodes: 2, ResumeFrom: "/ck/step-10"}},
		{Time: at(31), Kind: KindProgress, Restart: 1, Step: 11},
		{Time: at(45), Kind: KindCkptFail, Restart: 1, Cause: "disk-full", Message: "checkpoint step-20 was not saved: /ck (tmpfs) is full"},
		{Time: at(46), Kind: KindCkptFail, Restart: 1, Cause: "incomplete"},
		{Time: at(60), Kind: KindProgress, Restart: 1, Step: 40},
		{Time: at(61), Kind: KindEnd, Restart: 1, Cause: EndFinished},
	}
}

func TestGoodput(t *testing.T) {
	r := BuildReport(goodputEvents())
	g := r.Goodput
	if g.StepsRun != 50 || g.StepsRedone != 10 {
		t.Errorf("steps run %d, redone %d; want 50 and 10", g.StepsRun, g.StepsRedone)
	}
	if math.Abs(g.ProductiveGPUSeconds-80) > 1e-9 || math.Abs(g.AllocatedGPUSeconds-112) > 1e-9 || math.Abs(g.Ratio-80.0/112) > 1e-9 {
		t.Errorf("goodput %+v, want 80 of 112 GPU s", g)
	}
	if len(g.Restarts) != 1 || g.Restarts[FaultNode] != 1 {
		t.Errorf("restarts by cause %v, want node 1", g.Restarts)
	}
	if len(r.FailedSaves) != 1 || r.FailedSaves[0].Cause != "disk-full" {
		t.Errorf("failed saves %+v, want the one disk-full save only", r.FailedSaves)
	}
	var b bytes.Buffer
	r.WriteText(&b)
	for _, want := range []string{
		"goodput: 71% (productive step time 1m20s of 1m52s allocated GPU time), 10 of 50 steps run were redone",
		"restarts: 1 (node 1)",
		"failed node: n2 (node-fail, restart 0): ranks 2,3 never reported an exit",
		"failed saves: 1", "(disk-full): checkpoint step-20 was not saved: /ck (tmpfs) is full",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
}

// Without progress reports the goodput is unknown, never 0 or 100%.
func TestGoodputUnknown(t *testing.T) {
	var evs []Event
	for _, e := range goodputEvents() {
		if e.Kind != KindProgress {
			evs = append(evs, e)
		}
	}
	r := BuildReport(evs)
	if r.Goodput.Ratio != -1 {
		t.Errorf("goodput without step times = %v, want -1 (unknown)", r.Goodput.Ratio)
	}
	var b bytes.Buffer
	r.WriteText(&b)
	if !strings.Contains(b.String(), "goodput: unknown") {
		t.Errorf("report:\n%s", b.String())
	}
}

// The metrics of the same run, live: restarts by cause, the failed node,
// the failed save by cause, the goodput and the steps redone.
func TestGoodputMetrics(t *testing.T) {
	evs := goodputEvents()
	c := &clock{t: evs[len(evs)-1].Time}
	o := newTestObserver(t, c, Config{})
	for _, e := range evs {
		o.Observe(e)
	}
	want := `
# HELP trainrun_restarts_total Restarts of the run, by cause: hang, node, crash, disk (failures), preempted, time-limit, signal (interruptions); a requeue or a restart of the step inside the allocation.
# TYPE trainrun_restarts_total counter
trainrun_restarts_total{cause="node",job_id="4242",partition="batch"} 1
# HELP trainrun_failed_node_info A node a failure of the run pointed to (value 1), with the cause (node-fail, hang, crash): drain it if it fails again.
# TYPE trainrun_failed_node_info gauge
trainrun_failed_node_info{cause="node-fail",job_id="4242",node="n2",partition="batch"} 1
# HELP trainrun_steps_redone Training steps run again after a restart (run after the checkpoint the next incarnation resumed from).
# TYPE trainrun_steps_redone gauge
trainrun_steps_redone{job_id="4242",partition="batch"} 10
`
	if err := testutil.GatherAndCompare(o.Metrics().Registry, strings.NewReader(want), "trainrun_restarts_total", "trainrun_failed_node_info", "trainrun_steps_redone"); err != nil {
		t.Error(err)
	}
	if got := testutil.ToFloat64(o.Metrics().goodput.v); math.Abs(got-80.0/112) > 1e-9 {
		t.Errorf("trainrun_goodput_ratio = %v, want 80/112", got)
	}
	if got := testutil.ToFloat64(o.Metrics().ckptFail.WithLabelValues("disk-full")); got != 1 {
		t.Errorf("failed saves by cause disk-full = %v, want 1", got)
	}
}

// A restart inside the allocation (KindRestart): the step that crashed at
// step 20 ends, a new one resumes in the same job from step-10 and
// finishes at step 30. The report counts the restart by cause, names the
// failed node, and counts the 10 steps redone; the metric counts it too.
func TestGoodputInJobRestart(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	evs := []Event{
		{Time: at(0), Kind: KindStart, JobID: "9", Restart: 0, Start: &Start{GPUs: 2, Nodes: 2}},
		{Time: at(1), Kind: KindProgress, Step: 1},
		{Time: at(11), Kind: KindCkptCommit, Ckpt: &Ckpt{Tag: "step-10", Step: 10}},
		{Time: at(20), Kind: KindProgress, Step: 20},
		{Time: at(22), Kind: KindRestart, Fault: FaultCrash, Message: "rank 1 (node n2, GPU 0) failed first with exit 1; restarting the step inside the allocation",
			FailedNodes: []FailedNode{{Node: "n2", Cause: "crash", Detail: "rank 1 (GPU 0) failed first with exit 1"}}, Start: &Start{GPUs: 2, Nodes: 2, ResumeFrom: "/ck/step-10"}},
		{Time: at(23), Kind: KindProgress, Step: 11},
		{Time: at(41), Kind: KindCkptCommit, Ckpt: &Ckpt{Tag: "step-30", Step: 30}}, // the second step's: never the first's progress
		{Time: at(42), Kind: KindProgress, Step: 30},
		{Time: at(43), Kind: KindEnd, Cause: EndFinished},
	}
	r := BuildReport(evs)
	if len(r.Incarnations) != 2 || !r.Incarnations[1].InJob || r.Incarnations[1].Restart != 0 || r.Incarnations[0].Cause != EndRestarted {
		t.Fatalf("incarnations %+v, want two in restart 0, the second begun inside the job", r.Incarnations)
	}
	if g := r.Goodput; g.StepsRedone != 10 || g.Restarts[FaultCrash] != 1 || len(g.Restarts) != 1 {
		t.Errorf("goodput %+v, want 10 steps redone and one crash restart", g)
	}
	var b bytes.Buffer
	r.WriteText(&b)
	for _, want := range []string{"restarts: 1 (crash 1)", "restarted inside the job after crash", "failed node: n2 (crash, restart 0)"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
	o := newTestObserver(t, &clock{t: at(43)}, Config{})
	for _, e := range evs {
		o.Observe(e)
	}
	if got := testutil.ToFloat64(o.Metrics().restarts.WithLabelValues(FaultCrash)); got != 1 {
		t.Errorf("trainrun_restarts_total{cause=crash} = %v, want 1", got)
	}
}

// The report names the container the newest incarnation ran in (issue 33),
// in its text and its JSON.
func TestReportContainer(t *testing.T) {
	evs := goodputEvents()
	for i := range evs {
		if evs[i].Kind == KindStart && evs[i].Restart == 1 {
			s := *evs[i].Start
			s.ContainerImage, s.ContainerRuntime = "nvcr.io#nvidia/pytorch:24.01-py3", "pyxis"
			evs[i].Start = &s
		}
	}
	r := BuildReport(evs)
	var b bytes.Buffer
	r.WriteText(&b)
	if !strings.Contains(b.String(), "container nvcr.io#nvidia/pytorch:24.01-py3 (pyxis)\n") {
		t.Errorf("report lacks the container line:\n%s", b.String())
	}
	j, err := json.Marshal(r)
	if err != nil || !strings.Contains(string(j), `"container_image":"nvcr.io#nvidia/pytorch:24.01-py3","container_runtime":"pyxis"`) {
		t.Errorf("JSON lacks the container: %v\n%s", err, j)
	}
}
