package obs

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestResizeMetricReport(t *testing.T) {
	o, err := New(Config{JobDir: t.TempDir(), JobID: "9", Partition: "hopper"})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	o.Observe(Event{Kind: KindResize, ResizeFrom: 1, ResizeTo: 2, Message: "growing from 1 to 2 node(s)"})
	o.Observe(Event{Kind: KindResize, ResizeFrom: 4, ResizeTo: 2, Message: "shrinking from 4 to 2 node(s)"})
	o.Observe(Event{Kind: KindResize, ResizeFrom: 2, ResizeTo: 4, Message: "growing from 2 to 4 node(s)"})
	want := `
# HELP trainrun_resizes_total Requeues that gave the job another number of nodes for its next run (grow or shrink data parallelism within --min-gpus/--max-gpus), by direction.
# TYPE trainrun_resizes_total counter
trainrun_resizes_total{direction="grow",job_id="9",partition="hopper"} 2
trainrun_resizes_total{direction="shrink",job_id="9",partition="hopper"} 1
`
	if err := testutil.GatherAndCompare(o.Metrics().Registry, strings.NewReader(want), "trainrun_resizes_total"); err != nil {
		t.Error(err)
	}
	at := time.Date(2026, 12, 7, 15, 0, 0, 0, time.UTC)
	r := BuildReport([]Event{{Kind: KindStart, Time: at}, {Kind: KindResize, Time: at.Add(time.Minute), ResizeFrom: 1, ResizeTo: 2, Message: "150 steps left"}})
	if len(r.Resizes) != 1 || r.Resizes[0].From != 1 || r.Resizes[0].To != 2 {
		t.Fatalf("Resizes = %+v", r.Resizes)
	}
	var w bytes.Buffer
	r.WriteText(&w)
	if !strings.Contains(w.String(), "resizes: 1") || !strings.Contains(w.String(), "1 -> 2 node(s): 150 steps left") {
		t.Errorf("report:\n%s", w.String())
	}
}
