// trainrun run's configuration, resolved once before any phase runs.

package run

import (
	"fmt"
	"github.com/trainrun/trainrun/internal/failclass"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/trainrun/trainrun/internal/slurm"
	"github.com/trainrun/trainrun/plan"
	"github.com/trainrun/trainrun/plan/policy"
	"github.com/trainrun/trainrun/wrapper/internal/container"
	"github.com/trainrun/trainrun/wrapper/internal/health"
	"github.com/trainrun/trainrun/wrapper/internal/planflags"
)

// sourceKind is where one option of trainrun run got its value, in the
// order of precedence (a flag beats its twin, which beats the policy).
type sourceKind int

const (
	fromDefault sourceKind = iota // the flag's default
	fromFlag                      // given on the command line
	fromEnv                       // its TRAINRUN_* twin (or TRAINRUN_PLAN, TRAINRUN_BATCH ...)
	fromPolicy                    // the partition's policy (--policy)
)

// source says where one resolved value came from, for messages.
type source struct {
	kind  sourceKind
	name  string // the flag ("ckpt-dir"), the variable ("TRAINRUN_CKPT_DIR") or the policy key ("CkptDir"); "" for a default
	where string // for the policy: the line that set it (policy.Source)
}

func (s source) String() string {
	switch s.kind {
	case fromFlag:
		return "--" + s.name
	case fromEnv:
		return s.name
	case fromPolicy:
		return fmt.Sprintf("the policy's %s (%s)", s.name, s.where)
	}
	return "the default"
}

// Config is trainrun run's configuration: each option from its flag,
// else its TRAINRUN_* twin, else the partition's policy, else the flag's
// default. complete makes it, and is the only reader of the flag set and of
// the policy; the phases read it and never write it
// (TestRunConfigIsNotWritten).
type Config struct {
	Options                   // the resolved values
	given   map[string]bool   // the flags given on the command line
	from    map[string]source // where each given option, and each from a twin or the policy, got its value; absent: its default

	// From the policy only (zero without --policy).
	policyGPU         policy.Setting[string] // GPUType ("" = auto): the planner's GPU type when the probe finds none
	ncclPolicy        plan.NCCLPolicy
	leadAdapt         bool             // CkptLeadAdapt: raise the lead to fit measured checkpoints
	graceBudg         time.Duration    // CkptGraceBudget (0: auto, the partition's GraceTime)
	excludeStragglers bool             // StragglerAction=exclude
	migrateMin        time.Duration    // MigrateMinInterval (0: defaultMigrateInterval)
	migrateMaxDelay   time.Duration    // MigrateMaxDelay (0: a move delays no waiting job)
	restartOn         failclass.Policy // RestartOn= (nil without --policy: failPolicy's default)
	healthScript      string           // HealthCheck= ("" none)
	healthTimeout     time.Duration    // HealthCheckTimeout= (0 without --policy: 60 s)

	hang *health.Config // --hang-timeout (nil: off)

	container container.Spec // --container-* and the policy's Container* (container.go); zero: none
	srunArgs  []string       // the policy's SrunArgs, then --srun-arg

	alloc *slurm.Allocation // the allocation as Slurm's environment gave it (setup)
	argv  []string          // the training command as given (after --)
	self  string            // this trainrun binary
	shim  string            // the lean shim binary the step runs ("": trainrun exec-task)

	// The planner's inputs from the plugin's twins. They matter only when
	// the run plans from a model, so their errors and notes are kept for
	// the choose phase, which reports them where it always did.
	modelFromEnv  bool           // --model is TRAINRUN_MODEL
	submittedPlan string         // TRAINRUN_PLAN, when --plan is not given (choose checks that it fits)
	batchErr      error          // TRAINRUN_BATCH does not parse
	software      []softwareNote // --stack, --precision, --finetune: in softwareInputs order
}

// softwareNote is what resolving one software input found: a line to log
// (its value came from elsewhere than its flag) or an error.
type softwareNote struct {
	log string
	err error
}

// source is where flag's value came from.
func (c *Config) source(flag string) source { return c.from[flag] }

// fromUser says that the flag or its twin gave the option: the policy's
// value is then only a default that lost.
func (c *Config) fromUser(flag string) bool {
	k := c.source(flag).kind
	return k == fromFlag || k == fromEnv
}

// envTwins are the run's options that a TRAINRUN_* variable gives where the
// flag is not given. The first group are flag defaults (addFlags reads them);
// the planner's inputs below them are read by complete.
var envTwins = []struct{ flag, env string }{
	{"ckpt-dir", "TRAINRUN_CKPT_DIR"}, {"ckpt-local-dir", "TRAINRUN_CKPT_LOCAL_DIR"}, {"ckpt-signal", "TRAINRUN_CKPT_SIGNAL"},
	{"policy", "TRAINRUN_POLICY"}, {"job-dir", "TRAINRUN_JOB_DIR"},
	{"metrics-addr", "TRAINRUN_METRICS_ADDR"}, {"metrics-textfile", "TRAINRUN_METRICS_TEXTFILE"},
	{"pushgateway", "TRAINRUN_PUSHGATEWAY"}, {"webhook", "TRAINRUN_WEBHOOK"}, {"webhook-format", "TRAINRUN_WEBHOOK_FORMAT"},
	{"tune", "TRAINRUN_TUNE"}, {"tune-budget", "TRAINRUN_TUNE_BUDGET"}, {"container-runtime", "TRAINRUN_CONTAINER_RUNTIME"},
	{"target-loss", "TRAINRUN_TARGET_LOSS"}, {"stop-if-off-track", "TRAINRUN_STOP_IF_OFF_TRACK"},
	{"train-steps", "TRAINRUN_TRAIN_STEPS"},
	{"loss-spike", "TRAINRUN_LOSS_SPIKE"}, {"loss-spike-action", "TRAINRUN_LOSS_SPIKE_ACTION"}, {"shrink", "TRAINRUN_SHRINK"},
	{"migrate", "TRAINRUN_MIGRATE"}, {"migrate-every", "TRAINRUN_MIGRATE_EVERY"},
}

// complete resolves trainrun run's options for allocation a: o as parsed,
// given the flags set on the command line, getenv the environment. Errors
// are the policy's (it does not parse, UserOverride refuses a flag, the
// checkpoint directory is outside CkptRoots).
func complete(o Options, given map[string]bool, getenv func(string) string, a *slurm.Allocation, stderr io.Writer) (Config, error) {
	c := Config{Options: o, given: given, from: map[string]source{}}
	for f := range given {
		c.from[f] = source{kind: fromFlag, name: f}
	}
	for _, t := range envTwins {
		if !given[t.flag] && getenv(t.env) != "" {
			c.from[t.flag] = source{kind: fromEnv, name: t.env}
		}
	}
	c.hang, _ = hangConfig(o.fault.hangTimeout) // checked by validate
	c.planInputsFromEnv(getenv)
	if !given["plan"] {
		if p := getenv("TRAINRUN_PLAN"); p != "" {
			c.submittedPlan, c.from["plan"] = p, source{kind: fromEnv, name: "TRAINRUN_PLAN"}
		}
	}
	var st *policy.Settings
	var pf *policy.Policy
	if o.policy != "" {
		var err error
		if pf, err = planflags.LoadPolicy(o.policy); err != nil {
			return c, planflags.ReportPolicyErrors(stderr, o.policy, err)
		}
		s := pf.Effective(a.Partition)
		st = &s
		if err := c.applyPolicy(s, getenv, a.JobID); err != nil {
			return c, err
		}
	}
	c.resolveSoftware(getenv, pf, st, a.Partition)
	c.resolveCalibration(getenv, st)
	return c, c.resolveContainer(getenv, st)
}

// resolveCalibration sets the site calibration directory the planner reads
// and the run's observation is appended to: --calibration, else
// TRAINRUN_CALIBRATION, else the policy's Calibration= (as
// planflags.Options.calibrationDir resolves it for plan, submit and sweep).
func (c *Config) resolveCalibration(getenv func(string) string, st *policy.Settings) {
	switch v := getenv("TRAINRUN_CALIBRATION"); {
	case c.plan.Calibration != "":
	case v != "":
		c.plan.Calibration, c.from["calibration"] = v, source{kind: fromEnv, name: "TRAINRUN_CALIBRATION"}
	case st != nil && st.Calibration.Value != "":
		c.plan.Calibration = st.Calibration.Value
		c.from["calibration"] = source{kind: fromPolicy, name: "Calibration", where: st.Calibration.Source.String()}
	}
}

// planInputsFromEnv takes --model from TRAINRUN_MODEL and --seq-len and
// --global-batch from TRAINRUN_BATCH (GLOBALxSEQLEN) where those flags are
// not given: the plugin's --train-model and --train-batch, given as #SBATCH
// directives, reach the batch script as these twins.
func (c *Config) planInputsFromEnv(getenv func(string) string) {
	po := &c.plan
	shape := false
	for _, f := range planflags.ModelFlags {
		shape = shape || c.given[f]
	}
	if v := strings.TrimSpace(getenv("TRAINRUN_MODEL")); v != "" && !c.given["model"] && !shape {
		po.Model, c.modelFromEnv = v, true
		c.from["model"] = source{kind: fromEnv, name: "TRAINRUN_MODEL"}
	}
	if v := getenv("TRAINRUN_BATCH"); v != "" && (!c.given["seq-len"] || !c.given["global-batch"]) {
		gb, sl, err := plan.ParseBatch(v)
		if err != nil {
			c.batchErr = usageErrorf("TRAINRUN_BATCH=%s: %v (it is #SBATCH --train-batch's twin; or give --seq-len and --global-batch)", v, err)
			return
		}
		if !c.given["global-batch"] {
			po.GlobalBatch, c.from["global-batch"] = gb, source{kind: fromEnv, name: "TRAINRUN_BATCH"}
		}
		if !c.given["seq-len"] {
			po.SeqLen, c.from["seq-len"] = sl, source{kind: fromEnv, name: "TRAINRUN_BATCH"}
		}
	}
}

// policyFlags maps run's flags to the policy keys that give their defaults.
var policyFlags = []struct{ flag, key string }{
	{"ckpt-signal", "CkptSignal"}, {"ckpt-lead", "CkptLead"}, {"max-requeue", "MaxRequeue"},
	{"max-failures", "MaxFailuresNoProgress"}, {"ckpt-dir", "CkptDir"}, {"ckpt-keep", "CkptKeep"}, {"ckpt-keep-every", "CkptKeepEvery"},
	{"ckpt-compress", "CkptCompress"}, {"hang-timeout", "HangTimeout"}, {"max-restarts", "MaxRestarts"}, {"spare-nodes", "SpareNodes"},
	{"tune", "Tune"}, {"tune-budget", "TuneBudget"}, {"srun-arg", "SrunArgs"},
	{"loss-spike", "LossSpike"}, {"loss-spike-action", "LossSpikeAction"}, {"shrink", "Shrink"},
	{"migrate", "Migrate"}, {"migrate-every", "MigrateEvery"},
}

// applyPolicy takes the site's settings for the job's partition: its values
// are the defaults of the checkpoint, fault and metrics flags, a flag the
// user sets must be one UserOverride allows, the checkpoint directory must
// lie under CkptRoots, and the NCCL settings shape each rank's environment.
func (c *Config) applyPolicy(st policy.Settings, getenv func(string) string, jobID string) error {
	ov := st.UserOverride.Value
	for _, pfl := range policyFlags {
		if !c.given[pfl.flag] {
			continue
		}
		allowed := ov.All
		for _, k := range ov.Keys {
			allowed = allowed || strings.EqualFold(k, pfl.key)
		}
		if !allowed {
			return usageErrorf("--%s: the site's policy (%s, %s) does not let users override %s (UserOverride=%s); drop the flag or ask the admins",
				pfl.flag, c.policy, st.UserOverride.Source, pfl.key, ov)
		}
	}
	// set makes the policy's value flag's where the user gave none and the
	// policy has one (has).
	set := func(flag, key string, src policy.Source, has bool, apply func()) {
		if has && !c.fromUser(flag) {
			apply()
			c.from[flag] = source{kind: fromPolicy, name: key, where: src.String()}
		}
	}
	set("ckpt-signal", "CkptSignal", st.CkptSignal.Source, st.CkptSignal.Value != "", func() { c.ckptSignal = st.CkptSignal.Value })
	set("ckpt-lead", "CkptLead", st.CkptLead.Source, st.CkptLead.Value > 0, func() { c.plan.CkptLead = st.CkptLead.Value })
	set("max-requeue", "MaxRequeue", st.MaxRequeue.Source, true, func() { c.maxRequeue = st.MaxRequeue.Value })
	set("ckpt-keep", "CkptKeep", st.CkptKeep.Source, true, func() { c.ckptKeep = st.CkptKeep.Value })
	set("ckpt-keep-every", "CkptKeepEvery", st.CkptKeepEvery.Source, true, func() { c.ckptEvery = st.CkptKeepEvery.Value })
	set("ckpt-compress", "CkptCompress", st.CkptCompress.Source, st.CkptCompress.Value != "", func() { c.compress = st.CkptCompress.Value })
	set("max-failures", "MaxFailuresNoProgress", st.MaxFailuresNoProgress.Source, true, func() { c.maxFailures = st.MaxFailuresNoProgress.Value })
	set("ckpt-dir", "CkptDir", st.CkptDir.Source, st.CkptDir.Value != "", func() {
		job := slurm.JobFromEnv(getenv)
		user := job.User
		if user == "" {
			user = getenv("USER")
		}
		c.ckptDir = policy.ExpandCkptDir(st.CkptDir.Value, user, jobID, job.Name)
	})
	if roots := st.CkptRoots.Value; roots != nil && c.ckptDir != "" {
		dir, _ := filepath.Abs(c.ckptDir)
		ok := false
		for _, root := range roots {
			ok = ok || dir == root || strings.HasPrefix(dir, strings.TrimSuffix(root, "/")+"/")
		}
		if !ok {
			return usageErrorf("--ckpt-dir %s is not under the checkpoint roots the site allows (%s: CkptRoots=%s); choose a directory below one of them",
				dir, st.CkptRoots.Source, strings.Join(roots, ","))
		}
	}
	set("hang-timeout", "HangTimeout", st.HangTimeout.Source, st.HangTimeout.Value != "", func() {
		c.fault.hangTimeout = st.HangTimeout.Value
		c.hang, _ = hangConfig(st.HangTimeout.Value) // checked by the policy's parser
	})
	set("max-restarts", "MaxRestarts", st.MaxRestarts.Source, true, func() { c.fault.maxRestarts = st.MaxRestarts.Value })
	set("spare-nodes", "SpareNodes", st.SpareNodes.Source, true, func() { c.fault.spareNodes = st.SpareNodes.Value })
	set("tune", "Tune", st.Tune.Source, st.Tune.Value != "", func() { c.tune.tune = st.Tune.Value })
	set("tune-budget", "TuneBudget", st.TuneBudget.Source, st.TuneBudget.Value > 0, func() { c.tune.budget = st.TuneBudget.Value.String() })
	set("loss-spike", "LossSpike", st.LossSpike.Source, st.LossSpike.Value != "", func() { c.spike.rule = st.LossSpike.Value })
	set("shrink", "Shrink", st.Shrink.Source, st.Shrink.Value != "", func() { c.shrink.shrink = st.Shrink.Value })
	set("migrate", "Migrate", st.Migrate.Source, st.Migrate.Value != "", func() { c.migrate.migrate = st.Migrate.Value })
	set("migrate-every", "MigrateEvery", st.MigrateEvery.Source, st.MigrateEvery.Value > 0, func() { c.migrate.every = st.MigrateEvery.Value.String() })
	c.migrateMin = st.MigrateMinInterval.Value
	c.migrateMaxDelay = st.MigrateMaxDelay.Value
	set("loss-spike-action", "LossSpikeAction", st.LossSpikeAction.Source, st.LossSpikeAction.Value != "", func() { c.spike.action = st.LossSpikeAction.Value })
	// The metrics flags (MetricsAddr, Pushgateway, Webhook, MaxCkptAge,
	// CkptGraceBudget): a flag or variable the user sets wins.
	set("metrics-addr", "MetricsAddr", st.MetricsAddr.Source, st.MetricsAddr.Value != "", func() { c.obs.metricsAddr = st.MetricsAddr.Value })
	set("pushgateway", "Pushgateway", st.Pushgateway.Source, st.Pushgateway.Value != "", func() { c.obs.pushgateway = st.Pushgateway.Value })
	set("webhook", "Webhook", st.Webhook.Source, st.Webhook.Value != "", func() { c.obs.webhook = st.Webhook.Value })
	set("stop-if-off-track", "StopIfOffTrack", st.StopIfOffTrack.Source, st.StopIfOffTrack.Value > 0, func() { c.obs.stopOffTrack = strconv.FormatFloat(st.StopIfOffTrack.Value, 'g', -1, 64) })
	set("max-ckpt-age", "MaxCkptAge", st.MaxCkptAge.Source, st.MaxCkptAge.Value > 0, func() { c.obs.maxCkptAge = st.MaxCkptAge.Value })
	set("grace-budget", "CkptGraceBudget", st.CkptGraceBudget.Source, st.CkptGraceBudget.Value > 0, func() { c.obs.graceBudget = st.CkptGraceBudget.Value })
	set("nvme-bw", "NVMeBW", st.NVMeBW.Source, st.NVMeBW.Value > 0, func() { c.plan.NVMeBW = st.NVMeBW.Value })
	c.policyGPU = st.GPUType
	c.leadAdapt = st.CkptLeadAdapt.Value
	c.graceBudg = st.CkptGraceBudget.Value
	c.excludeStragglers = st.StragglerAction.Value == "exclude"
	c.restartOn, _ = failclass.ParsePolicy(st.RestartOn.Value) // checked by the policy's parser
	c.healthScript, c.healthTimeout = st.HealthCheck.Value, st.HealthCheckTimeout.Value
	c.ncclPolicy = st.NCCL()
	return nil
}

// resolveSoftware sets the stack, precision and fine-tuning mode the planner
// assumes: each from its flag, else its TRAINRUN_* twin (the plugin's
// #SBATCH --train-* option), else the partition's policy, else the flag's
// default. A bad value is refused naming where it came from, and a value
// that differs from the policy's must be one UserOverride allows; both are
// kept in c.software for the choose phase.
func (c *Config) resolveSoftware(getenv func(string) string, pf *policy.Policy, st *policy.Settings, partition string) {
	for _, in := range softwareInputs {
		dst := in.value(&c.plan)
		var src string
		switch v := getenv(in.env); {
		case c.given[in.flag]:
			src = "--" + in.flag + " " + *dst
		case v != "":
			*dst, src = v, fmt.Sprintf("%s=%s (the twin of #SBATCH %s)", in.env, v, in.option)
			c.from[in.flag] = source{kind: fromEnv, name: in.env}
		case st != nil && in.setting(*st).Source.Kind != policy.FromDefault:
			s := in.setting(*st)
			*dst, src = s.Value, fmt.Sprintf("the policy's %s=%s (%s)", in.key, s.Value, s.Source)
			c.from[in.flag] = source{kind: fromPolicy, name: in.key, where: s.Source.String()}
		default:
			continue
		}
		var n softwareNote
		got, err := in.canon(*dst)
		if err != nil {
			n.err = usageErrorf("%s: %v", src, err)
		} else if st != nil {
			s := in.setting(*st)
			def, err := in.canon(s.Value)
			if err == nil && got != def && !pf.MayOverride(in.key, partition) {
				n.err = usageErrorf("%s: the site's policy (%s) plans partition %s for %s=%s (%s) and does not let users override %s (UserOverride); drop it or ask the admins",
					src, c.policy, partition, in.key, s.Value, s.Source, in.key)
			}
		}
		if n.err == nil && !c.given[in.flag] {
			n.log = fmt.Sprintf("planning with %s %s, from %s", in.flag, *dst, src)
		}
		c.software = append(c.software, n)
		if n.err != nil {
			return // as before: the first bad input is the one reported
		}
	}
}
