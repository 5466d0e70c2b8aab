package run

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/trainrun/trainrun/plan"
	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
	"github.com/trainrun/trainrun/wrapper/internal/jobdir"
	"github.com/trainrun/trainrun/wrapper/internal/launch"
	"github.com/trainrun/trainrun/wrapper/internal/planflags"
	"github.com/trainrun/trainrun/wrapper/internal/planjson"
)

// What `trainrun run` hands the framework: {megatron_args} and the
// framework's environment, rendered by the functions `trainrun plan --format
// megatron` uses, so that --fix, --plan FILE (TRAINRUN_PLAN, submit's path)
// and planning in the job give the same flags for the same plan.

// megatronArgs is {megatron_args} for the chosen layout; nil when the
// command does not use it (then nothing it cannot express matters).
func (r *runner) megatronArgs() ([]string, error) {
	used := false
	for _, a := range r.cfg.argv {
		used = used || strings.Contains(a, "{megatron_args}")
	}
	if !used {
		return nil, nil
	}
	args, err := r.renderMegatron()
	if err != nil {
		return nil, withCode(exitcode.Usage, fmt.Errorf("{megatron_args}: %w", err))
	}
	return args, nil
}

// renderMegatron: the model's full set when the run knows the model (planned
// here, given beside --plan, or in the plan file's "inputs"), else the
// layout's flags alone.
func (r *runner) renderMegatron() ([]string, error) {
	c := r.choice
	if c.Model != nil && c.Eval != nil {
		return plan.MegatronArgs(*c.Model, c.Job, *c.Eval)
	}
	j := r.configJob()
	if c.Eval != nil {
		if m, mj, ok, err := r.planModel(); err != nil {
			return nil, err
		} else if ok {
			return plan.MegatronArgs(m, mj, *c.Eval)
		}
	}
	return plan.MegatronLayoutArgs(c.Layout, j)
}

// configJob is the job as the run's options give it when no model was
// planned here: batch, precision, stack and fine-tuning (a value the
// planner would refuse is left at its zero, as the choose phase reports it).
func (r *runner) configJob() plan.Job {
	po := r.cfg.plan // a copy: the phases never write the configuration
	j := plan.Job{GlobalBatch: po.GlobalBatch, Precision: plan.Precision(strings.ToLower(po.Precision))}
	if st, err := plan.ParseStack(po.Stack); err == nil {
		j.Stack = st
	}
	if f, err := plan.ParseFinetuneSpec(po.Finetune); err == nil {
		j = j.WithFinetune(f)
	}
	return j
}

// planModel is the model and job of a run given --plan FILE: from the model
// flags (or TRAINRUN_MODEL) beside it, else from the file's "inputs" when
// the planner that wrote it recorded them. ok is false when neither names
// a model.
func (r *runner) planModel() (plan.Model, plan.Job, bool, error) {
	po := r.cfg.plan // a copy: the phases never write the configuration
	changed := func(name string) bool { return r.cfg.given[name] }
	given := po.Model != "" || slices.ContainsFunc(planflags.ModelFlags, changed)
	if given {
		m, err := po.ModelGiven(changed)
		if err != nil {
			return m, plan.Job{}, false, err
		}
		j, err := po.Job()
		if err != nil {
			return m, j, false, fmt.Errorf("the model %s is given with --plan %s: %w", m.Name, r.choice.PlanFile, err)
		}
		return m, j, true, nil
	}
	in, err := readPlanInputs(r.choice.PlanFile)
	if err != nil || in == nil {
		return plan.Model{}, plan.Job{}, false, err
	}
	return in.resolve(r.choice.PlanFile)
}

// planInputs is what run takes from a plan file's "inputs".
type planInputs planjson.Inputs

// readPlanInputs reads "inputs" of a plan file (nil when it has none) with
// the one plan-JSON reader (planjson: a regular file, size-capped, its
// layout checked).
func readPlanInputs(path string) (*planInputs, error) {
	b, err := planjson.ReadFile(path)
	if err != nil {
		return nil, usageErrorf("--plan %s: %v", path, err)
	}
	pf, err := planjson.Decode(b)
	if err != nil {
		return nil, usageErrorf("--plan %s: %v", path, err)
	}
	if pf.Inputs == nil || pf.Inputs.Model == nil {
		return nil, nil
	}
	return (*planInputs)(pf.Inputs), nil
}

func (in *planInputs) resolve(path string) (plan.Model, plan.Job, bool, error) {
	j := plan.Job{SeqLen: in.SeqLen, GlobalBatch: in.GlobalBatch, Precision: plan.Precision(strings.ToLower(cmp.Or(in.Precision, "bf16")))}
	st, err := plan.ParseStack(in.Stack)
	if err != nil {
		return plan.Model{}, j, false, usageErrorf("--plan %s: inputs.stack: %v", path, err)
	}
	j.Stack = st
	ft, err := plan.ParseFinetuneSpec(in.Finetune)
	if err != nil {
		return plan.Model{}, j, false, usageErrorf("--plan %s: inputs.finetune: %v", path, err)
	}
	j = j.WithFinetune(ft)
	if err := plan.ValidateModel(*in.Model); err != nil {
		return plan.Model{}, j, false, usageErrorf("--plan %s: inputs.model: %v", path, err)
	}
	if j.SeqLen <= 0 || j.GlobalBatch <= 0 {
		return plan.Model{}, j, false, usageErrorf("--plan %s: inputs: seq_len %d and global_batch %d must be > 0", path, j.SeqLen, j.GlobalBatch)
	}
	return *in.Model, j, true, nil
}

// frameworkEnv is the framework's own rank variables (plan.MegatronEnv for
// Megatron's stacks); a value the user exported is kept. On a Megatron
// stack TRAINRUN_MEGATRON_ARGS is {megatron_args} as shell-quoted words
// (plan.ShellJoin), the plugin's variable, for scripts that do not use the
// template; unset, with a log line, where Megatron-LM cannot express the
// plan.
func (r *runner) frameworkEnv() []plan.RankVar {
	st, _ := plan.ParseStack(r.cfg.plan.Stack)
	var out []plan.RankVar
	for _, v := range plan.MegatronEnv(r.choice.Layout, st) {
		if u := r.env.Getenv(v.Key); u != "" && v.KeepUser {
			r.logf("%s=%s is kept from the environment (Megatron-LM's rule gives %s: %s)", v.Key, u, v.Value, v.Why)
			continue
		}
		out = append(out, v)
	}
	if plan.MegatronStack(st) {
		if args, err := r.renderMegatron(); err != nil {
			r.logf("TRAINRUN_MEGATRON_ARGS not set: %v", err)
		} else {
			out = append(out, plan.RankVar{Key: "TRAINRUN_MEGATRON_ARGS", Value: plan.ShellJoin(args),
				Why: "the Megatron-LM flags of the plan ({megatron_args}), shell-quoted words"})
		}
	}
	return out
}

// torchTitanArgs is {torchtitan_args} for the chosen layout
// (plan.TorchTitanArgs, what `trainrun plan --format torchtitan` prints);
// nil when the command does not use it.
func (r *runner) torchTitanArgs() ([]string, error) {
	used := false
	for _, a := range r.cfg.argv {
		used = used || strings.Contains(a, "{torchtitan_args}")
	}
	if !used {
		return nil, nil
	}
	c := r.choice
	j, e, layers := c.Job, plan.Evaluation{Layout: c.Layout}, 0
	if c.Eval != nil {
		e = *c.Eval
	}
	switch {
	case c.Model != nil:
		layers = c.Model.Layers
	default:
		j = r.configJob()
		j.SeqLen = r.cfg.plan.SeqLen
		if c.Eval != nil {
			if m, mj, ok, err := r.planModel(); err != nil {
				return nil, withCode(exitcode.Usage, fmt.Errorf("{torchtitan_args}: %w", err))
			} else if ok {
				j, layers = mj, m.Layers
			}
		}
	}
	args, err := plan.TorchTitanArgs(j, e, layers)
	if err != nil {
		return nil, withCode(exitcode.Usage, fmt.Errorf("{torchtitan_args}: %w", err))
	}
	return args, nil
}

// planTraffic is the traffic the placement weighs: the evaluation's, else
// (a plan read from --plan FILE, whose JSON does not carry it) the layout
// evaluated again for the model the run knows (planModel), so that --plan
// and TRAINRUN_PLAN place ranks as planning in the job does. The bytes each
// group sends depend on the model, the sequence and the layout, not on the
// GPU's speed: the GPU type is the one the run plans for when it can tell,
// else an H100. Zero (block order) when no model is known.
func (r *runner) planTraffic(c choice) plan.Traffic {
	switch {
	case c.Eval == nil:
		return plan.Traffic{}
	case c.Eval.Traffic != plan.Traffic{}:
		return c.Eval.Traffic
	}
	m, j, ok, err := r.planModel()
	if err != nil || !ok {
		r.logf("placement: the plan file records no traffic and the run knows no model (give --model with --plan): ranks stay in Slurm's order")
		return plan.Traffic{}
	}
	name := cmp.Or(r.cfg.plan.GPU, r.probedGPUName(), r.cfg.policyGPU.Value, "h100-sxm")
	g, err := plan.LookupGPU(name)
	if err != nil {
		g, _ = plan.LookupGPU("h100-sxm")
	}
	cl := plan.ClusterOf(g, r.alloc.World())
	cl.GPUsPerNode = r.alloc.TasksPerNode
	return plan.Evaluate(m, j, cl, c.Layout).Traffic
}

// deepSpeedConfig sets {deepspeed_config} when the command uses it: the
// path of ds_config.json in the job directory, written from the plan by
// plan.DeepSpeedConfig (what `trainrun plan --format deepspeed` prints). A
// dry run names the path and writes nothing.
func (r *runner) deepSpeedConfig(vals map[string]string) error {
	used := false
	for _, a := range r.cfg.argv {
		used = used || strings.Contains(a, "{deepspeed_config}")
	}
	if !used {
		return nil
	}
	e := plan.Evaluation{Layout: r.choice.Layout}
	j := r.choice.Job
	if r.choice.Eval != nil {
		e = *r.choice.Eval
	}
	if r.choice.Model == nil {
		j = plan.Job{GlobalBatch: r.cfg.plan.GlobalBatch, Precision: plan.Precision(strings.ToLower(r.cfg.plan.Precision))}
	}
	c, err := plan.DeepSpeedConfig(j, e)
	if err != nil {
		return withCode(exitcode.Usage, fmt.Errorf("{deepspeed_config}: %w", err))
	}
	path := r.dirs.in(jobdir.DSConfig)
	vals["deepspeed_config"] = path
	if r.cfg.dryRun {
		return nil
	}
	return launch.WriteJSONAtomic(path, c, 0o644)
}
