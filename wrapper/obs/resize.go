package obs

import (
	"fmt"
	"io"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// KindResize: at a requeue the controller gave the job another number of
// nodes for its next incarnation (issue 34: data parallelism grown or
// shrunk within the job's --min-gpus/--max-gpus, the global batch kept by
// gradient accumulation). ResizeFrom and ResizeTo are the node counts,
// Message the reason (both sizes' predicted finishes).
const KindResize Kind = "resize"

type resizeMetrics struct {
	resizes *prometheus.CounterVec
}

func (m *Metrics) registerResizes(r both) {
	m.resizes = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "trainrun_resizes_total",
		Help: "Requeues that gave the job another number of nodes for its next run (grow or shrink data parallelism within --min-gpus/--max-gpus), by direction."}, []string{"direction"})
	r.MustRegister(m.resizes)
}

// resizeDirection is the label of a resize: grow or shrink.
func resizeDirection(e *Event) string {
	if e.ResizeTo > e.ResizeFrom {
		return "grow"
	}
	return "shrink"
}

func (o *Observer) onResize(e *Event) {
	o.m.resizes.WithLabelValues(resizeDirection(e)).Inc()
}

// Resize is one resize of the report.
type Resize struct {
	Restart  int
	Time     time.Time
	From, To int // nodes
	Message  string
}

func (r *Report) addResize(e Event, restart int) {
	r.Resizes = append(r.Resizes, Resize{Restart: restart, Time: e.Time, From: e.ResizeFrom, To: e.ResizeTo, Message: e.Message})
}

// writeResizes prints the resize section of the text report.
func (r *Report) writeResizes(w io.Writer) {
	if len(r.Resizes) == 0 {
		return
	}
	fmt.Fprintf(w, "\nresizes: %d (--min-gpus/--max-gpus)\n", len(r.Resizes))
	for _, z := range r.Resizes {
		fmt.Fprintf(w, "  restart %d, %s: %d -> %d node(s): %s\n", z.Restart, z.Time.UTC().Format(time.RFC3339), z.From, z.To, z.Message)
	}
}
