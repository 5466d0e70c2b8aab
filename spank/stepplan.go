package spank

import (
	"bytes"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/trainrun/trainrun/plan"
	"github.com/trainrun/trainrun/plan/policy"
	"github.com/trainrun/trainrun/topo"
)

// StepPlan is the layout the plugin planned for a step, with the inputs it
// was planned from: the same inputs to `trainrun plan --model M --gpu TYPE
// --gpus TASKS --gpus-per-node TASKS_PER_NODE --seq-len S --global-batch B
// [--fix LAYOUT] --format json` print JSON.
type StepPlan struct {
	Model   plan.Model
	Job     plan.Job
	Cluster plan.Cluster
	Options plan.SearchOptions
	Result  plan.Result // Result.Plan is non-nil and fits
	JSON    []byte      // plan.RenderJSONWithInputs of Result
	GPUFrom string      // where the GPU type came from, for notes and explain
}

// PlanStep plans a step's layout with plan.Search when the request names a
// model and a batch, the policy of the partition has AutoPlan=yes and the
// layout does not pin every degree: GPUs = the step's tasks, GPUs per node
// = its tasks per node, the GPU type from this node's GPU names or else the
// policy's GPUType, the layout's degrees as pins. It returns nil and a note
// when no plan is to be made, and an error (the planner's reason) when the
// model does not fit. It does no I/O but reading a config.json model.
func PlanStep(c *Config, r *Request, st Step, node *topo.Node) (*StepPlan, []string, error) {
	switch {
	case r.Model == "" && r.Batch() == "":
		return nil, nil, nil
	case r.Model == "":
		return nil, []string{fmt.Sprintf("--train-batch=%s without --train-model: nothing to plan (TRAINRUN_BATCH exported); add --train-model=NAME for a plan", r.Batch())}, nil
	case r.Batch() == "":
		return nil, []string{fmt.Sprintf("--train-model=%s without --train-batch: no plan made (TRAINRUN_MODEL exported); add --train-batch=GLOBALxSEQLEN (e.g. 1024x8192) for the plugin to plan the layout, or plan in the job script with trainrun run --seq-len S --global-batch B", r.Model)}, nil
	}
	pol := c.Policy
	if pol == nil {
		pol = policy.Default()
	}
	s := pol.Effective(r.Partition)
	if !s.AutoPlan.Value {
		return nil, []string{fmt.Sprintf("the policy's AutoPlan=no (%s): no plan made for --train-model=%s --train-batch=%s; trainrun plan ... --format json gives one, and --train-layout applies its degrees", s.AutoPlan.Source, r.Model, r.Batch())}, nil
	}
	m, err := loadModel(c, r.Model)
	if err != nil {
		return nil, nil, err
	}
	so := plan.SearchOptions{TopK: plan.DefaultTop}
	if r.LayoutSet {
		so.Pins = r.Pins
		if so.FullyPinned(m) {
			return nil, []string{fmt.Sprintf("--train-layout=%s pins every degree: used as given, not planned", r.Pins)}, nil
		}
	}
	g, from, notes, err := stepGPU(s, node)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot plan %s: %v", m.Name, err)
	}
	world, perNode := st.TotalTasks, st.LocalTasks
	cl := plan.ClusterFor(g, world, perNode)
	if bw := s.NVMeBW.Value; bw > 0 {
		cl.NVMeBW = bw * 1e9 // the partition's NVMeBW, GB/s per node
	}
	j := plan.Job{SeqLen: r.SeqLen, GlobalBatch: r.Global, Precision: plan.PrecisionFor(r.Precision, g), Stack: r.Stack}.WithFinetune(plan.FinetuneOf(plan.Job{LoRARank: r.LoRARank, Finetune: r.Finetune}))
	res := plan.Search(m, j, cl, so)
	if msg := plan.NoFit(m, j, cl, so, res); msg != "" {
		return nil, nil, fmt.Errorf("plan for --train-model=%s --train-batch=%s on the step's %d tasks (%s, %s): %s", r.Model, r.Batch(), world, g.Name, from, msg)
	}
	if n := plan.LayoutGPUs(res.Plan.Layout); n != world {
		return nil, nil, fmt.Errorf("the plan %s uses %d GPUs but the step has %d tasks", res.Plan.Layout.Config(), n, world)
	}
	var js bytes.Buffer
	if err := plan.RenderJSONWithInputs(&js, res, plan.InputsOf(m, j, cl, r.Pins.String())); err != nil { // the plan JSON carries its inputs (PRODUCT.md)
		return nil, nil, err
	}
	notes = append(notes, fmt.Sprintf("planned %s, %s, on %d x %s (%s): %s", m.Name, r.Batch(), world, g.Name, from, res.Plan.Layout.Config()))
	return &StepPlan{Model: m, Job: j, Cluster: cl, Options: so, Result: res, JSON: js.Bytes(), GPUFrom: from}, notes, nil
}

// MegatronArgsVar is TRAINRUN_MEGATRON_ARGS=VALUE for a step on a Megatron
// stack (plan.MegatronStack): the flags `trainrun plan --format megatron`
// prints for the same plan (plan.MegatronArgs of sp, the model's full set),
// or, for a layout pinned by --train-layout without a model, the layout's
// flags alone (plan.MegatronLayoutArgs, as `trainrun run --fix` gives
// {megatron_args}), joined by plan.ShellJoin: each word shell-quoted where a
// shell would split or expand it. "" with no plan and no pins, another
// stack, or, with a note, a plan Megatron-LM cannot express (LoRA).
func MegatronArgsVar(sp *StepPlan, r *Request, ml plan.Layout) (kv, note string) {
	var args []string
	var err error
	switch {
	case !plan.MegatronStack(r.Stack):
		return "", ""
	case sp != nil:
		args, err = plan.MegatronArgs(sp.Model, sp.Job, *sp.Result.Plan)
	case r.LayoutSet:
		args, err = plan.MegatronLayoutArgs(ml, plan.Job{GlobalBatch: r.Global, Precision: r.Precision, Stack: r.Stack}.WithFinetune(plan.FinetuneOf(plan.Job{LoRARank: r.LoRARank, Finetune: r.Finetune})))
	default:
		return "", ""
	}
	if err != nil {
		return "", fmt.Sprintf("TRAINRUN_MEGATRON_ARGS not set: %v", err)
	}
	return "TRAINRUN_MEGATRON_ARGS=" + plan.ShellJoin(args), ""
}

// loadModel reads --train-model as Validate accepted it: a preset, or the
// absolute path of a Hugging Face config.json.
func loadModel(c *Config, name string) (plan.Model, error) {
	var m plan.Model
	var err error
	if strings.HasPrefix(name, "/") {
		m, err = readModelConfig(c, name)
	} else {
		m, err = plan.LookupModel(name)
	}
	if err != nil {
		return m, fmt.Errorf("--train-model=%s: %w", name, err)
	}
	if err := plan.ValidateModel(m); err != nil {
		return m, fmt.Errorf("--train-model=%s: %v", name, err)
	}
	return m, nil
}

// readModelConfig reads a config.json path the user gave with the job's
// credentials (c.As; ReadUserFile: no link followed by root, no FIFO, at
// most plan.MaxConfigBytes) and parses it.
func readModelConfig(c *Config, path string) (plan.Model, error) {
	data, err := ReadUserFile(c.As, path, plan.MaxConfigBytes)
	if err != nil {
		return plan.Model{}, fmt.Errorf("cannot read the model config as the job's user: %v", err)
	}
	return plan.ParseHFConfig(bytes.NewReader(data), path)
}

// stepGPU is the GPU type to plan for: this node's, when every GPU's name
// maps to one catalog type (plan.GPUTypeOf, as trainrun run reads the
// probe's names); else the policy's GPUType; else an error saying so.
func stepGPU(s policy.Settings, node *topo.Node) (plan.GPU, string, []string, error) {
	var notes []string
	typ, names := "", map[string]bool{}
	mixed := false
	if node != nil {
		for _, g := range node.GPUs {
			names[g.Name] = true
			t := plan.GPUTypeOf(g.Name)
			if t == "" || typ != "" && t != typ {
				mixed = true
			}
			if typ == "" {
				typ = t
			}
		}
	}
	if mixed {
		typ = ""
	}
	var seen []string
	for n := range names {
		seen = append(seen, strconv.Quote(n))
	}
	sort.Strings(seen)
	policyType, src := s.GPUType.Value, s.GPUType.Source
	switch {
	case typ != "":
		g, err := plan.LookupGPU(typ)
		if err != nil {
			return g, "", nil, err
		}
		from := fmt.Sprintf("from the node's GPUs %s", strings.Join(seen, ", "))
		if policyType != "" && policyType != typ {
			notes = append(notes, fmt.Sprintf("the policy's GPUType=%s (%s) applies only where the GPUs cannot be identified; this node's are %s", policyType, src, typ))
		}
		return g, from, notes, nil
	case policyType != "":
		g, err := plan.LookupGPU(policyType)
		if err != nil {
			return g, "", nil, err
		}
		return g, fmt.Sprintf("the policy's GPUType=%s, %s", policyType, src), notes, nil
	}
	what := fmt.Sprintf("this node's GPUs %s are not one GPU type of the planner's catalog", strings.Join(seen, ", "))
	switch {
	case node == nil || len(node.GPUs) == 0:
		what = "this node shows no GPUs"
	case len(seen) == 1 && seen[0] == `""`:
		what = "this node's GPUs have no names (fake or hidden devices)"
	}
	return plan.GPU{}, "", nil, fmt.Errorf("%s and the policy has GPUType=auto (%s): ask the site to set GPUType for the partition (one of %s), or give the degrees with --train-layout",
		what, src, strings.Join(plan.GPUNames(), " "))
}

// WritePlan writes a step's plan JSON to JobDir(cacheDir, job)/plan-STEP.json
// (atomically: a task never reads half a file; given to owner, the job's
// user, mode 0600, or with no owner 0644) and returns its path, the value of
// TRAINRUN_PLAN.
func WritePlan(cacheDir string, st Step, data []byte, owner *Cred) (string, error) {
	if cacheDir == "" {
		return "", fmt.Errorf("no cache directory for the plan file (plugstack.conf cache=)")
	}
	path := filepath.Join(JobDir(cacheDir, st.JobID), fmt.Sprintf("plan-%d.json", st.StepID))
	return path, writeFileAtomic(path, data, 0o644, owner)
}
