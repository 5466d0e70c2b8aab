package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"github.com/trainrun/trainrun/checkpoint"
	"github.com/trainrun/trainrun/internal/calib"
	"github.com/trainrun/trainrun/plan"
	"github.com/trainrun/trainrun/wrapper/internal/launch"
	"github.com/trainrun/trainrun/wrapper/internal/losshist"
	"github.com/trainrun/trainrun/wrapper/obs"
)

func init() {
	register(&command{name: "run", short: "plan, place and launch the training step inside a Slurm allocation", run: runRun})
}

// runOptions are the flags of `trainrun run`: the plan flags of `trainrun
// plan` (planOptions, shared) and the run's own.
type runOptions struct {
	plan        planOptions
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
}

// defaultCkptLead is --ckpt-lead when not given: at most this, and at most a
// quarter of the job's time limit.
const defaultCkptLead = 10 * time.Minute

// planFlagsNotForRun are plan flags that the allocation or the run decides.
var planFlagsNotForRun = []string{"format", "top", "time-margin", "nodelist", "topology-conf", "gpus", "gpus-per-node"}

func (o *runOptions) addFlags(fs *pflag.FlagSet, getenv func(string) string) {
	o.plan.AddFlags(fs)
	for _, name := range planFlagsNotForRun {
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
	fs.StringVar(&o.ckptSignal, "ckpt-signal", envOr(getenv, "TRAINRUN_CKPT_SIGNAL", "USR2"), "signal that asks the trainer to checkpoint (env TRAINRUN_CKPT_SIGNAL); not USR1, which NCCL uses")
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
}

func envOr(getenv func(string) string, k, def string) string {
	if v := getenv(k); v != "" {
		return v
	}
	return def
}

const runSynopsis = "run [flags] -- CMD [ARGS...]"

var runHelpTail = joinLines(
	"",
	"Inside an allocation (sbatch or salloc), plans the layout (or takes --fix/--plan), places one rank",
	"per GPU, writes plan.json, hostfile and summary.txt into the job directory and launches the step",
	"with srun. Each task gets the torchrun variables (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE,",
	"NODE_RANK, MASTER_ADDR, MASTER_PORT) and TRAINRUN_* (trainrun help trainer lists them).",
	"",
	"With the SPANK plugin, '#SBATCH --train-model=NAME --train-batch=GLOBALxSEQLEN' reach trainrun run",
	"as TRAINRUN_MODEL and TRAINRUN_BATCH: they stand for --model and --seq-len/--global-batch where",
	"those flags are not given (so '#SBATCH --train-model=llama3-70b' then 'trainrun run --seq-len 8192",
	"--global-batch 1024 -- ...' plans llama3-70b). Likewise --train-stack, --train-precision and",
	"--train-finetune reach it as TRAINRUN_STACK, TRAINRUN_PRECISION and TRAINRUN_FINETUNE: each of",
	"--stack, --precision and --finetune comes from its flag, else that twin, else the partition's",
	"policy (Stack=, Precision=, Finetune=), else the flag's default.",
	"",
	"Templates in CMD: {tp} {pp} {vpp} {cp} {ep} {dp} {micro_batch} {grad_accum} {resume} {ckpt_dir}",
	"{megatron_args} ({megatron_args} as a whole argument expands to one argument per flag; inside a",
	"longer argument, to shell-quoted words) {deepspeed_config} (the plan's ds_config.json in the job dir)",
	"{torchtitan_args} (plan --format torchtitan's overrides, expanded as {megatron_args} is; put it last).",
	"On a Megatron stack the ranks also get TRAINRUN_MEGATRON_ARGS: {megatron_args} as shell-quoted words.",
	"",
	"Checkpoints: trainrun asks every training process to checkpoint with TRAINRUN_CKPT_SIGNAL (once),",
	"--ckpt-lead before the job's end time, on SIGUSR1 to trainrun itself (#SBATCH --signal=B:USR1@90;",
	"the script must 'exec trainrun run ...' for the batch shell's signal to reach it, see",
	"contrib/jobs/), and Slurm's own SIGTERM at preemption reaches the trainer directly. The trainer",
	"saves to TRAINRUN_CKPT_DIR/<tag>/, marks "+checkpoint.DonePattern+", and exits 0; trainrun",
	"commits the checkpoint and requeues the job (scontrol requeue) up to --max-requeue times.",
	"'trainrun ckpt request --then continue|stop|requeue' asks for one while the job runs.",
	"Tiered: with --ckpt-local-dir the trainer saves into TRAINRUN_CKPT_LOCAL_DIR/<tag>/ on node-local",
	"storage and marks done there; each node's first task drains it into the store in the background,",
	"trainrun commits when every node's drain is done, and the step ends only after its drains.",
	"Grace budget: each checkpoint's time from request to commit is kept in the job's history; trainrun",
	"warns when the lead, the partition's GraceTime or KillWait is shorter (policy CkptLeadAdapt=yes",
	"raises the lead).",
	"Hangs: every rank's report_progress is its liveness (TRAINRUN_HEARTBEAT_FD, node-local). A step",
	"without progress for --hang-timeout is logged (rank, node, GPU, process state), asked for a stack",
	"dump (SIGURG, faulthandler), killed and restarted inside the job from the latest checkpoint up to",
	"--max-restarts times, then requeued. Stragglers (1.5x their peers' step time) are logged.",
	"Faults: a save the disk refuses (ENOSPC, EDQUOT, EIO; the trainer marks "+checkpoint.FailedPattern+")",
	"is discarded and reported with the file system's free space; the latest stays, the next save retries, and a",
	"stop whose save failed requeues from it. A failed step's node (lost, or its rank failed first) is kept in the",
	"history; a requeued job excludes lost nodes (scontrol update ExcNodeList; use #SBATCH --no-kill).",
	"Restarts: a crash or a lost node is first restarted inside the job (--max-restarts; a lost node only",
	"onto a --spare-nodes node, with the same world size), then the job is requeued.",
	"",
)

func runRun(ctx context.Context, env *runEnv, args []string) error {
	var o runOptions
	fs := newFlags("run", runSynopsis, env.stdout)
	o.addFlags(fs, env.getenv)
	fs.Usage = func() {
		fmt.Fprintf(env.stdout, "Usage: trainrun %s\n\nFlags:\n", runSynopsis)
		fs.PrintDefaults()
		fmt.Fprint(env.stdout, runHelpTail)
		fmt.Fprint(env.stdout, exitCodeTable())
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	argv := fs.Args()
	if len(argv) == 0 {
		return usageErrorf("no training command: put it after --, e.g. trainrun run --fix tp=8 -- python train.py --tp {tp}")
	}
	if err := o.validate(); err != nil {
		return err
	}
	r := &runner{env: env, t0: time.Now()}
	return r.run(ctx, o, givenFlags(fs), argv)
}

// givenFlags are the flags set on fs's command line.
func givenFlags(fs *pflag.FlagSet) map[string]bool {
	given := map[string]bool{}
	fs.Visit(func(f *pflag.Flag) { given[f.Name] = true })
	return given
}

// validate refuses flag values no run can use, before anything starts.
func (o *runOptions) validate() error {
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
	if o.fault.maxRestarts < 0 {
		return usageErrorf("--max-restarts %d: want 0 (never restart inside the allocation) or more", o.fault.maxRestarts)
	}
	if o.fault.spareNodes < 0 {
		return usageErrorf("--spare-nodes %d: want 0 (no spare nodes) or more, fewer than the job's nodes", o.fault.spareNodes)
	}
	return nil
}

// choice is what the choose phase hands on: the layout, its evaluation
// when the planner made one, and a planned model's Megatron arguments.
type choice struct {
	Layout   plan.Layout
	Eval     *plan.Evaluation // nil when the layout was pinned and not evaluated
	Model    *plan.Model      // the planned model (nil: none given); {megatron_args} renders it with Job
	Job      plan.Job
	Inputs   *plan.Inputs // what Eval was planned from (nil unless planned here): the observation's record
	GPU      string       // the GPU type the planner planned for ("" when it did not plan)
	PlanFile string       // the plan file the layout came from: --plan, else TRAINRUN_PLAN ("": none)
}

// placed is what the place phase hands on: each rank's node and GPU, and
// the placement's traffic model (nil when the block order fallback was used).
type placed struct {
	Slots     []rankSlot
	Placement *plan.Placement
}

// runner holds one `trainrun run` from allocation to exit: its
// configuration, and the value each phase returned, in their order.
type runner struct {
	cfg runConfig // setup: the options resolved (complete) and the command; never written after
	env *runEnv
	t0  time.Time

	alloc  *allocation // setup; gather and the spares replace it, never change it
	dirs   runDirs     // dirs
	early  *earlyStep  // early: the step started before the plan; nil once handed to the monitor
	facts  runFacts    // gather
	choice choice      // choose
	placed placed      // place; a restart on spare nodes places again
	ckpt   runStore    // store (written by its goroutine, read after awaitStore)
	step   stepLaunch  // prepare; a restart prepares again
	sess   session     // while the step runs, and across restarts inside the allocation
}

// runDirs are the run's directories (makeDirs).
type runDirs struct {
	jobDir  string // JOBDIR, or JOBDIR/runs/NAME for a named run
	runName string
	ckptDir string // the checkpoint store
}

// The job directory's layout: what trainrun run keeps under jobDir, in one
// table (paths are runDirs.in(...) of these).
const (
	jobLaunchDir = "launch"         // the launch files, ckpt-request, the trainers' progress file
	jobTopoDir   = "topo"           // the probe's node facts, reused by --probe auto
	jobPlanFile  = "plan.json"      // the layout and where each rank runs (planDoc)
	jobHostfile  = "hostfile"       // one line per node, slots=GPUs
	jobSummary   = "summary.txt"    // what the run does (run_summary.go)
	jobCkptDir   = "checkpoints"    // the default --ckpt-dir
	jobRunsDir   = "runs"           // runs/NAME: each named run's own directory (run_name.go)
	jobDSConfig  = "ds_config.json" // {deepspeed_config}: the plan's DeepSpeed configuration (megatron_args.go)
)

// in is the path of parts under the job directory.
func (d runDirs) in(parts ...string) string {
	return filepath.Join(append([]string{d.jobDir}, parts...)...)
}

// runStore is what the store phase opened (openRunStore).
type runStore struct {
	store  *checkpoint.Store // nil in a dry run
	resume string            // the checkpoint resumed from
}

// stepLaunch is what the prepare phase made for srun.
type stepLaunch struct {
	cmdArgv    []string      // the command with its templates filled
	srunArgv   []string      // srun's command line
	srunEnv    []string      // srun's environment additions
	masterPort int           // the step's MASTER_PORT (freeMasterPort)
	tReady     time.Duration // from start to launching srun (or its go)
}

// session is the state that lives while steps run and across restarts
// inside the allocation; the monitor's goroutines share it (tagMu guards
// lastTag).
type session struct {
	tagMu        sync.Mutex
	lastTag      string      // the latest committed checkpoint's tag known to the controller
	obs          runObserver // nil in a dry run
	progress     *obs.ProgressReader
	lossHist     *losshist.Recorder // the loss history (issue 32); nil without a store
	fc           *forecastWatch     // --target-loss (cmd_forecast.go); nil without
	esw          *earlyStopWatch    // a sweep trial's --early-stop (cmd_forecast.go)
	endCause     checkpoint.Cause
	interrupted  map[string]bool
	commitFailed bool
	faults       faultState  // failed saves and nodes (run_faults.go)
	restarts     int         // steps restarted inside this allocation (run_hang.go)
	hangWhat     string      // the ranks the last hang points to
	rankFaults   []rankFault // hangs and stragglers seen, for the log and the report
	spare        spareState  // --spare-nodes (run_spare.go)

	// The run's observation (calib.go); nil: none is recorded.
	calibRec *calib.Recorder
}

func (r *runner) logf(format string, a ...any) {
	fmt.Fprintf(r.env.stderr, "trainrun: "+format+"\n", a...)
}

// run is the controller's spine: setup → gather → choose → place →
// prepare → launch/monitor → decide → act (see doc.go).
func (r *runner) run(ctx context.Context, o runOptions, given map[string]bool, argv []string) error {
	if err := r.setup(o, given, argv); err != nil {
		return err
	}
	if finished, err := r.makeDirs(); err != nil || finished {
		return err
	}
	if err := r.startEarly(ctx); err != nil {
		return err
	}
	defer r.abortEarly() // unless the monitor took the step over
	// The observer starts while Slurm starts the early step.
	if !r.cfg.dryRun {
		if err := r.startObserver(); err != nil {
			return err
		}
		defer r.closeObserver()
	}
	// The store is opened (recovered, scanned for the resume point) while
	// gather waits on Slurm and the probes: on a shared file system its
	// scans and Slurm's start of the step overlap.
	awaitStore := r.openRunStoreAsync()
	defer awaitStore()
	f, err := r.gather(ctx)
	if err != nil {
		return err
	}
	r.facts = f
	if err := r.setupSpares(ctx); err != nil {
		return err
	}
	if r.choice, err = r.choosePlan(); err != nil {
		return err
	}
	if r.placed, err = r.place(f, r.choice); err != nil {
		return err
	}
	store, err := awaitStore()
	if err != nil {
		return err
	}
	step, renv, err := r.prepare(f)
	if err != nil {
		return err
	}
	r.step = step
	if r.cfg.dryRun {
		return r.printDryRun(renv)
	}
	for {
		if err = r.startStep(ctx, f, renv, store); !errors.Is(err, errRestartStep) {
			return err
		}
		if renv, err = r.restartStep(f, store); err != nil {
			return err
		}
	}
}
