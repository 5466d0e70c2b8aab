package policy

import (
	"fmt"
	"net"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/trainrun/trainrun/internal/failclass"
	"github.com/trainrun/trainrun/internal/lossspike"
	"github.com/trainrun/trainrun/plan"
)

// Key is one setting of trainrun.conf.
type Key struct {
	Name     string // canonical spelling; the file may use any case
	Default  string // the value when nothing sets it, as an admin would write it
	Format   string // what a value may be, for messages and `trainrun policy show`
	Why      string // why the default is what it is
	SiteOnly bool   // only on site-wide lines, not on PartitionName= lines
	Repeat   bool   // may be given several times (one NCCL variable each)
	User     bool   // UserOverride may let users override it

	parse func(v string) (any, error)
	set   func(s *Settings, v any, src Source)
}

// keys is the one table of settings and their defaults. Order is the order
// of `trainrun policy show`.
var keys []*Key

func init() {
	keys = slices.Concat(checkpointKeys(), faultKeys(), ncclKeys(), plannerKeys(), pluginKeys(), overrideKeys(), observeKeys(), containerKeys())
	for _, k := range keys {
		keyByName[strings.ToLower(k.Name)] = k
	}
}

// checkpointKeys are the keys of the checkpoint handshake, store and pruning.
func checkpointKeys() []*Key {
	return []*Key{
		{Name: "CkptSignal", Default: "USR2", User: true,
			Format: "a signal name: " + strings.Join(signalNames, ", ") + " (SIG prefix optional)",
			Why:    "PRODUCT.md's handshake: SIGUSR2, because NCCL uses SIGUSR1",
			parse:  parseSignal, set: func(s *Settings, v any, src Source) { s.CkptSignal = Setting[string]{v.(string), src} }},
		{Name: "CkptLead", Default: "5m", User: true,
			Format: "a duration such as 90s, 5m, 1h30m (a bare number is seconds), more than 0",
			Why:    "time before the job's end at which trainrun asks for a checkpoint: a large model's save takes minutes on a parallel file system, and Slurm checks limits only every ~30 s",
			parse:  positiveDuration, set: func(s *Settings, v any, src Source) { s.CkptLead = Setting[time.Duration]{v.(time.Duration), src} }},
		{Name: "CkptLeadAdapt", Default: "no", User: true,
			Format: "yes or no",
			Why:    "no: when measured saves outgrow CkptLead, trainrun warns; yes: it also raises the lead it uses on its own clock to fit them",
			parse:  parseYesNo, set: func(s *Settings, v any, src Source) { s.CkptLeadAdapt = Setting[bool]{v.(bool), src} }},
		{Name: "CkptGraceBudget", Default: "auto",
			Format: "auto, or a duration such as 2m",
			Why:    "auto: the partition's GraceTime (preemption) as Slurm reports it; a checkpoint measured slower than the budget is warned about",
			parse:  autoDuration, set: func(s *Settings, v any, src Source) {
				s.CkptGraceBudget = Setting[time.Duration]{v.(time.Duration), src}
			}},
		{Name: "CkptDir", Default: "none", User: true,
			Format: "none, or an absolute path; %u user, %j job id, %x job name, %% a '%'",
			Why:    "none: the user names the checkpoint directory (--ckpt-dir, TRAINRUN_CKPT_DIR)",
			parse:  parseCkptDir, set: func(s *Settings, v any, src Source) { s.CkptDir = Setting[string]{v.(string), src} }},
		{Name: "CkptRoots", Default: "any",
			Format: "any, or a comma-separated list of absolute paths",
			Why:    "any: checkpoints may go anywhere the user can write",
			parse:  parseRoots, set: func(s *Settings, v any, src Source) { s.CkptRoots = Setting[[]string]{v.([]string), src} }},
		{Name: "CkptKeep", Default: "3", User: true,
			Format: "a whole number, at least 1",
			Why:    "the last 3 committed checkpoints survive pruning: latest plus two to fall back to",
			parse:  intAtLeast(1), set: func(s *Settings, v any, src Source) { s.CkptKeep = Setting[int]{v.(int), src} }},
		{Name: "CkptKeepEvery", Default: "0", User: true,
			Format: "a whole number; 0 = off",
			Why:    "also keep every K-th checkpoint for loss-curve and scaling analysis; off unless asked, as it grows without bound",
			parse:  intAtLeast(0), set: func(s *Settings, v any, src Source) { s.CkptKeepEvery = Setting[int]{v.(int), src} }},
		{Name: "CkptCompress", Default: "no", User: true,
			Format: "no, auto, archive or always",
			Why: "no: checkpoints stay as the trainer wrote them; archive: retained older checkpoints are compressed losslessly in the background (the newest stays raw); " +
				"auto: archive, and the tiered drain also compresses when it measures the target slower than the compressor; always: archive, and every drain compresses. Off by default: it spends the batch host's CPU",
			parse: parseCompress, set: func(s *Settings, v any, src Source) { s.CkptCompress = Setting[string]{v.(string), src} }},
	}
}

// faultKeys are the keys of requeues, hangs, restarts, spare nodes and stragglers.
func faultKeys() []*Key {
	return []*Key{
		{Name: "MaxRequeue", Default: "100", User: true,
			Format: "a whole number; 0 = never requeue",
			Why:    "time-limit requeues are normal progress (two weeks in 4-hour slices is 84), so the cap is loose; loops are caught by MaxFailuresNoProgress",
			parse:  intAtLeast(0), set: func(s *Settings, v any, src Source) { s.MaxRequeue = Setting[int]{v.(int), src} }},
		{Name: "MaxFailuresNoProgress", Default: "3", User: true,
			Format: "a whole number, at least 1",
			Why:    "give up after 3 endings in a row that committed no new checkpoint",
			parse:  intAtLeast(1), set: func(s *Settings, v any, src Source) { s.MaxFailuresNoProgress = Setting[int]{v.(int), src} }},
		{Name: "HangTimeout", Default: "auto", User: true,
			Format: "auto, off, or a duration such as 90s or 10m (at least 1s)",
			Why:    "auto: 15m until a rank's first step, then 4x the p99 of the observed step times (at least 1m), 10m while a checkpoint is written; a hung step is stopped and restarted from the latest checkpoint",
			parse:  parseHangTimeout, set: func(s *Settings, v any, src Source) { s.HangTimeout = Setting[string]{v.(string), src} }},
		{Name: "MaxRestarts", Default: "2", User: true,
			Format: "a whole number; 0 = never restart inside the allocation",
			Why:    "a hung step is relaunched inside the job twice (seconds, no queue wait) before the job is requeued",
			parse:  intAtLeast(0), set: func(s *Settings, v any, src Source) { s.MaxRestarts = Setting[int]{v.(int), src} }},
		{Name: "SpareNodes", Default: "0", User: true,
			Format: "a whole number, less than the job's nodes; 0 = none",
			Why:    "the job holds this many nodes beyond the layout's, idle: a step that loses a node restarts inside the job on the healthy ones with the same world size instead of going back to the queue (submit with #SBATCH --no-kill)",
			parse:  intAtLeast(0), set: func(s *Settings, v any, src Source) { s.SpareNodes = Setting[int]{v.(int), src} }},
		{Name: "StragglerAction", Default: "report",
			Format: "report or exclude",
			Why:    "report: a rank whose step time stays 1.5x its peers' median is logged and named in the report; exclude: its node is also kept out of the job's next requeue, as a hung rank's is",
			parse:  oneOf("report", "exclude"), set: func(s *Settings, v any, src Source) { s.StragglerAction = Setting[string]{v.(string), src} }},
		{Name: "Shrink", Default: "no", User: true,
			Format: "yes or no",
			Why:    "no: a step that lost nodes no spare can replace is requeued without them; yes: it restarts inside the job on the healthy nodes with a smaller dp and the global batch kept, for trainers that declare TRAINRUN_RESHARD=dp",
			parse:  oneOf("yes", "no"), set: func(s *Settings, v any, src Source) { s.Shrink = Setting[string]{v.(string), src} }},
		{Name: "Migrate", Default: "no", User: true,
			Format: "yes or no",
			Why:    "yes: a running late-bound job (trainrun submit, -p A,B with a plan per partition) checks every MigrateEvery whether checkpointing and requeueing into another of its partitions finishes sooner by more than the move costs, and moves (at most once per MigrateMinInterval)",
			parse:  oneOf("yes", "no"), set: func(s *Settings, v any, src Source) { s.Migrate = Setting[string]{v.(string), src} }},
		{Name: "MigrateEvery", Default: "5m", User: true,
			Format: "a duration such as 5m or 90s (a bare number is seconds), more than 0",
			Why:    "how often a job with Migrate=yes asks Slurm whether another of its partitions would finish it sooner (Slurm is asked, scontrol show node and show job, only at a check where a move would pay)",
			parse:  positiveDuration, set: func(s *Settings, v any, src Source) { s.MigrateEvery = Setting[time.Duration]{v.(time.Duration), src} }},
		{Name: "MigrateMinInterval", Default: "1h",
			Format: "a duration such as 1h or 30m (a bare number is seconds), more than 0",
			Why:    "a job moves at most once per this interval (from its history's migrated ends): a bound on the queue churn one job causes for the others",
			parse:  positiveDuration, set: func(s *Settings, v any, src Source) {
				s.MigrateMinInterval = Setting[time.Duration]{v.(time.Duration), src}
			}},
		{Name: "MigrateMaxDelay", Default: "0",
			Format: "a duration such as 2m or 90s (a bare number is seconds); 0 = a move may delay no waiting job",
			Why:    "the most a move may delay a job waiting in the partition it moves to, one that the nodes it takes would keep from starting (estimate: until the moved job ends there, its cost plus its steps left at its step time there): a bound on what a large job's move costs the small ones queued behind it",
			parse:  func(v string) (any, error) { return parseDuration(v) }, set: func(s *Settings, v any, src Source) {
				s.MigrateMaxDelay = Setting[time.Duration]{v.(time.Duration), src}
			}},
		{Name: "LossSpike", Default: lossspike.Default, User: true,
			Format: "off, nan, or mad:K[:window=W][:metric=NAME]",
			Why:    "a reported loss that is NaN, infinite, or above median + 6·MAD of the last 50 values is a spike: logged, counted (trainrun_loss_spikes_total), sent to the webhook, and acted on by LossSpikeAction",
			parse: func(v string) (any, error) {
				if _, err := lossspike.ParseRule(v); err != nil {
					return nil, bad("%v", err)
				}
				return v, nil
			}, set: func(s *Settings, v any, src Source) { s.LossSpike = Setting[string]{v.(string), src} }},
		{Name: "LossSpikeAction", Default: "report", User: true,
			Format: "report, stop, or rollback[:N]",
			Why:    "report only; rollback restarts the step from the checkpoint before the spike with TRAINRUN_SKIP_STEPS naming the steps to skip, at most N times (3), then stops",
			parse: func(v string) (any, error) {
				if _, err := lossspike.ParseAction(v); err != nil {
					return nil, bad("%v", err)
				}
				return v, nil
			}, set: func(s *Settings, v any, src Source) { s.LossSpikeAction = Setting[string]{v.(string), src} }},
		{Name: "RestartOn", Default: failclass.DefaultPolicy,
			Format: "comma-separated CLASS=ACTION, CLASS one of hardware, oom, nccl, user, signal, unknown; ACTION restart, exclude (restart without the failing rank's node) or stop; a class not named keeps its default",
			Why:    "a failed step's class decides: a hardware fault or a collective's error points at the node, so it is left; an OOM or the trainer's own error recurs from the same checkpoint on any node, so retrying spends the failure budget for nothing (stop); a kill from outside or a failure without evidence restarts",
			parse:  parseRestartOn, set: func(s *Settings, v any, src Source) { s.RestartOn = Setting[string]{v.(string), src} }},
		{Name: "HealthCheck", Default: "none",
			Format: "none, or the absolute path of an executable on every node",
			Why:    "none: only the built-in checks (GPUs against the GRES, InfiniBand port state, free space on the store and /dev/shm); a site script runs on each node before the first step and every restart, exit 0 healthy, anything else keeps the node out",
			parse:  parseHealthCheck, set: func(s *Settings, v any, src Source) { s.HealthCheck = Setting[string]{v.(string), src} }},
		{Name: "HealthCheckTimeout", Default: "60s",
			Format: "a duration such as 30s or 2m (a bare number is seconds), more than 0",
			Why:    "a health script that does not end in time fails its node: a check that hangs is itself a symptom",
			parse:  positiveDuration, set: func(s *Settings, v any, src Source) {
				s.HealthCheckTimeout = Setting[time.Duration]{v.(time.Duration), src}
			}},
	}
}

// parseHealthCheck reads HealthCheck=: none ("") or an absolute path.
func parseHealthCheck(v string) (any, error) {
	if strings.EqualFold(v, "none") {
		return "", nil
	}
	if !path.IsAbs(v) {
		return nil, fmt.Errorf("%q is not an absolute path: give the script's full path on the nodes, or none", v)
	}
	return path.Clean(v), nil
}

// parseRestartOn checks RestartOn= and returns it complete, in the
// classes' order.
func parseRestartOn(v string) (any, error) {
	p, err := failclass.ParsePolicy(v)
	if err != nil {
		return nil, err
	}
	return p.String(), nil
}

// ncclKeys are the keys of the NCCL environment and the fabric it runs on.
func ncclKeys() []*Key {
	return []*Key{
		{Name: "NCCLForce", Default: "none", Repeat: true,
			Format: "NAME=VALUE, one variable per NCCLForce= (repeat the key); none clears the site's list on a partition line",
			Why:    "variables set over anyone: the user's environment, /etc/nccl.conf, a cloud plugin and trainrun",
			parse:  parseEnvOp, set: func(s *Settings, v any, src Source) { applyEnvOp(&s.NCCLForce, v.(envOp), src) }},
		{Name: "NCCLDefault", Default: "none", Repeat: true,
			Format: "NAME=VALUE, one variable per NCCLDefault= (repeat the key); none clears the site's list on a partition line",
			Why:    "variables set unless the user, /etc/nccl.conf or a plugin sets them; they replace trainrun's own value",
			parse:  parseEnvOp, set: func(s *Settings, v any, src Source) { applyEnvOp(&s.NCCLDefault, v.(envOp), src) }},
		{Name: "NCCLPrecedence", Default: "user",
			Format: "user or site",
			Why:    "user: what the user or /etc/nccl.conf sets stands and trainrun reports its own value; site: trainrun's values win",
			parse:  oneOf("user", "site"), set: func(s *Settings, v any, src Source) { s.NCCLPrecedence = Setting[string]{v.(string), src} }},
		{Name: "Fabric", Default: "auto",
			Format: "auto, ib, roce, efa or tcp",
			Why:    "auto: from the link layer of the active compute ports in sysfs; name it where sysfs cannot tell (VMs, SR-IOV)",
			parse:  oneOf("auto", "ib", "roce", "efa", "tcp"), set: func(s *Settings, v any, src Source) { s.Fabric = Setting[string]{v.(string), src} }},
	}
}

// plannerKeys are the keys of the partition's nodes as the planner sees them, and their price.
func plannerKeys() []*Key {
	return []*Key{
		{Name: "GPUType", Default: "auto",
			Format: "auto, or a GPU type of the planner: " + strings.Join(plan.GPUNames(), ", "),
			Why:    "auto: from the nodes' GPU names (NVML, else the PCI id table); name it where they cannot be identified (VMs, fake or unlisted devices), so the plugin can plan for the partition's nodes",
			parse:  parseGPUType, set: func(s *Settings, v any, src Source) { s.GPUType = Setting[string]{v.(string), src} }},
		{Name: "NVMeBW", Default: "auto",
			Format: "auto, or the nodes' local NVMe bandwidth in GB/s per node (a positive number, at most 10000)",
			Why:    "auto: the planner's 25 GB/s (8 PCIe Gen4 drives); the time offload=nvme (ZeRO-Infinity) costs where trainrun plan/run get no --nvme-bw",
			parse:  parseNVMeBW, set: func(s *Settings, v any, src Source) { s.NVMeBW = Setting[float64]{v.(float64), src} }},
		{Name: "GPUHourCost", Default: "none",
			Format: "none, or the price of one GPU-hour on the partition's nodes in any currency unit (a number, 0 or more, at most 1e9)",
			Why:    "none: trainrun submit --objective cost cannot price the partition and says so; set it on each PartitionName= line to let cost choose",
			parse:  parseGPUHourCost, set: func(s *Settings, v any, src Source) { s.GPUHourCost = Setting[float64]{v.(float64), src} }},
		{Name: "MemoryMargin", Default: "5%",
			Format: "the share of GPU memory a plan should leave free, in per cent: 0 to 50 (e.g. 5%; 0 for none)",
			Why:    "5%: a plan using more than 95% of the GPU's memory is shown as tight (fragmentation, pinned buffers and longer batches the memory model cannot see)",
			parse:  parseMemoryMargin, set: func(s *Settings, v any, src Source) { s.MemoryMargin = Setting[float64]{v.(float64), src} }},
	}
}

// pluginKeys are the keys of what the SPANK plugin does, and the software it plans for when a job names none.
func pluginKeys() []*Key {
	return []*Key{
		{Name: "InjectEnv", Default: "yes", User: true,
			Format: "yes or no",
			Why:    "yes: the plugin puts the NCCL and launcher environment into every task; no: it only reports what it would set",
			parse:  parseYesNo, set: func(s *Settings, v any, src Source) { s.InjectEnv = Setting[bool]{v.(bool), src} }},
		{Name: "AutoPlan", Default: "yes", User: true,
			Format: "yes or no",
			Why:    "yes: the plugin plans the layout when a job names a model and a batch (--train-model, --train-batch); no: it never plans, and jobs give their degrees with --train-layout",
			parse:  parseYesNo, set: func(s *Settings, v any, src Source) { s.AutoPlan = Setting[bool]{v.(bool), src} }},
		{Name: "Stack", Default: "megatron-core", User: true,
			Format: "a training stack of the planner: " + strings.Join(plan.StackNames(), ", "),
			Why:    "the software the plugin plans for when a job names none (--train-stack); its kernels, overlaps and fitted efficiency change the plan",
			parse:  parseStack, set: func(s *Settings, v any, src Source) { s.Stack = Setting[string]{v.(string), src} }},
		{Name: "Precision", Default: "bf16", User: true,
			Format: "bf16, fp16 or fp8",
			Why:    "the matmul precision the plugin plans for when a job names none (--train-precision)",
			parse:  oneOf("bf16", "fp16", "fp8"), set: func(s *Settings, v any, src Source) { s.Precision = Setting[string]{v.(string), src} }},
		{Name: "Finetune", Default: "full", User: true,
			Format: "full, lora or lora:RANK",
			Why:    "the training mode the plugin plans for when a job names none (--train-finetune): LoRA trains adapters on a frozen base",
			parse:  parseFinetune, set: func(s *Settings, v any, src Source) { s.Finetune = Setting[string]{v.(string), src} }},
	}
}

// overrideKeys is UserOverride: which of the user keys users may set.
func overrideKeys() []*Key {
	return []*Key{
		{Name: "UserOverride", Default: "all",
			Format: "all, none, or a comma-separated list of: " + strings.Join(userKeyNames(), ", "),
			Why:    "all: users may override every setting marked user-overridable; restrict it per partition",
			parse:  parseOverride, set: func(s *Settings, v any, src Source) { s.UserOverride = Setting[Override]{v.(Override), src} }},
	}
}

// observeKeys are the keys of metrics, events, checkpoint age alerts and the site calibration.
func observeKeys() []*Key {
	return []*Key{
		{Name: "MetricsAddr", Default: "off", SiteOnly: true,
			Format: "off, or HOST:PORT to serve Prometheus metrics on (HOST may be empty: all addresses)",
			Why:    "off: no listener unless the site asks; a port per node is the site's to allocate",
			parse:  parseAddr, set: func(s *Settings, v any, src Source) { s.MetricsAddr = Setting[string]{v.(string), src} }},
		{Name: "Pushgateway", Default: "off", SiteOnly: true,
			Format: "off, or an http(s) URL of a Prometheus Pushgateway",
			Why:    "off: nothing is pushed unless the site runs a Pushgateway",
			parse:  parseURL, set: func(s *Settings, v any, src Source) { s.Pushgateway = Setting[string]{v.(string), src} }},
		{Name: "Webhook", Default: "off", User: true,
			Format: "off, or an http(s) URL that receives job events as JSON (write '#' as \\#)",
			Why:    "off: no outbound calls unless asked",
			parse:  parseURL, set: func(s *Settings, v any, src Source) { s.Webhook = Setting[string]{v.(string), src} }},
		{Name: "MaxCkptAge", Default: "off",
			Format: "off, or a duration such as 2h: the age of the latest checkpoint at which metrics flag the job",
			Why:    "off: no alert threshold unless the site sets one",
			parse:  offDuration, set: func(s *Settings, v any, src Source) { s.MaxCkptAge = Setting[time.Duration]{v.(time.Duration), src} }},
		{Name: "StopIfOffTrack", Default: "no", User: true,
			Format: "no, yes (0.9), or a probability in [0.5, 1): a run with --target-loss checkpoints and stops (exit 12) once its loss forecast is off track with at least this probability",
			Why:    "no: a forecast informs (metrics, webhook); stopping a run is the user's or the site's choice",
			parse:  parseStopIfOffTrack, set: func(s *Settings, v any, src Source) { s.StopIfOffTrack = Setting[float64]{v.(float64), src} }},
		{Name: "Calibration", Default: "none", User: true,
			Format: "none, or the absolute path of a site calibration directory (trainrun calib)",
			Why:    "none: plans use the published-run calibration only; with a directory, trainrun run appends each run's observation to it and plan/run/submit/sweep correct their predictions with the nearest ones",
			parse:  parseCalibration, set: func(s *Settings, v any, src Source) { s.Calibration = Setting[string]{v.(string), src} }},
		{Name: "Tune", Default: "none", User: true,
			Format: "none, K or K:STEPS (K layouts to try, 1-16; STEPS per layout, at least 6, default 10)",
			Why:    "none: trainrun run trains the planner's choice; with K, it first runs the planner's K best layouts STEPS steps each inside the job and trains the fastest measured one (trainrun run --tune)",
			parse:  parseTune, set: func(s *Settings, v any, src Source) { s.Tune = Setting[string]{v.(string), src} }},
		{Name: "TuneBudget", Default: "auto", User: true,
			Format: "auto, or the tune trials' time: minutes (5) or a duration (90s)",
			Why:    "auto: 5% of the job's time limit (10m without one), so that measuring costs a few per cent of the job",
			parse:  parseTuneBudget, set: func(s *Settings, v any, src Source) { s.TuneBudget = Setting[time.Duration]{v.(time.Duration), src} }},
	}
}

var keyByName = map[string]*Key{}

// lookupKey finds a key by name, ignoring case.
func lookupKey(name string) *Key { return keyByName[strings.ToLower(name)] }

// Keys returns the table of settings, in display order.
func Keys() []Key {
	out := make([]Key, len(keys))
	for i, k := range keys {
		out[i] = *k
	}
	return out
}

// userKeys are the keys users may be allowed to override. A function, not
// derived from keys, because the UserOverride entry of keys quotes it.
func userKeyNames() []string {
	return []string{"CkptSignal", "CkptLead", "CkptLeadAdapt", "CkptDir", "CkptKeep", "CkptKeepEvery", "CkptCompress", "MaxRequeue", "MaxFailuresNoProgress",
		"HangTimeout", "MaxRestarts", "SpareNodes", "Shrink", "Migrate", "MigrateEvery", "LossSpike", "LossSpikeAction", "InjectEnv", "AutoPlan", "Stack", "Precision", "Finetune", "Webhook", "StopIfOffTrack", "Calibration", "Tune", "TuneBudget", "SrunArgs"}
}

// badValue is a value error before the file and line are known.
type badValue struct{ msg string }

func (e *badValue) Error() string { return e.msg }

func bad(format string, a ...any) error { return &badValue{fmt.Sprintf(format, a...)} }

var signalNames = []string{"USR1", "USR2", "TERM", "INT", "HUP", "QUIT", "ALRM", "URG", "XCPU"}

func parseSignal(v string) (any, error) {
	name := strings.TrimPrefix(strings.ToUpper(v), "SIG")
	if slices.Contains(signalNames, name) {
		return name, nil
	}
	switch name {
	case "KILL", "STOP":
		return nil, bad("SIG%s cannot be caught, so no trainer can checkpoint on it", name)
	case "CONT":
		return nil, bad("Slurm sends SIGCONT before every signal; a trainer cannot tell it apart")
	}
	return nil, bad("not a signal name trainrun accepts")
}

// parseDuration reads 90, 90s, 5m, 1h30m.
func parseDuration(v string) (time.Duration, error) {
	if n, err := strconv.ParseUint(v, 10, 31); err == nil {
		return time.Duration(n) * time.Second, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, bad("not a duration")
	}
	if d < 0 {
		return 0, bad("negative")
	}
	if d%time.Second != 0 {
		return 0, bad("finer than a second")
	}
	return d, nil
}

func positiveDuration(v string) (any, error) {
	d, err := parseDuration(v)
	if err == nil && d == 0 {
		err = bad("must be more than 0")
	}
	return d, err
}

func autoDuration(v string) (any, error) {
	if strings.EqualFold(v, "auto") {
		return time.Duration(0), nil
	}
	return positiveDuration(v)
}

func offDuration(v string) (any, error) {
	if strings.EqualFold(v, "off") {
		return time.Duration(0), nil
	}
	return positiveDuration(v)
}

// parseHangTimeout reads auto, off or a duration of at least 1s, in the
// spelling `trainrun run --hang-timeout` takes.
func parseHangTimeout(v string) (any, error) {
	switch strings.ToLower(v) {
	case "auto", "off":
		return strings.ToLower(v), nil
	}
	d, err := parseDuration(v)
	if err != nil {
		return nil, err
	}
	if d < time.Second {
		return nil, bad("shorter than 1s")
	}
	return FormatDuration(d), nil
}

func intAtLeast(lo int) func(string) (any, error) {
	return func(v string) (any, error) {
		n, err := strconv.Atoi(v)
		if err != nil {
			return nil, bad("not a whole number")
		}
		if n < lo {
			return nil, bad("less than %d", lo)
		}
		return n, nil
	}
}

func oneOf(vals ...string) func(string) (any, error) {
	return func(v string) (any, error) {
		for _, a := range vals {
			if strings.EqualFold(a, v) {
				return a, nil
			}
		}
		return nil, bad("not one of the accepted values")
	}
}

// CompressModes are CkptCompress's values.
var CompressModes = []string{"no", "auto", "archive", "always"}

func parseCompress(v string) (any, error) {
	v = strings.ToLower(v)
	if slices.Contains(CompressModes, v) {
		return v, nil
	}
	return nil, bad("%q is not one of %s", v, strings.Join(CompressModes, ", "))
}

// parseStopIfOffTrack reads StopIfOffTrack: no (0), yes (0.9) or the
// probability itself.
func parseStopIfOffTrack(v string) (any, error) {
	switch strings.ToLower(v) {
	case "no":
		return 0.0, nil
	case "yes":
		return 0.9, nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || !(f >= 0.5 && f < 1) {
		return nil, bad("not no, yes or a probability in [0.5, 1)")
	}
	return f, nil
}

func parseYesNo(v string) (any, error) {
	switch strings.ToLower(v) {
	case "yes":
		return true, nil
	case "no":
		return false, nil
	}
	return nil, bad("not yes or no")
}

func parseAbsPath(p string) (string, error) {
	if !path.IsAbs(p) {
		return "", bad("%q is not an absolute path", p)
	}
	if strings.Contains(p, "$") {
		return "", bad("%q: variables are not expanded here", p)
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == ".." {
			return "", bad("%q contains ..", p)
		}
	}
	return path.Clean(p), nil
}

func parseRoots(v string) (any, error) {
	if strings.EqualFold(v, "any") {
		return []string(nil), nil
	}
	var out []string
	for _, r := range strings.Split(v, ",") {
		if r == "" {
			return nil, bad("empty path in the list")
		}
		p, err := parseAbsPath(r)
		if err != nil {
			return nil, err
		}
		if strings.Contains(p, "%") {
			return nil, bad("%q: a root is a fixed directory; use %%u and friends in CkptDir", r)
		}
		if slices.Contains(out, p) {
			return nil, bad("%q is listed twice", r)
		}
		out = append(out, p)
	}
	return out, nil
}

// parseCalibration reads none ("") or an absolute directory path.
func parseCalibration(v string) (any, error) {
	if strings.EqualFold(v, "none") {
		return "", nil
	}
	return parseAbsPath(v)
}

func parseCkptDir(v string) (any, error) {
	if strings.EqualFold(v, "none") {
		return "", nil
	}
	p, err := parseAbsPath(v)
	if err != nil {
		return nil, err
	}
	for i := 0; i < len(p); i++ {
		if p[i] != '%' {
			continue
		}
		if i+1 >= len(p) || !strings.ContainsRune("ujx%", rune(p[i+1])) {
			return nil, bad("%q: after %% write u (user), j (job id), x (job name) or %%", v)
		}
		i++
	}
	return p, nil
}

// ExpandCkptDir replaces %u, %j, %x and %% in a CkptDir value.
func ExpandCkptDir(dir, user, jobID, jobName string) string {
	var b strings.Builder
	for i := 0; i < len(dir); i++ {
		if dir[i] != '%' || i+1 >= len(dir) {
			b.WriteByte(dir[i])
			continue
		}
		i++
		switch dir[i] {
		case 'u':
			b.WriteString(user)
		case 'j':
			b.WriteString(jobID)
		case 'x':
			b.WriteString(jobName)
		default:
			b.WriteByte(dir[i])
		}
	}
	return b.String()
}

// underRoot reports whether dir (a CkptDir, placeholders allowed) lies under
// one of roots; nil roots allow anything.
func underRoot(dir string, roots []string) bool {
	if roots == nil || dir == "" {
		return true
	}
	for _, r := range roots {
		if r == "/" || dir == r || strings.HasPrefix(dir, r+"/") {
			return true
		}
	}
	return false
}

// envOp is one NCCLForce/NCCLDefault value: a variable, or "none".
type envOp struct {
	clear       bool
	name, value string
}

func validEnvName(s string) bool {
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

func parseEnvOp(v string) (any, error) {
	if strings.EqualFold(v, "none") {
		return envOp{clear: true}, nil
	}
	name, value, ok := strings.Cut(v, "=")
	if !ok {
		return nil, bad("no '=': write NAME=VALUE, e.g. NCCL_IB_TIMEOUT=22")
	}
	if !validEnvName(name) {
		return nil, bad("%q is not an environment variable name", name)
	}
	if value == "" {
		return nil, bad("%s has an empty value; to stop a site-wide setting on a partition, write none and list the rest", name)
	}
	return envOp{name: name, value: value}, nil
}

func applyEnvOp(list *Setting[[]EnvVar], op envOp, src Source) {
	if op.clear {
		*list = Setting[[]EnvVar]{nil, src}
		return
	}
	for i := range list.Value {
		if list.Value[i].Name == op.name {
			list.Value[i] = EnvVar{op.name, op.value, src}
			return
		}
	}
	list.Value = append(list.Value, EnvVar{op.name, op.value, src})
}

func parseOverride(v string) (any, error) {
	switch strings.ToLower(v) {
	case "all":
		return Override{All: true}, nil
	case "none":
		return Override{}, nil
	}
	var o Override
	for _, k := range strings.Split(v, ",") {
		key := lookupKey(k)
		switch {
		case key == nil:
			return nil, bad("%q is not a key", k)
		case !key.User:
			return nil, bad("%s is the site's to set; users cannot be allowed to override it", key.Name)
		case slices.Contains(o.Keys, key.Name):
			return nil, bad("%s is listed twice", key.Name)
		}
		o.Keys = append(o.Keys, key.Name)
	}
	return o, nil
}

func parseAddr(v string) (any, error) {
	if strings.EqualFold(v, "off") {
		return "", nil
	}
	_, port, err := net.SplitHostPort(v)
	if err != nil {
		return nil, bad("not HOST:PORT")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return nil, bad("port %q is not 1-65535", port)
	}
	return v, nil
}

func parseURL(v string) (any, error) {
	if strings.EqualFold(v, "off") {
		return "", nil
	}
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, bad("not an http:// or https:// URL with a host")
	}
	return v, nil
}

// parseStack reads a stack name as the planner accepts it (plan.ParseStack)
// and keeps its canonical spelling.
func parseStack(v string) (any, error) {
	st, err := plan.ParseStack(v)
	if err != nil {
		return nil, bad("%v", err)
	}
	if st == plan.StackMegatronCore {
		return "megatron-core", nil
	}
	return string(st), nil
}

// parseFinetune reads full, lora or lora:RANK (plan.ParseFinetune).
func parseFinetune(v string) (any, error) {
	if _, err := plan.ParseFinetune(v); err != nil {
		return nil, bad("%v", err)
	}
	return strings.ToLower(strings.TrimSpace(v)), nil
}

// parseMemoryMargin reads a percentage ("5%" or "5") as a fraction.
func parseMemoryMargin(v string) (any, error) {
	f, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), "%"), 64)
	if err != nil || !(f >= 0) || f > 50 {
		return nil, bad("want a percentage from 0 to 50 (e.g. 5%%)")
	}
	return f / 100, nil
}

// parseNVMeBW reads auto (0) or a bandwidth in GB/s per node.
func parseNVMeBW(v string) (any, error) {
	if strings.EqualFold(v, "auto") {
		return 0.0, nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || !(f > 0) || f > 10000 {
		return nil, bad("want auto or a positive number of GB/s per node, at most 10000 (e.g. 25)")
	}
	return f, nil
}

// parseGPUHourCost reads none (-1) or a price per GPU-hour.
func parseGPUHourCost(v string) (any, error) {
	if strings.EqualFold(v, "none") {
		return -1.0, nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || !(f >= 0) || f > 1e9 {
		return nil, bad("want none or a price per GPU-hour, a number from 0 to 1e9 (e.g. 2.5)")
	}
	return f, nil
}

// parseGPUType reads auto ("") or a GPU type of the planner's catalog, as
// its canonical name (LookupGPU's spellings accepted).
func parseGPUType(v string) (any, error) {
	if strings.EqualFold(v, "auto") {
		return "", nil
	}
	g, err := plan.LookupGPU(v)
	if err != nil {
		// The accepted list follows in the message: drop LookupGPU's own.
		msg, _, _ := strings.Cut(err.Error(), " known:")
		return nil, bad("%s", msg)
	}
	return g.Name, nil
}

// parseTune reads none, K or K:STEPS (trainrun run --tune; the run checks
// it again where it is used).
func parseTune(v string) (any, error) {
	if strings.EqualFold(v, "none") {
		return "", nil
	}
	ks, ss, hasSteps := strings.Cut(v, ":")
	k, err := strconv.Atoi(ks)
	if err != nil || k < 1 || k > 16 {
		return nil, &badValue{fmt.Sprintf("%q: want none, K or K:STEPS with K from 1 to 16 (the layouts to try), e.g. 4:10", v)}
	}
	if hasSteps {
		if n, err := strconv.Atoi(ss); err != nil || n < 6 {
			return nil, &badValue{fmt.Sprintf("%q: STEPS %q must be a whole number of at least 6 (the first steps are warm-up), e.g. %d:10", v, ss, k)}
		}
	}
	return v, nil
}

// parseTuneBudget reads auto (0), minutes or a duration.
func parseTuneBudget(v string) (any, error) {
	if strings.EqualFold(v, "auto") {
		return time.Duration(0), nil
	}
	if m, err := strconv.ParseFloat(v, 64); err == nil && m > 0 && m < 1e6 {
		return time.Duration(m * float64(time.Minute)).Round(time.Second), nil
	}
	if d, err := time.ParseDuration(v); err == nil && d > 0 {
		return d, nil
	}
	return nil, &badValue{fmt.Sprintf("%q: want auto, minutes (e.g. 5) or a duration (e.g. 90s)", v)}
}

// CheckTune says what is wrong with a Tune= value (none, K or K:STEPS), for
// the plugin's --train-tune.
func CheckTune(v string) error {
	_, err := parseTune(v)
	return err
}

// CheckCalibration says what is wrong with a Calibration= value (none or an
// absolute directory), for the plugin's --train-calibration.
func CheckCalibration(v string) error {
	_, err := parseCalibration(v)
	return err
}
