package plan

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
)

// Inputs is what a plan was computed from, carried in the plan JSON as
// "inputs" (PRODUCT.md: "The plan JSON carries its inputs") so that a plan
// describes itself: an observation of a run, which keeps the plan it ran,
// can be re-evaluated by a later planner without the command line.
type Inputs struct {
	Model        Model   `json:"model"`
	GPU          string  `json:"gpu"` // catalog name (LookupGPU)
	GPUs         int     `json:"gpus"`
	GPUsPerNode  int     `json:"gpus_per_node"`
	NVLinkDomain int     `json:"nvlink_domain"`
	InterNode    float64 `json:"inter_node_bandwidth,omitempty"` // bytes/s per GPU; 0 = the GPU type's usual
	SeqLen       int     `json:"seq_len"`
	GlobalBatch  int     `json:"global_batch"`
	Precision    string  `json:"precision"`
	Stack        string  `json:"stack"`
	Finetune     string  `json:"finetune"`
	Pins         string  `json:"pins,omitempty"` // the --fix string
	// How the FP8 and MoE layers run (issue 29; Job's fields of the same
	// names): an observation of a MoE run keeps them, so a calibration
	// compares like with like.
	FP8Recipe     string  `json:"fp8_recipe,omitempty"`
	MoEDispatcher string  `json:"moe_dispatcher,omitempty"`
	MoEA2AOverlap bool    `json:"moe_a2a_overlap,omitempty"`
	MoECapacity   float64 `json:"moe_capacity_factor,omitempty"`
}

// InputsOf describes m, j on c with the user's pins.
func InputsOf(m Model, j Job, c Cluster, pins string) Inputs {
	ft := FinetuneOf(j).String()
	st := string(j.Stack)
	if j.Stack == StackMegatronCore {
		st = "megatron-core"
	}
	prec := string(j.Precision)
	if prec == "" {
		prec = string(BF16)
	}
	in := Inputs{Model: m, GPU: c.GPU.Name, GPUs: c.GPUs, GPUsPerNode: c.GPUsPerNode, NVLinkDomain: c.NVLinkDomain,
		SeqLen: j.SeqLen, GlobalBatch: j.GlobalBatch, Precision: prec, Stack: st, Finetune: ft, Pins: pins,
		FP8Recipe: string(j.FP8Recipe), MoEDispatcher: j.MoEDispatcher, MoEA2AOverlap: j.MoEA2AOverlap, MoECapacity: j.MoECapacity}
	if c.InterNode != c.GPU.InterNode {
		in.InterNode = c.InterNode
	}
	return in
}

// Resolve turns the inputs back into the planner's types; an unknown GPU,
// stack, precision or fine-tuning mode is an error naming the value.
func (in Inputs) Resolve() (Model, Job, Cluster, error) {
	g, err := LookupGPU(in.GPU)
	if err != nil {
		return Model{}, Job{}, Cluster{}, fmt.Errorf("inputs.gpu: %w", err)
	}
	st, err := ParseStack(in.Stack)
	if err != nil {
		return Model{}, Job{}, Cluster{}, fmt.Errorf("inputs.stack: %w", err)
	}
	prec, err := ParsePrecision(in.Precision)
	if err != nil {
		return Model{}, Job{}, Cluster{}, fmt.Errorf("inputs.precision: %w", err)
	}
	ft, err := ParseFinetuneSpec(in.Finetune)
	if err != nil {
		return Model{}, Job{}, Cluster{}, fmt.Errorf("inputs.finetune: %w", err)
	}
	if md := in.Model; md.Layers <= 0 || md.Hidden <= 0 || md.Heads <= 0 || md.Vocab <= 0 {
		return Model{}, Job{}, Cluster{}, fmt.Errorf("inputs.model: layers %d, hidden %d, heads %d and vocab %d must all be > 0", md.Layers, md.Hidden, md.Heads, md.Vocab)
	}
	if in.GPUs <= 0 || in.SeqLen <= 0 || in.GlobalBatch <= 0 {
		return Model{}, Job{}, Cluster{}, fmt.Errorf("inputs: gpus %d, seq_len %d and global_batch %d must all be > 0", in.GPUs, in.SeqLen, in.GlobalBatch)
	}
	c := ClusterOf(g, in.GPUs)
	if in.GPUsPerNode > 0 {
		c.GPUsPerNode = in.GPUsPerNode
	}
	if in.NVLinkDomain > 0 {
		c.NVLinkDomain = in.NVLinkDomain
	}
	if in.InterNode > 0 && !math.IsInf(in.InterNode, 0) {
		c.InterNode = in.InterNode
	}
	j := Job{SeqLen: in.SeqLen, GlobalBatch: in.GlobalBatch, Precision: prec, Stack: st,
		FP8Recipe: FP8Recipe(in.FP8Recipe), MoEDispatcher: in.MoEDispatcher, MoEA2AOverlap: in.MoEA2AOverlap, MoECapacity: in.MoECapacity}.WithFinetune(ft)
	if r := validFP8Recipe(j.FP8Recipe, g); r != "" && j.Precision == FP8 {
		return Model{}, Job{}, Cluster{}, fmt.Errorf("inputs.fp8_recipe: %s", r)
	}
	if j.MoEDispatcher != "" && j.MoEDispatcher != "alltoall" && j.MoEDispatcher != "flex" {
		return Model{}, Job{}, Cluster{}, fmt.Errorf("inputs.moe_dispatcher %q: accepted alltoall, flex", j.MoEDispatcher)
	}
	return in.Model, j, c, nil
}

// RenderJSONWithInputs writes the contract's object (RenderJSON) with
// "inputs" added after "rejected".
func RenderJSONWithInputs(w io.Writer, r Result, in Inputs) error {
	out := struct {
		jsonResult
		Inputs Inputs `json:"inputs"`
	}{toJSONResult(r), in}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return fmt.Errorf("plan JSON: %w", err)
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// PlanRecord is what an observation needs of a plan JSON object: the layout
// of its "plan" and its "inputs".
type PlanRecord struct {
	Layout Layout
	Step   float64 // the step time the plan predicted
	Inputs *Inputs // nil when the object has none (written by hand, or by an older trainrun)
}

// ParsePlanJSON reads a `trainrun plan --format json` object (or its "plan"
// object alone) into its layout and inputs.
func ParsePlanJSON(b []byte) (PlanRecord, error) {
	var top struct {
		Plan   *jsonPlan `json:"plan"`
		Inputs *Inputs   `json:"inputs"`
		TP     *int      `json:"tp"`
	}
	if err := json.Unmarshal(b, &top); err != nil {
		return PlanRecord{}, fmt.Errorf("plan JSON: %w", err)
	}
	p := top.Plan
	if p == nil && top.TP != nil { // the "plan" object itself
		p = new(jsonPlan)
		if err := json.Unmarshal(b, p); err != nil {
			return PlanRecord{}, fmt.Errorf("plan JSON: %w", err)
		}
	}
	if p == nil {
		return PlanRecord{}, fmt.Errorf(`plan JSON has no "plan" object (or it is null: nothing fitted); give the object trainrun plan --format json prints`)
	}
	l := normalizeLayout(Layout{TP: p.TP, PP: p.PP, VPP: p.VPP, CP: p.CP, EP: p.EP, ETP: p.ETP, DP: p.DP, SP: p.SP,
		MicroBatch: p.MicroBatch, GradAccum: p.GradAccum, Recompute: p.Recompute, Zero: p.Zero, Offload: p.Offload})
	if l.TP <= 0 || l.PP <= 0 || l.DP <= 0 || l.MicroBatch <= 0 {
		return PlanRecord{}, fmt.Errorf("plan JSON: tp %d, pp %d, dp %d and micro_batch %d must all be ≥ 1", l.TP, l.PP, l.DP, l.MicroBatch)
	}
	return PlanRecord{Layout: l, Step: p.Time.Step, Inputs: top.Inputs}, nil
}
