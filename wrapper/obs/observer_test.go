package obs

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// clock is a settable time for the observer.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

func newTestObserver(t *testing.T, c *clock, cfg Config) *Observer {
	t.Helper()
	cfg.JobID, cfg.Partition = "4242", "batch"
	if cfg.Logf == nil {
		cfg.Logf = t.Logf
	}
	cfg.Now = c.now
	o, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Close() })
	return o
}

func testStart() *Start {
	return &Start{Partition: "batch", JobName: "llama", Nodes: 2, GPUs: 16, GPUType: "h100-sxm",
		Layout:      map[string]int{"tp": 4, "pp": 2, "vpp": 1, "cp": 1, "ep": 1, "dp": 2, "mbs": 1},
		StepSeconds: 2, MFU: 0.4, TokensPerSecond: 65536, TokensPerStep: 131072,
		EndTime: at(3600), CkptLead: 5 * time.Minute, GraceBudget: 60 * time.Second, MaxCkptAge: time.Hour}
}

// One incarnation: start, progress, a preemption answered by a checkpoint,
// requeue. The exposition text is what a Prometheus scrape reads.
func TestObserverPreemptedIncarnation(t *testing.T) {
	c := &clock{t: at(0)}
	dir := t.TempDir()
	o := newTestObserver(t, c, Config{JobDir: dir})
	o.Observe(Event{Kind: KindStart, Time: at(0), Start: testStart()})
	// Steps every 2.5 s (the plan said 2 s): observed MFU 0.4·2/2.5 = 0.32.
	for i := int64(1); i <= 5; i++ {
		o.Observe(Event{Kind: KindProgress, Time: at(10 + 2.5*float64(i)), Step: 100 + i, Tokens: (100 + i) * 131072})
	}
	o.Observe(Event{Kind: KindInterrupt, Time: at(30), Cause: InterruptPreempted})
	o.Observe(Event{Kind: KindCkptCommit, Time: at(42), Ckpt: &Ckpt{Tag: "step_105", Step: 105, Bytes: 3 << 30,
		CompleteAt: at(40), Commit: 2 * time.Second}})
	o.Observe(Event{Kind: KindEnd, Time: at(43), Cause: EndRequeued, Exit: 6})
	c.set(at(100))

	want := `
# HELP trainrun_checkpoint_age_seconds Age of the newest committed checkpoint at scrape time (-1 before the first). In a textfile or a Pushgateway it is the age when written: alert on time() - trainrun_checkpoint_last_commit_timestamp_seconds instead.
# TYPE trainrun_checkpoint_age_seconds gauge
trainrun_checkpoint_age_seconds{job_id="4242",partition="batch"} 58
# HELP trainrun_checkpoint_duration_seconds Checkpoint durations by phase: save (trainrun's request or the interruption until the checkpoint is complete on disk) and commit (verify, fsync, rename, latest).
# TYPE trainrun_checkpoint_duration_seconds histogram
trainrun_checkpoint_duration_seconds_bucket{job_id="4242",partition="batch",phase="commit",le="0.5"} 0
trainrun_checkpoint_duration_seconds_bucket{job_id="4242",partition="batch",phase="commit",le="1"} 0
trainrun_checkpoint_duration_seconds_bucket{job_id="4242",partition="batch",phase="commit",le="2"} 1
trainrun_checkpoint_duration_seconds_bucket{job_id="4242",partition="batch",phase="commit",le="5"} 1
trainrun_checkpoint_duration_seconds_bucket{job_id="4242",partition="batch",phase="commit",le="10"} 1
trainrun_checkpoint_duration_seconds_bucket{job_id="4242",partition="batch",phase="commit",le="20"} 1
trainrun_checkpoint_duration_seconds_bucket{job_id="4242",partition="batch",phase="commit",le="30"} 1
trainrun_checkpoint_duration_seconds_bucket{job_id="4242",partition="batch",phase="commit",le="60"} 1
trainrun_checkpoint_duration_seconds_bucket{job_id="4242",partition="batch",phase="commit",le="120"} 1
trainrun_checkpoint_duration_seconds_bucket{job_id="4242",partition="batch",phase="commit",le="300"} 1
trainrun_checkpoint_duration_seconds_bucket{job_id="4242",partition="batch",phase="commit",le="600"} 1
trainrun_checkpoint_duration_seconds_bucket{job_id="4242",partition="batch",phase="commit",le="1200"} 1
trainrun_checkpoint_duration_seconds_bucket{job_id="4242",partition="batch",phase="commit",le="3600"} 1
trainrun_checkpoint_duration_seconds_bucket{job_id="4242",partition="batch",phase="commit",le="+Inf"} 1
trainrun_checkpoint_duration_seconds_sum{job_id="4242",partition="batch",phase="commit"} 2
trainrun_checkpoint_duration_seconds_count{job_id="4242",partition="batch",phase="commit"} 1
trainrun_checkpoint_duration_seconds_bucket{job_id="4242",partition="batch",phase="save",le="0.5"} 0
trainrun_checkpoint_duration_seconds_bucket{job_id="4242",partition="batch",phase="save",le="1"} 0
trainrun_checkpoint_duration_seconds_bucket{job_id="4242",partition="batch",phase="save",le="2"} 0
trainrun_checkpoint_duration_seconds_bucket{job_id="4242",partition="batch",phase="save",le="5"} 0
trainrun_checkpoint_duration_seconds_bucket{job_id="4242",partition="batch",phase="save",le="10"} 1
trainrun_checkpoint_duration_seconds_bucket{job_id="4242",partition="batch",phase="save",le="20"} 1
trainrun_checkpoint_duration_seconds_bucket{job_id="4242",partition="batch",phase="save",le="30"} 1
trainrun_checkpoint_duration_seconds_bucket{job_id="4242",partition="batch",phase="save",le="60"} 1
trainrun_checkpoint_duration_seconds_bucket{job_id="4242",partition="batch",phase="save",le="120"} 1
trainrun_checkpoint_duration_seconds_bucket{job_id="4242",partition="batch",phase="save",le="300"} 1
trainrun_checkpoint_duration_seconds_bucket{job_id="4242",partition="batch",phase="save",le="600"} 1
trainrun_checkpoint_duration_seconds_bucket{job_id="4242",partition="batch",phase="save",le="1200"} 1
trainrun_checkpoint_duration_seconds_bucket{job_id="4242",partition="batch",phase="save",le="3600"} 1
trainrun_checkpoint_duration_seconds_bucket{job_id="4242",partition="batch",phase="save",le="+Inf"} 1
trainrun_checkpoint_duration_seconds_sum{job_id="4242",partition="batch",phase="save"} 10
trainrun_checkpoint_duration_seconds_count{job_id="4242",partition="batch",phase="save"} 1
# HELP trainrun_grace_margin_seconds Time left before the deadline (time limit, or SIGTERM + grace budget) when the last interruption's checkpoint was committed; negative: it did not fit.
# TYPE trainrun_grace_margin_seconds gauge
trainrun_grace_margin_seconds{job_id="4242",partition="batch"} 48
# HELP trainrun_interruptions_total Interruptions of the run by cause: preempted, time-limit, signal, cancelled, requested.
# TYPE trainrun_interruptions_total counter
trainrun_interruptions_total{cause="preempted",job_id="4242",partition="batch"} 1
# HELP trainrun_layout_info The layout the run trains with (value 1): parallel degrees, GPUs, nodes and GPU type.
# TYPE trainrun_layout_info gauge
trainrun_layout_info{cp="1",dp="2",ep="1",gpu_type="h100-sxm",gpus="16",job_id="4242",mbs="1",nodes="2",partition="batch",pp="2",tp="4",vpp="1"} 1
# HELP trainrun_mfu_observed_ratio Model FLOPs utilisation observed: the predicted MFU scaled by predicted/observed step time (0..1).
# TYPE trainrun_mfu_observed_ratio gauge
trainrun_mfu_observed_ratio{job_id="4242",partition="batch"} 0.32
# HELP trainrun_mfu_predicted_ratio Model FLOPs utilisation the planner predicted (0..1).
# TYPE trainrun_mfu_predicted_ratio gauge
trainrun_mfu_predicted_ratio{job_id="4242",partition="batch"} 0.4
# HELP trainrun_requeues_total Times trainrun requeued the job: after a checkpoint, or after a failed step (--max-failures).
# TYPE trainrun_requeues_total counter
trainrun_requeues_total{job_id="4242",partition="batch"} 1
# HELP trainrun_state 1 for the run's current state (running, checkpointing, requeued, finished, stopped, failed), 0 for the others.
# TYPE trainrun_state gauge
trainrun_state{job_id="4242",partition="batch",state="checkpointing"} 0
trainrun_state{job_id="4242",partition="batch",state="failed"} 0
trainrun_state{job_id="4242",partition="batch",state="finished"} 0
trainrun_state{job_id="4242",partition="batch",state="requeued"} 1
trainrun_state{job_id="4242",partition="batch",state="running"} 0
trainrun_state{job_id="4242",partition="batch",state="stopped"} 0
# HELP trainrun_step_time_observed_seconds Optimizer step time observed from the trainer's progress reports (last minute).
# TYPE trainrun_step_time_observed_seconds gauge
trainrun_step_time_observed_seconds{job_id="4242",partition="batch"} 2.5
# HELP trainrun_throughput_observed_tokens_per_second Tokens per second of the whole job from the trainer's progress reports (last minute).
# TYPE trainrun_throughput_observed_tokens_per_second gauge
trainrun_throughput_observed_tokens_per_second{job_id="4242",partition="batch"} 52428.8
# HELP trainrun_work_lost_seconds Work lost at each interruption or crash: time from the last checkpoint (or the incarnation's start) to the moment the run stopped training.
# TYPE trainrun_work_lost_seconds histogram
trainrun_work_lost_seconds_bucket{job_id="4242",partition="batch",le="10"} 1
trainrun_work_lost_seconds_bucket{job_id="4242",partition="batch",le="30"} 1
trainrun_work_lost_seconds_bucket{job_id="4242",partition="batch",le="60"} 1
trainrun_work_lost_seconds_bucket{job_id="4242",partition="batch",le="300"} 1
trainrun_work_lost_seconds_bucket{job_id="4242",partition="batch",le="900"} 1
trainrun_work_lost_seconds_bucket{job_id="4242",partition="batch",le="1800"} 1
trainrun_work_lost_seconds_bucket{job_id="4242",partition="batch",le="3600"} 1
trainrun_work_lost_seconds_bucket{job_id="4242",partition="batch",le="7200"} 1
trainrun_work_lost_seconds_bucket{job_id="4242",partition="batch",le="14400"} 1
trainrun_work_lost_seconds_bucket{job_id="4242",partition="batch",le="43200"} 1
trainrun_work_lost_seconds_bucket{job_id="4242",partition="batch",le="86400"} 1
trainrun_work_lost_seconds_bucket{job_id="4242",partition="batch",le="+Inf"} 1
trainrun_work_lost_seconds_sum{job_id="4242",partition="batch"} 0
trainrun_work_lost_seconds_count{job_id="4242",partition="batch"} 1
`
	if err := testutil.GatherAndCompare(o.Metrics().Registry, strings.NewReader(want),
		"trainrun_checkpoint_age_seconds", "trainrun_checkpoint_duration_seconds", "trainrun_grace_margin_seconds",
		"trainrun_interruptions_total", "trainrun_layout_info", "trainrun_mfu_observed_ratio", "trainrun_mfu_predicted_ratio",
		"trainrun_requeues_total", "trainrun_state", "trainrun_step_time_observed_seconds",
		"trainrun_throughput_observed_tokens_per_second", "trainrun_work_lost_seconds"); err != nil {
		t.Error(err)
	}
	evs, err := ReadEvents(dir)
	if err != nil {
		t.Fatal(err)
	}
	// Progress is sampled once a minute into the log: the first, and the
	// newest before the next other event.
	var kinds []string
	for _, e := range evs {
		kinds = append(kinds, string(e.Kind))
	}
	if got := strings.Join(kinds, " "); got != "start progress progress interrupt ckpt-commit end" {
		t.Errorf("event log kinds: %s", got)
	}
	if evs[4].Ckpt == nil || evs[4].Ckpt.Save != 10*time.Second {
		t.Errorf("logged commit: %+v, want save 10s (SIGTERM at 30 s, complete at 40 s)", evs[4].Ckpt)
	}
}

// A requeued job's next incarnation continues the run's counters from the
// log, and counts an incarnation that was killed before its end as a crash
// with its lost work.
func TestObserverReplaysEarlierIncarnations(t *testing.T) {
	dir := t.TempDir()
	for _, e := range []Event{
		{Kind: KindStart, Time: at(0), Restart: 0, Start: testStart()},
		{Kind: KindCkptCommit, Time: at(100), Ckpt: &Ckpt{Tag: "step_10", Bytes: 100, CompleteAt: at(99), Commit: time.Second}},
		{Kind: KindInterrupt, Time: at(400), Cause: InterruptTimeLimit},
		{Kind: KindCkptRequest, Time: at(400), Why: "time-limit"},
		{Kind: KindCkptCommit, Time: at(420), Ckpt: &Ckpt{Tag: "step_20", Bytes: 100, CompleteAt: at(415), Save: 15 * time.Second, Commit: 5 * time.Second}},
		{Kind: KindEnd, Time: at(421), Cause: EndRequeued, Exit: 6},
		{Kind: KindStart, Time: at(500), Restart: 1, Start: testStart()},
		// killed 700 s after its last checkpoint's state (step_20, state of t=400)
		{Kind: KindStart, Time: at(1100), Restart: 2, Start: testStart()},
		{Kind: KindEnd, Time: at(1400), Cause: EndCrash, Crash: CrashStepFailed, Exit: 5},
	} {
		if err := appendEvent(filepath.Join(dir, EventsFile), e); err != nil {
			t.Fatal(err)
		}
	}
	c := &clock{t: at(1500)}
	o := newTestObserver(t, c, Config{JobDir: dir, Restart: 3})
	want := `
# HELP trainrun_checkpoints_committed_total Checkpoints committed by the run.
# TYPE trainrun_checkpoints_committed_total counter
trainrun_checkpoints_committed_total{job_id="4242",partition="batch"} 2
# HELP trainrun_crashes_total Incarnations that ended in failure, by cause: step-failed, not-found, checkpoint, slurm, killed.
# TYPE trainrun_crashes_total counter
trainrun_crashes_total{cause="killed",job_id="4242",partition="batch"} 1
trainrun_crashes_total{cause="step-failed",job_id="4242",partition="batch"} 1
# HELP trainrun_requeues_total Times trainrun requeued the job: after a checkpoint, or after a failed step (--max-failures).
# TYPE trainrun_requeues_total counter
trainrun_requeues_total{job_id="4242",partition="batch"} 1
# HELP trainrun_interruptions_total Interruptions of the run by cause: preempted, time-limit, signal, cancelled, requested.
# TYPE trainrun_interruptions_total counter
trainrun_interruptions_total{cause="time-limit",job_id="4242",partition="batch"} 1
# HELP trainrun_checkpoint_age_seconds Age of the newest committed checkpoint at scrape time (-1 before the first). In a textfile or a Pushgateway it is the age when written: alert on time() - trainrun_checkpoint_last_commit_timestamp_seconds instead.
# TYPE trainrun_checkpoint_age_seconds gauge
trainrun_checkpoint_age_seconds{job_id="4242",partition="batch"} 1080
`
	// The time limit's checkpoint committed at 420 s, the limit at 3600 s.
	want += `
# HELP trainrun_grace_margin_seconds Time left before the deadline (time limit, or SIGTERM + grace budget) when the last interruption's checkpoint was committed; negative: it did not fit.
# TYPE trainrun_grace_margin_seconds gauge
trainrun_grace_margin_seconds{job_id="4242",partition="batch"} 3180
`
	if err := testutil.GatherAndCompare(o.Metrics().Registry, strings.NewReader(want), "trainrun_grace_margin_seconds", "trainrun_checkpoints_committed_total",
		"trainrun_crashes_total", "trainrun_requeues_total", "trainrun_interruptions_total", "trainrun_checkpoint_age_seconds"); err != nil {
		t.Error(err)
	}
	// Lost work: 0 for the time limit (checkpoint asked at the interruption),
	// the killed incarnation: none known (it never stopped by a recorded
	// event, see report), the crash: 1400 - 1100 (its start; no checkpoint of its own).
	if n := testutil.CollectAndCount(o.Metrics().lost); n != 1 {
		t.Fatalf("%d work-lost series", n)
	}
	got, err := testutil.GatherAndCount(o.Metrics().Registry, "trainrun_work_lost_seconds")
	if err != nil || got != 1 {
		t.Fatalf("work lost: %d series, %v", got, err)
	}
	mfs, _ := o.Metrics().Registry.Gather()
	for _, mf := range mfs {
		if mf.GetName() == "trainrun_work_lost_seconds" {
			h := mf.GetMetric()[0].GetHistogram()
			if h.GetSampleCount() != 2 || h.GetSampleSum() != 300 {
				t.Errorf("work lost: count %d sum %g, want 2 and 0+300", h.GetSampleCount(), h.GetSampleSum())
			}
		}
	}
}

func TestObserverMetricsAddrConflict(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, err = New(Config{JobID: "1", MetricsAddr: ln.Addr().String(), Logf: t.Logf})
	if err == nil || !strings.Contains(err.Error(), "is in use on this node") || !strings.Contains(err.Error(), ln.Addr().String()) {
		t.Fatalf("New on a busy port: %v", err)
	}
}

func TestObserverServesAndWritesTextfile(t *testing.T) {
	c := &clock{t: at(0)}
	tf := filepath.Join(t.TempDir(), "trainrun-4242.prom")
	o := newTestObserver(t, c, Config{MetricsAddr: "127.0.0.1:0", Textfile: tf})
	o.Observe(Event{Kind: KindStart, Time: at(0), Start: testStart()})
	resp, err := http.Get("http://" + o.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `trainrun_step_time_predicted_seconds{job_id="4242",partition="batch"} 2`) {
		t.Errorf("/metrics lacks the predicted step time:\n%s", body)
	}
	b, err := os.ReadFile(tf)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `trainrun_state{job_id="4242",partition="batch",state="running"} 1`) {
		t.Errorf("textfile:\n%s", b)
	}
	ents, _ := os.ReadDir(filepath.Dir(tf))
	if len(ents) != 1 {
		t.Errorf("textfile directory holds %d entries (a temporary file left behind?)", len(ents))
	}
	if _, err := New(Config{JobID: "1", Textfile: filepath.Join(t.TempDir(), "x.txt")}); err == nil || !strings.Contains(err.Error(), "*.prom") {
		t.Errorf("textfile without .prom: %v", err)
	}
}

// Webhooks: trainrun's JSON and Slack's payload, on the events that call
// for one, through a real HTTP server.
func TestWebhookPayloads(t *testing.T) {
	for _, tc := range []struct {
		name, format string
		check        func(t *testing.T, bodies []map[string]any)
	}{
		{"json", "json", func(t *testing.T, bodies []map[string]any) {
			var evs []string
			for _, b := range bodies {
				evs = append(evs, b["event"].(string))
				if b["job_id"] != "4242" || b["partition"] != "batch" {
					t.Errorf("payload %v", b)
				}
			}
			if strings.Join(evs, ",") != "preempted,requeued" {
				t.Errorf("webhook events %v, want preempted,requeued", evs)
			}
		}},
		{"slack", "slack", func(t *testing.T, bodies []map[string]any) {
			if len(bodies) != 2 {
				t.Fatalf("%d bodies", len(bodies))
			}
			txt, _ := bodies[1]["text"].(string)
			if txt != "trainrun job 4242 (llama) on batch: *requeued*: checkpointed and requeued" {
				t.Errorf("slack text %q", txt)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var bodies []map[string]any
			got := make(chan struct{}, 4)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var m map[string]any
				json.NewDecoder(r.Body).Decode(&m)
				mu.Lock()
				bodies = append(bodies, m)
				mu.Unlock()
				got <- struct{}{}
			}))
			defer srv.Close()
			c := &clock{t: at(0)}
			o := newTestObserver(t, c, Config{Webhook: srv.URL, WebhookFormat: tc.format})
			o.Observe(Event{Kind: KindStart, Time: at(0), Start: testStart()})
			o.Observe(Event{Kind: KindInterrupt, Time: at(1), Cause: InterruptPreempted})
			<-got // in order: the second is sent after the first arrived
			o.Observe(Event{Kind: KindEnd, Time: at(2), Cause: EndRequeued, Message: "checkpointed and requeued"})
			o.Close()
			mu.Lock()
			defer mu.Unlock()
			tc.check(t, bodies)
		})
	}
}

// blackhole accepts connections and never answers.
func blackhole(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	return "http://" + ln.Addr().String()
}

// A Pushgateway and a webhook that never answer: Close keeps its bound.
// The bound is the product's promise; the margin here is generous (a
// loaded machine), and without the bound Close would wait for the retries:
// 4 attempts of 3 s each plus backoff.
func TestCloseBoundedWhenEndpointsHang(t *testing.T) {
	url := blackhole(t)
	var logMu sync.Mutex
	var logs []string
	c := &clock{t: at(0)}
	o := newTestObserver(t, c, Config{Pushgateway: url, Webhook: url + "/hook", ExitBound: 500 * time.Millisecond,
		Logf: func(f string, a ...any) { logMu.Lock(); logs = append(logs, f); logMu.Unlock() }})
	o.Observe(Event{Kind: KindStart, Start: testStart()})
	o.Observe(Event{Kind: KindEnd, Cause: EndFinished})
	d := o.Close()
	if d > 3*time.Second {
		t.Errorf("Close took %s with a bound of 500ms", d)
	}
	logMu.Lock()
	defer logMu.Unlock()
	if !strings.Contains(strings.Join(logs, "\n"), "so as not to delay the job") {
		t.Errorf("no warning that the calls were abandoned: %q", logs)
	}
}

// The Pushgateway receives the final state in the job's group, with
// retries through a failing first answer.
func TestPushFinalStateWithRetry(t *testing.T) {
	var mu sync.Mutex
	var last string
	var paths []string
	fails := 1
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		paths = append(paths, r.Method+" "+r.URL.Path)
		if fails > 0 {
			fails--
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		b, _ := io.ReadAll(r.Body)
		last = string(b)
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	c := &clock{t: at(0)}
	o := newTestObserver(t, c, Config{Pushgateway: srv.URL})
	o.Observe(Event{Kind: KindStart, Start: testStart()})
	o.Observe(Event{Kind: KindEnd, Cause: EndFinished})
	o.Close()
	mu.Lock()
	defer mu.Unlock()
	if len(paths) < 2 || paths[0] != "PUT /metrics/job/trainrun/job_id/4242" {
		t.Errorf("requests %v", paths)
	}
	if !strings.Contains(last, "trainrun_state") {
		t.Fatalf("no push succeeded: %q", last)
	}
}

// What trainrun does not know is absent, not 0: a pinned layout has no
// prediction, a trainer that reports nothing has no observed speed, and
// no MaxCkptAge means no bound. Alert rules compare these series; a 0
// would make TrainrunMFUBelowPrediction and TrainrunCheckpointTooOld fire.
func TestUnknownFiguresAreAbsent(t *testing.T) {
	c := &clock{t: at(0)}
	o := newTestObserver(t, c, Config{})
	o.Observe(Event{Kind: KindStart, Time: at(0), Start: &Start{GPUs: 8, Nodes: 1, Layout: map[string]int{"tp": 8}}})
	for _, name := range []string{"trainrun_mfu_predicted_ratio", "trainrun_mfu_observed_ratio", "trainrun_step_time_predicted_seconds",
		"trainrun_step_time_observed_seconds", "trainrun_checkpoint_max_age_seconds", "trainrun_checkpoint_last_commit_timestamp_seconds",
		"trainrun_trainer_progress_timestamp_seconds", "trainrun_grace_margin_seconds", "trainrun_grace_budget_seconds"} {
		if n, err := testutil.GatherAndCount(o.Metrics().Registry, name); err != nil || n != 0 {
			t.Errorf("%s: %d series before anything set it (%v)", name, n, err)
		}
	}
	o.Observe(Event{Kind: KindProgress, Time: at(10), Step: 1})
	if n, _ := testutil.GatherAndCount(o.Metrics().Registry, "trainrun_trainer_step"); n != 1 {
		t.Errorf("trainrun_trainer_step: %d series after a progress report", n)
	}
}

// A controller that ends before its first event (bad flags, nothing fits)
// pushes nothing: it has no run state.
func TestNoPushWithoutEvents(t *testing.T) {
	var mu sync.Mutex
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		mu.Unlock()
	}))
	defer srv.Close()
	o := newTestObserver(t, &clock{t: at(0)}, Config{Pushgateway: srv.URL})
	o.Close()
	mu.Lock()
	defer mu.Unlock()
	if n != 0 {
		t.Errorf("%d pushes from an observer that saw no event", n)
	}
}
