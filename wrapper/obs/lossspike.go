package obs

import (
	"cmp"
	"fmt"
	"io"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// KindLossSpike: the controller judged a reported loss a spike, a NaN or
// an infinity (trainrun run --loss-spike, issue 31). Step is the step,
// Cause the kind ("spike", "nan", "inf"), Message the judgement.
const KindLossSpike Kind = "loss-spike"

type spikeMetrics struct {
	lossSpikes *prometheus.CounterVec
}

func (m *Metrics) registerLossSpikes(r both) {
	m.lossSpikes = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "trainrun_loss_spikes_total",
		Help: "Reported losses the controller judged bad (--loss-spike), by kind: spike (above median + K·MAD of the window), nan, inf."}, []string{"kind"})
	r.MustRegister(m.lossSpikes)
}

func (o *Observer) onLossSpike(e *Event) {
	o.m.lossSpikes.WithLabelValues(cmp.Or(e.Cause, "spike")).Inc()
}

// LossSpike is one loss-spike event of the report.
type LossSpike struct {
	Restart int
	Time    time.Time
	Step    int64
	Kind    string // spike, nan, inf
	Message string
}

func (r *Report) addLossSpike(e Event, restart int) {
	r.LossSpikes = append(r.LossSpikes, LossSpike{Restart: restart, Time: e.Time, Step: e.Step, Kind: e.Cause, Message: e.Message})
}

// writeLossSpikes prints the loss-spike section of the text report.
func (r *Report) writeLossSpikes(w io.Writer) {
	if len(r.LossSpikes) == 0 {
		return
	}
	fmt.Fprintf(w, "\nloss spikes: %d (--loss-spike; the steps rolled back over are in the store's .trainrun/skip-steps)\n", len(r.LossSpikes))
	for _, s := range r.LossSpikes {
		fmt.Fprintf(w, "  restart %d, %s: %s\n", s.Restart, s.Time.UTC().Format(time.RFC3339), s.Message)
	}
}
