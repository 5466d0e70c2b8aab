package run

import (
	"cmp"
	"errors"
	"sync"
	"time"

	"github.com/spf13/pflag"
	"github.com/trainrun/trainrun/checkpoint"
	"github.com/trainrun/trainrun/internal/slurm"
	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
	"github.com/trainrun/trainrun/wrapper/internal/jobdir"
	"github.com/trainrun/trainrun/wrapper/internal/losshist"
	"github.com/trainrun/trainrun/wrapper/obs"
)

// runObserver is what the controller tells of the run's life: one call per
// event (obs.Event), and Close as it exits (bounded: see obs.Config.ExitBound).
type runObserver interface {
	Observe(obs.Event)
	Close() time.Duration
}

// obsOptions are the flags of `trainrun run` for metrics and notifications.
type obsOptions struct {
	metricsAddr   string
	textfile      string
	pushgateway   string
	webhook       string
	webhookFormat string
	notifyBound   time.Duration
	graceBudget   time.Duration
	maxCkptAge    time.Duration
	targetLoss    string // --target-loss: forecast at each checkpoint (cmd_forecast.go)
	stopOffTrack  string // --stop-if-off-track[=P]: the probability ("": off)
	trainSteps    string // --train-steps: the run's optimizer steps, its budget without --tokens (budget.go)
}

func (o *obsOptions) addFlags(fs *pflag.FlagSet, getenv func(string) string) {
	fs.StringVar(&o.metricsAddr, "metrics-addr", getenv("TRAINRUN_METRICS_ADDR"), "serve Prometheus metrics on HOST:PORT (env TRAINRUN_METRICS_ADDR; off by default)")
	fs.StringVar(&o.textfile, "metrics-textfile", getenv("TRAINRUN_METRICS_TEXTFILE"), "keep this node_exporter textfile collector file (*.prom) current, written atomically (env TRAINRUN_METRICS_TEXTFILE)")
	fs.StringVar(&o.pushgateway, "pushgateway", getenv("TRAINRUN_PUSHGATEWAY"), "push the run's metrics to this Pushgateway URL at each state change and at exit (env TRAINRUN_PUSHGATEWAY)")
	fs.StringVar(&o.webhook, "webhook", getenv("TRAINRUN_WEBHOOK"), "POST a JSON event to this URL when the job is preempted, requeued, fails, stops or finishes (env TRAINRUN_WEBHOOK)")
	fs.StringVar(&o.webhookFormat, "webhook-format", envOr(getenv, "TRAINRUN_WEBHOOK_FORMAT", "json"), "webhook payload: json (trainrun's) or slack ({\"text\": ...}, for Slack-compatible incoming webhooks)")
	fs.DurationVar(&o.notifyBound, "notify-timeout", obs.DefaultExitBound, "at exit, spend at most this on the final push and pending webhooks (the job's exit is never delayed longer)")
	fs.DurationVar(&o.graceBudget, "grace-budget", 0, "time a checkpoint may take after a preemption's SIGTERM, for the grace-margin metric (default: the partition's GraceTime)")
	fs.StringVar(&o.targetLoss, "target-loss", getenv("TRAINRUN_TARGET_LOSS"), "forecast the loss at --tokens at each checkpoint against this target: metrics trainrun_forecast_loss and trainrun_on_track, a webhook when the verdict turns (env TRAINRUN_TARGET_LOSS)")
	fs.StringVar(&o.stopOffTrack, "stop-if-off-track", getenv("TRAINRUN_STOP_IF_OFF_TRACK"), "[=P] with --target-loss: once the forecast is off track with probability P (bare: 0.9), checkpoint and stop with exit 12 (env TRAINRUN_STOP_IF_OFF_TRACK=P)")
	fs.Lookup("stop-if-off-track").NoOptDefVal = "0.9"
	fs.StringVar(&o.trainSteps, "train-steps", getenv("TRAINRUN_TRAIN_STEPS"), "the optimizer steps the run trains: its budget for --target-loss and trainrun forecast where --tokens is not given (in tokens at --global-batch × --seq-len, or at the tokens per step the trainer reports; env TRAINRUN_TRAIN_STEPS)")
	fs.DurationVar(&o.maxCkptAge, "max-ckpt-age", 0, "export this as the bound on the newest checkpoint's age (trainrun_checkpoint_max_age_seconds, for the alert rule); 0: none")
}

// startObserver opens the run's observer: the event log in the job
// directory, and the exporters the flags ask for.
func (r *runner) startObserver() error {
	o := r.cfg.obs
	if o.notifyBound <= 0 {
		return usageErrorf("--notify-timeout %s: want a positive duration such as 5s", o.notifyBound)
	}
	if err := r.startForecast(); err != nil { // cmd_forecast.go
		return err
	}
	ob, err := obs.New(obs.Config{
		JobDir: r.dirs.jobDir, JobID: r.alloc.JobID, Partition: r.partition(), Restart: r.alloc.RestartCount, Sweep: r.env.Getenv("TRAINRUN_SWEEP"),
		MetricsAddr: o.metricsAddr, Textfile: o.textfile, Pushgateway: o.pushgateway,
		Webhook: o.webhook, WebhookFormat: o.webhookFormat, ExitBound: o.notifyBound,
		Logf: r.logf,
	})
	if err != nil {
		return withCode(exitcode.Usage, err)
	}
	if a := ob.Addr(); a != "" {
		r.logf("metrics on http://%s/metrics", a)
	}
	r.sess.obs = ob
	return nil
}

// observe passes one event to the observer (none in a dry run).
func (r *runner) observe(e obs.Event) {
	if r.sess.obs != nil {
		r.sess.obs.Observe(e)
	}
}

// closeObserver ends the observer, within --notify-timeout.
func (r *runner) closeObserver() {
	if r.sess.obs == nil {
		return
	}
	if d := r.sess.obs.Close(); d > time.Second {
		r.logf("metrics and notifications took %.1f s at exit", d.Seconds())
	}
}

// observeStart describes the incarnation about to launch.
func (r *runner) observeStart() {
	l := r.choice.Layout
	s := &obs.Start{
		Partition: r.partition(), JobName: cmp.Or(slurm.JobFromEnv(r.env.Getenv).Name, r.facts.job.Name),
		Run: r.dirs.runName, Sweep: r.env.Getenv("TRAINRUN_SWEEP"),
		Nodes: len(r.alloc.Nodes), GPUs: r.alloc.World(), GPUType: cmp.Or(r.choice.GPU, r.cfg.plan.GPU, r.probedGPUName()),
		Layout:  map[string]int{"tp": l.TP, "pp": l.PP, "vpp": l.VPP, "cp": l.CP, "ep": l.EP, "dp": l.DP, "mbs": l.MicroBatch},
		EndTime: r.alloc.EndTime, CkptLead: r.facts.lead, MaxCkptAge: r.cfg.obs.maxCkptAge,
		GraceBudget: r.cfg.obs.graceBudget, ResumeFrom: r.ckpt.resume, CkptDir: r.dirs.ckptDir,
	}
	s.ContainerImage, s.ContainerRuntime = r.containerRecord()
	if s.GraceBudget == 0 && r.facts.grace.GraceTime > 0 { // read once at start (scontrolGraceLimits)
		s.GraceBudget = r.facts.grace.GraceTime
	}
	if ev := r.choice.Eval; ev != nil {
		s.StepSeconds, s.MFU = ev.Time.Step, ev.MFU
		s.TokensPerSecond = ev.TokensPerSPerGPU * float64(r.alloc.World())
		s.TokensPerStep = s.TokensPerSecond * s.StepSeconds
	}
	r.observe(obs.Event{Kind: obs.KindStart, Restart: r.alloc.RestartCount, Start: s})
	r.sess.progress = obs.NewProgressReader(r.dirs.in(jobdir.Launch, obs.ProgressFile))
	r.startRecorder() // the run's observation (calib.go)
}

// interruptCause maps the controller's stop reasons onto the metrics'.
var interruptCause = map[StopReason]string{
	TimeLimit: obs.InterruptTimeLimit, TermLimit: obs.InterruptTimeLimit, Signal: obs.InterruptSignal,
	Preempted: obs.InterruptPreempted, Cancelled: obs.InterruptCancelled, Requested: obs.InterruptRequested,
}

// observeInterrupt records an interruption once per cause.
func (r *runner) observeInterrupt(reason StopReason) {
	c := interruptCause[reason]
	if c == "" || r.sess.interrupted[c] {
		return
	}
	if r.sess.interrupted == nil {
		r.sess.interrupted = map[string]bool{}
	}
	r.sess.interrupted[c] = true
	r.observe(obs.Event{Kind: obs.KindInterrupt, Cause: c})
}

// observeEnd classifies how the incarnation ends from what run returns
// and the cause it recorded in the job history.
func (r *runner) observeEnd(err error) {
	if r.sess.obs != nil {
		r.pollProgress() // the trainer's last steps, since the last poll
	}
	r.finishObservation() // calib.go
	e := obs.Event{Kind: obs.KindEnd, Exit: exitcode.Of(err), Cause: obs.EndFinished}
	if err != nil && !errors.Is(err, exitcode.ErrSilent) {
		e.Message = err.Error()
	}
	e.Requeued = e.Exit == exitcode.Requeued
	switch {
	case r.sess.endCause == checkpoint.CauseCrash:
		e.Cause, e.Crash = obs.EndCrash, crashCause(e.Exit)
	case err == nil:
	case e.Exit == exitcode.Requeued:
		e.Cause = obs.EndRequeued
	case e.Exit == exitcode.Stopped:
		e.Cause = obs.EndStopped
	case e.Exit == exitcode.RequeueLimit:
		e.Cause = obs.EndLimit
	default:
		e.Cause, e.Crash = obs.EndCrash, crashCause(e.Exit)
	}
	e.Fault = faultOf[r.sess.endCause]
	e.FailureClass, e.FailureEvidence = string(r.sess.failClass.Class), r.sess.failClass.Evidence
	for _, f := range r.failedNodes() {
		e.FailedNodes = append(e.FailedNodes, obs.FailedNode{Node: f.Node, Cause: string(f.Cause), Detail: f.Detail})
	}
	if e.Exit == exitcode.Checkpoint && !r.sess.commitFailed {
		r.observe(obs.Event{Kind: obs.KindCkptFail, Cause: "incomplete", Message: e.Message})
	}
	r.observe(e)
}

// faultOf maps the history's failure causes onto the event's.
var faultOf = map[checkpoint.Cause]string{checkpoint.CauseCrash: obs.FaultCrash, checkpoint.CauseNodeFail: obs.FaultNode,
	checkpoint.CauseHang: obs.FaultHang, checkpoint.CauseDisk: obs.FaultDisk}

func crashCause(code int) string {
	switch code {
	case exitcode.NotFound:
		return obs.CrashNotFound
	case exitcode.Checkpoint:
		return obs.CrashCheckpoint
	case exitcode.Slurm:
		return obs.CrashSlurm
	}
	return obs.CrashStepFailed
}

// pollProgress reads the trainer's progress file (JOBDIR/launch/progress).
func (r *runner) pollProgress() {
	if r.sess.progress == nil {
		r.sess.progress = obs.NewProgressReader(r.dirs.in(jobdir.Launch, obs.ProgressFile))
	}
	if r.sess.lossHist == nil { // the loss history, .trainrun/metrics.jsonl (issue 32)
		r.sess.lossHist = losshist.NewRecorder(r.dirs.ckptDir, func(err error) { r.logf("warning: %v", err) })
	}
	if e, ok := r.sess.progress.Poll(); ok {
		r.sess.calibRec.Progress(e.Step, e.Time)
		r.sess.lossHist.Record(e.Step, e.Tokens, e.Time, r.sess.progress.Metrics) // .trainrun/metrics.jsonl (issue 32)
		r.earlyStop(e.Step, r.sess.progress.Metrics)                              // sweep --early-stop (cmd_forecast.go)
		r.judgeLoss(e.Step, r.sess.progress.Metrics)                              // --loss-spike (lossspike.go)
		r.badputProgress(e.Step, e.Time)                                          // badput.go
		r.migrateProgress(e.Step, e.Time)                                         // migrate.go
		r.observe(e)
	}
}

// observedStore tells the observer of each commit: its size, step, when
// the trainers completed it (the newest done marker) and how long the
// commit took.
type observedStore struct {
	ckptStore
	st *checkpoint.Store
	r  *runner
	mu sync.Mutex
}

func (s *observedStore) CommitComplete(world int) (string, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t0 := time.Now()
	tag, changed, err := s.ckptStore.CommitComplete(world)
	d := time.Since(t0)
	if err != nil {
		s.r.sess.commitFailed = true
		if cause, first := s.r.commitDiskFault(err); first {
			s.r.observe(obs.Event{Kind: obs.KindCkptFail, Cause: cause, Message: err.Error()})
		}
		return tag, changed, err
	}
	if changed && tag != "" {
		c := &obs.Ckpt{Tag: tag, Commit: d}
		if list, err := s.st.List(); err == nil {
			for _, in := range list {
				if in.Tag == tag {
					c.Step, c.Bytes = in.Step, in.Bytes
					c.CompleteAt = checkpoint.CompletedAt(in.Dir)
				}
			}
		}
		s.r.observe(obs.Event{Kind: obs.KindCkptCommit, Ckpt: c})
		s.r.forecastAtCommit() // --target-loss (cmd_forecast.go)
	}
	return tag, changed, err
}

// unwrapStore finds the checkpoint.Store adapter under the observing one.
func unwrapStore(s ckptStore) (storeAdapter, bool) {
	if o, ok := s.(*observedStore); ok {
		s = o.ckptStore
	}
	sa, ok := s.(storeAdapter)
	return sa, ok
}

// partition is the job's partition: SLURM_JOB_PARTITION, else scontrol's.
func (r *runner) partition() string {
	return cmp.Or(r.alloc.Partition, r.facts.job.Partition)
}
