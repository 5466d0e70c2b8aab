// Package planflags holds trainrun plan's flags, which the commands that
// plan (plan, run, submit, sweep, branches, env, partitions) share, and what
// turns them into the planner's inputs: the model, the job, the clusters, the
// search options and the --fix pins. The errors carry the usage exit code.
package planflags

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/trainrun/trainrun/plan"
	"github.com/trainrun/trainrun/plan/policy"
	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
)

// Options are the `trainrun plan` flags (PRODUCT.md, "`trainrun plan`"),
// which run, submit, sweep, env and partitions take too: AddFlags registers
// them, and ModelGiven, Job, Clusters and SearchOptions build the planner's
// inputs from them.
type Options struct {
	// model
	Model                                   string
	ModelNotes                              []string // what a config.json's model leaves out (plan.ParseHFConfigNotes)
	Layers, Hidden, Heads, KVHeads, HeadDim int
	FFN                                     int
	FFNType                                 string
	Vocab, Experts, TopK, MoEFFN, SharedFFN int
	DenseLayers                             int
	MTPLayers                               int // multi-token prediction (DeepSeek-V3: 1)
	TieEmbeddings                           bool
	QLoRA, KVLoRA, QKRopeDim, VHeadDim      int // MLA
	// job
	SeqLen, GlobalBatch int
	Precision           string
	Finetune            string
	Tokens              string
	Stack               string
	// how the MoE and FP8 layers run (plan/moe.go, plan/fp8.go)
	FP8Recipe     string
	MoEDispatcher string
	MoEA2AOverlap bool
	MoECapacity   float64
	// cluster
	GPU                             string
	GPUs, GPUsPerNode, NVLinkDomain int
	InterNodeBW, HostMemoryGB       float64
	NVMeBW                          float64 // GB/s per node
	MemoryMargin                    float64 // per cent of GPU memory to leave free; -1: the policy's, else plan's default
	// search and output
	Fix                  string
	AllowCP              bool
	AllowTPOutsideNVLink bool
	Format               string
	Top                  int
	CkptLead             time.Duration
	TimeMargin           float64
	Place                PlaceOptions
	Calibration          string             // site calibration directory (calib.go)
	Observations         []plan.Observation // its observations, once read (wrapper's loadCalibration)
}

// PlaceOptions are the placement inputs of `trainrun plan` (--nodelist and
// --topology-conf).
type PlaceOptions struct {
	Nodelist, TopologyConf string
}

// ModelFlags are the flags that describe (or override) the model's shape.
var ModelFlags = []string{"layers", "hidden", "heads", "kv-heads", "head-dim", "ffn", "ffn-type", "vocab", "experts", "topk", "moe-ffn", "shared-ffn", "dense-layers", "mtp-layers", "tie-embeddings", "q-lora-rank", "kv-lora-rank", "qk-rope-dim", "v-head-dim"}

// AddFlags registers the plan flags on fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Model, "model", "", "model preset (e.g. llama3-70b, mixtral-8x7b) or path of a Hugging Face config.json (or its directory)")
	fs.IntVar(&o.Layers, "layers", 0, "transformer layers (overrides the preset)")
	fs.IntVar(&o.Hidden, "hidden", 0, "hidden size")
	fs.IntVar(&o.Heads, "heads", 0, "attention (query) heads")
	fs.IntVar(&o.KVHeads, "kv-heads", 0, "key/value heads (default: --heads; fewer for GQA)")
	fs.IntVar(&o.HeadDim, "head-dim", 0, "per-head dimension (default: hidden/heads)")
	fs.IntVar(&o.FFN, "ffn", 0, "MLP hidden size (default 4*hidden, except swiglu)")
	fs.StringVar(&o.FFNType, "ffn-type", "", "MLP type: gelu|swiglu|geglu|relu|squared-relu (default gelu)")
	fs.IntVar(&o.Vocab, "vocab", 0, "vocabulary size")
	fs.IntVar(&o.Experts, "experts", 0, "routed experts per MoE layer (0 = dense)")
	fs.IntVar(&o.TopK, "topk", 0, "experts per token")
	fs.IntVar(&o.MoEFFN, "moe-ffn", 0, "each expert's MLP hidden size (default --ffn)")
	fs.IntVar(&o.SharedFFN, "shared-ffn", 0, "shared-expert MLP hidden size (0 = none)")
	fs.IntVar(&o.DenseLayers, "dense-layers", 0, "leading dense layers of a MoE model")
	fs.IntVar(&o.MTPLayers, "mtp-layers", 0, "multi-token-prediction layers trained beside the model (DeepSeek-V3: 1; the presets: 0)")
	fs.BoolVar(&o.TieEmbeddings, "tie-embeddings", false, "input and output embeddings share weights")
	fs.IntVar(&o.KVLoRA, "kv-lora-rank", 0, "multi-head latent attention (DeepSeek-V2/V3, Kimi-K2): KV latent width (0 = no MLA)")
	fs.IntVar(&o.QLoRA, "q-lora-rank", 0, "MLA: query latent width (0 = full-rank queries)")
	fs.IntVar(&o.QKRopeDim, "qk-rope-dim", 0, "MLA: RoPE dimensions per query/key head, besides --head-dim")
	fs.IntVar(&o.VHeadDim, "v-head-dim", 0, "MLA: value dimensions per head (default --head-dim)")

	fs.IntVar(&o.SeqLen, "seq-len", 0, "sequence length (tokens)")
	fs.IntVar(&o.GlobalBatch, "global-batch", 0, "global batch (sequences per optimizer step)")
	fs.StringVar(&o.Precision, "precision", "", "bf16|fp16|fp8; when not given, bf16 (fp16 on GPUs without BF16, such as v100-32gb)")
	fs.StringVar(&o.Finetune, "finetune", "full", "full|lora[:RANK[:TARGETS]]|qlora[:RANK[:TARGETS]][:adamw8|adamw32]|prefix[:TOKENS]|prompt[:TOKENS]|ia3 (rank 16 and 20 virtual tokens by default; TARGETS: q,k,v,o,gate,up,down, default all linear; lora and qlora take :dropout=P, the LoRA dropout)")
	fs.StringVar(&o.Stack, "stack", "megatron-core", "training software the time and memory model assume: megatron-core (Megatron-Core + Transformer Engine), nemo (same, BF16 gradient reduction), megatron-2022 (softmax attention, blocking TP collectives), fsdp[:eager|:compile] (PyTorch FSDP/FSDP2), deepspeed[:zero1|:zero2|:zero3|:pipe], jax (MaxText/PaxML)")
	fs.StringVar(&o.FP8Recipe, "fp8-recipe", "", "with --precision fp8: delayed|current|blockwise|mxfp8 scaling (default: mxfp8 on Blackwell, else delayed)")
	fs.StringVar(&o.MoEDispatcher, "moe-dispatcher", "", "MoE token dispatcher: alltoall (NCCL, default) or flex (DeepEP/HybridEP: one copy per remote node)")
	fs.BoolVar(&o.MoEA2AOverlap, "moe-a2a-overlap", false, "the EP all-to-all overlaps another micro-batch's compute (Megatron-Core --overlap-moe-expert-parallel-comm, DualPipe)")
	fs.Float64Var(&o.MoECapacity, "moe-capacity", 0, "MoE capacity factor (token dropping, experts padded to capacity); 0 = dropless")
	fs.StringVar(&o.Tokens, "tokens", "", "total training tokens, for time to train and the sbatch time limit (1e12, 2T, 300B)")

	fs.StringVar(&o.GPU, "gpu", "", "GPU type ("+strings.Join(plan.GPUNames(), " ")+"), or a list TYPE:N,TYPE:N to compare")
	fs.IntVar(&o.GPUs, "gpus", 0, "number of GPUs (for --gpu without :N)")
	fs.IntVar(&o.GPUsPerNode, "gpus-per-node", 0, "GPUs per node (default: the GPU type's usual node)")
	fs.IntVar(&o.NVLinkDomain, "nvlink-domain", 0, "GPUs per NVLink domain (default: the node; 72 for gb200)")
	fs.Float64Var(&o.InterNodeBW, "inter-node-bw", 0, "inter-node bandwidth per GPU, GB/s per direction (default: the GPU type's usual fabric)")
	fs.Float64Var(&o.HostMemoryGB, "host-memory", 0, "host memory per node in GB, for offload (default: the GPU type's usual node)")
	fs.Float64Var(&o.NVMeBW, "nvme-bw", 0, "local NVMe bandwidth per node in GB/s, for offload=nvme (ZeRO-Infinity; default: the policy's NVMeBW, else 25)")

	fs.Float64Var(&o.MemoryMargin, "memory-margin", -1, fmt.Sprintf("per cent of GPU memory a plan should leave free; a plan inside it fits but is shown as tight and ranked below plans with headroom up to %.0f %% slower (default: the policy's MemoryMargin=, else %.0f)", 100*plan.TightPenalty, 100*plan.DefaultMemoryMargin))
	fs.StringVar(&o.Fix, "fix", "", "pin values: key=value,... with keys tp pp vpp cp ep etp(expert TP, default tp) dp mbs grad_accum recompute(none|selective|full) zero(0-3) sp(true|false) offload(none|optimizer|params|nvme)")
	fs.BoolVar(&o.AllowCP, "allow-cp", false, "consider context parallelism (pays at long sequences; a pinned cp is always honoured)")
	fs.BoolVar(&o.AllowTPOutsideNVLink, "allow-tp-outside-nvlink", false, "let tensor-parallel groups span NVLink domains")
	fs.StringVar(&o.Format, "format", "table", "table|json|megatron|deepspeed (ds_config JSON)|torchtitan (command-line overrides)|peft (Hugging Face PEFT/bitsandbytes/TrainingArguments/accelerate JSON)|env|sbatch|hostfile|placement")
	fs.IntVar(&o.Top, "top", plan.DefaultTop, "alternatives to report")
	fs.DurationVar(&o.CkptLead, "ckpt-lead", 10*time.Minute, "sbatch: checkpoint lead before the time limit (added to it, and the --signal time)")
	fs.Float64Var(&o.TimeMargin, "time-margin", 0.10, "sbatch: fraction added to the predicted training time")
	fs.StringVar(&o.Place.Nodelist, "nodelist", "", "hostfile/placement: Slurm node list expression, e.g. 'gpu[001-008]'")
	fs.StringVar(&o.Place.TopologyConf, "topology-conf", "", "hostfile/placement: Slurm topology.conf of the cluster")
	fs.StringVar(&o.Calibration, "calibration", "", "site calibration directory (default: env TRAINRUN_CALIBRATION, else the policy's Calibration=): its observations of past runs correct the predicted step times and their band (trainrun calib); trainrun run also appends its own")
}

func (o *Options) SearchOptions(pins plan.Pins) plan.SearchOptions {
	top := o.Top
	if top == 0 {
		top = -1 // the planner reads 0 as "its default"; --top 0 means none
	}
	return plan.SearchOptions{Pins: pins, TopK: top, AllowCP: o.AllowCP, AllowTPOutsideDomain: o.AllowTPOutsideNVLink, Calibration: o.Observations}
}

// NoFitError is nil when r has a plan that fits; otherwise an exitcode.NoFit
// error naming the nearest miss and what would fit (plan.NoFit).
func NoFitError(m plan.Model, j plan.Job, c plan.Cluster, so plan.SearchOptions, r plan.Result) error {
	if msg := plan.NoFit(m, j, c, so, r); msg != "" {
		return withCode(NoFitCode(r), errors.New(msg))
	}
	return nil
}

// NoFitCode tells a layout the rules forbid (exitcode.Layout) and a job the GPU
// cannot run (exitcode.Capability) apart from one that needs more memory
// (exitcode.NoFit): a job script's fix differs.
func NoFitCode(r plan.Result) int {
	switch r.Invalid {
	case plan.InvalidLayout:
		return exitcode.Layout
	case plan.InvalidCapability:
		return exitcode.Capability
	}
	return exitcode.NoFit
}

// ModelGiven is the model for a command that has resolved its flags already:
// changed says whether a flag was given.
func (o *Options) ModelGiven(changed func(name string) bool) (plan.Model, error) {
	var m plan.Model
	switch {
	case o.Model == "":
		var missing []string
		for _, f := range []string{"layers", "hidden", "heads", "vocab"} {
			if !changed(f) {
				missing = append(missing, "--"+f)
			}
		}
		if len(missing) > 0 {
			return m, usageErrorf("no model: give --model NAME|PATH (presets: %s) or the shape with --layers --hidden --heads --vocab (missing %s)",
				strings.Join(plan.ModelNames(), ", "), strings.Join(missing, " "))
		}
		m.Name = "custom"
		m.FFNType = plan.FFNGelu
	case looksLikePath(o.Model):
		path := o.Model
		if st, err := os.Stat(path); err == nil && st.IsDir() {
			path = filepath.Join(path, "config.json")
		}
		f, err := os.Open(path)
		if err != nil {
			return m, usageErrorf("--model %s: %v", o.Model, err)
		}
		defer f.Close()
		if m, o.ModelNotes, err = plan.ParseHFConfigNotes(f, path); err != nil {
			return m, withCode(exitcode.Usage, err)
		}
		m.Name = modelNameOfPath(path)
	default:
		var err error
		if m, err = plan.LookupModel(o.Model); err != nil {
			return m, withCode(exitcode.Usage, fmt.Errorf("--model: %w", err))
		}
	}
	set := func(name string, dst *int, v int) {
		if changed(name) {
			*dst = v
		}
	}
	set("layers", &m.Layers, o.Layers)
	set("hidden", &m.Hidden, o.Hidden)
	set("heads", &m.Heads, o.Heads)
	set("kv-heads", &m.KVHeads, o.KVHeads)
	set("head-dim", &m.HeadDim, o.HeadDim)
	set("ffn", &m.FFN, o.FFN)
	set("vocab", &m.Vocab, o.Vocab)
	set("experts", &m.Experts, o.Experts)
	set("topk", &m.TopK, o.TopK)
	set("moe-ffn", &m.MoEFFN, o.MoEFFN)
	set("shared-ffn", &m.SharedFFN, o.SharedFFN)
	set("dense-layers", &m.DenseLayers, o.DenseLayers)
	set("mtp-layers", &m.MTPLayers, o.MTPLayers)
	set("kv-lora-rank", &m.KVLoRA, o.KVLoRA)
	set("q-lora-rank", &m.QLoRA, o.QLoRA)
	set("qk-rope-dim", &m.QKRopeDim, o.QKRopeDim)
	set("v-head-dim", &m.VHeadDim, o.VHeadDim)
	if changed("tie-embeddings") {
		m.TiedEmbeddings = o.TieEmbeddings
	}
	if changed("ffn-type") {
		m.FFNType = plan.FFNType(strings.ToLower(o.FFNType))
	}
	overridden := false
	for _, f := range ModelFlags {
		overridden = overridden || changed(f)
	}
	if overridden && o.Model != "" {
		m.Name += " (modified)"
	}
	// Defaults for what the flags left out.
	if m.KVHeads == 0 {
		m.KVHeads = m.Heads
	}
	if changed("hidden") || changed("heads") {
		if !changed("head-dim") && m.Heads > 0 {
			if m.Hidden%m.Heads != 0 {
				return m, usageErrorf("--heads %d does not divide --hidden %d: give --head-dim", m.Heads, m.Hidden)
			}
			m.HeadDim = m.Hidden / m.Heads
		}
	}
	if m.Experts > 0 && m.MoEFFN == 0 {
		m.MoEFFN = m.FFN
	}
	if allMoE := m.Experts > 0 && m.DenseLayers == 0 && m.MoEFFN > 0; m.FFN == 0 && !allMoE { // every layer MoE: no dense MLP
		if m.FFNType == plan.FFNSwiGLU || m.FFNType == plan.FFNGeGLU {
			return m, usageErrorf("--ffn is required with --ffn-type %s (its width is not a fixed multiple of --hidden); a MoE model whose every layer is MoE needs --moe-ffn instead", m.FFNType)
		}
		m.FFN = 4 * m.Hidden
		if m.Experts > 0 && m.MoEFFN > 0 && !changed("ffn") {
			m.FFN = m.MoEFFN
		}
	}
	if err := plan.ValidateModel(m); err != nil {
		return m, usageErrorf("model %s: %v", m.Name, err)
	}
	return m, nil
}

// modelNameOfPath names a model read from a file: the directory of a
// config.json (a checkout of the HF repository, e.g. Meta-Llama-3-70B), else
// the file name without .json.
func modelNameOfPath(path string) string {
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	if filepath.Base(path) == "config.json" {
		if d := filepath.Base(filepath.Dir(path)); d != "/" && d != "." {
			return d
		}
	}
	return strings.TrimSuffix(filepath.Base(path), ".json")
}

// looksLikePath: a preset name never contains a slash or ends in .json.
func looksLikePath(s string) bool {
	if strings.ContainsRune(s, os.PathSeparator) || strings.HasSuffix(strings.ToLower(s), ".json") {
		return true
	}
	_, err := os.Stat(s)
	return err == nil
}

// Job is the job the flags describe: sequence, batch, precision, stack,
// fine-tuning and tokens, checked.
func (o *Options) Job() (plan.Job, error) {
	j := plan.Job{SeqLen: o.SeqLen, GlobalBatch: o.GlobalBatch, Precision: plan.Precision(strings.ToLower(o.Precision))}
	if j.SeqLen <= 0 {
		return j, usageErrorf("--seq-len %d: give the training sequence length (e.g. --seq-len 8192)", o.SeqLen)
	}
	if j.GlobalBatch <= 0 {
		return j, usageErrorf("--global-batch %d: give the sequences per optimizer step (e.g. --global-batch 512)", o.GlobalBatch)
	}
	switch j.Precision {
	case "", plan.BF16, plan.FP16, plan.FP8: // "": the GPU's 16-bit format (plan.PrecisionFor)
	default:
		return j, usageErrorf("--precision %q: accepted: bf16, fp16, fp8", o.Precision)
	}
	st, err := plan.ParseStack(o.Stack)
	if err != nil {
		return j, usageErrorf("--%v", err)
	}
	j.Stack = st
	if err := o.moeJob(&j); err != nil {
		return j, err
	}
	ft, err := ParseFinetune(o.Finetune)
	if err != nil {
		return j, err
	}
	j = j.WithFinetune(ft)
	if o.Tokens != "" {
		if j.Tokens, err = ParseTokens(o.Tokens); err != nil {
			return j, err
		}
	}
	return j, nil
}

// ParseFinetune reads --finetune (plan.ParseFinetuneSpec); a bad spec is a
// usage error naming the flag.
func ParseFinetune(s string) (plan.Finetune, error) {
	f, err := plan.ParseFinetuneSpec(s)
	if err != nil {
		return f, usageErrorf("--%v", err)
	}
	return f, nil
}

// moeJob sets how the job's FP8 and MoE layers run, from their flags.
func (o *Options) moeJob(j *plan.Job) error {
	j.FP8Recipe = plan.FP8Recipe(strings.ToLower(o.FP8Recipe))
	switch j.FP8Recipe {
	case "", plan.FP8Delayed, plan.FP8Current, plan.FP8Blockwise, plan.FP8MX:
	default:
		return usageErrorf("--fp8-recipe %q: accepted: delayed, current, blockwise, mxfp8", o.FP8Recipe)
	}
	if j.FP8Recipe != "" && j.Precision != plan.FP8 {
		return usageErrorf("--fp8-recipe %s needs --precision fp8", o.FP8Recipe)
	}
	j.MoEDispatcher = strings.ToLower(o.MoEDispatcher)
	if j.MoEDispatcher != "" && j.MoEDispatcher != "alltoall" && j.MoEDispatcher != "flex" {
		return usageErrorf("--moe-dispatcher %q: accepted: alltoall, flex", o.MoEDispatcher)
	}
	if o.MoECapacity < 0 {
		return usageErrorf("--moe-capacity %g: give a capacity factor ≥ 1 (e.g. 1.25), or 0 for dropless", o.MoECapacity)
	}
	j.MoECapacity, j.MoEA2AOverlap = o.MoECapacity, o.MoEA2AOverlap
	return nil
}

// ParseTokens reads 1e12, 2T, 300B, 1.5t, 500M, 4096K or a plain integer.
func ParseTokens(s string) (float64, error) {
	t := strings.TrimSpace(s)
	mult := 1.0
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'k', 'K':
			mult = 1e3
		case 'm', 'M':
			mult = 1e6
		case 'b', 'B', 'g', 'G':
			mult = 1e9
		case 't', 'T':
			mult = 1e12
		}
		if mult != 1 {
			t = t[:n-1]
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || v <= 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, usageErrorf("--tokens %q: want a positive count such as 1e12, 2T, 300B or 500M", s)
	}
	return v * mult, nil
}

// Clusters builds one Cluster per --gpu entry ("h100-sxm" with --gpus, or
// "h100-sxm:64,a100-80gb:128"). changed says which flags were given (the
// flag set's Changed; trainrun run adds gpus-per-node, which the allocation
// gives).
func (o *Options) Clusters(changed func(name string) bool) ([]plan.Cluster, error) {
	if o.GPU == "" {
		return nil, usageErrorf("no GPU type: give --gpu TYPE --gpus N (types: %s)", strings.Join(plan.GPUNames(), " "))
	}
	var out []plan.Cluster
	for _, item := range strings.Split(o.GPU, ",") {
		item = strings.TrimSpace(item)
		name, count, hasCount := strings.Cut(item, ":")
		n := o.GPUs
		if hasCount {
			v, err := strconv.Atoi(count)
			if err != nil || v <= 0 {
				return nil, usageErrorf("--gpu %q: the count after ':' must be a positive integer, e.g. h100-sxm:64", item)
			}
			n = v
		}
		if n <= 0 {
			return nil, usageErrorf("--gpu %s: how many? give --gpus N or --gpu %s:N", name, name)
		}
		g, err := plan.LookupGPU(name)
		if err != nil {
			return nil, withCode(exitcode.Usage, fmt.Errorf("--gpu: %w", err))
		}
		perNode := 0 // the type's usual node
		if changed("gpus-per-node") {
			if o.GPUsPerNode <= 0 {
				return nil, usageErrorf("--gpus-per-node %d: must be positive", o.GPUsPerNode)
			}
			perNode = o.GPUsPerNode
			if n > perNode && n%perNode != 0 {
				return nil, usageErrorf("--gpus %d is not a whole number of %d-GPU nodes (--gpus-per-node %d): give --gpus %d or %d", n, perNode, perNode, n/perNode*perNode, (n/perNode+1)*perNode)
			}
		}
		c := plan.ClusterFor(g, n, perNode)
		if changed("nvlink-domain") {
			if o.NVLinkDomain <= 0 {
				return nil, usageErrorf("--nvlink-domain %d: must be positive (1 = no NVLink)", o.NVLinkDomain)
			}
			c.NVLinkDomain = o.NVLinkDomain
		}
		if changed("inter-node-bw") {
			if o.InterNodeBW <= 0 {
				return nil, usageErrorf("--inter-node-bw %g: must be positive (GB/s per GPU per direction)", o.InterNodeBW)
			}
			c.InterNode = o.InterNodeBW * 1e9
		}
		if changed("host-memory") {
			if o.HostMemoryGB <= 0 {
				return nil, usageErrorf("--host-memory %g: must be positive (GB per node)", o.HostMemoryGB)
			}
			c.HostMemory = o.HostMemoryGB * 1e9
		}
		if changed("nvme-bw") {
			if o.NVMeBW <= 0 {
				return nil, usageErrorf("--nvme-bw %g: must be positive (GB/s per node)", o.NVMeBW)
			}
			c.NVMeBW = o.NVMeBW * 1e9
		}
		switch {
		case o.MemoryMargin == 0:
			c.MemoryMargin = -1 // none
		case o.MemoryMargin > 0 && o.MemoryMargin <= 50:
			c.MemoryMargin = o.MemoryMargin / 100
		case o.MemoryMargin > 50 || o.MemoryMargin < 0 && o.MemoryMargin != -1:
			return nil, usageErrorf("--memory-margin %g: give a percentage from 0 to 50 (e.g. 5)", o.MemoryMargin)
		}
		out = append(out, c)
	}
	return out, nil
}

// PolicyMemoryMargin makes the partition's MemoryMargin= the default of
// --memory-margin (called with NVMeBW's, on every path that reads a policy).
func (o *Options) PolicyMemoryMargin(st policy.Settings) {
	if o.MemoryMargin == -1 && st.MemoryMargin.Source.Kind != policy.FromDefault {
		o.MemoryMargin = 100 * st.MemoryMargin.Value
	}
}

// PolicyNVMeBW makes the partition's NVMeBW (GB/s per node) the default of
// --nvme-bw; o.NVMeBW > 0 afterwards says that a bandwidth was given.
func (o *Options) PolicyNVMeBW(flagGiven bool, st policy.Settings) {
	if !flagGiven && st.NVMeBW.Value > 0 {
		o.NVMeBW = st.NVMeBW.Value
	}
	o.PolicyMemoryMargin(st)
}

func withCode(code int, err error) error { return exitcode.With(code, err) }

func usageErrorf(format string, a ...any) error {
	return exitcode.With(exitcode.Usage, fmt.Errorf(format, a...))
}
