package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/trainrun/trainrun/internal/slurm"
	"github.com/trainrun/trainrun/wrapper/internal/array"
	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
	"github.com/trainrun/trainrun/wrapper/internal/run"
	"github.com/trainrun/trainrun/wrapper/internal/sweep"
)

func init() {
	register(&command{name: "sweep", short: "run a hyperparameter sweep as one Slurm job array of short trainrun runs (and 'sweep status DIR')", run: runSweep})
}

const sweepSynopsis = "sweep [plan flags] --grid KEY=V1,V2 [...] [--random N --range KEY=LO:HI[:log]] [--max-concurrent K] [--time LIMIT] [--nodes N] [--gpus-per-node G] [--format table|json] [--dry-run] -- CMD {KEY}..."

var sweepHelpTail = joinLines(
	"",
	"Expands the grid (every combination; with --random N, N samples of the --range keys per grid point,",
	"drawn from --seed) into trials and submits them as one job array, sbatch --array=0-(N-1)%K: Slurm",
	"runs at most K at a time and backfills them into the gaps between larger jobs. Trial i runs",
	"'trainrun run --name trial-i --job-dir SWEEPDIR [plan flags] -- CMD' with {KEY} replaced by its value",
	"and TRAINRUN_SWEEP_KEY exported (also TRAINRUN_SWEEP, the sweep's name, and TRAINRUN_SWEEP_TRIAL);",
	"its plan, launch files and checkpoint store are SWEEPDIR/runs/trial-i, and it is requeued and",
	"resumed like any trainrun run (a preempted trial resumes, it is not lost).",
	"",
	"Time limit: --time, or planned: the planner's step time for the model (--model or shape flags,",
	"--gpu, --seq-len, --global-batch) on the trial's GPUs, times --steps (or --tokens), plus",
	"--time-margin and --ckpt-lead, rounded up to a minute. A short limit is what lets trials backfill.",
	"--proxy-scale F plans the trials on the model scaled by F in width and depth and prints the",
	"sweep's GPU-hours against the same sweep on the full model.",
	"",
	"SWEEPDIR (--sweep-dir, default ./trainrun-sweep-NAME) holds sweep.json (the trials and their",
	"parameters), sweep.sbatch (the array's script) and logs/trial-i.out. The trainer reports metrics",
	"with Checkpointer.report_progress(step, metrics={\"loss\": ...}); 'trainrun sweep status SWEEPDIR'",
	"shows every trial's state, steps and last metrics, and the best trial by --metric.",
	"",
)

// sweepOptions are the flags of `trainrun sweep`.
type sweepOptions struct {
	plan       planOptions
	grid       []string
	ranges     []string
	random     int
	seed       uint64
	maxConc    int
	timeLimit  string
	nodes      int
	steps      int
	proxyScale float64
	metric     string
	maximize   bool
	earlyStop  string // --early-stop asha[:ETA[:MIN_STEPS]] or forecast[:P[:MIN_STEPS[:STEPS]]] (issue 32)
	dryRun     bool
	dir        string
	name       string
	partition  string
	runArgs    []string
	sbatchArgs []string
	keysInEnv  bool // the trainer reads TRAINRUN_SWEEP_<KEY>: keys need not appear in the command
}

// sweepPlanFlagsNotForRun are plan flags that size or describe the sweep
// itself; every other plan flag given is passed on to each trial's run.
var sweepPlanFlagsNotForRun = append([]string{"tokens"}, run.PlanFlagsNotForRun...)

func (o *sweepOptions) addFlags(fs *pflag.FlagSet) {
	o.addArrayFlags(fs, "trial", "trials")
	fs.Lookup("tokens").Usage = "tokens each trial trains, for the planned time limit (default: --steps × --global-batch × --seq-len)"
	fs.StringArrayVar(&o.grid, "grid", nil, "KEY=V1,V2,...: sweep KEY over these values (repeat for a grid: every combination)")
	fs.IntVar(&o.random, "random", 0, "N random samples of the --range keys (per grid point)")
	fs.StringArrayVar(&o.ranges, "range", nil, "KEY=LO:HI[:log]: --random samples KEY uniformly (log: log-uniformly) in [LO, HI)")
	fs.Uint64Var(&o.seed, "seed", 0, "seed of the --random samples (the same seed, the same trials)")
	fs.Float64Var(&o.proxyScale, "proxy-scale", 0, "plan the trials on the model scaled by F (0 < F < 1) in width and depth, and print the sweep's cost against the full model's")
	fs.StringVar(&o.metric, "metric", "loss", "the metric 'sweep status' ranks trials by (as the trainer reports it)")
	fs.BoolVar(&o.maximize, "maximize", false, "the best trial has the highest --metric (default: the lowest)")
	fs.StringVar(&o.earlyStop, "early-stop", "", "asha[:ETA[:MIN_STEPS]]: at steps MIN_STEPS·ETA^k (default 100·3^k) a trial goes on only if its --metric is in the best 1/ETA of the trials that reached that step; the others stop (state stopped-early), freeing their array slot. forecast[:P[:MIN_STEPS[:STEPS]]]: from step MIN_STEPS (default 100) a trial forecasts its --metric at STEPS (default --steps) and stops once its chance of ending below the best trial's forecast is under P (default 0.05)")
	fs.BoolVar(&o.keysInEnv, "keys-in-env", false, "the trainer reads each swept value from TRAINRUN_SWEEP_<KEY>: a key need not appear as {KEY} in the command")
	fs.StringVar(&o.dir, "sweep-dir", "", "the sweep's directory, on a file system all nodes share (default ./trainrun-sweep-NAME)")
	fs.Lookup("name").Usage = "the sweep's name: the array's job name, TRAINRUN_SWEEP, the metrics' sweep label (default: the swept keys and a hash of the sweep)"
}

func runSweep(ctx context.Context, env *runEnv, args []string) error {
	if len(args) > 0 && args[0] == "status" {
		return runSweepStatus(ctx, env, args[1:])
	}
	var o sweepOptions
	fs := newFlags("sweep", sweepSynopsis, env.stdout)
	o.addFlags(fs)
	o.plan.Calibration = env.getenv("TRAINRUN_CALIBRATION") // --calibration's default
	fs.Usage = func() {
		fmt.Fprintf(env.stdout, "Usage: trainrun %s\n       trainrun sweep status DIR [--format table|json] [--metric NAME] [--maximize] [--svg FILE]\n\nFlags:\n", sweepSynopsis)
		fs.PrintDefaults()
		fmt.Fprint(env.stdout, sweepHelpTail)
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	argv := fs.Args()
	if len(argv) == 0 {
		return usageErrorf("no training command: put it after --, e.g. trainrun sweep --grid lr=1e-4,3e-4 --time 20m -- python train.py --lr {lr}")
	}
	if o.plan.Format != "table" && o.plan.Format != "json" {
		return usageErrorf("--format %q: accepted: table, json", o.plan.Format)
	}
	s, err := o.expand(argv)
	if err != nil {
		return err
	}
	if err := checkSweepCommand(fs, argv, s.Keys, o.keysInEnv); err != nil {
		return err
	}
	if err := o.sizeAndTime(ctx, env, fs, s); err != nil {
		return err
	}
	if err := o.checkTrialsPlannable(fs, env.getenv, s); err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	script := array.Script(exe, s, append(o.forwardedRunFlags(fs), s.Proxy...))
	req := o.sbatchRequest(s)
	if o.dryRun {
		return printSweep(env, o.plan.Format, s, req, script, true)
	}
	if err := array.WriteDir(s, map[string]string{req.Script: script}); err != nil {
		return err
	}
	if err := submitArray(ctx, env, s, req, "sweep's"); err != nil {
		return err
	}
	return printSweep(env, o.plan.Format, s, req, script, false)
}

// expand parses the sweep flags into the manifest's trials.
func (o *sweepOptions) expand(argv []string) (*array.Manifest, error) {
	var grid []sweep.Param
	for _, g := range o.grid {
		p, err := sweep.ParseGrid(g)
		if err != nil {
			return nil, withCode(exitcode.Usage, err)
		}
		grid = append(grid, p)
	}
	var ranges []sweep.Range
	for _, r := range o.ranges {
		x, err := sweep.ParseRange(r)
		if err != nil {
			return nil, withCode(exitcode.Usage, err)
		}
		ranges = append(ranges, x)
	}
	trials, err := sweep.Expand(grid, o.random, ranges, o.seed)
	if err != nil {
		return nil, withCode(exitcode.Usage, err)
	}
	keys := sweep.Keys(grid, ranges)
	name := o.name
	if name == "" {
		h := sha256.Sum256([]byte(strings.Join(append(append([]string{}, argv...), append(o.grid, o.ranges...)...), "\x00") + fmt.Sprint(o.random, o.seed)))
		name = strings.Join(keys, "-")
		if len(name) > 40 {
			name = name[:40]
		}
		name += "-" + hex.EncodeToString(h[:4])
	}
	s, err := o.newManifest("sweep", name, "trainrun-sweep-", keys, argv, len(trials))
	if err != nil {
		return nil, err
	}
	for _, t := range trials {
		s.Trials = append(s.Trials, array.Trial{Index: t.Index, Params: t.Params, Name: fmt.Sprintf("trial-%d", t.Index)})
	}
	return s, nil
}

// size sets the trial's GPUs per node: --gpus-per-node, else all GPUs of a
// node of the partition.
func (o *sweepOptions) size(ctx context.Context, env *runEnv, fs *pflag.FlagSet, s *array.Manifest) error {
	if fs.Changed("gpus-per-node") {
		if o.plan.GPUsPerNode <= 0 {
			return usageErrorf("--gpus-per-node %d: want 1 or more", o.plan.GPUsPerNode)
		}
		s.GPUsPerNode = o.plan.GPUsPerNode
		return nil
	}
	n, err := env.slurm.NodeGPUs(ctx, o.partition)
	if err != nil || n <= 0 {
		return withCode(exitcode.Slurm, fmt.Errorf("--gpus-per-node not given and the GPUs of a node could not be read from Slurm (%v): give --gpus-per-node G", err))
	}
	s.GPUsPerNode = n
	return nil
}

// forwardedRunFlags are the plan flags given to the sweep that each trial's
// run takes, then the --run-arg flags.
func (o *sweepOptions) forwardedRunFlags(fs *pflag.FlagSet) []string {
	var out []string
	skip := map[string]bool{}
	for _, n := range sweepPlanFlagsNotForRun {
		skip[n] = true
	}
	probe := pflag.NewFlagSet("plan", pflag.ContinueOnError)
	var po planOptions
	po.AddFlags(probe)
	fs.Visit(func(f *pflag.Flag) {
		if skip[f.Name] || probe.Lookup(f.Name) == nil {
			return
		}
		out = append(out, "--"+f.Name+"="+f.Value.String())
	})
	return append(out, o.runArgs...)
}

func (o *sweepOptions) sbatchRequest(s *array.Manifest) slurm.SbatchRequest {
	return slurm.SbatchRequest{
		Script: filepath.Join(s.Dir, "sweep.sbatch"), JobName: "sweep-" + s.Name, Array: s.Array, Partition: o.partition,
		Nodes: s.Nodes, NtasksPerNode: s.GPUsPerNode, GPUsPerNode: s.GPUsPerNode, Time: time.Duration(s.TimeLimitS) * time.Second,
		Output: filepath.Join(s.Dir, "logs", "trial-%a.out"), Requeue: true, Extra: o.sbatchArgs,
	}
}

// sweepJSON is the contract's `trainrun sweep --format json`.
type sweepJSON struct {
	Dir    string        `json:"sweep_dir"`
	JobID  string        `json:"job_id,omitempty"`
	Trials []sweep.Trial `json:"trials"`
}

func printSweep(env *runEnv, format string, s *array.Manifest, req slurm.SbatchRequest, script string, dry bool) error {
	if env.stdout == nil {
		return nil
	}
	trials := make([]sweep.Trial, len(s.Trials))
	for i, t := range s.Trials {
		trials[i] = sweep.Trial{Index: t.Index, Params: t.Params}
	}
	w := env.stdout
	if format == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(sweepJSON{Dir: s.Dir, JobID: s.JobID, Trials: trials})
	}
	fmt.Fprintf(w, "sweep %s: %d trials (%s), one job array --array=%s, %d node(s) x %d GPU(s) each, time limit %s (%s)\n",
		s.Name, len(s.Trials), strings.Join(s.Keys, " x "), s.Array, s.Nodes, s.GPUsPerNode, time.Duration(s.TimeLimitS)*time.Second, s.TimeSource)
	if s.Cost != "" {
		fmt.Fprintf(w, "cost: %s\n", s.Cost)
	}
	fmt.Fprintf(w, "%-6s", "trial")
	for _, k := range s.Keys {
		fmt.Fprintf(w, " %-12s", k)
	}
	fmt.Fprintln(w)
	for _, t := range s.Trials {
		fmt.Fprintf(w, "%-6d", t.Index)
		for _, k := range s.Keys {
			fmt.Fprintf(w, " %-12s", t.Params[k])
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "sweep dir  %s\n", s.Dir)
	if dry {
		fmt.Fprintf(w, "dry run: would submit  sbatch --parsable %s\n\n%s", strings.Join(req.Argv(), " "), script)
		return nil
	}
	fmt.Fprintf(w, "job id     %s\nstatus     trainrun sweep status %s\n", s.JobID, s.Dir)
	return nil
}
