// The choose phase of trainrun run: the layout, from --plan, the planner or
// --fix.

package run

import (
	"fmt"
	"strings"

	"github.com/trainrun/trainrun/plan"
	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
	"github.com/trainrun/trainrun/wrapper/internal/launch"
	"github.com/trainrun/trainrun/wrapper/internal/planflags"
)

// choosePlan chooses the layout (evaluated when the planner evaluated it):
// from --plan FILE; from the planner when a model is given (searching, or
// evaluating what --fix pins); or from --fix alone, unevaluated.
func (r *runner) choosePlan() (c choice, err error) {
	world := r.alloc.World()
	po := r.cfg.plan
	modelFromEnv := r.cfg.modelFromEnv
	if r.cfg.batchErr != nil {
		return c, r.cfg.batchErr
	}
	planFile := r.cfg.planFile
	var derived *plan.Layout // TRAINRUN_PLAN's layout for the allocation's GPUs (resize.go)
	if planFile == "" {
		planFile, derived = r.submittedPlan(world)
	}
	hasModel := po.Model != ""
	for _, f := range planflags.ModelFlags {
		hasModel = hasModel || r.cfg.given[f]
	}
	switch {
	case planFile == "" && modelFromEnv && po.Fix != "" && (po.SeqLen == 0 || po.GlobalBatch == 0):
		// #SBATCH --train-model alone with a script that pins its layout:
		// the layout is used as before, not evaluated.
		r.logf("TRAINRUN_MODEL=%s is set but no batch (--seq-len, --global-batch or TRAINRUN_BATCH): --fix %s is used as given, not evaluated", po.Model, po.Fix)
		if c.Layout, err = planflags.FixedLayout(po.Fix, world, po.GlobalBatch); err != nil {
			return c, err
		}
	case derived != nil: // evaluated for the plan's own size: not kept (as a shrink)
		c.Layout, c.PlanFile = *derived, planFile
	case planFile != "":
		if c.Eval, err = ReadRunPlan(planFile, world); err != nil {
			return c, err
		}
		c.Layout, c.PlanFile = c.Eval.Layout, planFile
	case hasModel:
		if c, err = r.planFromModel(modelFromEnv); err != nil {
			return c, err
		}
	case po.Fix != "":
		if c.Layout, err = planflags.FixedLayout(po.Fix, world, po.GlobalBatch); err != nil {
			return c, err
		}
	default:
		return c, usageErrorf("no layout: give the model (--model NAME|PATH, or --layers --hidden --heads --vocab) with --seq-len and --global-batch to plan, "+
			"or pin the degrees with --fix (e.g. --fix tp=%d; dp is derived from the %d GPUs), or pass --plan FILE from 'trainrun plan --format json'",
			min(world, r.alloc.TasksPerNode), world)
	}
	if c.Layout.VPP <= 0 {
		c.Layout.VPP = 1
	}
	if c.Layout.TP > r.alloc.TasksPerNode {
		r.logf("warning: tp=%d is larger than the %d GPUs of a node: tensor-parallel traffic will cross the network", c.Layout.TP, r.alloc.TasksPerNode)
	} else if r.alloc.TasksPerNode%c.Layout.TP != 0 {
		r.logf("warning: tp=%d does not divide the %d GPUs of a node: some TP groups will span two nodes", c.Layout.TP, r.alloc.TasksPerNode)
	}
	return c, nil
}

// planFromModel plans the layout for the model on the allocation's GPUs
// (evaluated, with the model's Megatron arguments).
func (r *runner) planFromModel(modelFromEnv bool) (choice, error) {
	world := r.alloc.World()
	po := r.cfg.plan // a copy: the allocation's GPUs are filled in below
	m, err := po.ModelGiven(func(name string) bool { return r.cfg.given[name] })
	if err != nil {
		return choice{}, err
	}
	if err := r.planSoftware(); err != nil {
		return choice{}, err
	}
	j, err := po.Job()
	if err != nil {
		if modelFromEnv {
			return choice{}, usageErrorf("%v (the model %s comes from TRAINRUN_MODEL, which #SBATCH --train-model sets: give the batch with --seq-len and --global-batch, or #SBATCH --train-batch=GLOBALxSEQLEN)", err, po.Model)
		}
		return choice{}, err
	}
	if po.GPU == "" {
		if po.GPU, err = r.plannerGPU(); err != nil {
			return choice{}, err
		}
	}
	if strings.Contains(po.GPU, ",") || strings.Contains(po.GPU, ":") {
		return choice{}, usageErrorf("--gpu %q: inside an allocation give one GPU type; the count comes from the allocation", po.GPU)
	}
	po.GPUs = world
	// The allocation decides the GPUs per node, as if --gpus-per-node
	// gave it.
	po.GPUsPerNode = r.alloc.TasksPerNode
	clusters, err := po.Clusters(func(name string) bool {
		return name == "gpus-per-node" || r.cfg.given[name] || name == "nvme-bw" && po.NVMeBW > 0 // the policy's NVMeBW
	})
	if err != nil {
		return choice{}, err
	}
	c := clusters[0]
	j.Precision = plan.PrecisionFor(j.Precision, c.GPU) // the flag's default: the GPU's 16-bit format
	pins, err := planflags.ParseFix(po.Fix)
	if err != nil {
		return choice{}, err
	}
	if err := r.loadCalibration(&po); err != nil {
		return choice{}, err
	}
	so := po.SearchOptions(pins)
	if spec, _ := r.tuneSpec(); spec.K > 0 {
		so.TopK = max(so.TopK, 4*spec.K) // --tune's candidates come from the alternatives (tunestep.go)
	}
	res := plan.Search(m, j, c, so)
	if err := planflags.NoFitError(m, j, c, so, res); err != nil {
		return choice{}, err
	}
	if n := plan.LayoutGPUs(res.Plan.Layout); n != world {
		return choice{}, withCode(exitcode.NoFit, fmt.Errorf("the plan %s uses %d GPUs but the allocation has %d", res.Plan.Layout.Config(), n, world))
	}
	in := plan.InputsOf(m, j, c, pins.String())
	return choice{Layout: res.Plan.Layout, Eval: res.Plan, Model: &m, Job: j, Inputs: &in, GPU: po.GPU, Search: &res}, nil
}

// plannerGPU is the GPU type to plan for: what the probe found on the
// nodes, else the policy's GPUType.
func (r *runner) plannerGPU() (string, error) {
	name := r.probedGPUName()
	if name == "" && r.cfg.policyGPU.Value != "" {
		r.logf("the probe found no GPU name the planner knows; planning for %s, the policy's GPUType (%s)", r.cfg.policyGPU.Value, r.cfg.policyGPU.Source)
		name = r.cfg.policyGPU.Value
	}
	if name == "" {
		return "", usageErrorf("no GPU type for the planner: the probe found no GPU name on the nodes (probe %s; fake or unrecognised devices); pass --gpu TYPE (%s)",
			r.cfg.probe, strings.Join(plan.GPUNames(), " "))
	}
	if _, err := plan.LookupGPU(name); err != nil {
		return "", usageErrorf("the nodes' GPU %q is not in the planner's catalog: pass --gpu TYPE (%s)", name, strings.Join(plan.GPUNames(), " "))
	}
	return name, nil
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

// writePlan writes plan.json for the step that runs cmdArgv.
func (r *runner) writePlan(path string, cmdArgv []string) error {
	d := planDoc{JobID: r.alloc.JobID, Nodes: r.alloc.Nodes, Ranks: r.placed.Slots, Command: cmdArgv, Resume: r.ckpt.resume, CkptDir: r.dirs.ckptDir}
	if r.placed.Placement != nil {
		d.Traffic, d.Baseline = &r.placed.Placement.Traffic, &r.placed.Placement.Baseline
	}
	if r.choice.Eval != nil {
		d.Plan, d.Evaluated = r.choice.Eval, true
	} else {
		d.Plan = r.choice.Layout
	}
	return launch.WriteJSONAtomic(path, d, 0o644)
}
