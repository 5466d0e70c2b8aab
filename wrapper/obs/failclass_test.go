package obs

import (
	"bytes"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// Failed steps are counted by class, health failures by node and check,
// and the report lists both.
func TestFailureClassAndHealthMetrics(t *testing.T) {
	c := &clock{t: at(0)}
	o := newTestObserver(t, c, Config{JobDir: t.TempDir()})
	evs := []Event{
		{Kind: KindHealth, Time: at(0), Why: "before the first step", FailedNodes: []FailedNode{{Node: "n2", Cause: "ib", Detail: `mlx5_0/1 port state "1: DOWN"`}}},
		{Kind: KindStart, Time: at(1), Start: testStart()},
		{Kind: KindRestart, Time: at(20), Fault: FaultCrash, FailureClass: "nccl", FailureEvidence: "Watchdog caught collective operation timeout", Start: &Start{GPUs: 16}},
		{Kind: KindEnd, Time: at(40), Cause: EndCrash, Crash: CrashStepFailed, Exit: 13, FailureClass: "user", FailureEvidence: "ValueError: warmup 0"},
	}
	for _, e := range evs {
		o.Observe(e)
	}
	want := `
# HELP trainrun_node_health_failures_total Nodes that failed trainrun's health pass before a step (and were kept out of it), by node and failed check: gpus, ib, space, script.
# TYPE trainrun_node_health_failures_total counter
trainrun_node_health_failures_total{check="ib",job_id="4242",node="n2",partition="batch"} 1
# HELP trainrun_step_failures_total Failed training steps, by class: oom, nccl, hardware, user, signal, unknown (from the ranks' exit, last stderr lines and lost nodes; the policy's RestartOn acts on it).
# TYPE trainrun_step_failures_total counter
trainrun_step_failures_total{class="nccl",job_id="4242",partition="batch"} 1
trainrun_step_failures_total{class="user",job_id="4242",partition="batch"} 1
`
	if err := testutil.GatherAndCompare(o.Metrics().Registry, strings.NewReader(want), "trainrun_step_failures_total", "trainrun_node_health_failures_total"); err != nil {
		t.Error(err)
	}
	var b bytes.Buffer
	rep := BuildReport(evs)
	if len(rep.Incarnations) != 2 || rep.Incarnations[0].Start != at(1) {
		t.Errorf("incarnations %+v: want the start's and the restart's (a health event before the start begins none)", rep.Incarnations)
	}
	rep.WriteText(&b)
	for _, s := range []string{"failed steps: 2 (nccl 1, user 1)", ": nccl: Watchdog caught collective operation timeout", ": user: ValueError: warmup 0",
		`before the first step: node n2 failed ib: mlx5_0/1 port state "1: DOWN"`} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("the report lacks %q:\n%s", s, b.String())
		}
	}
}
