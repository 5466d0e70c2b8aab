package obs

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-retryablehttp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/push"
)

// Retry bounds of every outbound call (Pushgateway and webhooks): a few
// attempts with exponential backoff, each attempt bounded, the whole call
// bounded by its context. While the job runs a call may take
// callTimeout; at exit everything left shares Config.ExitBound.
const (
	retryMax       = 3
	retryWaitMin   = 200 * time.Millisecond
	retryWaitMax   = 2 * time.Second
	attemptTimeout = 3 * time.Second
	callTimeout    = 15 * time.Second
)

// notifier runs the pushes and webhooks in the background.
type notifier struct {
	cfg    Config
	client *retryablehttp.Client
	pusher *push.Pusher

	ctx    context.Context // cancelled when Close's bound runs out
	cancel context.CancelFunc
	// loopCtx bounds the pushes of the running job; close cancels it at
	// once: the final push supersedes a push still in flight.
	loopCtx    context.Context
	loopCancel context.CancelFunc
	kick       chan struct{}
	kicked     atomic.Bool    // a state worth pushing exists (an event was observed)
	wg         sync.WaitGroup // webhooks in flight
	loop       chan struct{}  // closed when the push loop ended
	stop       chan struct{}
}

// newRetryClient is a retryablehttp client with trainrun's bounds whose
// log goes to trainrun's own (its default logger writes to stderr).
func newRetryClient(cfg Config) *retryablehttp.Client {
	c := retryablehttp.NewClient()
	c.HTTPClient.Timeout = attemptTimeout // NewClient's is a pooled client of its own
	c.RetryMax = retryMax
	c.RetryWaitMin, c.RetryWaitMax = retryWaitMin, retryWaitMax
	c.Logger = leveled{warn: cfg.Logf, debug: cfg.Debugf}
	return c
}

func newNotifier(cfg Config, g prometheus.Gatherer) *notifier {
	cfg.Logf, cfg.Debugf = redacting(cfg.Logf), redacting(cfg.Debugf) // URLs hold tokens: never logged whole
	n := &notifier{cfg: cfg, client: newRetryClient(cfg), kick: make(chan struct{}, 1),
		loop: make(chan struct{}), stop: make(chan struct{})}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	n.loopCtx, n.loopCancel = context.WithCancel(n.ctx)
	if cfg.Pushgateway != "" {
		n.pusher = push.New(cfg.Pushgateway, "trainrun").Grouping("job_id", cfg.JobID).
			Gatherer(g).Client(n.client.StandardClient())
		if cfg.Sweep != "" { // every trial of a sweep under one label: sum by (sweep)
			n.pusher = n.pusher.Grouping("sweep", cfg.Sweep)
		}
	}
	go n.pushLoop()
	return n
}

func (n *notifier) kickPush() {
	if n.pusher == nil {
		return
	}
	n.kicked.Store(true)
	select {
	case n.kick <- struct{}{}:
	default: // one push is pending already; it will carry this state too
	}
}

// pushLoop pushes the state after each change, one push at a time.
func (n *notifier) pushLoop() {
	defer close(n.loop)
	for {
		select {
		case <-n.stop:
			return
		case <-n.kick:
			ctx, cancel := context.WithTimeout(n.loopCtx, callTimeout)
			if err := n.pusher.PushContext(ctx); err != nil && n.loopCtx.Err() == nil {
				n.cfg.Logf("warning: metrics: push to %s: %v", n.cfg.Pushgateway, err)
			}
			cancel()
		}
	}
}

// close makes the final push and waits for the webhooks, all within bound.
func (n *notifier) close(bound time.Duration) {
	deadline := time.Now().Add(bound)
	close(n.stop)
	n.loopCancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-n.loop // a push in flight ends, or is cancelled below
		// A controller that stopped before its first event (bad flags, no
		// layout fits) has no run state to push.
		if n.pusher != nil && n.kicked.Load() {
			ctx, cancel := context.WithDeadline(n.ctx, deadline)
			if err := n.pusher.PushContext(ctx); err != nil {
				n.cfg.Logf("warning: metrics: final push to %s: %v (gave up within %s so as not to delay the job)", n.cfg.Pushgateway, err, bound)
			}
			cancel()
		}
		n.wg.Wait()
	}()
	select {
	case <-done:
	case <-time.After(time.Until(deadline)):
		n.cfg.Logf("warning: metrics: Pushgateway/webhook calls still unanswered after %s; abandoned so as not to delay the job", bound)
	}
	n.cancel()
}

// webhookEvent is the webhook name of an event, if it has one.
func webhookEvent(e Event) (string, bool) {
	switch {
	case e.Kind == KindInterrupt && e.Cause == InterruptPreempted:
		return "preempted", true
	case e.Kind == KindLossSpike:
		return "loss-spike", true
	case e.Kind == KindMigrate:
		return "migrated", true
	case e.Kind == KindForecast && e.Forecast != nil && e.Forecast.Changed:
		return e.Forecast.Verdict, true // on-track, off-track: the verdict turned
	case e.Kind == KindEnd:
		switch e.Cause {
		case EndRequeued:
			return "requeued", true
		case EndFinished:
			return "finished", true
		case EndStopped:
			return "stopped", true
		case EndCrash, EndLimit:
			return "failed", true
		}
	}
	return "", false
}

// WebhookPayload is the JSON body of a webhook in the json format.
type WebhookPayload struct {
	Event     string    `json:"event"` // preempted, requeued, failed, stopped, finished; on-track, off-track (the forecast's verdict turned); loss-spike; migrated
	JobID     string    `json:"job_id"`
	JobName   string    `json:"job_name,omitempty"`
	Partition string    `json:"partition,omitempty"`
	Restart   int       `json:"restart"`
	Time      time.Time `json:"time"`
	Cause     string    `json:"cause,omitempty"`
	Exit      int       `json:"exit,omitempty"`
	Message   string    `json:"message,omitempty"`
	Requeued  bool      `json:"requeued,omitempty"` // a failed step that trainrun requeued
}

func webhookBody(format, name string, e Event, s Start) ([]byte, error) {
	p := WebhookPayload{Event: name, JobID: e.JobID, JobName: s.JobName, Partition: s.Partition, Restart: e.Restart,
		Time: e.Time.UTC(), Cause: cmp.Or(e.Crash, e.Cause), Exit: e.Exit, Message: e.Message, Requeued: e.Requeued}
	if format != "slack" {
		return json.Marshal(p)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "trainrun job %s", p.JobID)
	if p.JobName != "" {
		fmt.Fprintf(&b, " (%s)", p.JobName)
	}
	if p.Partition != "" {
		fmt.Fprintf(&b, " on %s", p.Partition)
	}
	fmt.Fprintf(&b, ": *%s*", name)
	if p.Restart > 0 {
		fmt.Fprintf(&b, " (restart %d)", p.Restart)
	}
	if p.Requeued && name != "requeued" {
		b.WriteString(", requeued")
	}
	if p.Message != "" {
		fmt.Fprintf(&b, ": %s", p.Message)
	}
	return json.Marshal(map[string]string{"text": b.String()})
}

func (n *notifier) webhook(name string, e Event, s Start) {
	if n.cfg.Webhook == "" {
		return
	}
	body, err := webhookBody(n.cfg.WebhookFormat, name, e, s)
	if err != nil {
		n.cfg.Logf("warning: webhook: %v", err)
		return
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		ctx, cancel := context.WithTimeout(n.ctx, callTimeout)
		defer cancel()
		req, err := retryablehttp.NewRequestWithContext(ctx, http.MethodPost, n.cfg.Webhook, bytes.NewReader(body))
		if err != nil {
			n.cfg.Logf("warning: webhook %s: %v", n.cfg.Webhook, err)
			return
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := n.client.Do(req)
		if err != nil {
			if n.ctx.Err() == nil {
				n.cfg.Logf("warning: webhook %s (%s): %v", n.cfg.Webhook, name, err)
			}
			return
		}
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			n.cfg.Logf("warning: webhook %s (%s): %s", n.cfg.Webhook, name, resp.Status)
		}
	}()
}

// leveled routes retryablehttp's log into trainrun's: errors and warnings
// as warnings, its per-attempt chatter to the debug log (dropped unless set).
type leveled struct{ warn, debug func(string, ...any) }

func kv(msg string, kvs []any) string {
	var b strings.Builder
	b.WriteString(msg)
	for i := 0; i+1 < len(kvs); i += 2 {
		fmt.Fprintf(&b, " %v=%v", kvs[i], kvs[i+1])
	}
	return b.String()
}

// Error: a request trainrun itself cancelled (a push superseded by the
// final one, or abandoned at the exit bound, which is reported once) is
// not worth a warning.
func (l leveled) Error(msg string, kvs ...any) {
	for _, v := range kvs {
		if err, ok := v.(error); ok && errors.Is(err, context.Canceled) {
			l.Debug(msg, kvs...)
			return
		}
	}
	l.warn("warning: http: %s", kv(msg, kvs))
}
func (l leveled) Warn(msg string, kvs ...any) { l.warn("warning: http: %s", kv(msg, kvs)) }
func (l leveled) Info(msg string, kvs ...any) {
	if l.debug != nil {
		l.debug("http: %s", kv(msg, kvs))
	}
}
func (l leveled) Debug(msg string, kvs ...any) {
	if l.debug != nil {
		l.debug("http: %s", kv(msg, kvs))
	}
}
