package obs

import (
	"cmp"

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
