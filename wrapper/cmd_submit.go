package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"
	"github.com/trainrun/trainrun/internal/atomicfile"
	"github.com/trainrun/trainrun/internal/safefs"
	"github.com/trainrun/trainrun/internal/shell"
	"github.com/trainrun/trainrun/internal/slurm"
	"github.com/trainrun/trainrun/internal/units"
	"github.com/trainrun/trainrun/plan"
	"github.com/trainrun/trainrun/plan/policy"
	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
	"github.com/trainrun/trainrun/wrapper/internal/planflags"
	"github.com/trainrun/trainrun/wrapper/internal/submit"
)

func init() {
	register(&command{name: "submit", short: "choose partition, size and layout from the live cluster and submit the job with sbatch", run: runSubmit})
}

// schedOptions are the flags trainrun submit and trainrun partitions share.
type schedOptions struct {
	plan       planOptions
	policyFile string
}

// planFlagsNotForSched are plan flags the cluster decides (or that have no
// meaning for a choice among partitions).
var planFlagsNotForSched = []string{"top", "nodelist", "topology-conf", "gpus-per-node", "fix"}

func (o *schedOptions) addFlags(fs *pflag.FlagSet, getenv func(string) string) {
	o.plan.AddFlags(fs)
	o.plan.Calibration = getenv("TRAINRUN_CALIBRATION") // --calibration's default
	for _, name := range planFlagsNotForSched {
		fs.MarkHidden(name)
	}
	fs.Lookup("format").Usage = "table|json"
	fs.Lookup("gpu").Usage = "GPU type for partitions whose nodes' GRES has no type (or an ambiguous one) and whose policy has no GPUType (" + strings.Join(plan.GPUNames(), " ") + ")"
	fs.Lookup("gpus").Usage = "exactly this many GPUs (submit: the one size tried; partitions: planned on instead of the whole partition)"
	fs.StringVar(&o.policyFile, "policy", getenv("TRAINRUN_POLICY"), "the site's trainrun.conf (env TRAINRUN_POLICY): each partition's GPUType and GPUHourCost")
}

// load reads the model, job and policy.
func (o *schedOptions) load(fs *pflag.FlagSet) (plan.Model, plan.Job, *policy.Policy, error) {
	if o.plan.Format != "table" && o.plan.Format != "json" {
		return plan.Model{}, plan.Job{}, nil, usageErrorf("--format %q: accepted: table, json", o.plan.Format)
	}
	pol := policy.Default()
	if o.policyFile != "" {
		p, err := planflags.LoadPolicy(o.policyFile)
		if err != nil {
			return plan.Model{}, plan.Job{}, nil, err
		}
		pol = p
	}
	m, err := o.plan.model(fs)
	if err != nil {
		return m, plan.Job{}, nil, err
	}
	j, err := o.plan.Job()
	return m, j, pol, err
}

// clusterAdjust applies the user's fabric flags to every candidate's
// cluster, as `trainrun plan` does to its one.
func (o *schedOptions) clusterAdjust(fs *pflag.FlagSet) (func(*plan.Cluster), error) {
	p := &o.plan
	for _, f := range []struct {
		name string
		v    float64
	}{{"nvlink-domain", float64(p.NVLinkDomain)}, {"inter-node-bw", p.InterNodeBW}, {"host-memory", p.HostMemoryGB}, {"nvme-bw", p.NVMeBW}} {
		if fs.Changed(f.name) && f.v <= 0 {
			return nil, usageErrorf("--%s %g: must be positive", f.name, f.v)
		}
	}
	return func(c *plan.Cluster) {
		if fs.Changed("nvlink-domain") {
			c.NVLinkDomain = p.NVLinkDomain
		}
		if fs.Changed("inter-node-bw") {
			c.InterNode = p.InterNodeBW * 1e9
		}
		if fs.Changed("host-memory") {
			c.HostMemory = p.HostMemoryGB * 1e9
		}
		if fs.Changed("nvme-bw") {
			c.NVMeBW = p.NVMeBW * 1e9
		}
	}, nil
}

// submitOptions are trainrun submit's own flags.
type submitOptions struct {
	schedOptions
	partition    string
	objective    string
	minGPUs      int
	maxGPUs      int
	dryRun       bool
	ckptInterval time.Duration
	ckptBW       float64
	planDir      string
	account      string
	qos          string
	reservation  string
	parallel     int
	// Issue 37: --time-limit and --finetune-fallback (plan --cheapest's logic).
	trainLimit string
	fallback   bool
	ckptDir    string                 // the job's checkpoint store: its measured saves size the lead (issue 34)
	lateMargin float64                // late binding: partitions whose finish is within this share of the best's are listed too
	list       []int                  // the chosen candidate, then the late-bound ones (set once chosen)
	idle       map[string]int         // idle nodes of each partition, for trainrun's start estimates
	infos      []submit.PartitionInfo // the partitions and their nodes, for the queue simulation

	queues  map[string]*submit.Queue // the partitions' queues (betterStarts), for sizing's GrowFair
	learn   bool                     // learn from the jobs --plan-dir's ledger names (learnRuns)
	jobs    []slurm.Job              // Slurm's jobs, read once (learnRuns, betterStarts); nil = not read
	learned *learnedJSON             // what learnRuns found, for the output
	tokens  float64                  // the job's --tokens, in its mark (MarkTokens)
}

const submitSynopsis = "submit [plan flags] [--partition auto|P1,P2] [--objective finish|cost] [--min-gpus N] [--max-gpus N] [--policy FILE] [--format table|json] [--dry-run] [sbatch flags] -- SCRIPT [ARGS]"

var submitHelpTail = joinLines("",
	"For each candidate partition and a few sizes (1, 2, 4, ... GPUs of one node when the job fits in",
	"fewer GPUs than a node; whole nodes 1, 2, 4, ... up to the partition's size and --max-gpus), plans",
	"the job, asks Slurm when it would start (sbatch --test-only with the same request, all in",
	"parallel), and predicts the finish: start + --tokens ÷ throughput + checkpoint saves. It chooses",
	"by --objective (earliest finish, or lowest cost with the policy's GPUHourCost= per partition;",
	"--time-limit takes the candidates that would train longer out of the choice, and",
	"--finetune-fallback lets each candidate train the first kind that fits, full → lora:16 → qlora:16,",
	"as plan --cheapest does: the cheapest partition and size that finishes in time),",
	"prints every candidate with the reason it won or lost, writes the chosen plan's JSON into",
	"--plan-dir and submits SCRIPT with sbatch: the partition, nodes, tasks and GPUs per node (a job",
	"smaller than a node asks --gpus-per-node=K without --exclusive, so Slurm packs it beside others),",
	"the time limit (train time × (1 + the plan's error band) + a lead from the job's measured or",
	"predicted checkpoint save, or --time-margin and --ckpt-lead when given; at most the partition's",
	"MaxTime), the partitions within --late-bind of the best as one -p list (a plan for each), and",
	"TRAINRUN_PLAN=FILE exported, which 'trainrun run' inside takes as its --plan: the chosen layout,",
	"exactly. A partition's GPU type comes from its nodes' typed GRES (gpu:h100:8), else the policy's",
	"GPUType=, else a memory feature of its nodes (80gb), else --gpu. --account, --qos, --reservation",
	"and any flag trainrun does not know go to sbatch as given (before '--'); sbatch's errors are",
	"shown as it prints them. Sizing (--min-gpus below --max-gpus) takes a larger size only where it",
	"starts as soon as the smallest, into nodes idle now that no pending job wants, and leaving free",
	"nodes for one more job of the smallest size: fair to the small jobs that arrive after it.",
	"",
	"Exit status: 0 submitted (or, with --dry-run, chosen); 2 bad flag; 3 nothing fits; 4 Slurm",
	"refused every candidate or the submission.")

func (o *submitOptions) addFlags(fs *pflag.FlagSet, getenv func(string) string) {
	o.schedOptions.addFlags(fs, getenv)
	fs.StringVar(&o.partition, "partition", "auto", "auto (every partition whose GPUs the planner knows) or a comma-separated list")
	fs.StringVar(&o.objective, "objective", submit.Finish, "finish (earliest predicted finish) or cost (lowest GPUHourCost × GPU-hours)")
	fs.IntVar(&o.minGPUs, "min-gpus", 1, "the fewest GPUs to consider")
	fs.IntVar(&o.maxGPUs, "max-gpus", 0, "the most GPUs to consider (0 = each partition's size)")
	fs.BoolVar(&o.dryRun, "dry-run", false, "choose and print, submit nothing")
	fs.DurationVar(&o.ckptInterval, "ckpt-interval", time.Hour, "checkpoint overhead: a save every this long (0 = none counted)")
	fs.Float64Var(&o.ckptBW, "ckpt-bw", 5, "checkpoint overhead: each node writes its share of the weights and Adam state (14 bytes per parameter) at this many GB/s")
	fs.StringVar(&o.planDir, "plan-dir", "trainrun-submit", "where the chosen plan's JSON is written (on a file system the nodes share)")
	fs.StringVar(&o.account, "account", "", "sbatch --account")
	fs.StringVar(&o.qos, "qos", "", "sbatch --qos")
	fs.StringVar(&o.reservation, "reservation", "", "sbatch --reservation")
	fs.IntVar(&o.parallel, "parallel", 8, "sbatch --test-only calls in flight at once")
	fs.StringVar(&o.trainLimit, "time-limit", "", "the longest the training may take (hours, e.g. 24, or a duration such as 36h): slower candidates do not qualify, so --objective cost picks the cheapest that finishes in time")
	fs.BoolVar(&o.fallback, "finetune-fallback", false, "where the job's --finetune kind does not fit a candidate, try the kinds that need less memory in plan --cheapest's order (full → lora:16 → qlora:16; lora → qlora); the chosen kind is in the plan and the output: SCRIPT must train it")
	o.addHonestFlags(fs, getenv)
}

func runSubmit(ctx context.Context, env *runEnv, args []string) error {
	var o submitOptions
	fs := newFlags("submit", submitSynopsis, env.stdout)
	o.addFlags(fs, env.getenv)
	fs.Usage = func() {
		fmt.Fprintf(env.stdout, "Usage: trainrun %s\n\nFlags:\n", submitSynopsis)
		fs.PrintDefaults()
		fmt.Fprint(env.stdout, submitHelpTail)
	}
	ours, passthrough, script, err := splitSbatchArgs(fs, args)
	if err != nil {
		return err
	}
	if err := parseFlags(fs, ours); err != nil {
		return err
	}
	if len(script) == 0 {
		return usageErrorf("no script: give it after '--' (trainrun submit [flags] -- job.sh [ARGS])")
	}
	req, pol, err := o.request(ctx, fs, env)
	if err != nil {
		return err
	}
	if err := checkScript(script[0]); err != nil {
		return err
	}
	parts, err := o.partitions(ctx, env, pol)
	if err != nil {
		return err
	}
	cands := submit.Candidates(parts, req)
	if err := costPriced(o.objective, cands, o.policyFile); err != nil {
		return err
	}
	sb := o.sbatchFlags(passthrough)
	testOnly(ctx, env.slurm, cands, sb, script, o.parallel)
	o.betterStarts(ctx, env, cands)
	submit.NoWaitToGrow(cands)
	o.growFair(cands)
	chosen, err := submit.Choose(cands, o.objective, nowFunc())
	if err != nil {
		o.print(env.stdout, cands, -1, "")
		return withCode(noChoiceCode(cands), err)
	}
	list := o.lateList(cands, chosen)
	o.list = list
	if o.dryRun {
		if err := o.print(env.stdout, cands, chosen, ""); err != nil {
			return err
		}
		if o.plan.Format != "json" { // as sweep --dry-run: the command it would run (the plan file is written at submission)
			c := &cands[chosen]
			req := lateRequest(cands, list)
			args := requestArgs(&req, withPlanExport(sb, filepath.Join(o.planDir, fmt.Sprintf("plan-%s-%dgpus-TIME.json", c.Partition, c.GPUs)), o.jobExports(cands, list, o.planDir, "TIME")...))
			q := make([]string, 0, len(args)+len(script))
			for _, a := range append(args, script...) {
				q = append(q, shell.Quote(a))
			}
			fmt.Fprintf(env.stdout, "dry run: would submit  sbatch %s\n", strings.Join(q, " "))
		}
		return nil
	}
	id, err := o.submitChosen(ctx, env, cands, list, sb, script)
	if err != nil {
		o.print(env.stdout, cands, chosen, "")
		return err
	}
	return o.print(env.stdout, cands, chosen, id)
}

// nowFunc is the clock of the choice (tests fix it).
var nowFunc = time.Now

func noChoiceCode(cands []submit.Candidate) int {
	for _, c := range cands {
		if c.Fits {
			return exitcode.Slurm // something fits; Slurm refused it
		}
	}
	return exitcode.NoFit
}

func (o *submitOptions) request(ctx context.Context, fs *pflag.FlagSet, env *runEnv) (submit.Request, *policy.Policy, error) {
	m, j, pol, err := o.load(fs)
	if err != nil {
		return submit.Request{}, nil, err
	}
	if j.Tokens <= 0 {
		return submit.Request{}, nil, usageErrorf("--tokens: submit predicts when the job finishes from the tokens to train; give --tokens (e.g. 300B)")
	}
	o.tokens = j.Tokens // the job's mark carries them, for later submissions' observed ends
	if o.objective != submit.Finish && o.objective != submit.Cost {
		return submit.Request{}, nil, usageErrorf("--objective %q: accepted: finish, cost", o.objective)
	}
	if o.minGPUs < 1 || o.maxGPUs < 0 || o.maxGPUs > 0 && o.maxGPUs < o.minGPUs {
		return submit.Request{}, nil, usageErrorf("--min-gpus %d --max-gpus %d: want 1 <= min <= max (max 0 = no bound)", o.minGPUs, o.maxGPUs)
	}
	if o.parallel < 1 || o.ckptBW <= 0 || o.ckptInterval < 0 {
		return submit.Request{}, nil, usageErrorf("--parallel %d, --ckpt-bw %g and --ckpt-interval %s must be positive", o.parallel, o.ckptBW, o.ckptInterval)
	}
	if o.plan.TimeMargin < 0 || o.plan.CkptLead < 0 {
		return submit.Request{}, nil, usageErrorf("--time-margin %g and --ckpt-lead %s must not be negative", o.plan.TimeMargin, o.plan.CkptLead)
	}
	adj, err := o.clusterAdjust(fs)
	if err != nil {
		return submit.Request{}, nil, err
	}
	minG, maxG := o.minGPUs, o.maxGPUs
	if fs.Changed("gpus") {
		if o.plan.GPUs <= 0 {
			return submit.Request{}, nil, usageErrorf("--gpus %d: must be positive", o.plan.GPUs)
		}
		minG, maxG = o.plan.GPUs, o.plan.GPUs
	}
	fix, err := planflags.ParseFix(o.plan.Fix)
	if err != nil {
		return submit.Request{}, nil, err
	}
	if err := o.plan.loadCalibration(func(string) string { return "" }, pol.Effective("").Calibration.Value, io.Discard); err != nil {
		return submit.Request{}, nil, err
	}
	saves, err := o.runObservations(env)
	if err != nil {
		return submit.Request{}, nil, err
	}
	o.learnRuns(ctx, env)
	so := o.plan.SearchOptions(fix)
	so.TopK = 1
	limit, err := parseCheapestLimit(o.trainLimit)
	if err != nil {
		return submit.Request{}, nil, err
	}
	var kinds []plan.Finetune
	if o.fallback {
		kinds = plan.CheapestKinds(plan.FinetuneOf(j))
	}
	req := submit.Request{Model: m, Job: j, Search: so, Cluster: adj, MinGPUs: minG, MaxGPUs: maxG,
		CkptInterval: o.ckptInterval, CkptBW: o.ckptBW * 1e9,
		Sbatch: plan.SbatchOptions{Margin: o.plan.TimeMargin, Lead: o.plan.CkptLead},
		Kinds:  kinds, TrainLimit: time.Duration(limit * float64(time.Second)), Fix: o.plan.Fix}
	o.honestLimits(fs, &req, saves)
	return req, pol, nil
}

// partitions are the candidates' partitions: those named, or every one
// whose GPUs can be planned (the others are reported on stderr).
func (o *submitOptions) partitions(ctx context.Context, env *runEnv, pol *policy.Policy) ([]submit.Partition, error) {
	var only []string
	if o.partition != "auto" && o.partition != "" {
		for _, p := range strings.Split(o.partition, ",") {
			if p = strings.TrimSpace(p); p != "" {
				only = append(only, p)
			}
		}
	}
	infos, err := submit.LoadPartitions(ctx, env.slurm, pol, o.plan.GPU, only)
	if err != nil {
		return nil, withSlurmCode(err)
	}
	var out []submit.Partition
	var errs []string
	for _, pi := range infos {
		p, ok := pi.ForChoice()
		o.noteIdle(pi)
		switch {
		case ok:
			out = append(out, p)
		case pi.TypeErr != nil:
			errs = append(errs, pi.TypeErr.Error())
		default:
			errs = append(errs, fmt.Sprintf("partition %s is %s", pi.Name, pi.State))
		}
	}
	for _, e := range errs {
		if len(only) > 0 {
			return nil, usageErrorf("%s", e)
		}
		fmt.Fprintf(env.stderr, "trainrun: submit: skipped: %s\n", e)
	}
	if len(out) == 0 {
		return nil, usageErrorf("no partition to plan on: %s", strings.Join(errs, "; "))
	}
	return out, nil
}

// withSlurmCode keeps a usage error's code; a Slurm command that failed
// is exitcode.Slurm.
func withSlurmCode(err error) error {
	var se *slurm.Error
	if errors.As(err, &se) {
		return withCode(exitcode.Slurm, err)
	}
	return err
}

// sbatchFlags are the flags every request carries besides its size: the
// account, QoS and reservation, then the user's other sbatch flags.
func (o *submitOptions) sbatchFlags(passthrough []string) []string {
	var out []string
	for _, f := range []struct{ name, v string }{{"account", o.account}, {"qos", o.qos}, {"reservation", o.reservation}} {
		if f.v != "" {
			out = append(out, "--"+f.name+"="+f.v)
		}
	}
	return append(out, passthrough...)
}

// requestArgs is the sbatch request of a candidate (without the script).
func requestArgs(c *submit.Candidate, extra []string) []string {
	args := []string{"--partition=" + c.Partition, "--nodes=" + strconv.Itoa(c.Nodes)}
	if c.Partial {
		args = append(args, "--ntasks="+strconv.Itoa(c.GPUs), "--gpus-per-node="+strconv.Itoa(c.GPUsPerNode))
	} else {
		args = append(args, "--ntasks-per-node="+strconv.Itoa(c.GPUsPerNode), "--gpus-per-node="+strconv.Itoa(c.GPUsPerNode), "--exclusive")
	}
	args = append(args, "--time="+strconv.Itoa(int(c.TimeLimit/time.Minute)))
	return append(args, extra...)
}

// testOnly asks Slurm when each fitting candidate would start, at most
// parallel at once.
func testOnly(ctx context.Context, c slurm.Client, cands []submit.Candidate, extra, script []string, parallel int) {
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for i := range cands {
		if !cands[i].Fits {
			continue
		}
		wg.Add(1)
		go func(cd *submit.Candidate) {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			est, err := c.TestOnly(ctx, append(requestArgs(cd, extra), script...)...)
			if err != nil {
				var se *slurm.Error
				if errors.As(err, &se) && se.Stderr != "" {
					// one line: sbatch's multi-line messages broke the table
					cd.StartErr = strings.Join(strings.Fields(strings.ReplaceAll(se.Stderr, "\n", " ; ")), " ")
				} else {
					cd.StartErr = err.Error()
				}
				return
			}
			cd.Start = est.Start
		}(&cands[i])
	}
	wg.Wait()
}

// submitChosen writes the plan of each listed candidate (the chosen
// first, then the late-bound ones) and submits the script with them.
func (o *submitOptions) submitChosen(ctx context.Context, env *runEnv, cands []submit.Candidate, list []int, extra, script []string) (string, error) {
	dir, err := filepath.Abs(o.planDir)
	if err != nil {
		return "", err
	}
	// The user's own, 0700: another user who created it first could swap
	// the plan the job reads and choose its layout (review t4, F2).
	if err := safefs.MkdirOwn(dir, "--plan-dir"); err != nil {
		return "", usageErrorf("%v", err)
	}
	stamp := strconv.FormatInt(nowFunc().UnixNano(), 10)
	var files []string
	for _, i := range list {
		c := &cands[i]
		// Rendered first, then written whole (temporary file and rename): a
		// failed render or a full disk leaves no partial plan for the job to
		// read. With its inputs, so that the run can be learned from.
		var b bytes.Buffer
		if err := plan.RenderJSONWithInputs(&b, c.Result, c.Inputs); err != nil {
			return "", err
		}
		p := filepath.Join(dir, fmt.Sprintf("plan-%s-%dgpus-%s.json", c.Partition, c.GPUs, stamp))
		if err := atomicfile.WriteFile(p, b.Bytes(), 0o644); err != nil {
			return "", fmt.Errorf("--plan-dir %s: %w", o.planDir, err)
		}
		files = append(files, p)
	}
	path := files[0]
	req := lateRequest(cands, list)
	args := requestArgs(&req, withPlanExport(append(o.markArgs(cands, list, extra), extra...), path,
		append(modelExports(&o.plan), o.jobExports(cands, list, dir, stamp)...)...))
	id, warnings, err := env.slurm.Submit(ctx, append(args, script...)...)
	if warnings != "" {
		fmt.Fprintln(env.stderr, warnings)
	}
	if err != nil {
		var se *slurm.Error
		if errors.As(err, &se) && se.Stderr != "" {
			fmt.Fprintln(env.stderr, se.Stderr) // sbatch's message, as it printed it
		}
		return "", withCode(exitcode.Slurm, err)
	}
	if err := submit.AppendSubmitted(dir, submit.SubmittedOf(cands, list, files, id, nowFunc())); err != nil {
		fmt.Fprintf(env.stderr, "trainrun: submit: job %s is submitted; later submissions will not learn from its run: %v\n", id, err)
	}
	return id, nil
}

// withPlanExport exports TRAINRUN_PLAN=path (and more KEY=VALUE) to the
// job: appended to the user's --export when there is one (unless it is
// NONE, which then gets them alone), else --export=ALL,TRAINRUN_PLAN=path.
func withPlanExport(extra []string, path string, more ...string) []string {
	vars := strings.Join(append([]string{"TRAINRUN_PLAN=" + path}, more...), ",")
	out := append([]string(nil), extra...)
	for i, a := range out {
		if v, ok := strings.CutPrefix(a, "--export="); ok {
			if strings.EqualFold(v, "NONE") {
				out[i] = "--export=" + vars
			} else {
				out[i] = a + "," + vars
			}
			return out
		}
	}
	return append(out, "--export=ALL,"+vars)
}

// splitSbatchArgs splits args at "--": before it, trainrun's flags (known
// to fs) and the sbatch flags it does not know, which pass through with
// their values (an argument before "--" that is not a flag is the value of
// the unknown flag before it); after it, the script and its arguments.
func splitSbatchArgs(fs *pflag.FlagSet, args []string) (ours, passthrough, script []string, err error) {
	i := 0
	for ; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return ours, passthrough, args[i+1:], nil
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			if len(passthrough) > 0 && strings.HasPrefix(passthrough[len(passthrough)-1], "-") && !strings.Contains(passthrough[len(passthrough)-1], "=") {
				passthrough = append(passthrough, a)
				continue
			}
			return nil, nil, nil, usageErrorf("unexpected argument %q before '--': the script goes after '--' (trainrun submit [flags] -- job.sh [ARGS])", a)
		}
		if a == "-h" || a == "--help" || known(fs, a) {
			ours = append(ours, a)
			if f := lookup(fs, a); f != nil && f.NoOptDefVal == "" && !strings.Contains(a, "=") && i+1 < len(args) && !isShortCluster(a) {
				i++
				ours = append(ours, args[i])
			}
			continue
		}
		passthrough = append(passthrough, a)
	}
	return ours, passthrough, nil, nil
}

func lookup(fs *pflag.FlagSet, a string) *pflag.Flag {
	name := strings.TrimLeft(a, "-")
	name, _, _ = strings.Cut(name, "=")
	if strings.HasPrefix(a, "--") {
		return fs.Lookup(name)
	}
	if len(name) == 1 {
		return fs.ShorthandLookup(name)
	}
	return nil
}

func known(fs *pflag.FlagSet, a string) bool { return lookup(fs, a) != nil }

func isShortCluster(a string) bool { return !strings.HasPrefix(a, "--") && len(a) > 2 }

// candidateJSON is one candidate of `submit --format json` (PRODUCT.md).
type candidateJSON struct {
	Partition  string   `json:"partition"`
	GPUType    string   `json:"gpu_type"`
	Nodes      int      `json:"nodes"`
	GPUs       int      `json:"gpus"`
	Fits       bool     `json:"fits"`
	Why        string   `json:"why"`
	TokensPerS float64  `json:"tokens_per_s"`
	TrainS     float64  `json:"train_s"`
	Start      *string  `json:"start"`
	Finish     *string  `json:"finish"`
	Cost       *float64 `json:"cost"`
	Layout     string   `json:"layout,omitempty"`
	TimeLimitS float64  `json:"time_limit_s,omitempty"`
	Finetune   string   `json:"finetune,omitempty"`    // the --finetune spec it was planned with
	SlurmStart *string  `json:"slurm_start,omitempty"` // Slurm's --test-only start, when trainrun's predictions moved start earlier
	StartWhy   string   `json:"start_why,omitempty"`
}

type chosenJSON struct {
	Partition   string  `json:"partition"`
	Nodes       int     `json:"nodes"`
	GPUs        int     `json:"gpus"`
	GPUsPerNode int     `json:"gpus_per_node"`
	Layout      string  `json:"layout"`
	TimeLimitS  float64 `json:"time_limit_s"`
	Exclusive   bool    `json:"exclusive"`
	Finetune    string  `json:"finetune,omitempty"` // the --finetune spec SCRIPT must train
}

type submitJSON struct {
	Chosen         *chosenJSON     `json:"chosen"`
	Candidates     []candidateJSON `json:"candidates"`
	SubmittedJobID string          `json:"submitted_job_id,omitempty"`
	Learned        *learnedJSON    `json:"learned,omitempty"` // the runs of --plan-dir's jobs the plans were corrected from
}

func rfc3339(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := t.Format(time.RFC3339)
	return &s
}

func toSubmitJSON(cands []submit.Candidate, chosen int, id string) submitJSON {
	out := submitJSON{Candidates: []candidateJSON{}, SubmittedJobID: id}
	for i := range cands {
		c := &cands[i]
		cj := candidateJSON{Partition: c.Partition, GPUType: c.GPUType, Nodes: c.Nodes, GPUs: c.GPUs, Fits: c.Fits, Why: c.Why,
			TokensPerS: c.TokensPerS, TrainS: c.TrainS, Start: rfc3339(c.Start), Finish: rfc3339(c.Finish), TimeLimitS: c.TimeLimit.Seconds(),
			SlurmStart: rfc3339(c.SlurmStart), StartWhy: c.StartWhy, Finetune: c.Finetune}
		if c.Cost >= 0 {
			v := c.Cost
			cj.Cost = &v
		}
		if c.Eval != nil {
			cj.Layout = c.Eval.Layout.Config()
		}
		out.Candidates = append(out.Candidates, cj)
	}
	if chosen >= 0 {
		c := &cands[chosen]
		out.Chosen = &chosenJSON{Partition: c.Partition, Nodes: c.Nodes, GPUs: c.GPUs, GPUsPerNode: c.GPUsPerNode,
			Layout: c.Eval.Layout.Config(), TimeLimitS: c.TimeLimit.Seconds(), Exclusive: !c.Partial, Finetune: c.Finetune}
	}
	return out
}

func (o *submitOptions) print(w io.Writer, cands []submit.Candidate, chosen int, id string) error {
	if o.plan.Format == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		out := toSubmitJSON(cands, chosen, id)
		out.Learned = o.learned
		return enc.Encode(o.withLateJSON(out, cands))
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PARTITION\tGPU\tNODES\tGPUS\tFITS\tTOKENS/S\tTRAIN\tSTART\tFINISH\tCOST\tWHY")
	for _, c := range cands {
		cost := "-"
		if c.Cost >= 0 {
			cost = strconv.FormatFloat(c.Cost, 'g', 4, 64)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%v\t%.0f\t%s\t%s\t%s\t%s\t%s\n", c.Partition, c.GPUType, c.Nodes, c.GPUs, c.Fits, c.TokensPerS,
			shortDur(c.TrainS), clock(c.Start), clock(c.Finish), cost, strings.TrimPrefix(c.Why+"; "+c.StartWhy, "; "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if chosen >= 0 {
		c := &cands[chosen]
		kind := "whole nodes, exclusive"
		if c.Partial {
			kind = fmt.Sprintf("partial node: --gpus-per-node=%d, shared", c.GPUsPerNode)
		}
		fmt.Fprintf(w, "\nchosen: partition %s, %d node(s) × %d GPUs (%s), %s, --time=%s\n", c.Partition, c.Nodes, c.GPUsPerNode, kind,
			c.Eval.Layout.Config(), slurmDuration(c.TimeLimit))
		if o.fallback {
			label := "full training"
			if f, err := plan.ParseFinetuneSpec(c.Finetune); err == nil && f.Frozen() {
				label = f.Label()
			}
			fmt.Fprintf(w, "fine-tuning: --finetune %s (%s): SCRIPT must train this kind\n", c.Finetune, label)
		}
	}
	o.printLate(w, cands, chosen)
	o.printLearned(w)
	if id != "" {
		fmt.Fprintf(w, "Submitted batch job %s\n", id)
	}
	return nil
}

func shortDur(s float64) string {
	if s <= 0 {
		return "-" // not estimated
	}
	return units.Seconds(s)
}

// clock is a START or FINISH cell: RFC 3339 with its zone, as the JSON.
func clock(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Format(time.RFC3339)
}

// slurmDuration writes d as sbatch's --time takes it and squeue prints it:
// [D-]HH:MM:SS (366038 minutes is 254-04:38:00).
func slurmDuration(d time.Duration) string {
	s := int64(d / time.Second)
	days, s := s/86400, s%86400
	hms := fmt.Sprintf("%02d:%02d:%02d", s/3600, s%3600/60, s%60)
	if days > 0 {
		return fmt.Sprintf("%d-%s", days, hms)
	}
	return hms
}

// costPriced refuses --objective cost before asking Slurm anything when
// the policy prices none of the candidates' partitions: a configuration
// error (exit 2), not every row "Slurm refused" (exit 4) after the
// test-only round (issue 30).
func costPriced(objective string, cands []submit.Candidate, policyFile string) error {
	if objective != submit.Cost {
		return nil
	}
	var parts []string
	for _, c := range cands {
		if c.Cost >= 0 {
			return nil
		}
		if !c.Fits && c.Eval == nil {
			continue // not planned: no cost to miss (the table says why it does not fit)
		}
		if !slices.Contains(parts, c.Partition) {
			parts = append(parts, c.Partition)
		}
	}
	if len(parts) == 0 {
		return nil // nothing fits: the table says why
	}
	where := "the policy (--policy or TRAINRUN_POLICY) has"
	if policyFile == "" {
		where = "no policy file was given (--policy or TRAINRUN_POLICY), so there is"
	}
	return usageErrorf("--objective cost: %s no GPUHourCost= for partition %s: add GPUHourCost=PRICE to each 'PartitionName=' line, or use --objective finish",
		where, strings.Join(parts, ", "))
}

// statScript is os.Stat; the unit tests, whose scripts are names only,
// replace it.
var statScript = os.Stat

// checkScript fails, as a usage error (exit 2), for a batch script sbatch
// could not read: found here, before the partitions and the --test-only
// round, whose every row said "Unable to open file" (exit 4: issue 30).
func checkScript(path string) error {
	st, err := statScript(path)
	switch {
	case err != nil:
		return usageErrorf("script %s: %v; sbatch reads it from here at submission: give its path (relative to %s, or absolute)", path, errors.Unwrap(err), workDir())
	case st != nil && st.IsDir():
		return usageErrorf("script %s is a directory; give the batch script's path", path)
	}
	return nil
}

func workDir() string {
	if d, err := os.Getwd(); err == nil {
		return d
	}
	return "the current directory"
}

// modelExports are the plugin twins TRAINRUN_MODEL and TRAINRUN_BATCH of
// the model submit planned, exported with TRAINRUN_PLAN: `trainrun run` in
// the job then knows the model beside the plan file, so {megatron_args} is
// the plan's full set (the model's flags too) and the placement weighs the
// plan's traffic, as planning in the job does. None when the model was given
// by its shape (--layers ...) or its name holds a comma (sbatch --export
// separates variables with commas).
func modelExports(po *planOptions) []string {
	shape := po.Layers != 0 || po.Hidden != 0 || po.Heads != 0 || po.FFN != 0 || po.Vocab != 0 || po.Experts != 0
	if po.Model == "" || shape || po.SeqLen <= 0 || po.GlobalBatch <= 0 {
		return nil
	}
	model := po.Model
	if _, err := os.Stat(model); err == nil {
		if abs, err := filepath.Abs(model); err == nil {
			model = abs // a config.json: the job may start elsewhere
		}
	}
	if strings.ContainsAny(model, ",=") {
		return nil
	}
	return []string{"TRAINRUN_MODEL=" + model, fmt.Sprintf("TRAINRUN_BATCH=%dx%d", po.GlobalBatch, po.SeqLen)}
}
