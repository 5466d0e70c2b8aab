package plan

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// Cheapest answers "cluster or workstation?" (issue 37): for each GPU type,
// the fewest GPUs on which the job fits — in the time limit when one is
// given — and the fine-tuning kind that makes it fit, ranked by cost
// (GPU-hours × the type's price; GPU-hours when no price is known).

// CheapestOptions steer Cheapest.
type CheapestOptions struct {
	Search    SearchOptions
	TimeLimit float64 // seconds for the whole run (needs Job.Tokens); 0 = none
	MaxGPUs   int     // largest count tried per type; 0 = 64
	// Kinds are the fine-tuning kinds tried in order at each count; nil =
	// CheapestKinds(the job's kind).
	Kinds []Finetune
}

// CheapestTarget is one place to run: a GPU type, the site partition that
// has it ("" = the catalog type), and its price per GPU-hour if known.
type CheapestTarget struct {
	GPU       GPU
	Partition string
	Price     float64
	Priced    bool
	MaxGPUs   int // the most GPUs the place has (a site partition's nodes × GPUs per node); 0 = CheapestOptions.MaxGPUs only
}

// CheapestOption is one target's answer.
type CheapestOption struct {
	Partition      string      `json:"partition,omitempty"`
	GPU            string      `json:"gpu"`
	GPUs           int         `json:"gpus"`
	Finetune       string      `json:"finetune"` // the kind that makes it fit (a --finetune spec)
	Fits           bool        `json:"fits"`
	StepS          float64     `json:"step_s,omitempty"`
	TokensPerS     float64     `json:"tokens_per_s,omitempty"` // all GPUs together
	TrainHours     float64     `json:"train_h,omitempty"`      // Job.Tokens at that rate; 0 = no --tokens
	GPUHours       float64     `json:"gpu_hours,omitempty"`
	PricePerGPUH   float64     `json:"price_per_gpu_hour,omitempty"`
	Cost           float64     `json:"cost,omitempty"` // GPU-hours × price; 0 without a price
	MemoryGiB      float64     `json:"memory_gib_per_gpu,omitempty"`
	CapacityGiB    float64     `json:"capacity_gib,omitempty"`
	Layout         string      `json:"layout,omitempty"`
	Limits         string      `json:"limits,omitempty"` // what binds: memory part and step part
	Why            string      `json:"why,omitempty"`    // why nothing fits, when Fits is false
	Plan           *Evaluation `json:"-"`
	priceKnown     bool
	perBillionGPUH float64
}

// CheapestKinds is the kinds tried for a job of kind f: its own first, then
// the ones that need less memory (full → LoRA r=16 → QLoRA r=16; LoRA →
// QLoRA of the same rank and targets).
func CheapestKinds(f Finetune) []Finetune {
	switch f.Kind {
	case "", FinetuneFull:
		return []Finetune{{Kind: FinetuneFull}, {Kind: FinetuneLoRA, Rank: DefaultLoRARank, Optim: "adamw"}, {Kind: FinetuneQLoRA, Rank: DefaultLoRARank, Optim: "adamw8"}}
	case FinetuneLoRA:
		return []Finetune{f, {Kind: FinetuneQLoRA, Rank: f.Rank, Targets: f.Targets, Optim: "adamw8"}}
	}
	return []Finetune{f}
}

// cheapestCounts is the GPU counts tried: 1, 2, 4, one node, then whole
// nodes doubling, up to max.
func cheapestCounts(g GPU, maxGPUs int) []int {
	node := max(g.GPUsPerNode, 1)
	var out []int
	for n := 1; n < node && n <= maxGPUs; n *= 2 {
		out = append(out, n)
	}
	for n := node; n <= maxGPUs; n *= 2 {
		out = append(out, n)
	}
	return out
}

// Cheapest plans m, j on each GPU type and returns one option per type,
// the fitting ones first by cost (or GPU-hours), then the others.
func Cheapest(m Model, j Job, targets []CheapestTarget, o CheapestOptions) []CheapestOption {
	maxGPUs := o.MaxGPUs
	if maxGPUs <= 0 {
		maxGPUs = 64
	}
	kinds := o.Kinds
	if kinds == nil {
		kinds = CheapestKinds(FinetuneOf(j))
	}
	so := o.Search
	so.TopK, so.MaxRejected = -1, -1
	var out []CheapestOption
	for _, t := range targets {
		op := cheapestOn(m, j, t, kinds, maxGPUs, so, o)
		op.Partition = t.Partition
		out = append(out, op)
	}
	slices.SortStableFunc(out, func(a, b CheapestOption) int {
		if a.Fits != b.Fits {
			if a.Fits {
				return -1
			}
			return 1
		}
		if a.priceKnown != b.priceKnown {
			if a.priceKnown {
				return -1
			}
			return 1
		}
		if a.priceKnown && a.Cost != b.Cost {
			return cmp.Compare(a.Cost, b.Cost)
		}
		if a.perBillionGPUH != b.perBillionGPUH {
			return cmp.Compare(a.perBillionGPUH, b.perBillionGPUH)
		}
		return cmp.Compare(a.GPUs, b.GPUs)
	})
	return out
}

func cheapestOn(m Model, j Job, t CheapestTarget, kinds []Finetune, maxGPUs int, so SearchOptions, o CheapestOptions) CheapestOption {
	g := t.GPU
	opt := CheapestOption{GPU: g.Name}
	price, known := t.Price, t.Priced
	slow := ""
	if t.MaxGPUs > 0 {
		maxGPUs = min(maxGPUs, t.MaxGPUs)
	}
	for _, n := range cheapestCounts(g, maxGPUs) {
		c := ClusterOf(g, n)
		for _, f := range kinds {
			jf := j.WithFinetune(f)
			jf.Precision = PrecisionFor(j.Precision, g)
			if r := validate(m, jf, c, Layout{TP: 1, PP: 1, DP: n, MicroBatch: 1}); r != "" && isCapability(jf, c) {
				opt.Why = r
				return opt
			}
			r := Search(m, jf, c, so)
			if r.Plan == nil || !r.Plan.Memory.Fits {
				continue
			}
			e := r.Plan
			tps := e.TokensPerSPerGPU * float64(n)
			hours := 0.0
			if j.Tokens > 0 && tps > 0 {
				hours = j.Tokens / tps / 3600
			}
			if o.TimeLimit > 0 && hours*3600 > o.TimeLimit {
				slow = fmt.Sprintf("%d × %s with %s needs %.1f h, over the %.1f h limit", n, g.Name, f, hours, o.TimeLimit/3600)
				continue
			}
			opt = CheapestOption{GPU: g.Name, GPUs: n, Finetune: f.String(), Fits: true, StepS: e.Time.Step, TokensPerS: tps,
				TrainHours: hours, GPUHours: hours * float64(n), MemoryGiB: e.Memory.PerGPU / gib, CapacityGiB: e.Memory.Capacity / gib,
				Layout: e.Layout.Config(), Limits: limitsOf(e), Plan: e}
			opt.perBillionGPUH = 1e9 / math.Max(tps, 1e-9) / 3600 * float64(n)
			if known {
				opt.priceKnown, opt.PricePerGPUH = true, price
				opt.Cost = opt.GPUHours * price
				if hours == 0 {
					opt.Cost = opt.perBillionGPUH * price // per billion tokens when no --tokens
				}
			}
			return opt
		}
	}
	opt.Why = fmt.Sprintf("nothing fits up to %d GPUs with %s", maxGPUs, kindList(kinds))
	if slow != "" {
		opt.Why = "too slow: " + slow
	}
	return opt
}

func isCapability(j Job, c Cluster) bool { return capabilityReason(j, c, Pins{}) != "" }

func kindList(ks []Finetune) string {
	s := ""
	for i, k := range ks {
		if i > 0 {
			s += ", "
		}
		s += k.String()
	}
	return s
}

// limitsOf names the largest memory part and the largest step part of e.
func limitsOf(e *Evaluation) string {
	ms := e.Memory
	mem := []struct {
		n string
		v float64
	}{{"weights", ms.Weights}, {"activations", ms.Activations}, {"optimizer", ms.Optimizer}, {"gradients", ms.Grads}, {"allowance", ms.Other}}
	bm := mem[0]
	for _, p := range mem[1:] {
		if p.v > bm.v {
			bm = p
		}
	}
	tm := e.Time
	tt := []struct {
		n string
		v float64
	}{{"compute", tm.Compute + tm.Recompute}, {"TP", tm.TPComm}, {"pipeline bubble", tm.PPBubble + tm.PPComm}, {"DP", tm.DPCommExposed},
		{"CP", tm.CPComm}, {"EP", tm.EPComm}, {"offload", tm.Offload}, {"optimizer", tm.Optimizer}}
	bt := tt[0]
	for _, p := range tt[1:] {
		if p.v > bt.v {
			bt = p
		}
	}
	return fmt.Sprintf("memory %.0f%% full, most in %s; step %.0f%% %s", 100*ms.PerGPU/ms.Capacity, bm.n, 100*bt.v/math.Max(tm.Step, 1e-12), bt.n)
}

// GPUCatalog returns the catalog's GPU types (a copy).
func GPUCatalog() []GPU { return slices.Clone(gpuCatalog) }
