package obs

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// KindForecast: the controller forecast the run's loss at a checkpoint
// (trainrun run --target-loss, issue 32). Forecast is set; Message is the
// verdict's reason.
const KindForecast Kind = "forecast"

// Forecast is one forecast of the loss at the run's token budget.
type Forecast struct {
	Verdict string  `json:"verdict"` // on-track, off-track, too-early
	PReach  float64 `json:"p_reach"` // the probability that the loss at the budget is at most the target
	Target  float64 `json:"target"`
	Budget  float64 `json:"budget_tokens"`
	// Lo, Mid and Hi: the loss at the budget, the band's quantiles
	// (Level's central share) and the fit's value.
	Lo, Mid, Hi float64
	Level       float64 `json:"level"`
	Noise       float64 `json:"noise"` // the loss's spread about the fit
	// Changed: the verdict differs from the previous forecast's (the
	// webhook's cue).
	Changed bool `json:"changed,omitempty"`
}

type forecastMetrics struct {
	forecastLoss *prometheus.GaugeVec
	onTrack      optGauge
	pReach       optGauge
}

func (m *Metrics) registerForecast(r both, og func(name, help string) optGauge) {
	m.forecastLoss = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "trainrun_forecast_loss",
		Help: "The loss forecast at the run's token budget (--tokens), by quantile of the forecast's band (0.5: the fit); absent until a forecast (trainrun run --target-loss)."}, []string{"quantile"})
	r.MustRegister(m.forecastLoss)
	m.onTrack = og("trainrun_on_track", "1 when the forecast says the run reaches --target-loss by its budget, 0 when it does not; absent while it is too early to say.")
	m.pReach = og("trainrun_on_track_probability", "The forecast's probability that the loss at the budget is at most --target-loss.")
}

func (o *Observer) onForecast(e *Event) {
	f := e.Forecast
	if f == nil {
		return
	}
	if f.Verdict == "too-early" {
		return
	}
	q := func(p float64) string { return strconv.FormatFloat(p, 'g', 3, 64) }
	o.m.forecastLoss.WithLabelValues(q((1 - f.Level) / 2)).Set(f.Lo)
	o.m.forecastLoss.WithLabelValues("0.5").Set(f.Mid)
	o.m.forecastLoss.WithLabelValues(q((1 + f.Level) / 2)).Set(f.Hi)
	on := 0.0
	if f.Verdict == "on-track" {
		on = 1
	}
	o.m.onTrack.Set(on)
	o.m.pReach.Set(f.PReach)
}
