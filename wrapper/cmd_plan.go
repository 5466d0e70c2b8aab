package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/trainrun/trainrun/plan"
	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
)

func init() {
	register(&command{name: "plan", short: "choose the parallel layout; predict memory, step time, MFU and time to train", run: runPlan})
}

// planOptions are the `trainrun plan` flags (PRODUCT.md, "`trainrun plan`").
// `trainrun run` takes the same plan flags: it can call AddFlags and build.
type planOptions struct {
	// model
	Model                                   string
	modelNotes                              []string // what a config.json's model leaves out (plan.ParseHFConfigNotes)
	Layers, Hidden, Heads, KVHeads, HeadDim int
	FFN                                     int
	FFNType                                 string
	Vocab, Experts, TopK, MoEFFN, SharedFFN int
	DenseLayers                             int
	TieEmbeddings                           bool
	QLoRA, KVLoRA, QKRopeDim, VHeadDim      int // MLA
	// job
	SeqLen, GlobalBatch int
	Precision           string
	Finetune            string
	Tokens              string
	Stack               string
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
	Place                planPlaceOptions
	Calibration          string             // site calibration directory (calib.go)
	calObs               []plan.Observation // its observations, once read (loadCalibration)
}

// modelFlags are the flags that describe (or override) the model's shape.
var modelFlags = []string{"layers", "hidden", "heads", "kv-heads", "head-dim", "ffn", "ffn-type", "vocab", "experts", "topk", "moe-ffn", "shared-ffn", "dense-layers", "tie-embeddings", "q-lora-rank", "kv-lora-rank", "qk-rope-dim", "v-head-dim"}

// AddFlags registers the plan flags on fs.
func (o *planOptions) AddFlags(fs *pflag.FlagSet) {
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
	fs.BoolVar(&o.TieEmbeddings, "tie-embeddings", false, "input and output embeddings share weights")
	fs.IntVar(&o.KVLoRA, "kv-lora-rank", 0, "multi-head latent attention (DeepSeek-V2/V3, Kimi-K2): KV latent width (0 = no MLA)")
	fs.IntVar(&o.QLoRA, "q-lora-rank", 0, "MLA: query latent width (0 = full-rank queries)")
	fs.IntVar(&o.QKRopeDim, "qk-rope-dim", 0, "MLA: RoPE dimensions per query/key head, besides --head-dim")
	fs.IntVar(&o.VHeadDim, "v-head-dim", 0, "MLA: value dimensions per head (default --head-dim)")

	fs.IntVar(&o.SeqLen, "seq-len", 0, "sequence length (tokens)")
	fs.IntVar(&o.GlobalBatch, "global-batch", 0, "global batch (sequences per optimizer step)")
	fs.StringVar(&o.Precision, "precision", "", "bf16|fp16|fp8; when not given, bf16 (fp16 on GPUs without BF16, such as v100-32gb)")
	fs.StringVar(&o.Finetune, "finetune", "full", "full|lora[:RANK] (lora alone means rank 16)")
	fs.StringVar(&o.Stack, "stack", "megatron-core", "training software the time and memory model assume: megatron-core (Megatron-Core + Transformer Engine), nemo (same, BF16 gradient reduction), megatron-2022 (softmax attention, blocking TP collectives), fsdp[:eager|:compile] (PyTorch FSDP/FSDP2), deepspeed[:zero1|:zero2|:zero3|:pipe], jax (MaxText/PaxML)")
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
	fs.StringVar(&o.Format, "format", "table", "table|json|megatron|deepspeed (ds_config JSON)|torchtitan (command-line overrides)|env|sbatch|hostfile|placement")
	fs.IntVar(&o.Top, "top", plan.DefaultTop, "alternatives to report")
	fs.DurationVar(&o.CkptLead, "ckpt-lead", 10*time.Minute, "sbatch: checkpoint lead before the time limit (added to it, and the --signal time)")
	fs.Float64Var(&o.TimeMargin, "time-margin", 0.10, "sbatch: fraction added to the predicted training time")
	fs.StringVar(&o.Place.Nodelist, "nodelist", "", "hostfile/placement: Slurm node list expression, e.g. 'gpu[001-008]'")
	fs.StringVar(&o.Place.TopologyConf, "topology-conf", "", "hostfile/placement: Slurm topology.conf of the cluster")
	fs.StringVar(&o.Calibration, "calibration", "", "site calibration directory (default: env TRAINRUN_CALIBRATION, else the policy's Calibration=): its observations of past runs correct the predicted step times and their band (trainrun calib); trainrun run also appends its own")
}

func runPlan(ctx context.Context, env *runEnv, args []string) error {
	fs := newFlags("plan", "plan --model NAME|PATH --gpu TYPE --gpus N --seq-len S --global-batch B [flags]", env.stdout)
	var o planOptions
	o.AddFlags(fs)
	var pol planPolicyOptions
	pol.addFlags(fs, env.getenv)
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
	case "table", "json", "megatron", "deepspeed", "torchtitan", "env", "sbatch", "hostfile", "placement":
	default:
		return usageErrorf("--format %q: accepted: table, json, megatron, deepspeed, torchtitan, env, sbatch, hostfile, placement", o.Format)
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
	for _, n := range o.modelNotes {
		fmt.Fprintf(env.stderr, "trainrun: plan: note: %s\n", n)
	}
	if err := pol.apply(env, fs, &o); err != nil {
		return err
	}
	j, err := o.job()
	if err != nil {
		return err
	}
	clusters, err := o.clusters(func(name string) bool { return fs.Changed(name) || name == "nvme-bw" && o.NVMeBW > 0 })
	if err != nil {
		return err
	}
	fix, err := parseFix(o.Fix)
	if err != nil {
		return err
	}
	if err := o.loadCalibration(env.getenv, "", env.stderr); err != nil {
		return err
	}
	so := o.searchOptions(fix)
	if len(clusters) > 1 {
		return planCompare(env, &o, m, j, clusters, so)
	}
	c := clusters[0]
	j.Precision = plan.PrecisionFor(j.Precision, c.GPU)
	r := plan.Search(m, j, c, so)
	if err := o.render(env, m, j, c, r); err != nil {
		return err
	}
	return noFitError(m, j, c, so, r)
}

func (o *planOptions) searchOptions(pins plan.Pins) plan.SearchOptions {
	top := o.Top
	if top == 0 {
		top = -1 // the planner reads 0 as "its default"; --top 0 means none
	}
	return plan.SearchOptions{Pins: pins, TopK: top, AllowCP: o.AllowCP, AllowTPOutsideDomain: o.AllowTPOutsideNVLink, Calibration: o.calObs}
}

// noFitError is nil when r has a plan that fits; otherwise an exitcode.NoFit
// error naming the nearest miss and what would fit (plan.NoFit).
func noFitError(m plan.Model, j plan.Job, c plan.Cluster, so plan.SearchOptions, r plan.Result) error {
	if msg := plan.NoFit(m, j, c, so, r); msg != "" {
		return withCode(noFitCode(r), errors.New(msg))
	}
	return nil
}

// noFitCode tells a layout the rules forbid (exitcode.Layout) and a job the GPU
// cannot run (exitcode.Capability) apart from one that needs more memory
// (exitcode.NoFit): a job script's fix differs.
func noFitCode(r plan.Result) int {
	switch r.Invalid {
	case plan.InvalidLayout:
		return exitcode.Layout
	case plan.InvalidCapability:
		return exitcode.Capability
	}
	return exitcode.NoFit
}

// render writes r in the chosen format. Formats that describe one layout
// print nothing when there is none (the error says why).
func (o *planOptions) render(env *runEnv, m plan.Model, j plan.Job, c plan.Cluster, r plan.Result) error {
	w := env.stdout
	switch o.Format {
	case "table":
		return plan.RenderTable(w, m, j, c, r)
	case "json":
		pins, _ := parseFix(o.Fix) // parsed before: the error was reported
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
		errs = append(errs, noFitError(m, j, g.Cluster, so, g.Result).Error())
		if c := noFitCode(g.Result); code == 0 || c == exitcode.NoFit {
			code = c // no-fit where any type is only short of memory
		}
	}
	return withCode(code, errors.New(strings.Join(errs, "; ")))
}

// model resolves --model (preset or config.json) and the shape flags, which
// override the preset's figures or describe a model on their own.
func (o *planOptions) model(fs *pflag.FlagSet) (plan.Model, error) { return o.modelGiven(fs.Changed) }

// modelGiven is model for a command that has resolved its flags already:
// changed says whether a flag was given.
func (o *planOptions) modelGiven(changed func(name string) bool) (plan.Model, error) {
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
		if m, o.modelNotes, err = plan.ParseHFConfigNotes(f, path); err != nil {
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
	for _, f := range modelFlags {
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

func (o *planOptions) job() (plan.Job, error) {
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
	rank, err := parseFinetune(o.Finetune)
	if err != nil {
		return j, err
	}
	j.LoRARank = rank
	if o.Tokens != "" {
		if j.Tokens, err = parseTokens(o.Tokens); err != nil {
			return j, err
		}
	}
	return j, nil
}

// defaultLoRARank is the rank of a bare --finetune lora (a common choice).
const defaultLoRARank = 16

func parseFinetune(s string) (int, error) {
	switch v := strings.ToLower(strings.TrimSpace(s)); {
	case v == "" || v == "full":
		return 0, nil
	case v == "lora":
		return defaultLoRARank, nil
	case strings.HasPrefix(v, "lora:"):
		r, err := strconv.Atoi(v[len("lora:"):])
		if err != nil || r <= 0 {
			return 0, usageErrorf("--finetune %q: the LoRA rank must be a positive integer, e.g. lora:16", s)
		}
		return r, nil
	}
	return 0, usageErrorf("--finetune %q: accepted: full, lora, lora:RANK", s)
}

// parseTokens reads 1e12, 2T, 300B, 1.5t, 500M, 4096K or a plain integer.
func parseTokens(s string) (float64, error) {
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

// clusters builds one Cluster per --gpu entry ("h100-sxm" with --gpus, or
// "h100-sxm:64,a100-80gb:128"). changed says which flags were given (the
// flag set's Changed; trainrun run adds gpus-per-node, which the allocation
// gives).
func (o *planOptions) clusters(changed func(name string) bool) ([]plan.Cluster, error) {
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
