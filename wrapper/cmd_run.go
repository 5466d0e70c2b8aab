package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"github.com/trainrun/trainrun/checkpoint"
	"github.com/trainrun/trainrun/internal/slurm"
	"github.com/trainrun/trainrun/plan"
	"github.com/trainrun/trainrun/plan/policy"
	"github.com/trainrun/trainrun/topo"
	"github.com/trainrun/trainrun/wrapper/internal/health"
	"github.com/trainrun/trainrun/wrapper/internal/launch"
	"github.com/trainrun/trainrun/wrapper/internal/run"
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
	fs.StringVar(&o.probe, "probe", "auto", "node topology probe: auto (reuse JOBDIR/topo when it covers the nodes, else probe), all (probe every node), none")
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
	"NODE_RANK, MASTER_ADDR, MASTER_PORT) and TRAINRUN_* (see PRODUCT.md).",
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
	"{megatron_args} ({megatron_args} as a whole argument expands to one argument per flag).",
	"",
	"Checkpoints: trainrun asks every training process to checkpoint with TRAINRUN_CKPT_SIGNAL (once),",
	"--ckpt-lead before the job's end time, on SIGUSR1 to trainrun itself (#SBATCH --signal=B:USR1@90;",
	"the script must 'exec trainrun run ...' for the batch shell's signal to reach it, see",
	"contrib/jobs/), and Slurm's own SIGTERM at preemption reaches the trainer directly. The trainer",
	"saves to TRAINRUN_CKPT_DIR/<tag>/, marks <tag>/.trainrun/done.<RANK>, and exits 0; trainrun",
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
	"Faults: a save the disk refuses (ENOSPC, EDQUOT, EIO; the trainer marks <tag>/.trainrun/failed.<RANK>.<CAUSE>)",
	"is discarded and reported with the file system's free space; the latest stays, the next save retries, and a",
	"stop whose save failed requeues from it. A failed step's node (lost, or its rank failed first) is kept in the",
	"history; a requeued job excludes lost nodes (scontrol update ExcNodeList; use #SBATCH --no-kill).",
	"Restarts: a crash or a lost node is first restarted inside the job (--max-restarts; a lost node only",
	"onto a --spare-nodes node, with the same world size), then the job is requeued.",
	"",
)

func runRun(ctx context.Context, env *runEnv, args []string) error {
	var o runOptions
	fs := newFlags("run", runSynopsis, env.stderr)
	o.addFlags(fs, env.getenv)
	fs.Usage = func() {
		fmt.Fprintf(env.stderr, "Usage: trainrun %s\n\nFlags:\n", runSynopsis)
		fs.PrintDefaults()
		fmt.Fprint(env.stderr, runHelpTail)
		fmt.Fprint(env.stderr, exitCodeTable())
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	argv := fs.Args()
	if len(argv) == 0 {
		return usageErrorf("no training command: put it after --, e.g. trainrun run --fix tp=8 -- python train.py --tp {tp}")
	}
	if launch.SignalByName(o.ckptSignal) == nil {
		return usageErrorf("--ckpt-signal %q: want a signal name such as USR2 or TERM", o.ckptSignal)
	}
	if err := checkCompressMode(o.compress); err != nil {
		return err
	}
	if o.plan.Fix != "" && o.planFile != "" {
		return usageErrorf("--fix and --plan both given: use one (the plan file already pins the layout)")
	}
	hang, err := hangConfig(o.fault.hangTimeout)
	if err != nil {
		return err
	}
	if o.fault.maxRestarts < 0 {
		return usageErrorf("--max-restarts %d: want 0 (never restart inside the allocation) or more", o.fault.maxRestarts)
	}
	if o.fault.spareNodes < 0 {
		return usageErrorf("--spare-nodes %d: want 0 (no spare nodes) or more, fewer than the job's nodes", o.fault.spareNodes)
	}
	r := &runner{opts: o, fs: fs, env: env, argv: argv, t0: time.Now(), hangCfg: hang}
	return r.run(ctx)
}

// runner holds one `trainrun run` from allocation to exit.
type runner struct {
	opts       runOptions
	fs         *pflag.FlagSet
	lead       time.Duration // the checkpoint lead in use
	facts      map[string]nodeFacts
	megatron   []string
	store      *checkpoint.Store // nil in a dry run
	ncclPolicy plan.NCCLPolicy
	leadFixed  bool                   // the lead came from the policy: no shortening for short jobs
	leadAdapt  bool                   // the policy's CkptLeadAdapt: raise the lead to fit measured checkpoints
	policyGPU  policy.Setting[string] // the policy's GPUType ("" = auto): the planner's GPU type when the probe finds none
	policy     *partPolicy            // the partition's policy (nil without --policy): defaults of --stack, --precision, --finetune, --nvme-bw
	grace      graceLimits
	graceBudg  time.Duration // the policy's CkptGraceBudget (0: auto, the partition's GraceTime)
	tagMu      sync.Mutex
	lastTag    string          // the latest committed checkpoint's tag known to the controller
	tQuery     time.Duration   // from start to the end of the scontrol queries and the probe
	tReady     time.Duration   // from start to launching srun
	placement  *plan.Placement // nil when the block order fallback was used
	env        *runEnv
	argv       []string
	t0         time.Time
	alloc      *allocation
	job        slurm.Job

	jobDir   string
	runName  string
	ckptDir  string
	self     string
	layout   plan.Layout
	eval     *plan.Evaluation // nil when the layout was pinned and not evaluated
	slots    []rankSlot
	resume   string
	cmdArgv  []string
	srunArgv []string
	srunEnv  []string

	obs          runObserver // nil in a dry run
	endCause     checkpoint.Cause
	interrupted  map[string]bool
	commitFailed bool
	faults       faultState // failed saves and nodes (run_faults.go)
	progress     *obs.ProgressReader

	hangCfg    *health.Config // nil: --hang-timeout off
	restarts   int            // steps restarted inside this allocation (run_hang.go)
	hangWhat   string         // the ranks the last hang points to
	rankFaults []rankFault    // hangs and stragglers seen, for the log and the report
	masterPort int            // the step's MASTER_PORT (freeMasterPort)
	// excludeStragglers: the policy's StragglerAction=exclude.
	excludeStragglers bool
	spare             spareState // --spare-nodes (run_spare.go)
}

func (r *runner) logf(format string, a ...any) {
	fmt.Fprintf(r.env.stderr, "trainrun: "+format+"\n", a...)
}

// run is the controller's spine: setup → gather → choose → place →
// prepare → launch/monitor → decide → act (see doc.go).
func (r *runner) run(ctx context.Context) error {
	if err := r.setup(); err != nil {
		return err
	}
	if finished, err := r.makeDirs(); err != nil || finished {
		return err
	}
	f, err := r.gather(ctx)
	if err != nil {
		return err
	}
	if err := r.setupSpares(ctx); err != nil {
		return err
	}
	if !r.opts.dryRun {
		if err := r.startObserver(); err != nil {
			return err
		}
		defer r.closeObserver()
	}
	if err := r.choosePlan(); err != nil {
		return err
	}
	if err := r.place(f); err != nil {
		return err
	}
	store, err := r.openRunStore()
	if err != nil {
		return err
	}
	renv, err := r.prepare(f)
	if err != nil {
		return err
	}
	if r.opts.dryRun {
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

// setup checks srun and reads the allocation.
func (r *runner) setup() error {
	if !slurm.HaveSrun() {
		if !r.opts.dryRun {
			return withCode(ExitSlurm, errors.New("srun not found in PATH: run trainrun on a node with the Slurm client commands (srun, scontrol) installed"))
		}
		r.logf("warning: srun not found in PATH; a real launch would fail (exit %d)", ExitSlurm)
	}
	a, err := parseAllocation(r.env.getenv, topo.ExpandHostlist)
	if err != nil {
		return err
	}
	if a.InStep {
		return withCode(ExitSlurm, fmt.Errorf("trainrun run is running inside a job step (SLURM_STEP_ID=%s): call it once from the batch script, not under srun; it starts the step itself", slurm.JobFromEnv(r.env.getenv).StepID))
	}
	r.alloc = a
	if r.self, err = os.Executable(); err != nil {
		return err
	}
	return r.applyPolicy()
}

// makeDirs makes the job and checkpoint directories; finished says that the
// run already finished (its store says so) and must not start again.
func (r *runner) makeDirs() (finished bool, err error) {
	a := r.alloc
	base := r.opts.jobDir
	if base == "" {
		sub := a.SubmitDir
		if sub == "" {
			sub, _ = os.Getwd()
		}
		base = filepath.Join(sub, "trainrun-"+a.JobID)
	}
	if base, err = filepath.Abs(base); err != nil {
		return false, err
	}
	if err := mkdirOwnUnlessDry(r.opts.dryRun, base); err != nil {
		return false, withCode(ExitUsage, fmt.Errorf("job directory %s: %w (set --job-dir or TRAINRUN_JOB_DIR to a writable directory all nodes share)", base, err))
	}
	primary, err := r.resolveRun(base)
	if err != nil {
		return false, err
	}
	r.ckptDir = r.opts.ckptDir
	if r.ckptDir == "" {
		r.ckptDir = filepath.Join(r.jobDir, "checkpoints")
		if err := mkdirOwnUnlessDry(r.opts.dryRun, r.ckptDir); err != nil {
			return false, withCode(ExitUsage, fmt.Errorf("default --ckpt-dir: %w", err))
		}
	} else if !primary && !r.fs.Changed("ckpt-dir") {
		// TRAINRUN_CKPT_DIR or the policy's CkptDir is the job's, shared by
		// every run in it: each run but the first gets its own store below.
		r.ckptDir = filepath.Join(r.ckptDir, "runs", r.runName)
	}
	if r.ckptDir, err = filepath.Abs(r.ckptDir); err != nil {
		return false, err
	}
	if err := mkdirUnlessDry(r.opts.dryRun, r.ckptDir); err != nil {
		return false, withCode(ExitUsage, fmt.Errorf("--ckpt-dir %s: %w", r.ckptDir, err))
	}
	if !r.opts.dryRun {
		return r.finishedBefore()
	}
	return false, nil
}

// runFacts is what the gather phase learns beyond the environment.
type runFacts struct {
	addrs   map[string]string    // NodeAddr by node name (scontrol show node)
	nodes   map[string]nodeFacts // the probe's node facts (nil: no probe)
	cluster *topo.Cluster        // the switch topology (flat when unknown)
}

// gather asks what the environment does not say: end time (scontrol show
// job), node addresses (scontrol show node), limits, topology, node facts
// (probe): in parallel. Only an interrupt or a failed probe is fatal.
func (r *runner) gather(ctx context.Context) (runFacts, error) {
	a := r.alloc
	var f runFacts
	var wg sync.WaitGroup
	var jobErr, addrErr, probeErr, graceErr error
	wg.Add(4)
	sc := r.env.slurm
	go func() {
		defer wg.Done()
		lim, err := sc.Limits(ctx, a.Partition)
		r.grace, graceErr = graceLimitsOf(lim), err
	}()
	go func() { defer wg.Done(); f.cluster = liveTopology(ctx, sc, a.Nodes, r.logf) }()
	go func() { defer wg.Done(); r.job, jobErr = sc.Job(ctx, a.JobID) }()
	go func() { defer wg.Done(); f.addrs, addrErr = sc.NodeAddrs(ctx, a.NodeList) }()
	topoDir := filepath.Join(r.jobDir, "topo")
	switch r.opts.probe {
	case "none":
	case "auto", "all":
		if c, ok := readProbeCache(a, topoDir); ok && r.opts.probe == "auto" {
			f.nodes = c
			break
		}
		wg.Add(1)
		go func() { defer wg.Done(); f.nodes, probeErr = probeNodes(ctx, sc, a, r.self, topoDir) }()
	default:
		return f, usageErrorf("--probe %q: want auto, all or none", r.opts.probe)
	}
	wg.Wait()
	r.tQuery = time.Since(r.t0)
	if ctx.Err() != nil {
		return f, withCode(ExitInterrupted, errors.New("interrupted before the step started"))
	}
	if jobErr != nil {
		r.logf("warning: %v; no end time known: checkpoints before the time limit depend on a B:USR1 signal", jobErr)
		r.job = slurm.Job{}
	}
	if addrErr != nil {
		r.logf("warning: %v; using node names as addresses", addrErr)
	}
	if graceErr != nil {
		r.logf("warning: %v; the grace budget checks what it can", graceErr)
	}
	if r.graceBudg > 0 {
		r.grace.GraceTime, r.grace.GraceSource = r.graceBudg, "the policy's CkptGraceBudget"
	}
	if probeErr != nil {
		return f, probeErr
	}
	a.TimeLimit, a.EndTime, a.Requeue = r.job.TimeLimit, r.job.EndTime, r.job.Requeue
	r.facts = f.nodes
	r.lead = r.opts.plan.CkptLead
	if !r.fs.Changed("ckpt-lead") && !r.leadFixed && a.TimeLimit > 0 {
		r.lead = min(defaultCkptLead, a.TimeLimit/4)
	}
	return f, nil
}

// place puts the ranks on the GPUs (r.slots, r.placement).
func (r *runner) place(f runFacts) error {
	var traffic plan.Traffic
	if r.eval != nil {
		traffic = r.eval.Traffic
	}
	var notes []string
	var err error
	if r.slots, r.placement, notes, err = placeRanks(r.alloc, r.layout, traffic, f.nodes, f.cluster); err != nil {
		return withCode(ExitNoFit, err)
	}
	for _, n := range notes {
		r.logf("placement: %s", n)
	}
	return nil
}

// openRunStore opens the checkpoint store, commits what an earlier run
// completed, and finds the checkpoint to resume from (r.resume). A dry run
// opens nothing (nil).
func (r *runner) openRunStore() (*observedStore, error) {
	if r.opts.dryRun {
		return nil, nil
	}
	a := r.alloc
	sa, err := openStore(r.ckptDir)
	if err != nil {
		return nil, withCode(ExitCheckpoint, fmt.Errorf("checkpoint store %s: %w", r.ckptDir, err))
	}
	store := &observedStore{ckptStore: sa, st: sa.s, r: r}
	// A checkpoint the previous incarnation completed but did not
	// commit (killed, node failure) is committed now, before resuming.
	// With node-local saves, an unfinished drain cannot be finished
	// (its source was on the nodes): Recover discards it, so that the
	// drains of this run start from a clean staging area.
	if r.opts.ckptLocal != "" {
		if rep, err := sa.s.Recover(a.World(), true); err != nil {
			r.logf("warning: recovering the checkpoint store: %v", err)
		} else if len(rep.Committed)+len(rep.Discarded) > 0 {
			r.logf("checkpoint store recovered: committed %s; discarded unfinished %s",
				cmp.Or(strings.Join(rep.Committed, ", "), "none"), cmp.Or(strings.Join(rep.Discarded, ", "), "none"))
		}
	}
	if tag, changed, err := store.CommitComplete(a.World()); err != nil {
		r.logf("warning: committing a complete checkpoint left by an earlier run: %v", err)
	} else if changed {
		r.logf("committed checkpoint %s, completed by an earlier run of this job", tag)
	}
	r.store = store.st
	r.setCompressMode()
	var notes []string
	if r.resume, notes, err = store.Latest(); err != nil {
		return nil, withCode(ExitCheckpoint, fmt.Errorf("checkpoint store %s: %w", r.ckptDir, err))
	}
	for _, n := range notes {
		r.logf("warning: %s", n)
	}
	r.setLastTag(tagOf(r.resume))
	if err := r.resumeOrInit(); err != nil {
		return nil, err
	}
	return store, nil
}

// prepare substitutes the command's templates, writes plan.json and the
// hostfile, and builds the rank environment and the srun command line.
func (r *runner) prepare(f runFacts) (rankEnv, error) {
	a := r.alloc
	var unknown []string
	megatron := r.megatron
	if megatron == nil {
		megatron = plan.MegatronLayoutArgs(r.layout)
	}
	r.cmdArgv, unknown = substituteTemplates(r.argv, templateValues(r.layout, r.resume, r.ckptDir), megatron)
	for _, u := range unknown {
		r.logf("warning: %s in the command is not a trainrun template (known: {%s}); left as is", u, strings.Join(templateNames, "} {"))
	}

	// Files of the job directory (a dry run writes nothing).
	planPath := filepath.Join(r.jobDir, "plan.json")
	hostfilePath := filepath.Join(r.jobDir, "hostfile")
	if !r.opts.dryRun {
		if err := r.writePlan(planPath); err != nil {
			return rankEnv{}, err
		}
		if err := launch.WriteFileAtomic(hostfilePath, []byte(hostfile(r.slots)), 0o644); err != nil {
			return rankEnv{}, err
		}
	}
	master := nodesInRankOrder(r.slots)[0]
	masterAddr := master
	if v := f.addrs[master]; v != "" {
		masterAddr = v
	}
	r.masterPort = masterPort(a.JobID)
	if !r.opts.dryRun {
		r.masterPort = freeMasterPort(a.JobID, master == a.BatchNode, net.Listen, r.logf)
	}
	renv := runRankEnv(a, r.slots, envInputs{
		Layout: r.layout, MasterAddr: masterAddr, MasterPort: r.masterPort, PlanPath: planPath,
		CkptDir: r.ckptDir, ResumeDir: r.resume, CkptSignal: strings.TrimPrefix(strings.ToUpper(r.opts.ckptSignal), "SIG"),
		JobDir: r.jobDir, RestartCount: a.RestartCount,
	})
	r.addNCCLEnv(&renv, masterAddr, f.addrs, planPath)
	launchDir := filepath.Join(r.jobDir, "launch")
	bindInShim := false
	for _, s := range r.slots {
		if s.CPUs != "" {
			bindInShim = true
		}
	}
	r.srunArgv, r.srunEnv = launch.SrunCommand(launch.StepSpec{
		Self: r.self, LaunchDir: launchDir, Hostfile: hostfilePath, Arbitrary: !sameOrderAsSlurm(a, r.slots),
		Nodes: len(a.Nodes), Tasks: a.World(), PerNode: a.TasksPerNode, BindInShim: bindInShim, Argv: r.cmdArgv, NodeList: r.stepNodeList(), Overlap: len(r.spare.lost) > 0,
	})
	return renv, nil
}

// startStep opens the control channel, writes the launch files and the
// summary, and launches the step, unless too many runs failed in a row.
func (r *runner) startStep(ctx context.Context, f runFacts, renv rankEnv, store *observedStore) error {
	a := r.alloc
	launchDir := filepath.Join(r.jobDir, "launch")
	ctlHost := a.BatchNode
	if v := f.addrs[a.BatchNode]; v != "" {
		ctlHost = v
	}
	if ctlHost == "" {
		ctlHost, _ = os.Hostname()
	}
	bind, ctlHost := launch.ControlHost(ctlHost, len(a.Nodes) > 1)
	if bind == "" {
		r.logf("warning: the batch node's address %s is not one of its own non-loopback addresses; the control channel listens on all interfaces", ctlHost)
	}
	ctl, err := launch.Listen(bind, a.World())
	if err != nil {
		return err
	}
	defer ctl.Close()
	common := launchCommon{JobID: a.JobID, World: a.World(), Control: net.JoinHostPort(ctlHost, strconv.Itoa(ctl.Port())),
		Token: ctl.Token, Signal: renv.Common["TRAINRUN_CKPT_SIGNAL"], LocalDir: r.opts.ckptLocal, CkptDir: r.ckptDir}
	if err := writeLaunchDir(launchDir, common, r.slots, renv); err != nil {
		return fmt.Errorf("launch files in %s: %w", launchDir, err)
	}
	summary := r.summary()
	if err := launch.WriteFileAtomic(filepath.Join(r.jobDir, "summary.txt"), []byte(summary), 0o644); err != nil {
		return err
	}
	fmt.Fprint(r.env.stdout, summary)
	if r.store != nil && r.opts.maxFailures > 0 {
		// Runs that ended without an end event (killed, node failure) count as failures.
		if incs, err := r.store.History().Load(); err == nil {
			if n := checkpoint.FailuresWithoutProgress(incs); n >= r.opts.maxFailures {
				return withCode(ExitRequeueLimit, fmt.Errorf("the last %d run(s) of this job failed without progress (history in %s/.trainrun/history.jsonl); not starting again (--max-failures %d)",
					n, r.ckptDir, r.opts.maxFailures))
			}
		}
	}
	r.recordStart()
	r.checkGrace("start")
	r.tReady = time.Since(r.t0)
	if r.restarts == 0 { // the observer sees one run; a restart inside it is not its end
		r.observeStart()
	}
	err = r.launch(ctx, ctl, store)
	if !errors.Is(err, errRestartStep) {
		r.observeEnd(err)
	}
	return err
}

// choosePlan sets r.layout (and r.eval when the planner evaluated it): from
// --plan FILE; from the planner when a model is given (searching, or
// evaluating what --fix pins); or from --fix alone, unevaluated.
func (r *runner) choosePlan() error {
	world := r.alloc.World()
	po := &r.opts.plan
	modelFromEnv, err := r.planInputsFromEnv()
	if err != nil {
		return err
	}
	if r.opts.planFile == "" {
		r.opts.planFile = r.submittedPlan(world)
	}
	hasModel := po.Model != ""
	for _, f := range modelFlags {
		hasModel = hasModel || r.fs.Changed(f)
	}
	switch {
	case r.opts.planFile == "" && modelFromEnv && po.Fix != "" && (po.SeqLen == 0 || po.GlobalBatch == 0):
		// #SBATCH --train-model alone with a script that pins its layout:
		// the layout is used as before, not evaluated.
		r.logf("TRAINRUN_MODEL=%s is set but no batch (--seq-len, --global-batch or TRAINRUN_BATCH): --fix %s is used as given, not evaluated", po.Model, po.Fix)
		l, err := fixedLayout(po.Fix, world, po.GlobalBatch)
		if err != nil {
			return err
		}
		r.layout = l
	case r.opts.planFile != "":
		ev, err := readRunPlan(r.opts.planFile, world)
		if err != nil {
			return err
		}
		r.eval, r.layout = ev, ev.Layout
	case hasModel:
		if err := r.planFromModel(modelFromEnv); err != nil {
			return err
		}
	case po.Fix != "":
		l, err := fixedLayout(po.Fix, world, po.GlobalBatch)
		if err != nil {
			return err
		}
		r.layout = l
	default:
		return usageErrorf("no layout: give the model (--model NAME|PATH, or --layers --hidden --heads --vocab) with --seq-len and --global-batch to plan, "+
			"or pin the degrees with --fix (e.g. --fix tp=%d; dp is derived from the %d GPUs), or pass --plan FILE from 'trainrun plan --format json'",
			min(world, r.alloc.TasksPerNode), world)
	}
	if r.layout.VPP <= 0 {
		r.layout.VPP = 1
	}
	if r.layout.TP > r.alloc.TasksPerNode {
		r.logf("warning: tp=%d is larger than the %d GPUs of a node: tensor-parallel traffic will cross the network", r.layout.TP, r.alloc.TasksPerNode)
	} else if r.alloc.TasksPerNode%r.layout.TP != 0 {
		r.logf("warning: tp=%d does not divide the %d GPUs of a node: some TP groups will span two nodes", r.layout.TP, r.alloc.TasksPerNode)
	}
	return nil
}

// planFromModel plans the layout for the model on the allocation's GPUs
// (r.eval, r.layout, r.megatron).
func (r *runner) planFromModel(modelFromEnv bool) error {
	world := r.alloc.World()
	po := &r.opts.plan
	m, err := po.model(r.fs)
	if err != nil {
		return err
	}
	if err := r.planSoftware(); err != nil {
		return err
	}
	j, err := po.job()
	if err != nil {
		if modelFromEnv {
			return usageErrorf("%v (the model %s comes from TRAINRUN_MODEL, which #SBATCH --train-model sets: give the batch with --seq-len and --global-batch, or #SBATCH --train-batch=GLOBALxSEQLEN)", err, po.Model)
		}
		return err
	}
	if po.GPU == "" {
		if po.GPU, err = r.plannerGPU(); err != nil {
			return err
		}
	}
	if strings.Contains(po.GPU, ",") || strings.Contains(po.GPU, ":") {
		return usageErrorf("--gpu %q: inside an allocation give one GPU type; the count comes from the allocation", po.GPU)
	}
	po.GPUs = world
	// The allocation decides the GPUs per node, as if --gpus-per-node
	// gave it.
	po.GPUsPerNode = r.alloc.TasksPerNode
	clusters, err := po.clusters(func(name string) bool {
		return name == "gpus-per-node" || r.fs.Changed(name) || name == "nvme-bw" && po.NVMeBW > 0 // the policy's NVMeBW
	})
	if err != nil {
		return err
	}
	c := clusters[0]
	pins, err := parseFix(po.Fix)
	if err != nil {
		return err
	}
	so := po.searchOptions(pins)
	res := plan.Search(m, j, c, so)
	if err := noFitError(m, j, c, so, res); err != nil {
		return err
	}
	if n := plan.LayoutGPUs(res.Plan.Layout); n != world {
		return withCode(ExitNoFit, fmt.Errorf("the plan %s uses %d GPUs but the allocation has %d", res.Plan.Layout.Config(), n, world))
	}
	r.eval, r.layout = res.Plan, res.Plan.Layout
	r.megatron = plan.MegatronArgs(m, j, *res.Plan)
	return nil
}

// plannerGPU is the GPU type to plan for: what the probe found on the
// nodes, else the policy's GPUType.
func (r *runner) plannerGPU() (string, error) {
	name := r.probedGPUName()
	if name == "" && r.policyGPU.Value != "" {
		r.logf("the probe found no GPU name the planner knows; planning for %s, the policy's GPUType (%s)", r.policyGPU.Value, r.policyGPU.Source)
		name = r.policyGPU.Value
	}
	if name == "" {
		return "", usageErrorf("no GPU type for the planner: the probe found no GPU name on the nodes (probe %s; fake or unrecognised devices); pass --gpu TYPE (%s)",
			r.opts.probe, strings.Join(plan.GPUNames(), " "))
	}
	if _, err := plan.LookupGPU(name); err != nil {
		return "", usageErrorf("the nodes' GPU %q is not in the planner's catalog: pass --gpu TYPE (%s)", name, strings.Join(plan.GPUNames(), " "))
	}
	return name, nil
}

// planInputsFromEnv takes --model from TRAINRUN_MODEL and --seq-len and
// --global-batch from TRAINRUN_BATCH (GLOBALxSEQLEN) where those flags are
// not given: the plugin's --train-model and --train-batch, given as #SBATCH
// directives, reach the batch script as these twins. fromEnv says whether
// the model came from there.
func (r *runner) planInputsFromEnv() (fromEnv bool, err error) {
	po := &r.opts.plan
	shape := false
	for _, f := range modelFlags {
		shape = shape || r.fs.Changed(f)
	}
	if v := strings.TrimSpace(r.env.getenv("TRAINRUN_MODEL")); v != "" && !r.fs.Changed("model") && !shape {
		po.Model, fromEnv = v, true
	}
	if v := r.env.getenv("TRAINRUN_BATCH"); v != "" && (!r.fs.Changed("seq-len") || !r.fs.Changed("global-batch")) {
		gb, sl, err := plan.ParseBatch(v)
		if err != nil {
			return fromEnv, usageErrorf("TRAINRUN_BATCH=%s: %v (it is #SBATCH --train-batch's twin; or give --seq-len and --global-batch)", v, err)
		}
		if !r.fs.Changed("global-batch") {
			po.GlobalBatch = gb
		}
		if !r.fs.Changed("seq-len") {
			po.SeqLen = sl
		}
	}
	return fromEnv, nil
}

// planDoc is plan.json: the contract's plan object plus where each rank runs.
type planDoc struct {
	Plan      any        `json:"plan"`
	Evaluated bool       `json:"evaluated"` // false: the layout was pinned and not evaluated by the planner
	JobID     string     `json:"job_id"`
	Nodes     []string   `json:"nodes"`
	Ranks     []rankSlot `json:"ranks"`
	// Traffic and Baseline are the bytes per step over each link class for
	// this placement and for Slurm's block order (absent without placement).
	Traffic  *plan.LinkBytes `json:"traffic,omitempty"`
	Baseline *plan.LinkBytes `json:"baseline,omitempty"`
	Command  []string        `json:"command"`
	Resume   string          `json:"resume"`
	CkptDir  string          `json:"ckpt_dir"`
}

func (r *runner) writePlan(path string) error {
	d := planDoc{JobID: r.alloc.JobID, Nodes: r.alloc.Nodes, Ranks: r.slots, Command: r.cmdArgv, Resume: r.resume, CkptDir: r.ckptDir}
	if r.placement != nil {
		d.Traffic, d.Baseline = &r.placement.Traffic, &r.placement.Baseline
	}
	if r.eval != nil {
		d.Plan, d.Evaluated = r.eval, true
	} else {
		d.Plan = r.layout
	}
	return launch.WriteJSONAtomic(path, d, 0o644)
}

// summary is the one page printed to the job log and written to summary.txt.
func (r *runner) summary() string {
	var b strings.Builder
	a, l := r.alloc, r.layout
	fmt.Fprintf(&b, "trainrun run: job %s, %d node(s) × %d GPU(s) = %d ranks, partition %s, restart %d\n",
		a.JobID, len(a.Nodes), a.TasksPerNode, a.World(), orDash(a.Partition), a.RestartCount)
	if !a.EndTime.IsZero() {
		fmt.Fprintf(&b, "  time limit  %s, ends %s; checkpoint asked %s before\n", fmtLimit(a.TimeLimit), a.EndTime.Format("2006-01-02 15:04:05"), r.lead)
	}
	fmt.Fprintf(&b, "  layout      tp=%d pp=%d vpp=%d cp=%d ep=%d dp=%d  micro_batch=%d grad_accum=%d recompute=%s zero=%d sp=%t",
		l.TP, l.PP, l.VPP, l.CP, l.EP, l.DP, l.MicroBatch, l.GradAccum, l.Recompute, l.Zero, l.SP)
	if r.eval != nil {
		fmt.Fprintf(&b, "\n  predicted   step %.3f s (compute %.3f, TP comm %.3f, PP bubble %.3f, DP exposed %.3f), MFU %.1f%%, %.0f GiB/GPU of %.0f\n",
			r.eval.Time.Step, r.eval.Time.Compute, r.eval.Time.TPComm, r.eval.Time.PPBubble, r.eval.Time.DPCommExposed, 100*r.eval.MFU,
			r.eval.Memory.PerGPU/(1<<30), r.eval.Memory.Capacity/(1<<30))
	} else {
		fmt.Fprintf(&b, " (pinned with --fix; not evaluated: no prediction)\n")
	}
	fmt.Fprintf(&b, "  placement   rank order tp-cp-ep-dp-pp; %s\n", placementLine(r.slots, l))
	for _, w := range tpSlowLinks(r.slots, r.facts, 4) {
		fmt.Fprintf(&b, "  warning     %s\n", w)
	}
	if p := r.placement; p != nil && r.eval != nil {
		fmt.Fprintf(&b, "  traffic     per step: NVLink %s, PCIe %s, leaf %s, spine %s (Slurm's block order: leaf %s, spine %s)\n",
			gib(p.Traffic.NVLink), gib(p.Traffic.PCIe), gib(p.Traffic.Leaf), gib(p.Traffic.Spine), gib(p.Baseline.Leaf), gib(p.Baseline.Spine))
	}
	for _, line := range nodeTable(r.slots, 8) {
		fmt.Fprintf(&b, "    %s\n", line)
	}
	b.WriteString(r.spareSummary())
	fmt.Fprintf(&b, "  resume      %s\n", cmp.Or(r.resume, "(none: first start)"))
	fmt.Fprintf(&b, "  checkpoints %s (signal %s)\n", r.ckptDir, strings.ToUpper(r.opts.ckptSignal))
	if r.opts.ckptLocal != "" {
		fmt.Fprintf(&b, "  tiered      trainers save into %s on each node; trainrun drains it into the store\n", r.opts.ckptLocal)
	}
	fmt.Fprintf(&b, "  command     %s\n", shellJoin(r.cmdArgv))
	fmt.Fprintf(&b, "  job dir     %s (plan.json, hostfile, summary.txt, launch/)\n", r.jobDir)
	return b.String()
}

// placementLine says where the TP groups landed.
func placementLine(slots []rankSlot, l plan.Layout) string {
	groups, onOne := 0, 0
	byGroup := map[[4]int]map[string]bool{}
	for _, s := range slots {
		k := [4]int{s.CP, s.DP, s.PP, 0}
		if byGroup[k] == nil {
			byGroup[k] = map[string]bool{}
		}
		byGroup[k][s.Node] = true
	}
	for _, nodes := range byGroup {
		groups++
		if len(nodes) == 1 {
			onOne++
		}
	}
	return fmt.Sprintf("%d of %d TP groups (size %d) inside one node", onOne, groups, l.TP)
}

// nodeTable lists each node's ranks compactly, at most max lines.
func nodeTable(slots []rankSlot, maxLines int) []string {
	var lines []string
	nodes := nodesInRankOrder(slots)
	byNode := map[string][]rankSlot{}
	for _, s := range slots {
		byNode[s.Node] = append(byNode[s.Node], s)
	}
	for i, n := range nodes {
		if i == maxLines-1 && len(nodes) > maxLines {
			lines = append(lines, fmt.Sprintf("... %d more nodes (see plan.json)", len(nodes)-i))
			break
		}
		rs := byNode[n]
		sort.Slice(rs, func(a, b int) bool { return rs[a].LocalRank < rs[b].LocalRank })
		var parts []string
		for _, s := range rs {
			g := "gpu" + strconv.Itoa(s.GPU)
			if s.GPU < 0 {
				g = "gpu?"
			}
			parts = append(parts, fmt.Sprintf("%d:%s(pp%d,dp%d,tp%d)", s.Rank, g, s.PP, s.DP, s.TP))
		}
		lines = append(lines, fmt.Sprintf("%-10s %s", n, strings.Join(parts, " ")))
	}
	return lines
}

func orDash(s string) string { return cmp.Or(s, "-") }

func fmtLimit(d time.Duration) string {
	if d == 0 {
		return "UNLIMITED"
	}
	return d.String()
}

func (r *runner) printDryRun(renv rankEnv) error {
	if r.opts.rank < 0 || r.opts.rank >= len(r.slots) {
		return usageErrorf("--rank %d: the job has ranks 0..%d", r.opts.rank, len(r.slots)-1)
	}
	w := r.env.stdout
	fmt.Fprint(w, r.summary())
	fmt.Fprintln(w, "\n# srun command line:")
	line := shellJoin(r.srunArgv)
	if len(r.srunEnv) > 0 {
		line = shellJoin(r.srunEnv) + " " + line
	}
	fmt.Fprintln(w, line)
	s := r.slots[r.opts.rank]
	fmt.Fprintf(w, "\n# environment of rank %d (node %s, local rank %d, GPU %d), besides what Slurm sets:\n", s.Rank, s.Node, s.LocalRank, s.GPU)
	for _, kv := range launch.MergedEnv(renv.Common, renv.Ranks[r.opts.rank]) {
		k, v, _ := strings.Cut(kv, "=")
		fmt.Fprintf(w, "%s=%s\n", k, shellQuote(v))
	}
	fmt.Fprintf(w, "# CUDA_VISIBLE_DEVICES: Slurm's list for the step, reordered by the shim so that device %d (LOCAL_RANK) is GPU %d\n", s.LocalRank, s.GPU)
	return nil
}

// Why the step is being stopped: the stop reasons (run.None, ...), by their old names.
const (
	stopNone      = run.None
	stopTimeLimit = run.TimeLimit
	stopSignal    = run.Signal
	stopPreempted = run.Preempted
	stopCancelled = run.Cancelled
	stopTermLimit = run.TermLimit
	stopRequested = run.Requested
)

// ckptRequestFile (in JOBDIR/launch) holds "ID THEN" for the latest checkpoint
// request: THEN is stop or continue. The trainer client reads it when the
// checkpoint signal arrives; SIGTERM always means stop.
const ckptRequestFile = "ckpt-request"

// afterStep commits what the step completed, decides (run.Decide) what the
// job does next, and does it. tagAtStop is the latest committed tag when the
// stop was first asked for or signalled: only a checkpoint committed after
// it is progress made for the stop (a background commit may have committed
// it before the step ended).
func (r *runner) afterStep(waitErr error, reason string, stopAt time.Time, tagAtStop string, exits map[int]int, firstFail *launch.Event, store ckptStore) error {
	code, ok := slurm.ExitCode(waitErr)
	if !ok {
		return withCode(ExitSlurm, fmt.Errorf("srun: %w", waitErr))
	}
	o := r.outcome(code, reason, tagAtStop, exits, firstFail)
	o.Latest, o.CommitErr = r.commitAfterStep(store, reason, stopAt, tagAtStop)
	o.SaveFailed, o.FailedNodes = r.saveFailedSince(stopAt), r.stepFailedNodes(code, reason, exits, firstFail)
	r.spareOutcome(&o)
	if o.CommitErr == nil && code == 0 && reason == stopNone {
		r.compressKick(true) // a finished run compresses what it retains before it ends
	}
	if o.CheckpointStop() {
		took := time.Since(stopAt)
		r.logf("%s: step ended %.1f s after the request; latest checkpoint: %s", reason, took.Seconds(), cmp.Or(o.Latest, "none"))
		if (reason == stopTimeLimit || reason == stopSignal) && r.lead > 0 && took > r.lead*4/5 {
			r.logf("warning: checkpointing took %.0f s of the %s lead: raise --ckpt-lead (or the policy's CkptLead) before the next run is cut short", took.Seconds(), r.lead)
		}
	}
	if (o.Failed() || o.DiskFailed()) && o.MaxFailures > 0 && r.store != nil {
		o.HaveHistory = true
		if o.History, o.HistoryErr = r.store.History().Load(); o.HistoryErr != nil {
			r.logf("warning: %v", o.HistoryErr)
		}
	}
	return r.act(run.Decide(o), store)
}

// outcome gathers what run.Decide reads, except the commit's result.
func (r *runner) outcome(code int, reason, tagAtStop string, exits map[int]int, firstFail *launch.Event) run.Outcome {
	o := run.Outcome{Code: code, Reason: reason, TagAtStop: tagAtStop, RankExits: exits, Command: r.cmdArgv[0], CkptDir: r.ckptDir,
		JobID: r.alloc.JobID, RestartCount: r.alloc.RestartCount, Requeue: r.alloc.Requeue, MaxRequeue: r.opts.maxRequeue, MaxFailures: r.opts.maxFailures,
		EndNear:  !r.alloc.EndTime.IsZero() && time.Until(r.alloc.EndTime) < 2*r.lead,
		HangWhat: r.hangWhat, Restarts: r.restarts, MaxRestarts: r.opts.fault.maxRestarts}
	if firstFail != nil {
		s := r.slots[firstFail.Rank]
		o.FirstFail = fmt.Sprintf("rank %d (node %s, GPU %d) failed first with exit %d", s.Rank, s.Node, s.GPU, firstFail.Code)
	}
	return o
}

// commitAfterStep commits the newest complete checkpoint, and measures it
// when it was made for the stop.
func (r *runner) commitAfterStep(store ckptStore, reason string, stopAt time.Time, tagAtStop string) (string, error) {
	world := r.alloc.World()
	r.discardFailedSaves(store)
	latest, changed, err := store.CommitComplete(world)
	if err != nil || !changed {
		return latest, err
	}
	r.setLastTag(latest)
	r.logf("checkpoint %s complete (%d done markers) and committed as latest in %s", latest, world, r.ckptDir)
	r.prune()
	if reason != stopNone && reason != stopCancelled && !stopAt.IsZero() && latest != tagAtStop {
		r.recordCkpt(latest, reason, time.Since(stopAt))
		r.checkGrace("commit")
	}
	return latest, nil
}

// act does what the decision says: the history's end event, the finished
// marker, the requeue, the exit code.
func (r *runner) act(d run.Decision, store ckptStore) error {
	r.recordEnd(d.Cause, d.Tag, d.Record)
	if d.Finished {
		if sa, ok := unwrapStore(store); ok {
			if err := sa.s.MarkFinished(checkpoint.Finished{JobID: r.alloc.JobID, Restart: r.alloc.RestartCount, Tag: d.Tag, Run: r.runName}); err != nil {
				r.logf("warning: writing the finished marker: %v", err)
			}
		}
		r.logf("training finished (all %d ranks exited 0) in %.1f s", r.alloc.World(), time.Since(r.t0).Seconds())
	}
	if d.Restart {
		r.spare.restartWhy = d.Err
		r.logf("%s", d.Err)
		return errRestartStep
	}
	if d.Requeue {
		excl, nodes := r.badNodesToExclude()
		if err := r.env.slurm.Requeue(context.Background(), r.alloc.JobID); err != nil {
			return withCode(ExitStopped, fmt.Errorf("%s, but requeueing failed: %v", d.Err, err))
		}
		r.logf("%s; requeued (restart %d of at most %d)", d.Err, r.alloc.RestartCount+1, r.opts.maxRequeue)
		r.excludeBadNodes(excl, nodes)
		return withCode(ExitRequeued, errSilent)
	}
	if d.Exit == ExitOK {
		return nil
	}
	return withCode(d.Exit, errors.New(d.Err))
}

// recordStart and recordEnd keep the job's history in the checkpoint store:
// the requeue decisions read it.
func (r *runner) recordStart() {
	if r.store == nil {
		return
	}
	if err := r.store.History().Append(checkpoint.Event{Type: "start", JobID: r.alloc.JobID, Restart: r.alloc.RestartCount,
		Node: r.alloc.BatchNode, WorldSize: r.alloc.World(), ResumeFrom: tagOf(r.resume)}); err != nil {
		r.logf("warning: %v", err)
	}
}

func (r *runner) recordEnd(cause checkpoint.Cause, latest, msg string) {
	r.endCause = cause // for the observer's end event
	if r.store == nil {
		return
	}
	progress := int64(-1)
	if latest != "" {
		progress = checkpoint.StepOf(latest)
	}
	if err := r.store.History().Append(checkpoint.Event{Type: "end", JobID: r.alloc.JobID, Restart: r.alloc.RestartCount,
		Node: r.alloc.BatchNode, Cause: cause, LastCommitted: latest, Progress: progress, Message: msg, FailedNodes: r.failedNodes()}); err != nil {
		r.logf("warning: %v", err)
	}
}

func tagOf(dir string) string {
	if dir == "" {
		return ""
	}
	return filepath.Base(dir)
}

func mkdirUnlessDry(dry bool, dir string) error {
	if dry {
		return nil
	}
	return os.MkdirAll(dir, 0o755)
}

// probedGPUName is the GPU name the probe found on the nodes ("" if none or
// if the nodes disagree).
func (r *runner) probedGPUName() string {
	name := ""
	for _, f := range r.facts {
		t := plan.GPUTypeOf(f.GPUName)
		if t == "" || name != "" && t != name {
			return ""
		}
		name = t
	}
	return name
}

// liveTopology is the cluster model from Slurm's topology (flat when Slurm
// has no topology plugin, or when it cannot be read).
func liveTopology(ctx context.Context, sc slurm.Client, nodes []string, logf func(string, ...any)) *topo.Cluster {
	c, err := sc.Topology(ctx)
	if err != nil {
		logf("warning: %v; treating the nodes as one switch", err)
		return topo.FlatCluster(nodes)
	}
	return c
}

// ncclPrefixes are the variables taken from the placement's environment
// (plan.RankEnv); the launcher variables and CUDA_VISIBLE_DEVICES stay the
// controller's and the shim's.
var ncclPrefixes = []string{"NCCL_", "TORCH_NCCL_"}

// addNCCLEnv adds each rank's NCCL environment from its node's topology,
// where the probe discovered it. Values the task inherits (the user's, the
// site's nccl.conf) are kept: RankEnv does not inject over them.
func (r *runner) addNCCLEnv(renv *rankEnv, masterAddr string, addrs map[string]string, planPath string) {
	if r.placement == nil {
		return
	}
	user := map[string]string{}
	for _, k := range plan.ManagedEnvKeys(r.ncclPolicy) {
		if v := os.Getenv(k); v != "" {
			user[k] = v
		}
	}
	reported := false
	for i, s := range r.slots {
		f, ok := r.facts[s.Node]
		if !ok || f.Topo == nil {
			continue
		}
		var conf map[string]string
		if f.NCCLConf != "" {
			conf, _ = plan.ParseNCCLConf([]byte(f.NCCLConf))
		}
		var nodeAddrs []string
		if a := addrs[s.Node]; a != "" {
			nodeAddrs = []string{a}
		}
		e, err := plan.RankEnv(plan.EnvInput{Node: f.Topo, Placement: r.placement, Rank: s.Rank, Plan: r.layout, PlanPath: planPath,
			MasterAddr: masterAddr, MasterPort: r.masterPort, NodeAddrs: nodeAddrs, UserEnv: user, NCCLConf: conf, Policy: r.ncclPolicy})
		if err != nil {
			if !reported {
				r.logf("warning: NCCL environment not computed: %v", err)
				reported = true
			}
			continue
		}
		for _, v := range e.Vars {
			if !v.Inject {
				continue
			}
			for _, p := range ncclPrefixes {
				if strings.HasPrefix(v.Key, p) {
					renv.Ranks[i][v.Key] = v.Value
				}
			}
		}
		if i == 0 {
			for _, n := range e.Notes {
				r.logf("nccl: %s", n)
			}
		}
	}
}

func gib(b float64) string { return fmt.Sprintf("%.2f GiB", b/(1<<30)) }

// ckptSignalName is the checkpoint signal without "SIG", upper case.
func (r *runner) ckptSignalName() string {
	return strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(r.opts.ckptSignal)), "SIG")
}

// policyFlags maps run's flags to the policy keys that give their defaults.
var policyFlags = []struct{ flag, key string }{
	{"ckpt-signal", "CkptSignal"}, {"ckpt-lead", "CkptLead"}, {"max-requeue", "MaxRequeue"},
	{"max-failures", "MaxFailuresNoProgress"}, {"ckpt-dir", "CkptDir"}, {"ckpt-keep", "CkptKeep"}, {"ckpt-keep-every", "CkptKeepEvery"},
	{"ckpt-compress", "CkptCompress"}, {"hang-timeout", "HangTimeout"}, {"max-restarts", "MaxRestarts"}, {"spare-nodes", "SpareNodes"},
}

// applyPolicy reads the site's trainrun.conf (--policy) for the job's
// partition: its values are the defaults of the checkpoint flags, a flag the
// user sets must be one UserOverride allows, the checkpoint directory must
// lie under CkptRoots, and the NCCL settings shape each rank's environment.
func (r *runner) applyPolicy() error {
	if r.opts.policy == "" {
		return nil
	}
	pf, err := loadPolicyFile(r.opts.policy)
	if err != nil {
		return reportPolicyErrors(r.env.stderr, r.opts.policy, err)
	}
	st := pf.Effective(r.alloc.Partition)
	r.policyGPU = st.GPUType
	r.policy = &partPolicy{pol: pf, st: st, file: r.opts.policy}
	ov := st.UserOverride.Value
	for _, pfl := range policyFlags {
		if !r.fs.Changed(pfl.flag) {
			continue
		}
		allowed := ov.All
		for _, k := range ov.Keys {
			allowed = allowed || strings.EqualFold(k, pfl.key)
		}
		if !allowed {
			return usageErrorf("--%s: the site's policy (%s, %s) does not let users override %s (UserOverride=%s); drop the flag or ask the admins",
				pfl.flag, r.opts.policy, st.UserOverride.Source, pfl.key, ov)
		}
	}
	if !r.fs.Changed("ckpt-signal") && r.env.getenv("TRAINRUN_CKPT_SIGNAL") == "" && st.CkptSignal.Value != "" {
		r.opts.ckptSignal = st.CkptSignal.Value
	}
	if !r.fs.Changed("ckpt-lead") && st.CkptLead.Value > 0 {
		r.opts.plan.CkptLead = st.CkptLead.Value
		r.leadFixed = true // the policy's lead is used as given
	}
	if !r.fs.Changed("max-requeue") {
		r.opts.maxRequeue = st.MaxRequeue.Value
	}
	r.leadAdapt = st.CkptLeadAdapt.Value
	r.graceBudg = st.CkptGraceBudget.Value
	if !r.fs.Changed("ckpt-keep") {
		r.opts.ckptKeep = st.CkptKeep.Value
	}
	if !r.fs.Changed("ckpt-keep-every") {
		r.opts.ckptEvery = st.CkptKeepEvery.Value
	}
	if !r.fs.Changed("ckpt-compress") && st.CkptCompress.Value != "" {
		r.opts.compress = st.CkptCompress.Value
	}
	if !r.fs.Changed("max-failures") {
		r.opts.maxFailures = st.MaxFailuresNoProgress.Value
	}
	if !r.fs.Changed("ckpt-dir") && r.env.getenv("TRAINRUN_CKPT_DIR") == "" && st.CkptDir.Value != "" {
		user := slurm.JobFromEnv(r.env.getenv).User
		if user == "" {
			user = r.env.getenv("USER")
		}
		r.opts.ckptDir = policy.ExpandCkptDir(st.CkptDir.Value, user, r.alloc.JobID, slurm.JobFromEnv(r.env.getenv).Name)
	}
	if roots := st.CkptRoots.Value; roots != nil && r.opts.ckptDir != "" {
		dir, _ := filepath.Abs(r.opts.ckptDir)
		ok := false
		for _, root := range roots {
			ok = ok || dir == root || strings.HasPrefix(dir, strings.TrimSuffix(root, "/")+"/")
		}
		if !ok {
			return usageErrorf("--ckpt-dir %s is not under the checkpoint roots the site allows (%s: CkptRoots=%s); choose a directory below one of them",
				dir, st.CkptRoots.Source, strings.Join(roots, ","))
		}
	}
	r.ncclPolicy = st.NCCL()
	r.obsPolicy(st)
	r.faultPolicy(st)
	return nil
}

// recordCkpt keeps one measured checkpoint (request or signal -> committed)
// in the job's history, for the grace budget of this and later runs.
func (r *runner) recordCkpt(tag, why string, took time.Duration) {
	r.logf("checkpoint %s took %.2f s from the %s request to its commit", tag, took.Seconds(), why)
	if r.store == nil {
		return
	}
	if err := r.store.History().Append(checkpoint.Event{Type: "ckpt", JobID: r.alloc.JobID, Restart: r.alloc.RestartCount,
		Tag: tag, CkptSeconds: took.Seconds(), Why: why}); err != nil {
		r.logf("warning: %v", err)
	}
}

// checkGrace prints the grace budget (at start and after each measured
// commit) and applies a raised lead; it says whether the lead changed.
func (r *runner) checkGrace(when string) bool {
	var evs []checkpoint.Event
	if r.store != nil {
		var err error
		if evs, err = r.store.History().CkptTimes(); err != nil {
			r.logf("warning: %v", err)
		}
	}
	m, n := measuredCkpt(evs)
	lead := r.lead
	if r.alloc.EndTime.IsZero() {
		lead = 0
	}
	adv := graceBudget(graceInput{Measured: m, Samples: n, Lead: lead, TimeLimit: r.alloc.TimeLimit, Adapt: r.leadAdapt, Limits: r.grace})
	if when == "start" || adv.Need > 0 {
		r.logf("%s (at %s)", adv.Summary, when)
	}
	for _, w := range adv.Warnings {
		r.logf("warning: %s", w)
	}
	if adv.Raised {
		r.logf("grace budget: lead raised from %s to %s (CkptLeadAdapt=yes): trainrun's clock asks for the checkpoint at %s",
			r.lead, adv.Lead, r.alloc.EndTime.Add(-adv.Lead).Format(time.TimeOnly))
		r.lead = adv.Lead
		return true
	}
	return false
}

func (r *runner) setLastTag(t string) {
	r.tagMu.Lock()
	r.lastTag = t
	r.tagMu.Unlock()
}

func (r *runner) getLastTag() string {
	r.tagMu.Lock()
	defer r.tagMu.Unlock()
	return r.lastTag
}

// prune applies the retention (--ckpt-keep, --ckpt-keep-every) after a commit.
func (r *runner) prune() {
	if r.store == nil || r.opts.ckptKeep <= 0 {
		return
	}
	gone, err := r.store.Prune(checkpoint.Retention{KeepLast: r.opts.ckptKeep, KeepEvery: int64(r.opts.ckptEvery)})
	if err != nil {
		r.logf("warning: pruning checkpoints: %v", err)
	} else if len(gone) > 0 {
		every := ""
		if r.opts.ckptEvery > 0 {
			every = fmt.Sprintf(" and one per %d steps", r.opts.ckptEvery)
		}
		r.logf("pruned %s (keeping the newest %d%s)", strings.Join(gone, ", "), r.opts.ckptKeep, every)
	}
}
