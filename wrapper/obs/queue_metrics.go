package obs

import (
	"github.com/prometheus/client_golang/prometheus"
)

// QueueGroup is one user and account's jobs in the queue, as `trainrun
// partitions --queue` found them (issue 34: fairness is judged per team,
// by slowdown, a job's completion time over its run time alone).
type QueueGroup struct {
	User, Account    string
	Running, Pending int
	Marked           int     // of which trainrun submitted (with a predicted time)
	MeanSlow         float64 // over Marked; unused when Marked is 0
	MaxSlow          float64
}

// QueueRegistry holds the queue's per-user, per-account series:
// trainrun_queue_jobs{user,account,state} for every group, and the
// slowdown gauges for the groups with trainrun jobs (a group without has
// no slowdown to say, not a slowdown of 0).
func QueueRegistry(groups []QueueGroup) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	by := []string{"user", "account"}
	jobs := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "trainrun_queue_jobs",
		Help: "Jobs in the queue of the user and account, running or pending, as 'trainrun partitions --queue' found them."},
		[]string{"user", "account", "state"})
	marked := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "trainrun_queue_trainrun_jobs",
		Help: "Of the user and account's queued jobs, those trainrun submitted (whose slowdown is known)."}, by)
	mean := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "trainrun_queue_slowdown_mean_ratio",
		Help: "Mean slowdown so far (completion time over training time alone; at least 1) of the user and account's queued trainrun jobs."}, by)
	worst := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "trainrun_queue_slowdown_max_ratio",
		Help: "Largest slowdown so far of the user and account's queued trainrun jobs."}, by)
	for _, g := range groups {
		jobs.WithLabelValues(g.User, g.Account, "running").Set(float64(g.Running))
		jobs.WithLabelValues(g.User, g.Account, "pending").Set(float64(g.Pending))
		marked.WithLabelValues(g.User, g.Account).Set(float64(g.Marked))
		if g.Marked > 0 {
			mean.WithLabelValues(g.User, g.Account).Set(g.MeanSlow)
			worst.WithLabelValues(g.User, g.Account).Set(g.MaxSlow)
		}
	}
	reg.MustRegister(jobs, marked, mean, worst)
	return reg
}
