package plan

import (
	"fmt"
	"io"
	"strconv"
	"strings"
)

// MegatronVersion is the Megatron-LM range the megatron format is written
// for and checked against (test/frameworks/megatron.sh runs Megatron-LM's
// own parse_args, validate_args and TransformerConfig on it): the flag
// names --num-virtual-stages-per-pipeline-rank, --use-megatron-fsdp and
// --ckpt-format fsdp_dtensor, --use-precision-aware-optimizer for
// --optimizer-cpu-offload and the MLA flags exist in that range.
const MegatronVersion = "Megatron-Core 0.19 to 0.20 (checked at core_v0.19.0 5be96267 and main d98e8a64, 2026-08-22)"

// MegatronError is what the megatron format cannot express: Megatron-LM
// would train something else than the plan (all weights instead of LoRA
// adapters, parameters on the GPU instead of offloaded). Instead names what
// to use.
type MegatronError struct {
	What, Instead string
}

func (e *MegatronError) Error() string {
	return fmt.Sprintf("the megatron format cannot express %s: %s", e.What, e.Instead)
}

// MegatronArgs returns the Megatron-LM flags (megatron/training/arguments.py,
// MegatronVersion) that build the planned model with the plan's layout, one
// argv element each, for `plan --format megatron` and the launcher's
// {megatron_args}: the layout (MegatronLayoutArgs) followed by the model.
// Only data, tokenizer and schedule flags stay the user's. An element
// Megatron-LM cannot express is a *MegatronError.
func MegatronArgs(m Model, j Job, e Evaluation) ([]string, error) {
	if f := FinetuneOf(j); f.Frozen() {
		return nil, &MegatronError{f.Label() + " (Megatron-LM core trains every weight)",
			"run it through NeMo / Megatron-Bridge PEFT, or Hugging Face PEFT (--format peft), with this layout's parallel sizes, or plan with --finetune full"}
	}
	a := megatronArgv{}
	if err := a.layout(&m, j, e.Layout); err != nil {
		return nil, err
	}
	if err := a.model(m.Arch(), j); err != nil {
		return nil, err
	}
	return a, nil
}

// MegatronLayoutArgs are the layout's flags alone, for a run whose layout is
// pinned without a model (`trainrun run --fix`): the same flags MegatronArgs
// gives for the layout, less the ones that need the model's layer count
// (an uneven pipeline split) and shape. j.GlobalBatch 0 is mbs·dp·grad_accum.
func MegatronLayoutArgs(l Layout, j Job) ([]string, error) {
	a := megatronArgv{}
	if err := a.layout(nil, j, l); err != nil {
		return nil, err
	}
	return a, nil
}

// megatronArgv is MegatronArgs' argv, built by group of flags.
type megatronArgv []string

func (a *megatronArgv) add(flag string, v ...any) {
	*a = append(*a, flag)
	for _, x := range v {
		switch x := x.(type) {
		case float64:
			*a = append(*a, strconv.FormatFloat(x, 'g', -1, 64))
		default:
			*a = append(*a, fmt.Sprint(x))
		}
	}
}

// layout: every degree, the batch, recompute, sharding, offload, overlaps
// and precision. m is nil without a model.
func (a *megatronArgv) layout(m *Model, j Job, l Layout) error {
	l = normalizeLayout(l)
	if l.Offload == "params" || l.Offload == "nvme" {
		return &MegatronError{fmt.Sprintf("offload=%s (Megatron-LM keeps parameters on the GPU; it offloads only the optimizer)", l.Offload),
			"use DeepSpeed ZeRO-3 offload (ZeRO-Infinity for nvme) with --stack deepspeed:zero3, or plan with --fix offload=optimizer|none"}
	}
	a.add("--tensor-model-parallel-size", l.TP)
	a.add("--pipeline-model-parallel-size", l.PP)
	if err := a.pipelineSplit(m, l); err != nil {
		return err
	}
	a.add("--context-parallel-size", l.CP)
	if l.EP > 1 || m != nil && m.Experts > 0 {
		a.add("--expert-model-parallel-size", l.EP)
	}
	if l.ETP > 0 {
		a.add("--expert-tensor-parallel-size", l.ETP)
	}
	if l.SP && l.TP > 1 {
		a.add("--sequence-parallel")
	}
	gb := j.GlobalBatch
	if gb <= 0 {
		gb = l.MicroBatch * l.DP * l.GradAccum
	}
	a.add("--micro-batch-size", l.MicroBatch)
	a.add("--global-batch-size", gb)
	a.recompute(l)
	a.optimizer(j, l)
	return nil
}

// pipelineSplit: the layers of each stage, the way the planner's memory
// model splits them (shape.splitLayers): even; the embedding and the loss
// counted as one layer each when that makes it even (Megatron's
// --account-for-embedding/loss-in-pipeline-split); else, without VPP, a
// heavier first stage (--decoder-first/last-pipeline-num-layers). VPP is
// --num-virtual-stages-per-pipeline-rank: Megatron refuses
// --num-layers-per-virtual-pipeline-stage beside an uneven split
// (arguments.py validate_args, "please use --num-virtual-stages-per-pipeline-rank").
func (a *megatronArgv) pipelineSplit(m *Model, l Layout) error {
	if l.PP > 1 && m != nil {
		L, pv := m.Layers, l.PP*l.VPP
		switch {
		case L%pv == 0:
		case (L+2)%pv == 0:
			a.add("--account-for-embedding-in-pipeline-split")
			a.add("--account-for-loss-in-pipeline-split")
		case l.VPP > 1:
			// The layout names every virtual stage (and so the VPP): no
			// --num-virtual-stages-per-pipeline-rank beside it.
			a.add("--pipeline-model-parallel-layout", pipelineLayout(L, l.PP, l.VPP, m.MTPLayers))
			return nil
		default:
			first, _, last, ok := unevenSplit(L, l.PP)
			if !ok {
				return &MegatronError{fmt.Sprintf("%d layers over pp=%d with no stage above %d layers", L, l.PP, (L+l.PP-1)/l.PP),
					"pin another pp, or give Megatron --pipeline-model-parallel-layout by hand"}
			}
			a.add("--decoder-first-pipeline-num-layers", first)
			a.add("--decoder-last-pipeline-num-layers", last)
		}
	}
	if l.VPP > 1 && l.PP > 1 {
		a.add("--num-virtual-stages-per-pipeline-rank", l.VPP)
	}
	return nil
}

// recompute: selective (attention core), or full with the layers the memory
// model recomputes.
func (a *megatronArgv) recompute(l Layout) {
	switch l.Recompute {
	case "selective":
		a.add("--recompute-granularity", "selective")
	case "full":
		a.add("--recompute-granularity", "full")
		if l.RecomputeLayers > 0 {
			// The first N layers of each model chunk keep only their input;
			// the rest keep all activations (the planner's least that fits).
			a.add("--recompute-method", "block")
			a.add("--recompute-num-layers", l.RecomputeLayers)
		} else {
			// Every layer keeps only its input: the 2·s·b·h per layer of
			// Korthikanti et al. 2022 Table 2 that the memory model assumes.
			a.add("--recompute-method", "uniform")
			a.add("--recompute-num-layers", 1)
		}
	}
}

// optimizer: sharding (ZeRO 1 as Megatron's distributed optimizer, 2 and 3
// as Megatron-FSDP, which requires --ckpt-format fsdp_dtensor:
// arguments.py "Megatron-FSDP requires the `fsdp_dtensor` checkpointing
// format"), overlap, optimizer offload (which requires
// --use-precision-aware-optimizer) and precision.
func (a *megatronArgv) optimizer(j Job, l Layout) {
	switch l.Zero {
	case 1:
		a.add("--use-distributed-optimizer")
	case 2, 3:
		strategy := "optim_grads"
		if l.Zero == 3 {
			strategy = "optim_grads_params"
		}
		a.add("--use-distributed-optimizer") // Megatron-FSDP v1 runs on it
		a.add("--use-megatron-fsdp")
		a.add("--data-parallel-sharding-strategy", strategy)
		a.add("--ckpt-format", "fsdp_dtensor")
	}
	if l.DP*l.CP > 1 {
		// The time model hides the DP reduction behind backward: that needs these.
		a.add("--overlap-grad-reduce")
		if l.Zero >= 1 {
			a.add("--overlap-param-gather")
		}
	}
	if l.Offload == "optimizer" {
		a.add("--optimizer-cpu-offload")
		a.add("--optimizer-offload-fraction", "1.0")
		a.add("--use-precision-aware-optimizer")
	}
	switch j.Precision {
	case FP16:
		a.add("--fp16")
	case FP8:
		// FP8 GEMMs through Transformer Engine (E4M3 forward, E5M2
		// gradients, the job's scaling recipe: fp8.go); weights and the
		// rest stay BF16. Megatron calls current scaling "tensorwise".
		a.add("--bf16")
		a.add("--fp8-format", "hybrid")
		a.add("--fp8-recipe", map[FP8Recipe]string{FP8Delayed: "delayed", FP8Current: "tensorwise", FP8Blockwise: "blockwise", FP8MX: "mxfp8"}[fp8Recipe(j, GPU{})])
	default:
		a.add("--bf16")
	}
}

// model: the sequence and the model (m with Arch's details filled in).
func (a *megatronArgv) model(m Model, j Job) error {
	a.add("--seq-length", j.SeqLen)
	a.add("--max-position-embeddings", j.SeqLen)
	a.add("--num-layers", m.Layers)
	a.add("--hidden-size", m.Hidden)
	a.add("--num-attention-heads", m.Heads)
	a.add("--ffn-hidden-size", m.FFN)
	a.add("--vocab-size", m.Vocab)
	if !m.TiedEmbeddings {
		a.add("--untie-embeddings-and-output-weights")
	}
	a.attention(m)
	if err := a.position(m); err != nil {
		return err
	}
	if err := a.mlp(m); err != nil {
		return err
	}
	a.moe(m, j)
	return nil
}

// attention: grouped-query or multi-latent attention, normalisation, biases.
func (a *megatronArgv) attention(m Model) {
	if m.KVLoRA > 0 {
		// Megatron refuses --group-query-attention beside MLA (validate_args).
		a.add("--multi-latent-attention")
		if m.QLoRA > 0 {
			a.add("--q-lora-rank", m.QLoRA)
		}
		a.add("--kv-lora-rank", m.KVLoRA)
		a.add("--qk-head-dim", m.headDim())
		a.add("--qk-pos-emb-head-dim", m.QKRopeDim)
		a.add("--v-head-dim", m.VHeadDim)
	} else {
		if m.HeadDim > 0 && m.HeadDim*m.Heads != m.Hidden {
			a.add("--kv-channels", m.HeadDim)
		}
		if m.KVHeads > 0 && m.KVHeads < m.Heads {
			a.add("--group-query-attention")
			a.add("--num-query-groups", m.KVHeads)
		}
	}
	switch m.Norm {
	case NormRMS:
		a.add("--normalization", "RMSNorm")
	case NormLayer1P:
		a.add("--normalization", "LayerNorm")
		a.add("--apply-layernorm-1p")
	default:
		a.add("--normalization", "LayerNorm")
	}
	a.add("--norm-epsilon", m.NormEps)
	if m.QKNorm {
		a.add("--qk-layernorm") // per head, of --normalization's kind
	}
	switch m.Bias {
	case BiasNone:
		a.add("--disable-bias-linear")
	case BiasQKV:
		a.add("--disable-bias-linear")
		a.add("--add-qkv-bias")
	}
}

// position: RoPE (base, partial rotation, Llama-3.1 scaling; YaRN with MLA)
// or learned absolute embeddings. Megatron-LM core has no ALiBi.
func (a *megatronArgv) position(m Model) error {
	switch m.Position {
	case PositionLearned:
		a.add("--position-embedding-type", "learned_absolute")
	case PositionRoPE:
		a.add("--position-embedding-type", "rope")
		a.add("--rotary-base", int64(m.RopeTheta))
		if m.RotaryPercent != 1 {
			a.add("--rotary-percent", m.RotaryPercent)
		}
		if m.RopeScaling > 0 {
			if m.KVLoRA > 0 {
				a.add("--rotary-scaling-factor", m.RopeScaling) // MLA's YaRN factor
			} else {
				a.add("--use-rope-scaling")
				a.add("--rope-scaling-factor", m.RopeScaling)
			}
		}
	default:
		return &MegatronError{fmt.Sprintf("position=%s (Megatron-LM core has no ALiBi)", m.Position),
			"train it with Megatron-DeepSpeed, which has ALiBi, and plan it with --stack deepspeed"}
	}
	return nil
}

// mlp: the activation. Megatron-LM's arguments have SwiGLU, squared ReLU
// and GELU (the default); not a GELU-gated or a plain ReLU MLP.
func (a *megatronArgv) mlp(m Model) error {
	switch m.FFNType {
	case FFNSwiGLU:
		a.add("--swiglu")
	case FFNSquaredReLU:
		a.add("--squared-relu")
	case FFNGelu:
	case FFNGeGLU:
		return &MegatronError{"ffn_type=geglu (Megatron-LM's arguments have --swiglu and --quick-geglu, the sigmoid approximation, not GELU-gated)",
			"set gated_linear_unit with activation_func gelu in a Megatron-Bridge / NeMo model config"}
	default:
		return &MegatronError{fmt.Sprintf("ffn_type=%s (Megatron-LM's arguments have no plain ReLU MLP)", m.FFNType),
			"set activation_func in a Megatron-Bridge / NeMo model config"}
	}
	return nil
}

// moe: experts, routing, shared experts, the dense leading layers,
// grouped GEMM and the all-to-all dispatcher.
func (a *megatronArgv) moe(m Model, j Job) {
	if m.MTPLayers > 0 {
		a.add("--mtp-num-layers", m.MTPLayers)
	}
	if m.Experts == 0 {
		return
	}
	a.add("--num-experts", m.Experts)
	a.add("--moe-router-topk", m.TopK)
	a.add("--moe-ffn-hidden-size", m.MoEFFN)
	if m.SharedFFN > 0 {
		a.add("--moe-shared-expert-intermediate-size", m.SharedFFN)
	}
	if m.DenseLayers > 0 {
		a.add("--moe-layer-freq", fmt.Sprintf("([0]*%d+[1]*%d)", m.DenseLayers, m.Layers-m.DenseLayers))
	}
	if m.Router == RouterSigmoid {
		a.add("--moe-router-score-function", "sigmoid")
		a.add("--moe-router-enable-expert-bias")
	}
	if m.RouterGroups > 1 {
		a.add("--moe-router-num-groups", m.RouterGroups)
		a.add("--moe-router-group-topk", m.RouterGroupTopK)
	}
	if m.RouterScale > 0 {
		a.add("--moe-router-topk-scaling-factor", m.RouterScale)
	}
	a.add("--moe-grouped-gemm")
	if j.MoEDispatcher == "flex" {
		a.add("--moe-token-dispatcher-type", "flex")
		a.add("--moe-flex-dispatcher-backend", "deepep")
	} else {
		a.add("--moe-token-dispatcher-type", "alltoall")
	}
	if j.MoEA2AOverlap {
		a.add("--overlap-moe-expert-parallel-comm")
	}
	if j.MoECapacity > 0 {
		a.add("--moe-expert-capacity-factor", j.MoECapacity)
		a.add("--moe-pad-expert-input-to-capacity")
	}
}

// pipelineLayout is Megatron-Core's --pipeline-model-parallel-layout for L
// transformer layers over pp·vpp virtual stages listed in model order
// (virtual stage c runs on pipeline rank c mod pp): E is the embedding, t a
// layer, m a multi-token-prediction layer (on the last stage, before the
// loss, as the time model puts it), L the loss, | a stage boundary. The
// first L mod pv chunks get one layer more, which puts ⌈L/pp⌉ layers on the
// first rank and ⌊L/pp⌋ on the last, as shape.splitLayers assumes.
func pipelineLayout(layers, pp, vpp, mtp int) string {
	pv := pp * vpp
	q, r := layers/pv, layers%pv
	var b strings.Builder
	b.WriteString("E")
	for c := range pv {
		if c > 0 {
			b.WriteString("|")
		}
		n := q
		if c < r {
			n++
		}
		b.WriteString(strings.Repeat("t", n))
	}
	b.WriteString(strings.Repeat("m", max(mtp, 0)) + "L")
	return b.String()
}

// unevenSplit spreads layers over pp stages the way Megatron-LM can express
// it (--decoder-first/last-pipeline-num-layers: the pp−2 middle stages hold
// the same count) without any stage above ceil(layers/pp), the heaviest
// stage the planner's memory model assumes. The last stage (with the output
// layer) gets the smaller half of what the middle leaves. ok is false when
// no such split exists (many stages of two or three layers).
func unevenSplit(layers, pp int) (first, middle, last int, ok bool) {
	c := (layers + pp - 1) / pp
	if pp == 2 {
		return c, 0, layers - c, layers-c >= 1
	}
	for m := c; m >= 1; m-- {
		rem := layers - (pp-2)*m
		if rem >= 2 && rem <= 2*c {
			return rem - rem/2, m, rem / 2, true
		}
	}
	return 0, 0, 0, false
}

// MegatronEnv is the environment Megatron-LM requires of every rank for
// layout l (CUDA_DEVICE_MAX_CONNECTIONS, validate_args): 1 with TP or CP
// outside Megatron-FSDP, so that the TP/CP collectives are queued in order
// behind the GEMMs they overlap with ("Using tensor model parallelism or
// context parallelism require setting ... CUDA_DEVICE_MAX_CONNECTIONS to
// 1"; Blackwell no longer needs it and accepts it); above 1 under
// Megatron-FSDP ("FSDP requires CUDA_DEVICE_MAX_CONNECTIONS > 1 or unset"):
// 32, NeMo's choice. nil for a stack other than Megatron's.
func MegatronEnv(l Layout, st Stack) []RankVar {
	if !MegatronStack(st) {
		return nil
	}
	l = normalizeLayout(l)
	why := "Megatron-LM: "
	switch {
	case l.Zero >= 2:
		return []RankVar{{Key: "CUDA_DEVICE_MAX_CONNECTIONS", Value: "32", KeepUser: true,
			Why: why + "Megatron-FSDP (zero=2/3) refuses 1 and wants parallel streams"}}
	case l.TP > 1 || l.CP > 1:
		return []RankVar{{Key: "CUDA_DEVICE_MAX_CONNECTIONS", Value: "1", KeepUser: true,
			Why: why + "TP or CP needs one hardware queue so collectives keep their order behind the GEMMs"}}
	}
	return nil
}

// MegatronStack says whether st trains with Megatron-LM's arguments
// (megatron-core, nemo, megatron-2022): the stacks whose ranks get
// MegatronEnv and TRAINRUN_MEGATRON_ARGS.
func MegatronStack(st Stack) bool {
	return st == StackMegatronCore || st == StackNeMo || st == StackMegatron2022
}

// RenderMegatron writes MegatronArgs as a shell continuation block, one flag
// per line (values shell-quoted), under a header naming the Megatron-LM
// range and the environment the ranks get. What Megatron-LM cannot express
// is an error and nothing is written.
func RenderMegatron(w io.Writer, m Model, j Job, e Evaluation) error {
	args, err := MegatronArgs(m, j, e)
	if err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Megatron-LM flags for %s: %s\n", m.Name, e.Layout.Config())
	fmt.Fprintf(&b, "# for %s; add the data, tokenizer and schedule flags\n", MegatronVersion)
	for _, v := range MegatronEnv(e.Layout, j.Stack) {
		fmt.Fprintf(&b, "# environment (trainrun run/env and the plugin set it): %s=%s\n", v.Key, v.Value)
	}
	b.WriteString(ShellLines(args))
	_, err = io.WriteString(w, b.String())
	return err
}

// ShellLines writes argv as one flag and its values per line, joined by
// backslash continuations, each value shell-quoted.
func ShellLines(args []string) string {
	var b strings.Builder
	for i := 0; i < len(args); {
		line := args[i]
		i++
		for i < len(args) && !strings.HasPrefix(args[i], "--") {
			line += " " + shellQuote(args[i])
			i++
		}
		if i < len(args) {
			line += " \\"
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}

// ShellJoin joins argv into one shell word list, each element quoted where
// a shell would read it otherwise ({megatron_args} inside a longer word).
func ShellJoin(args []string) string {
	q := make([]string, len(args))
	for i, s := range args {
		q[i] = shellQuote(s)
	}
	return strings.Join(q, " ")
}
