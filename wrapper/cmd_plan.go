package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/pflag"
	"github.com/trainrun/trainrun/internal/slurm"
	"github.com/trainrun/trainrun/plan"
	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
	"github.com/trainrun/trainrun/wrapper/internal/planflags"
)

func init() {
	register(&command{name: "plan", short: "choose the parallel layout; predict memory, step time, MFU and time to train", run: runPlan})
}

// planOptions are the `trainrun plan` flags (planflags.Options, which the
// planning commands share) and what only the plan command does with them.
type planOptions struct {
	planflags.Options
}

func runPlan(ctx context.Context, env *runEnv, args []string) error {
	fs := newFlags("plan", "plan --model NAME|PATH --gpu TYPE --gpus N --seq-len S --global-batch B [flags]", env.stdout)
	var o planOptions
	o.AddFlags(fs)
	var pol planPolicyOptions
	pol.addFlags(fs, env.getenv)
	var cheap cheapestOptions
	cheap.addFlags(fs)
	listModels := fs.Bool("list-models", false, "print the model presets (layers, hidden, heads, parameters, source) and exit; --model list does the same")
	flagsUsage := fs.Usage
	fs.Usage = func() {
		flagsUsage()
		fmt.Fprint(env.stdout, joinLines("",
			"A fully pinned layout that does not fit is still printed (fits false) and exits 3.",
			""))
		fmt.Fprint(env.stdout, exitCodeTable())
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *listModels || o.Model == "list" {
		return writeModelList(env.stdout)
	}
	if fs.NArg() > 0 {
		return usageErrorf("unexpected argument %q: plan takes only flags", fs.Arg(0))
	}
	switch o.Format {
	case "table", "json", "megatron", "deepspeed", "torchtitan", "peft", "env", "sbatch", "hostfile", "placement":
	default:
		return usageErrorf("--format %q: accepted: table, json, megatron, deepspeed, torchtitan, peft, env, sbatch, hostfile, placement", o.Format)
	}
	if o.Top < 0 {
		return usageErrorf("--top %d: must be 0 or more", o.Top)
	}
	if o.TimeMargin < 0 || o.CkptLead < 0 {
		return usageErrorf("--time-margin %g and --ckpt-lead %s must not be negative", o.TimeMargin, o.CkptLead)
	}
	m, err := o.model(fs)
	if err != nil {
		return err
	}
	for _, n := range o.ModelNotes {
		fmt.Fprintf(env.stderr, "trainrun: plan: note: %s\n", n)
	}
	if err := pol.apply(env, fs, &o); err != nil {
		return err
	}
	j, err := o.Job()
	if err != nil {
		return err
	}
	if err := plan.CheckFinetune(m, plan.FinetuneOf(j)); err != nil {
		return usageErrorf("--%v", err)
	}
	if cheap.on {
		return o.cheapest(ctx, env, fs, &cheap, m, j)
	}
	clusters, err := o.Clusters(func(name string) bool { return fs.Changed(name) || name == "nvme-bw" && o.NVMeBW > 0 })
	if err != nil {
		return err
	}
	fix, err := planflags.ParseFix(o.Fix)
	if err != nil {
		return err
	}
	if err := o.loadCalibration(env.getenv, "", env.stderr); err != nil {
		return err
	}
	so := o.SearchOptions(fix)
	if len(clusters) > 1 {
		return planCompare(env, &o, m, j, clusters, so)
	}
	c := clusters[0]
	j.Precision = plan.PrecisionFor(j.Precision, c.GPU)
	r := plan.Search(m, j, c, so)
	if err := o.render(env, m, j, c, r); err != nil {
		return err
	}
	return planflags.NoFitError(m, j, c, so, r)
}

// render writes r in the chosen format. Formats that describe one layout
// print nothing when there is none (the error says why).
func (o *planOptions) render(env *runEnv, m plan.Model, j plan.Job, c plan.Cluster, r plan.Result) error {
	w := env.stdout
	switch o.Format {
	case "table":
		return plan.RenderTable(w, m, j, c, r)
	case "json":
		pins, _ := planflags.ParseFix(o.Fix) // parsed before: the error was reported
		return plan.RenderJSONWithInputs(w, r, plan.InputsOf(m, j, c, pins.String()))
	}
	if r.Plan == nil {
		return nil
	}
	switch o.Format {
	case "megatron":
		return formatRefusal(plan.RenderMegatron(w, m, j, *r.Plan))
	case "deepspeed":
		return formatRefusal(plan.RenderDeepSpeed(w, j, *r.Plan))
	case "torchtitan":
		return formatRefusal(plan.RenderTorchTitan(w, m, j, *r.Plan))
	case "peft":
		return formatRefusal(plan.RenderPEFT(w, m, j, c, *r.Plan))
	case "env":
		return plan.RenderEnv(w, *r.Plan)
	case "sbatch":
		sig := "USR2" // trainrun's default checkpoint signal (NCCL uses USR1)
		if s := env.getenv("TRAINRUN_CKPT_SIGNAL"); s != "" {
			sig = s
		}
		return plan.RenderSbatch(w, m, j, c, *r.Plan, plan.SbatchOptions{Margin: o.TimeMargin, Lead: o.CkptLead, Signal: sig})
	default: // hostfile, placement
		return renderPlacement(env, o.Format, &o.Place, m, j, c, r.Plan)
	}
}

// formatRefusal: a plan the framework format cannot express exits 2
// (usage: plan it otherwise, or use the tool the message names), as
// {megatron_args}, {deepspeed_config} and {torchtitan_args} do in run.
func formatRefusal(err error) error {
	var fe *plan.FormatError
	var me *plan.MegatronError
	if errors.As(err, &fe) || errors.As(err, &me) {
		return withCode(exitcode.Usage, err)
	}
	return err
}

// planCompare plans the same job on each GPU type and compares them.
func planCompare(env *runEnv, o *planOptions, m plan.Model, j plan.Job, clusters []plan.Cluster, so plan.SearchOptions) error {
	if o.Format != "table" && o.Format != "json" {
		return usageErrorf("--format %s describes one layout: give one --gpu type (the list %q compares types with --format table|json)", o.Format, o.GPU)
	}
	var rs []plan.GPUResult
	for _, c := range clusters {
		rs = append(rs, plan.GPUResult{Cluster: c, Result: plan.Search(m, j, c, so)}) // Search takes each GPU's 16-bit format
	}
	if o.Format == "json" {
		if err := plan.RenderComparisonJSON(env.stdout, rs); err != nil {
			return err
		}
	} else {
		for _, g := range rs {
			fmt.Fprintf(env.stdout, "=== %s x %d ===\n", g.Cluster.GPU.Name, g.Cluster.GPUs)
			if err := plan.RenderTable(env.stdout, m, j, g.Cluster, g.Result); err != nil {
				return err
			}
			fmt.Fprintln(env.stdout)
		}
		if err := plan.RenderComparison(env.stdout, m, j, rs); err != nil {
			return err
		}
	}
	var errs []string
	code := 0
	for _, g := range rs {
		if g.Result.Plan != nil && g.Result.Plan.Memory.Fits {
			return nil // at least one type fits: the comparison answered
		}
		errs = append(errs, planflags.NoFitError(m, j, g.Cluster, so, g.Result).Error())
		if c := planflags.NoFitCode(g.Result); code == 0 || c == exitcode.NoFit {
			code = c // no-fit where any type is only short of memory
		}
	}
	return withCode(code, errors.New(strings.Join(errs, "; ")))
}

// model resolves --model (preset or config.json) and the shape flags, which
// override the preset's figures or describe a model on their own.
func (o *planOptions) model(fs *pflag.FlagSet) (plan.Model, error) { return o.ModelGiven(fs.Changed) }

// writeModelList is `plan --list-models`: every preset --model takes.
func writeModelList(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MODEL\tLAYERS\tHIDDEN\tHEADS\tKV\tEXPERTS\tPARAMS\tSOURCE")
	for _, n := range plan.ModelNames() {
		m, err := plan.LookupModel(n)
		if err != nil {
			continue // a preset named only to refuse it (unsupported architecture)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%.1fB\t%s\n", n, m.Layers, m.Hidden, m.Heads, m.KVHeads, m.Experts, m.Params()/1e9, plan.ModelSource(n))
	}
	fmt.Fprintf(tw, "\nOr give a Hugging Face config.json (or its directory), model_type %s; or the shape flags --layers --hidden --heads ...\n",
		strings.Join(plan.HFModelTypes(), ", "))
	return tw.Flush()
}

// planPolicyOptions are trainrun plan's --policy and --partition: the
// site's trainrun.conf gives the partition's hardware defaults (NVMeBW for
// --nvme-bw) as it does for trainrun run inside the allocation.
type planPolicyOptions struct {
	file, partition string
}

func (o *planPolicyOptions) addFlags(fs *pflag.FlagSet, getenv func(string) string) {
	fs.StringVar(&o.file, "policy", getenv("TRAINRUN_POLICY"), "the site's trainrun.conf (env TRAINRUN_POLICY): the partition's NVMeBW is the default of --nvme-bw")
	fs.StringVar(&o.partition, "partition", slurm.JobFromEnv(getenv).Partition, "with --policy: the partition whose settings apply (env SLURM_JOB_PARTITION; a partition the policy does not name, or none, gets the site-wide ones)")
}

// apply sets what the policy gives to the plan's options where their
// flags are not given.
func (o *planPolicyOptions) apply(env *runEnv, fs *pflag.FlagSet, po *planOptions) error {
	if o.file == "" {
		po.calibrationDir(env.getenv, "")
		return nil
	}
	pf, err := planflags.LoadPolicy(o.file)
	if err != nil {
		return planflags.ReportPolicyErrors(env.stderr, o.file, err)
	}
	po.PolicyNVMeBW(fs.Changed("nvme-bw"), pf.Effective(o.partition))
	po.calibrationDir(env.getenv, pf.Effective(o.partition).Calibration.Value)
	return nil
}
