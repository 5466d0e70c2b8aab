package run

import (
	"strings"
	"time"

	"github.com/spf13/pflag"
	"github.com/trainrun/trainrun/plan"
	"github.com/trainrun/trainrun/wrapper/internal/launch"
	"github.com/trainrun/trainrun/wrapper/internal/planflags"
)

// Options are the flags of `trainrun run`: the plan flags of `trainrun
// plan` (planflags.Options, shared) and the run's own.
type Options struct {
	plan        planflags.Options
	planFile    string
	ckptDir     string
	ckptSignal  string
	ckptLocal   string
	maxRequeue  int
	maxFailures int
	ckptKeep    int
	ckptEvery   int
	compress    string
	policy      string
	jobDir      string
	name        string
	initFrom    string
	probe       string
	dryRun      bool
	rank        int
	obs         obsOptions
	fault       faultOptions
	tune        tuneOptions      // --tune, --tune-budget (tunestep.go)
	spike       spikeOptions     // --loss-spike, --loss-spike-action (lossspike.go)
	shrink      shrinkOptions    // --shrink (shrink.go)
	migrate     migrateOptions   // --migrate, --migrate-every (migrate.go)
	ctr         containerOptions // --container-*, --srun-arg (container.go)
}

// defaultCkptLead is --ckpt-lead when not given: at most this, and at most a
// quarter of the job's time limit.
const defaultCkptLead = 10 * time.Minute

// PlanFlagsNotForRun are plan flags that the allocation or the run decides.
var PlanFlagsNotForRun = []string{"format", "top", "time-margin", "nodelist", "topology-conf", "gpus", "gpus-per-node"}

// AddFlags registers run's flags on fs: the plan flags (planflags.Options)
// with those the allocation decides hidden, and the run's own; getenv gives
// the defaults that have a TRAINRUN_* twin.
func (o *Options) AddFlags(fs *pflag.FlagSet, getenv func(string) string) {
	o.plan.AddFlags(fs)
	for _, name := range PlanFlagsNotForRun {
		fs.MarkHidden(name)
	}
	fs.Lookup("gpu").Usage = "GPU type for the planner when the nodes' GPUs are not recognised (" + strings.Join(plan.GPUNames(), " ") + "; default: the policy's GPUType)"
	fs.Lookup("model").Usage += " (default: TRAINRUN_MODEL, which the plugin's #SBATCH --train-model sets)"
	fs.Lookup("seq-len").Usage += " (default: from TRAINRUN_BATCH=GLOBALxSEQLEN, which #SBATCH --train-batch sets)"
	fs.Lookup("global-batch").Usage += " (default: from TRAINRUN_BATCH=GLOBALxSEQLEN, which #SBATCH --train-batch sets)"
	addSoftwareUsage(fs)
	fs.Lookup("fix").Usage = "pin the layout: tp=,pp=,vpp=,cp=,ep=,etp=,dp=,mbs=,recompute=,zero=,sp=,offload=; without a model (--model or shape flags) the degrees are used as given (dp defaults to GPUs/(tp·pp·cp)) and not evaluated"
	fs.Lookup("ckpt-lead").Usage = "ask for the checkpoint this long before the job's end time, by trainrun's own clock (default: 10m or a quarter of the time limit, whichever is less)"
	fs.StringVar(&o.planFile, "plan", "", "use this plan (the JSON of 'trainrun plan --format json') instead of planning (default: TRAINRUN_PLAN, which trainrun submit exports, when its layout has the allocation's GPUs)")
	fs.StringVar(&o.ckptDir, "ckpt-dir", getenv("TRAINRUN_CKPT_DIR"), "durable checkpoint store of the run (env TRAINRUN_CKPT_DIR; default JOBDIR/checkpoints)")
	fs.StringVar(&o.ckptLocal, "ckpt-local-dir", getenv("TRAINRUN_CKPT_LOCAL_DIR"), "tiered checkpoints: the trainer saves into this node-local directory (e.g. /dev/shm/trainrun-%j; %n node, %j job id, %r restart; env TRAINRUN_CKPT_LOCAL_DIR) and trainrun drains each node's part into --ckpt-dir in the background and commits it")
	fs.StringVar(&o.ckptSignal, "ckpt-signal", envOr(getenv, "TRAINRUN_CKPT_SIGNAL", "USR2"), "signal that asks the trainer to checkpoint (env TRAINRUN_CKPT_SIGNAL); not USR1, which NCCL 2.12 catches (NVIDIA/nccl#704)")
	fs.IntVar(&o.maxRequeue, "max-requeue", 10, "requeue at most this many times (SLURM_RESTART_COUNT), then stop")
	fs.IntVar(&o.ckptKeep, "ckpt-keep", 0, "after each commit keep the newest N committed checkpoints and prune older ones (0 = keep all; the policy's CkptKeep when it has one)")
	fs.IntVar(&o.ckptEvery, "ckpt-keep-every", 0, "with --ckpt-keep: also keep one checkpoint per K steps, for loss curves and scaling-law analysis")
	fs.StringVar(&o.compress, "ckpt-compress", "no", "lossless compression of checkpoints: no; archive (retained older checkpoints, in the background; the newest stays raw); auto (archive, and the tiered drain compresses when the target is slower than the compressor); always (archive, and every drain compresses); the policy's CkptCompress when it has one")
	fs.IntVar(&o.maxFailures, "max-failures", 3, "after a failed step, requeue (resuming from the latest checkpoint) until this many runs in a row failed without progress; 0 = never requeue a failure")
	fs.StringVar(&o.policy, "policy", getenv("TRAINRUN_POLICY"), "the site's trainrun.conf (env TRAINRUN_POLICY): its settings for the job's partition are the defaults of the checkpoint flags and shape the NCCL variables")
	fs.StringVar(&o.jobDir, "job-dir", getenv("TRAINRUN_JOB_DIR"), "job directory for plan, hostfile, summary and launch files (env TRAINRUN_JOB_DIR; default $SLURM_SUBMIT_DIR/trainrun-<jobid>); must be on a file system all nodes share")
	fs.StringVar(&o.name, "name", "", "the run's name, its identity inside the job: its own directory JOBDIR/runs/NAME (plan, launch files, checkpoint store) and its own \"already finished\" rule, so several runs in one batch script each run once (default: derived from the command line; an unnamed run keeps JOBDIR itself unless another unnamed command owns it)")
	fs.StringVar(&o.initFrom, "init-from", "", "start from this committed checkpoint (STORE/TAG) while the run's own store has none: {resume} and TRAINRUN_RESUME_DIR point to it on the first start, to the run's own checkpoints after a requeue")
	fs.StringVar(&o.probe, "probe", "auto", "node topology probe: auto (reuse JOBDIR/topo when it covers the nodes, else probe), all (probe every node), none; it runs in the step's first task of each node while trainrun plans (TRAINRUN_EARLY_STEP=0: in a step of its own first)")
	fs.BoolVar(&o.dryRun, "dry-run", false, "print the srun command line and one rank's environment instead of launching")
	fs.IntVar(&o.rank, "rank", 0, "with --dry-run: the rank whose environment to print")
	o.obs.addFlags(fs, getenv)
	o.fault.addFlags(fs)
	o.tune.addFlags(fs, getenv)
	o.spike.addFlags(fs, getenv)
	o.shrink.addFlags(fs, getenv)
	o.migrate.addFlags(fs, getenv)
	o.ctr.addFlags(fs, getenv)
}

func envOr(getenv func(string) string, k, def string) string {
	if v := getenv(k); v != "" {
		return v
	}
	return def
}

// Validate refuses flag values no run can use, before anything starts.
func (o *Options) Validate() error {
	if launch.SignalByName(o.ckptSignal) == nil {
		return usageErrorf("--ckpt-signal %q: want a signal name such as USR2 or TERM", o.ckptSignal)
	}
	if err := checkCompressMode(o.compress); err != nil {
		return err
	}
	if o.plan.Fix != "" && o.planFile != "" {
		return usageErrorf("--fix and --plan both given: use one (the plan file already pins the layout)")
	}
	if _, err := hangConfig(o.fault.hangTimeout); err != nil {
		return err
	}
	if _, _, err := o.spike.parsed(); err != nil {
		return err
	}
	if err := o.shrink.check(); err != nil {
		return err
	}
	if err := o.migrate.check(); err != nil {
		return err
	}
	if o.fault.maxRestarts < 0 {
		return usageErrorf("--max-restarts %d: want 0 (never restart inside the allocation) or more", o.fault.maxRestarts)
	}
	if _, _, err := o.tune.parsed("--tune (env TRAINRUN_TUNE)", "--tune-budget (env TRAINRUN_TUNE_BUDGET)"); err != nil {
		return err
	}
	if o.fault.spareNodes < 0 {
		return usageErrorf("--spare-nodes %d: want 0 (no spare nodes) or more, fewer than the job's nodes", o.fault.spareNodes)
	}
	return nil
}
