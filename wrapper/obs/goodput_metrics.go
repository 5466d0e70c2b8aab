package obs

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// faultMetrics are the metrics of faults and goodput (issue 21).
type faultMetrics struct {
	restarts   *prometheus.CounterVec
	failedNode *prometheus.GaugeVec
	// stepFailures counts failed steps by class (issue 31).
	stepFailures *prometheus.CounterVec
	// healthFailures counts nodes that failed the health pass, by check.
	healthFailures *prometheus.CounterVec
	goodput        optGauge
	redone         optGauge
}

func (m *Metrics) registerFaults(r both, og func(name, help string) optGauge) {
	m.restarts = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "trainrun_restarts_total",
		Help: "Restarts of the run, by cause: hang, node, crash, disk (failures), preempted, time-limit, signal (interruptions); a requeue or a restart of the step inside the allocation."}, []string{"cause"})
	r.MustRegister(m.restarts)
	m.failedNode = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "trainrun_failed_node_info",
		Help: "A node a failure of the run pointed to (value 1), with the cause (node-fail, hang, crash): drain it if it fails again."}, []string{"node", "cause"})
	r.MustRegister(m.failedNode)
	m.stepFailures = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "trainrun_step_failures_total",
		Help: "Failed training steps, by class: oom, nccl, hardware, user, signal, unknown (from the ranks' exit, last stderr lines and lost nodes; the policy's RestartOn acts on it)."}, []string{"class"})
	r.MustRegister(m.stepFailures)
	m.healthFailures = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "trainrun_node_health_failures_total",
		Help: "Nodes that failed trainrun's health pass before a step (and were kept out of it), by node and failed check: gpus, ib, space, script."}, []string{"node", "check"})
	r.MustRegister(m.healthFailures)
	m.goodput = og("trainrun_goodput_ratio", "Productive step time (steps kept, at each incarnation's observed step time) over allocated GPU time, across the run's incarnations (0..1); absent until step times are observed.")
	m.redone = og("trainrun_steps_redone", "Training steps run again after a restart (run after the checkpoint the next incarnation resumed from).")
}

// onEndFaults counts the restart by cause and names the failed nodes.
func (o *Observer) onEndFaults(e *Event) {
	if e.Cause == EndRequeued || e.Requeued {
		in := Incarnation{Fault: e.Fault, Cause: e.Cause, Interrupt: o.st.interruptWhy}
		o.m.restarts.WithLabelValues(in.RestartCause()).Inc()
	}
	for _, f := range e.FailedNodes {
		o.m.failedNode.WithLabelValues(f.Node, f.Cause).Set(1)
	}
	o.countFailure(e)
}

// onRestart counts a restart of the step inside the allocation by cause
// and names the failed nodes; the run goes on.
func (o *Observer) onRestart(e *Event, live bool) {
	o.m.restarts.WithLabelValues(orText(e.Fault, FaultCrash)).Inc()
	for _, f := range e.FailedNodes {
		o.m.failedNode.WithLabelValues(f.Node, f.Cause).Set(1)
	}
	o.countFailure(e)
	st := &o.st
	if !st.incStart.IsZero() {
		o.m.lost.Observe(o.lostWork(e.Time).Seconds())
	}
	st.incStart, st.interruptAt, st.requestAt = e.Time, time.Time{}, time.Time{}
	if live {
		o.m.setState("running")
	}
}

// setGoodput recomputes the goodput and the steps redone when an event
// changes them (live only: a replay ends with the present incarnation's
// start, which sets them).
func (o *Observer) setGoodput(e *Event, live bool) {
	if !live || e.Kind == KindProgress || e.Kind == KindCkptRequest || e.Kind == KindInterrupt {
		return
	}
	g := o.goodput.report().Goodput
	if g.Ratio >= 0 {
		o.m.goodput.Set(g.Ratio)
	}
	o.m.redone.Set(float64(g.StepsRedone))
}

// goodputLog keeps the run's events for the goodput, progress thinned to
// one sample per goodputSample (and always the newest, kept until the next
// other event), so a week-long run holds a few thousand.
type goodputLog struct {
	evs     []Event
	pending *Event
	lastAt  time.Time
}

const goodputSample = 30 * time.Second

func (g *goodputLog) add(e Event) {
	if e.Kind == KindProgress {
		if e.Time.Sub(g.lastAt) < goodputSample {
			g.pending = &e
			return
		}
		g.lastAt, g.pending = e.Time, nil
		g.evs = append(g.evs, e)
		return
	}
	if g.pending != nil {
		g.evs = append(g.evs, *g.pending)
		g.pending = nil
	}
	g.evs = append(g.evs, e)
}

func (g *goodputLog) report() *Report {
	evs := g.evs
	if g.pending != nil {
		evs = append(evs[:len(evs):len(evs)], *g.pending)
	}
	return BuildReport(evs)
}
