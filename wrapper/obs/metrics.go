package obs

import (
	"regexp"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics is the run's metric set on its own registry (never the global
// one: trainrun's metrics are only the run's, and tests gather them
// without interference). Every series carries the const labels job_id and
// partition: one set of series per job, the lowest cardinality that still
// tells jobs apart.
type Metrics struct {
	Registry *prometheus.Registry
	// pushRegistry holds the same collectors without the job_id label:
	// the Pushgateway takes it from the group's key (job_id=...) and
	// refuses pushed series that carry it.
	pushRegistry *prometheus.Registry

	mu         sync.Mutex
	lastCommit time.Time // for trainrun_checkpoint_age_seconds

	layout          *prometheus.GaugeVec
	restart         prometheus.Gauge
	gpus            prometheus.Gauge
	startTime       prometheus.Gauge
	state           *prometheus.GaugeVec
	predStep        optGauge
	obsStep         optGauge
	predMFU         optGauge
	obsMFU          optGauge
	predTokens      optGauge
	obsTokens       optGauge
	step            optGauge
	progressTime    optGauge
	ckptDur         *prometheus.HistogramVec
	ckptBytes       optGauge
	ckptWritten     prometheus.Counter
	ckptCommits     prometheus.Counter
	ckptLast        optGauge
	ckptMaxAge      optGauge
	ckptFail        *prometheus.CounterVec
	drainBytes      prometheus.Counter
	drainSeconds    prometheus.Counter
	drainRate       optGauge
	interrupts      *prometheus.CounterVec
	requeues        prometheus.Counter
	crashes         *prometheus.CounterVec
	lost            prometheus.Histogram
	graceMargin     optGauge
	graceBudget     optGauge
	faultMetrics    // goodput_metrics.go
	forecastMetrics // forecast_metrics.go
	spikeMetrics    // lossspike_metrics.go
	migrateMetrics  // migrate.go
	resizeMetrics   // resize.go
}

// States of trainrun_state (one is 1, the others 0).
var States = []string{"running", "checkpointing", "requeued", "finished", "stopped", "failed"}

// ckptBuckets cover checkpoints from a second (small models, node-local
// NVMe) to an hour (multi-terabyte states on a busy parallel file system).
var ckptBuckets = []float64{0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1200, 3600}

// lostBuckets cover lost work from seconds (a checkpoint on SIGTERM) to a
// day (a crash long after the last checkpoint).
var lostBuckets = []float64{10, 30, 60, 300, 900, 1800, 3600, 7200, 14400, 43200, 86400}

// NewMetrics registers the run's metrics on a new registry, with the
// labels job_id and partition on every series, plus the time-dependent
// trainrun_checkpoint_age_seconds read from now at each gather.
func NewMetrics(jobID, partition string, now func() time.Time) *Metrics {
	m := &Metrics{Registry: prometheus.NewRegistry(), pushRegistry: prometheus.NewRegistry()}
	r := both{prometheus.WrapRegistererWith(prometheus.Labels{"job_id": jobID, "partition": partition}, m.Registry),
		prometheus.WrapRegistererWith(prometheus.Labels{"partition": partition}, m.pushRegistry)}
	g := func(name, help string) prometheus.Gauge {
		v := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
		r.MustRegister(v)
		return v
	}
	// og is a gauge that is absent until first set: a figure trainrun
	// does not know (no prediction, no progress reported, no bound) must
	// not read as 0, which alert rules would compare.
	og := func(name, help string) optGauge {
		v := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, nil)
		r.MustRegister(v)
		return optGauge{v}
	}
	c := func(name, help string) prometheus.Counter {
		v := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
		r.MustRegister(v)
		return v
	}
	m.layout = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "trainrun_layout_info",
		Help: "The layout the run trains with (value 1): parallel degrees, GPUs, nodes and GPU type."},
		[]string{"tp", "pp", "vpp", "cp", "ep", "dp", "mbs", "gpus", "nodes", "gpu_type"})
	r.MustRegister(m.layout)
	m.gpus = g("trainrun_gpus", "GPUs (ranks) of the running incarnation.")
	m.restart = g("trainrun_restart_count", "SLURM_RESTART_COUNT of the running incarnation (0 on the first start).")
	m.startTime = g("trainrun_incarnation_start_timestamp_seconds", "When the running incarnation started (Unix time).")
	m.state = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "trainrun_state",
		Help: "1 for the run's current state (running, checkpointing, requeued, finished, stopped, failed), 0 for the others."}, []string{"state"})
	r.MustRegister(m.state)
	m.predStep = og("trainrun_step_time_predicted_seconds", "Optimizer step time the planner predicted for the layout.")
	m.obsStep = og("trainrun_step_time_observed_seconds", "Optimizer step time observed from the trainer's progress reports (last minute).")
	m.predMFU = og("trainrun_mfu_predicted_ratio", "Model FLOPs utilisation the planner predicted (0..1).")
	m.obsMFU = og("trainrun_mfu_observed_ratio", "Model FLOPs utilisation observed: the predicted MFU scaled by predicted/observed step time (0..1).")
	m.predTokens = og("trainrun_throughput_predicted_tokens_per_second", "Tokens per second of the whole job the planner predicted.")
	m.obsTokens = og("trainrun_throughput_observed_tokens_per_second", "Tokens per second of the whole job from the trainer's progress reports (last minute).")
	m.step = og("trainrun_trainer_step", "Last optimizer step the trainer reported.")
	m.progressTime = og("trainrun_trainer_progress_timestamp_seconds", "When the trainer last reported a new step (Unix time).")
	m.ckptDur = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "trainrun_checkpoint_duration_seconds",
		Help:    "Checkpoint durations by phase: save (trainrun's request or the interruption until the checkpoint is complete on disk) and commit (verify, fsync, rename, latest).",
		Buckets: ckptBuckets}, []string{"phase"})
	r.MustRegister(m.ckptDur)
	m.ckptBytes = og("trainrun_checkpoint_size_bytes", "Size of the newest committed checkpoint.")
	m.ckptWritten = c("trainrun_checkpoint_committed_bytes_total", "Bytes of all checkpoints committed by the run.")
	m.ckptCommits = c("trainrun_checkpoints_committed_total", "Checkpoints committed by the run.")
	m.ckptLast = og("trainrun_checkpoint_last_commit_timestamp_seconds", "When the newest checkpoint was committed (Unix time); absent before the first.")
	m.ckptMaxAge = og("trainrun_checkpoint_max_age_seconds", "The policy's bound on the newest checkpoint's age (MaxCkptAge); absent when off.")
	m.ckptFail = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "trainrun_checkpoint_failures_total",
		Help: "Checkpoints that could not be completed or committed, by cause (commit, incomplete; disk-full, quota, io-error: saves a full, over-quota or failing disk refused)."}, []string{"cause"})
	r.MustRegister(m.ckptFail)
	m.drainBytes = c("trainrun_drain_bytes_total", "Bytes drained from node-local storage to the durable store.")
	m.drainSeconds = c("trainrun_drain_seconds_total", "Time spent draining (sum over drains; rate(bytes)/rate(seconds) is the throughput).")
	m.drainRate = og("trainrun_drain_throughput_bytes_per_second", "Throughput of the last drain.")
	m.interrupts = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "trainrun_interruptions_total",
		Help: "Interruptions of the run by cause: preempted, time-limit, signal, cancelled, requested."}, []string{"cause"})
	r.MustRegister(m.interrupts)
	m.requeues = c("trainrun_requeues_total", "Times trainrun requeued the job: after a checkpoint, or after a failed step (--max-failures).")
	m.crashes = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "trainrun_crashes_total",
		Help: "Incarnations that ended in failure, by cause: step-failed, not-found, checkpoint, slurm, killed."}, []string{"cause"})
	r.MustRegister(m.crashes)
	m.lost = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "trainrun_work_lost_seconds",
		Help:    "Work lost at each interruption or crash: time from the last checkpoint (or the incarnation's start) to the moment the run stopped training.",
		Buckets: lostBuckets})
	r.MustRegister(m.lost)
	m.graceMargin = og("trainrun_grace_margin_seconds", "Time left before the deadline (time limit, or SIGTERM + grace budget) when the last interruption's checkpoint was committed; negative: it did not fit.")
	m.graceBudget = og("trainrun_grace_budget_seconds", "Time a checkpoint may take after a preemption's SIGTERM (GraceTime or policy); absent when unknown.")
	r.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "trainrun_checkpoint_age_seconds",
		Help: "Age of the newest committed checkpoint at scrape time (-1 before the first). In a textfile or a Pushgateway it is the age when written: alert on time() - trainrun_checkpoint_last_commit_timestamp_seconds instead."},
		func() float64 { return m.age(now()) }))
	m.registerFaults(r, og)
	m.registerForecast(r, og)
	m.registerLossSpikes(r)
	m.registerMigrations(r)
	m.registerResizes(r)
	m.setState("running")
	return m
}

// optGauge is a gauge without labels that exports nothing until Set.
type optGauge struct{ v *prometheus.GaugeVec }

func (g optGauge) Set(x float64) { g.v.WithLabelValues().Set(x) }

// both registers each collector on the two registries.
type both [2]prometheus.Registerer

func (b both) MustRegister(cs ...prometheus.Collector) {
	b[0].MustRegister(cs...)
	b[1].MustRegister(cs...)
}

// lastCommit is kept for the age function (a Gauge cannot be read back
// without gathering).
func (m *Metrics) age(now time.Time) float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lastCommit.IsZero() {
		return -1
	}
	return now.Sub(m.lastCommit).Seconds()
}

func (m *Metrics) setLastCommit(t time.Time) {
	m.mu.Lock()
	m.lastCommit = t
	m.mu.Unlock()
	m.ckptLast.Set(float64(t.UnixNano()) / 1e9)
}

func (m *Metrics) setState(s string) {
	for _, v := range States {
		val := 0.0
		if v == s {
			val = 1
		}
		m.state.WithLabelValues(v).Set(val)
	}
}

func (m *Metrics) setLayout(s *Start) {
	m.layout.Reset()
	deg := func(k string, def int) string {
		if v, ok := s.Layout[k]; ok {
			return strconv.Itoa(v)
		}
		return strconv.Itoa(def)
	}
	m.layout.WithLabelValues(deg("tp", 1), deg("pp", 1), deg("vpp", 1), deg("cp", 1), deg("ep", 1), deg("dp", 1), deg("mbs", 1),
		strconv.Itoa(s.GPUs), strconv.Itoa(s.Nodes), s.GPUType).Set(1)
}

// layoutKeys is the order the report prints degrees in.
func layoutKeys(l map[string]int) []string {
	order := map[string]int{"tp": 0, "pp": 1, "vpp": 2, "cp": 3, "ep": 4, "dp": 5, "mbs": 6}
	var ks []string
	for k := range l {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool {
		oi, iok := order[ks[i]]
		oj, jok := order[ks[j]]
		if iok != jok {
			return iok
		}
		if oi != oj {
			return oi < oj
		}
		return ks[i] < ks[j]
	})
	return ks
}

// Names lists the names of every metric family the run exports, sorted
// (contrib/monitoring's test checks its README, rules and dashboards
// against it).
func (m *Metrics) Names() []string {
	ch := make(chan *prometheus.Desc, 64)
	go func() { m.Registry.Describe(ch); close(ch) }()
	re := regexp.MustCompile(`fqName: "([^"]+)"`)
	var out []string
	for d := range ch {
		if s := re.FindStringSubmatch(d.String()); s != nil {
			out = append(out, s[1])
		}
	}
	sort.Strings(out)
	return out
}
