package obs

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestSweepRegistryExposition(t *testing.T) {
	reg := SweepRegistry("lrs", map[string]int{"running": 2, "pending": 4})
	want := `# HELP trainrun_sweep_trials Trials of the sweep in each state (pending, running, preempted, requeued, finished, failed), as 'trainrun sweep status' found them.
# TYPE trainrun_sweep_trials gauge
trainrun_sweep_trials{state="pending",sweep="lrs"} 4
trainrun_sweep_trials{state="running",sweep="lrs"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "trainrun_sweep_trials"); err != nil {
		t.Error(err)
	}
}

func TestReportNamesTheSweep(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	r := BuildReport([]Event{{Time: t0, Kind: KindStart, JobID: "9", Start: &Start{Run: "trial-2", Sweep: "lrs", Nodes: 1, GPUs: 1}}})
	var b bytes.Buffer
	r.WriteText(&b)
	if !strings.Contains(b.String(), "run trial-2 of sweep lrs") {
		t.Errorf("report header lacks the sweep:\n%s", b.String())
	}
}

// A trial's push group carries its sweep: sum by (sweep) over the group.
func TestTrialPushGroupCarriesTheSweep(t *testing.T) {
	var mu sync.Mutex
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		paths = append(paths, r.Method+" "+r.URL.Path)
	}))
	defer srv.Close()
	o := newTestObserver(t, &clock{t: at(0)}, Config{Pushgateway: srv.URL, Sweep: "lrs"})
	o.Observe(Event{Kind: KindStart, Start: testStart()})
	o.Observe(Event{Kind: KindEnd, Cause: EndFinished})
	o.Close()
	mu.Lock()
	defer mu.Unlock()
	// client_golang writes the grouping labels in map order: either is right.
	if len(paths) == 0 || paths[0] != "PUT /metrics/job/trainrun/job_id/4242/sweep/lrs" && paths[0] != "PUT /metrics/job/trainrun/sweep/lrs/job_id/4242" {
		t.Errorf("requests %v, want the group job=trainrun, job_id=4242, sweep=lrs", paths)
	}
}
