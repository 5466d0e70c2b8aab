package obs

import (
	"context"
	"net/http"
	"sort"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/push"
)

// SweepRegistry holds trainrun_sweep_trials{sweep,state}: how many of the
// sweep's trials are in each state, as `trainrun sweep status` found them.
func SweepRegistry(sweep string, counts map[string]int) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "trainrun_sweep_trials",
		Help: "Trials of the sweep in each state (pending, running, preempted, requeued, finished, failed), as 'trainrun sweep status' found them."},
		[]string{"state"})
	states := make([]string, 0, len(counts))
	for s := range counts {
		states = append(states, s)
	}
	sort.Strings(states)
	for _, s := range states {
		g.WithLabelValues(s).Set(float64(counts[s]))
	}
	prometheus.WrapRegistererWith(prometheus.Labels{"sweep": sweep}, reg).MustRegister(g)
	return reg
}

// PushSweep replaces the sweep's group (job="trainrun_sweep", sweep=NAME) on
// a Pushgateway with reg. The sweep label lives in the group key there, so
// the pushed registry must not carry it itself.
func PushSweep(ctx context.Context, url, sweep string, counts map[string]int, client *http.Client) error {
	reg := prometheus.NewRegistry()
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "trainrun_sweep_trials",
		Help: "Trials of the sweep in each state (pending, running, preempted, requeued, finished, failed), as 'trainrun sweep status' found them."},
		[]string{"state"})
	for s, n := range counts {
		g.WithLabelValues(s).Set(float64(n))
	}
	reg.MustRegister(g)
	p := push.New(url, "trainrun_sweep").Grouping("sweep", sweep).Gatherer(reg)
	if client != nil {
		p = p.Client(client)
	}
	return p.PushContext(ctx)
}
