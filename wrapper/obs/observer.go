package obs

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Config says where the run's metrics and notifications go. The zero value
// (besides JobDir, JobID and Logf) exports nothing but the event log.
type Config struct {
	JobDir    string // the event log goes to JOBDIR/events.jsonl ("" = none)
	JobID     string
	Partition string
	Restart   int
	Sweep     string // TRAINRUN_SWEEP: a trial's Pushgateway group also carries sweep=Sweep

	// MetricsAddr is HOST:PORT to serve /metrics on ("" = off).
	MetricsAddr string
	// Textfile is the node_exporter textfile collector file to keep
	// current (written atomically; "" = off). Its name must end in .prom.
	Textfile string
	// Pushgateway is the base URL of a Prometheus Pushgateway ("" = off).
	// The run's metrics are pushed to the group job="trainrun",
	// job_id=JobID at every state change and at exit.
	Pushgateway string
	// Webhook is a URL that gets a JSON POST on preempted, requeued,
	// failed, stopped and finished ("" = off); WebhookFormat "slack" sends
	// Slack's {"text": ...} payload instead of trainrun's JSON.
	Webhook       string
	WebhookFormat string
	// ExitBound is the most Close spends on the final push and pending
	// webhooks (default DefaultExitBound): the job's exit is never delayed
	// longer, whatever the network does.
	ExitBound time.Duration

	Logf   func(format string, a ...any) // warnings (required)
	Debugf func(format string, a ...any) // retry chatter (nil = dropped)
	Now    func() time.Time              // nil = time.Now
}

// DefaultExitBound is Config.ExitBound when not set.
const DefaultExitBound = 5 * time.Second

// WebhookFormats are the accepted values of Config.WebhookFormat.
var WebhookFormats = []string{"json", "slack"}

// Observer receives the run's events (Observe) and exports them.
type Observer struct {
	cfg     Config
	m       *Metrics
	now     func() time.Time
	logPath string

	mu       sync.Mutex
	st       runState
	lastFile time.Time // textfile last written
	lastLog  time.Time // last progress event logged
	unlogged *Event    // the newest progress event, when not in the log

	srv      *http.Server
	ln       net.Listener
	notify   *notifier
	goodput  goodputLog // the events the goodput is computed from
	stopTick chan struct{}
	tickDone chan struct{}
	closed   bool
}

// runState is what the metrics need to remember between events.
type runState struct {
	incStart     time.Time
	start        Start
	captured     time.Time // training position of the newest checkpoint (approx.)
	interruptAt  time.Time
	interruptWhy string
	requestAt    time.Time
	samples      []sample // progress, last minute
	lastStep     int64
	stepSeen     bool
	ended        bool
}

type sample struct {
	t      time.Time
	step   int64
	tokens int64
}

// New sets up the observer: replays the job directory's event log into the
// counters (earlier incarnations), starts the HTTP listener when asked (a
// port in use is an error that says so) and the background pushes. Call
// Close when the controller exits.
func New(cfg Config) (*Observer, error) {
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	if cfg.ExitBound <= 0 {
		cfg.ExitBound = DefaultExitBound
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	if cfg.WebhookFormat == "" {
		cfg.WebhookFormat = "json"
	}
	if cfg.WebhookFormat != "json" && cfg.WebhookFormat != "slack" {
		return nil, fmt.Errorf("webhook format %q: use json or slack", cfg.WebhookFormat)
	}
	if cfg.Textfile != "" && filepath.Ext(cfg.Textfile) != ".prom" {
		return nil, fmt.Errorf("metrics textfile %s: node_exporter's textfile collector reads only *.prom files; name it like trainrun-%s.prom", cfg.Textfile, cfg.JobID)
	}
	o := &Observer{cfg: cfg, now: now, m: NewMetrics(cfg.JobID, cfg.Partition, now)}
	if cfg.JobDir != "" {
		o.logPath = filepath.Join(cfg.JobDir, EventsFile)
		past, err := ReadEvents(cfg.JobDir)
		if err != nil {
			cfg.Logf("warning: metrics: %v; counters start from zero", err)
		}
		o.replay(past)
	}
	if cfg.MetricsAddr != "" {
		ln, err := net.Listen("tcp", cfg.MetricsAddr)
		if err != nil {
			if errors.Is(err, syscall.EADDRINUSE) {
				return nil, fmt.Errorf("metrics address %s is in use on this node (another job's trainrun or another exporter listens there): choose a free port, or use a textfile (--metrics-textfile) or a Pushgateway", cfg.MetricsAddr)
			}
			return nil, fmt.Errorf("metrics address %s: %w", cfg.MetricsAddr, err)
		}
		o.ln = ln
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(o.m.Registry, promhttp.HandlerOpts{ErrorLog: logAdapter(cfg.Logf)}))
		mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "trainrun job %s: metrics at /metrics\n", cfg.JobID)
		})
		o.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go o.srv.Serve(ln)
	}
	if cfg.Pushgateway != "" || cfg.Webhook != "" {
		o.notify = newNotifier(cfg, o.m.pushRegistry)
	}
	if cfg.Textfile != "" {
		o.stopTick, o.tickDone = make(chan struct{}), make(chan struct{})
		go o.textfileLoop()
	}
	return o, nil
}

// Addr is the address the metrics listener is bound to ("" when off).
func (o *Observer) Addr() string {
	if o.ln == nil {
		return ""
	}
	return o.ln.Addr().String()
}

// Metrics is the observer's metric set (tests gather its registry).
func (o *Observer) Metrics() *Metrics { return o.m }

// Observe records one event: the log, the metrics, the textfile, a push of
// the new state and a webhook where the event calls for one. It never
// blocks on the network.
func (o *Observer) Observe(e Event) {
	if e.Time.IsZero() {
		e.Time = o.now()
	}
	if e.JobID == "" {
		e.JobID = o.cfg.JobID
	}
	if e.Kind != KindStart || e.Restart == 0 {
		e.Restart = max(e.Restart, o.cfg.Restart)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return
	}
	o.apply(&e, true)
	// Progress is sampled into the log (once a minute, and the newest
	// before any other event), the rest always.
	if o.logPath != "" {
		if e.Kind == KindProgress && e.Time.Sub(o.lastLog) < time.Minute {
			o.unlogged = &e
		} else {
			if e.Kind == KindProgress {
				o.lastLog, o.unlogged = e.Time, nil
			}
			if o.unlogged != nil {
				o.logEvent(*o.unlogged)
				o.unlogged = nil
			}
			o.logEvent(e)
		}
	}
	if e.Kind != KindProgress {
		o.writeTextfile()
		if o.notify != nil {
			o.notify.kickPush()
			if name, ok := webhookEvent(e); ok {
				o.notify.webhook(name, e, o.st.start)
			}
		}
	}
}

func (o *Observer) logEvent(e Event) {
	if err := appendEvent(o.logPath, e); err != nil {
		o.cfg.Logf("warning: event log %s: %v", o.logPath, err)
	}
}

// replay counts what earlier incarnations recorded.
func (o *Observer) replay(evs []Event) {
	for i := range evs {
		o.apply(&evs[i], false)
	}
	// An incarnation killed before its end event was a crash.
	if !o.st.incStart.IsZero() && !o.st.ended {
		o.m.crashes.WithLabelValues(CrashKilled).Inc()
	}
	o.st = runState{captured: o.st.captured}
}

// apply updates the metrics for one event; live is false while replaying
// the log of earlier incarnations (the gauges of the present one are then
// set again by its own events).
func (o *Observer) apply(e *Event, live bool) {
	o.goodput.add(*e)
	defer o.setGoodput(e, live)
	switch e.Kind {
	case KindStart:
		o.onStart(e, live)
	case KindCkptRequest:
		o.onCkptRequest(e, live)
	case KindCkptCommit:
		o.onCkptCommit(e, live)
	case KindCkptFail:
		o.m.ckptFail.WithLabelValues(orText(e.Cause, "unknown")).Inc()
	case KindDrain:
		o.onDrain(e.Drain)
	case KindInterrupt:
		o.onInterrupt(e, live)
	case KindProgress:
		if live {
			o.progress(*e)
		}
	case KindEnd:
		o.onEnd(e, live)
	case KindRestart:
		o.onRestart(e, live)
	case KindForecast:
		o.onForecast(e)
	case KindLossSpike:
		o.onLossSpike(e)
	case KindMigrate:
		o.onMigrate(e)
	case KindResize:
		o.onResize(e)
	case KindHealth:
		o.countHealth(e)
	}
}

// onStart begins an incarnation: one that began before it without an end
// was killed; the newest checkpoint's position is all that carries over.
func (o *Observer) onStart(e *Event, live bool) {
	m, st := o.m, &o.st
	if !st.incStart.IsZero() && !st.ended {
		m.crashes.WithLabelValues(CrashKilled).Inc()
	}
	captured := st.captured
	*st = runState{incStart: e.Time, captured: captured}
	if e.Start != nil {
		st.start = *e.Start
	}
	if !live {
		return
	}
	s := st.start
	m.setLayout(&s)
	m.restart.Set(float64(e.Restart))
	m.gpus.Set(float64(s.GPUs))
	m.startTime.Set(unix(e.Time))
	setIf(m.predStep, s.StepSeconds)
	setIf(m.predMFU, s.MFU)
	setIf(m.predTokens, s.TokensPerSecond)
	setIf(m.ckptMaxAge, s.MaxCkptAge.Seconds())
	setIf(m.graceBudget, s.GraceBudget.Seconds())
	m.setState("running")
}

func (o *Observer) onCkptRequest(e *Event, live bool) {
	o.st.requestAt = e.Time
	if live {
		o.m.setState("checkpointing")
	}
}

// onCkptCommit counts a committed checkpoint (filling in its save time when
// live and the trainer did not say) and remembers what training state it
// holds.
func (o *Observer) onCkptCommit(e *Event, live bool) {
	m, st := o.m, &o.st
	c := e.Ckpt
	if c == nil {
		return
	}
	if live && c.Save == 0 && !c.CompleteAt.IsZero() {
		c.Save = o.inferredSave(c)
	}
	m.ckptCommits.Inc()
	m.ckptWritten.Add(float64(c.Bytes))
	if c.Save > 0 {
		m.ckptDur.WithLabelValues("save").Observe(c.Save.Seconds())
	}
	m.ckptDur.WithLabelValues("commit").Observe(c.Commit.Seconds())
	m.ckptBytes.Set(float64(c.Bytes))
	m.setLastCommit(e.Time)
	// The training state it holds is from about when it was asked
	// for (or, unasked, when it was complete: lost work is then
	// undercounted by the save time).
	if !c.CompleteAt.IsZero() {
		st.captured = c.CompleteAt.Add(-c.Save)
	} else {
		st.captured = e.Time.Add(-c.Commit - c.Save)
	}
	// The margin of the last interruption's checkpoint, kept across
	// incarnations (replayed): the next one's push replaces the group.
	if !st.interruptAt.IsZero() {
		if d := o.deadline(); !d.IsZero() {
			m.graceMargin.Set(d.Sub(e.Time).Seconds())
		}
	}
}

// inferredSave is the save time of a checkpoint complete at c.CompleteAt:
// from trainrun's request, or the preemption that came after it, to then;
// 0 (unknown) when nothing asked for it since the previous checkpoint.
func (o *Observer) inferredSave(c *Ckpt) time.Duration {
	st := &o.st
	asked := st.requestAt
	if st.interruptWhy == InterruptPreempted && st.interruptAt.After(asked) {
		asked = st.interruptAt
	}
	if !asked.IsZero() && c.CompleteAt.After(asked) && asked.After(st.captured) {
		return c.CompleteAt.Sub(asked)
	}
	return 0
}

func (o *Observer) onDrain(d *Drain) {
	if d == nil {
		return
	}
	m := o.m
	m.drainBytes.Add(float64(d.Bytes))
	m.drainSeconds.Add(d.Duration.Seconds())
	if d.Duration > 0 {
		m.drainRate.Set(float64(d.Bytes) / d.Duration.Seconds())
	}
}

// onInterrupt counts an interruption; the first of the incarnation is the
// one its lost work and grace margin are measured from.
func (o *Observer) onInterrupt(e *Event, live bool) {
	st := &o.st
	if st.interruptAt.IsZero() {
		st.interruptAt, st.interruptWhy = e.Time, e.Cause
	}
	o.m.interrupts.WithLabelValues(orText(e.Cause, "unknown")).Inc()
	if live {
		o.m.setState("checkpointing")
	}
}

// onEnd closes the incarnation: requeue and crash counts, and the work lost
// when it did not finish.
func (o *Observer) onEnd(e *Event, live bool) {
	m, st := o.m, &o.st
	st.ended = true
	if e.Cause == EndRequeued || e.Requeued {
		m.requeues.Inc()
	}
	if e.Cause == EndCrash {
		m.crashes.WithLabelValues(orText(e.Crash, CrashStepFailed)).Inc()
	}
	if e.Cause != EndFinished && !st.incStart.IsZero() {
		m.lost.Observe(o.lostWork(e.Time).Seconds())
	}
	o.onEndFaults(e)
	if live {
		m.setState(endState(e))
	}
}

// lostWork is the training time since the newest checkpoint (or the
// incarnation's start) up to the first interruption, or up to end when
// there was none; never negative.
func (o *Observer) lostWork(end time.Time) time.Duration {
	st := &o.st
	stopped := end
	if !st.interruptAt.IsZero() {
		stopped = st.interruptAt
	}
	from := st.incStart
	if st.captured.After(from) {
		from = st.captured
	}
	return max(0, stopped.Sub(from))
}

// endState is the trainrun_state an end event leaves.
func endState(e *Event) string {
	switch {
	case e.Requeued:
		return "requeued"
	case e.Cause == EndFinished:
		return "finished"
	case e.Cause == EndRequeued:
		return "requeued"
	case e.Cause == EndStopped:
		return "stopped"
	}
	return "failed"
}

// deadline is when the interrupted incarnation's checkpoint had to be done:
// the time limit, or the preemption's SIGTERM plus the grace budget.
func (o *Observer) deadline() time.Time {
	st := &o.st
	switch st.interruptWhy {
	case InterruptPreempted:
		if st.start.GraceBudget > 0 {
			return st.interruptAt.Add(st.start.GraceBudget)
		}
	case InterruptTimeLimit, InterruptSignal:
		return st.start.EndTime
	}
	return time.Time{}
}

// progress updates step time, throughput and MFU from the last minute of
// the trainer's reports.
func (o *Observer) progress(e Event) {
	m, st := o.m, &o.st
	if st.stepSeen && e.Step <= st.lastStep {
		if e.Step < st.lastStep { // a new count (restart from an older checkpoint)
			st.samples = nil
		} else {
			return
		}
	}
	st.lastStep, st.stepSeen = e.Step, true
	m.step.Set(float64(e.Step))
	m.progressTime.Set(unix(e.Time))
	st.samples = append(st.samples, sample{e.Time, e.Step, e.Tokens})
	for len(st.samples) > 2 && e.Time.Sub(st.samples[0].t) > time.Minute {
		st.samples = st.samples[1:]
	}
	first, last := st.samples[0], st.samples[len(st.samples)-1]
	dt := last.t.Sub(first.t).Seconds()
	if last.step <= first.step || dt <= 0 {
		return
	}
	stepS := dt / float64(last.step-first.step)
	m.obsStep.Set(stepS)
	if last.tokens > first.tokens {
		m.obsTokens.Set(float64(last.tokens-first.tokens) / dt)
	} else if st.start.TokensPerStep > 0 {
		m.obsTokens.Set(st.start.TokensPerStep / stepS)
	}
	if st.start.MFU > 0 && st.start.StepSeconds > 0 {
		// Same work per step as planned: MFU scales with 1/step time.
		m.obsMFU.Set(st.start.MFU * st.start.StepSeconds / stepS)
	}
}

func setIf(g optGauge, v float64) {
	if v > 0 {
		g.Set(v)
	}
}

func unix(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

func orText(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// textfileLoop keeps the textfile's time-dependent values fresh.
func (o *Observer) textfileLoop() {
	defer close(o.tickDone)
	t := time.NewTicker(15 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-o.stopTick:
			return
		case <-t.C:
			o.mu.Lock()
			o.writeTextfile()
			o.mu.Unlock()
		}
	}
}

// writeTextfile replaces the textfile atomically (a temporary file in the
// same directory, renamed over it), so node_exporter never reads half.
func (o *Observer) writeTextfile() {
	if o.cfg.Textfile == "" {
		return
	}
	if err := prometheus.WriteToTextfile(o.cfg.Textfile, o.m.Registry); err != nil {
		o.cfg.Logf("warning: metrics textfile %s: %v", o.cfg.Textfile, err)
	}
	o.lastFile = o.now()
}

// Close writes the final textfile, makes the final push and sends pending
// webhooks, spending at most Config.ExitBound on them, then stops the
// listener. It returns how long it took.
func (o *Observer) Close() time.Duration {
	t0 := time.Now()
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return 0
	}
	o.closed = true
	o.writeTextfile()
	o.mu.Unlock()
	if o.stopTick != nil {
		close(o.stopTick)
		<-o.tickDone
	}
	if o.notify != nil {
		o.notify.close(o.cfg.ExitBound)
	}
	if o.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		o.srv.Shutdown(ctx)
		cancel()
	}
	return time.Since(t0)
}

// logAdapter makes promhttp's error logger print through trainrun's log.
type logAdapter func(string, ...any)

func (l logAdapter) Println(v ...any) { l("warning: metrics: %s", fmt.Sprint(v...)) }
