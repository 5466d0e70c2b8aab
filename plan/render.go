package plan

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// Renderers turn a plan into what people and programs read. They are pure:
// they write to the io.Writer they are given and read nothing else.

// jsonPlan is the contract's "plan" object (PRODUCT.md, `trainrun plan`):
// exactly its keys, in its order. Evaluation carries more (Traffic, for
// placement); that stays out of the contract.
type jsonPlan struct {
	TP                 int        `json:"tp"`
	PP                 int        `json:"pp"`
	VPP                int        `json:"vpp"`
	CP                 int        `json:"cp"`
	EP                 int        `json:"ep"`
	DP                 int        `json:"dp"`
	SP                 bool       `json:"sp"`
	MicroBatch         int        `json:"micro_batch"`
	GradAccum          int        `json:"grad_accum"`
	Recompute          string     `json:"recompute"`
	Zero               int        `json:"zero"`
	Offload            string     `json:"offload"`
	Memory             jsonMemory `json:"memory"`
	Time               jsonTime   `json:"time"`
	TokensPerSPerGPU   float64    `json:"tokens_per_s_per_gpu"`
	ModelFlopsPerToken float64    `json:"model_flops_per_token"`
	ModelTFLOPSPerGPU  float64    `json:"model_tflops_per_gpu"`
	MFU                float64    `json:"mfu"`
	Why                []string   `json:"why"`
	// Added by issue 13 (a new key only): the expert layers' tensor-parallel
	// size, present when it is set (absent: it is tp).
	ETP int `json:"etp,omitempty"`
	// Added by issue 29 (a new key only, absent without a site
	// calibration): how the calibration moved the plan (calibrate.go).
	Calibration *CalibrationNote `json:"calibration,omitempty"`
}

// jsonMemory and jsonTime are the contract's "memory" and "time" objects.
// They are spelled out, not Memory and Time themselves, so that a field the
// planner adds to those types cannot leak into the contract.
type jsonMemory struct {
	PerGPU      float64 `json:"per_gpu_bytes"`
	Capacity    float64 `json:"capacity_bytes"`
	Fits        bool    `json:"fits"`
	Weights     float64 `json:"weights_bytes"`
	Grads       float64 `json:"grads_bytes"`
	Optimizer   float64 `json:"optimizer_bytes"`
	Activations float64 `json:"activations_bytes"`
	Other       float64 `json:"other_bytes"`
}

type jsonTime struct {
	Step          float64 `json:"step_s"`
	Compute       float64 `json:"compute_s"`
	TPComm        float64 `json:"tp_comm_s"`
	PPBubble      float64 `json:"pp_bubble_s"`
	DPCommExposed float64 `json:"dp_comm_exposed_s"`
	CPComm        float64 `json:"cp_comm_s"`
	EPComm        float64 `json:"ep_comm_s"`
	Offload       float64 `json:"offload_s"`
	// Added by issue 13 (new keys only): the uncertainty band of step_s.
	StepRange [2]float64 `json:"step_s_range"`
}

// toJSONTime maps the planner's ten step parts onto the contract's seven so
// that they still add up to step_s: compute_s holds the GPU's own work
// (compute, recomputation, the optimizer step and the wait for stragglers),
// pp_bubble_s the pipeline's
// idle time (the bubble and exposed stage-to-stage transfers). The table
// shows all ten.
func toJSONTime(t Time) jsonTime {
	return jsonTime{Step: t.Step, Compute: t.Compute + t.Recompute + t.Optimizer + t.Straggler, TPComm: t.TPComm,
		PPBubble: t.PPBubble + t.PPComm, DPCommExposed: t.DPCommExposed, CPComm: t.CPComm, EPComm: t.EPComm, Offload: t.Offload,
		StepRange: t.StepRange}
}

type jsonRejection struct {
	Config string `json:"config"`
	Reason string `json:"reason"`
}

type jsonResult struct {
	Plan         *jsonPlan       `json:"plan"`
	Alternatives []jsonPlan      `json:"alternatives"`
	Rejected     []jsonRejection `json:"rejected"`
}

// toJSONPlan keeps to the contract's keys. Block recompute (Recompute "full"
// with RecomputeLayers N) has no key there and is written as "full": a
// trainer that recomputes every layer uses less memory than the plan, so the
// plan still fits (it runs slower than predicted). The megatron and env
// formats carry N.
func toJSONPlan(e Evaluation) jsonPlan {
	why := e.Why
	if why == nil {
		why = []string{}
	}
	return jsonPlan{
		TP: e.TP, PP: e.PP, VPP: e.VPP, CP: e.CP, EP: e.EP, ETP: e.ETP, DP: e.DP, SP: e.SP,
		MicroBatch: e.MicroBatch, GradAccum: e.GradAccum, Recompute: e.Recompute, Zero: e.Zero, Offload: e.Offload,
		Memory: jsonMemory(e.Memory), Time: toJSONTime(e.Time),
		TokensPerSPerGPU: e.TokensPerSPerGPU, ModelFlopsPerToken: e.ModelFlopsPerToken,
		ModelTFLOPSPerGPU: e.ModelTFLOPSPerGPU, MFU: e.MFU, Why: why, Calibration: e.Calibration,
	}
}

func toJSONResult(r Result) jsonResult {
	out := jsonResult{Alternatives: []jsonPlan{}, Rejected: []jsonRejection{}}
	if r.Plan != nil {
		p := toJSONPlan(*r.Plan)
		out.Plan = &p
	}
	for _, a := range r.Alternatives {
		out.Alternatives = append(out.Alternatives, toJSONPlan(a))
	}
	for _, rj := range r.Rejected {
		out.Rejected = append(out.Rejected, jsonRejection(rj))
	}
	return out
}

// RenderJSON writes the contract's object {"plan", "alternatives",
// "rejected"}, indented, with "plan": null when nothing fits. A non-finite
// figure is an error (it would be a planner bug, and JSON cannot carry it).
func RenderJSON(w io.Writer, r Result) error {
	b, err := json.MarshalIndent(toJSONResult(r), "", "  ")
	if err != nil {
		return fmt.Errorf("plan JSON: %w", err)
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// GPUResult is one GPU type's answer in a comparison (--gpu a:N,b:M).
type GPUResult struct {
	Cluster Cluster
	Result  Result
}

// RenderComparisonJSON writes {"comparison": [{"gpu", "gpus", "result"}...]},
// each "result" being the contract's object for that GPU type.
func RenderComparisonJSON(w io.Writer, rs []GPUResult) error {
	type entry struct {
		GPU    string     `json:"gpu"`
		GPUs   int        `json:"gpus"`
		Result jsonResult `json:"result"`
	}
	out := struct {
		Comparison []entry `json:"comparison"`
	}{Comparison: []entry{}}
	for _, g := range rs {
		out.Comparison = append(out.Comparison, entry{g.Cluster.GPU.Name, g.Cluster.GPUs, toJSONResult(g.Result)})
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return fmt.Errorf("plan JSON: %w", err)
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// LayoutGPUs is the number of GPUs a layout occupies: TP·PP·CP·DP (EP lives
// inside DP·CP, as in Megatron).
func LayoutGPUs(l Layout) int { return l.TP * l.PP * l.CP * l.DP }

// PlanEnv returns the plan's TRAINRUN_* variables for every training process
// (PRODUCT.md, "Environment of every training process"), in a fixed order.
// TRAINRUN_PLAN, the path of the plan JSON, is the launcher's to add.
// TRAINRUN_RECOMPUTE_LAYERS (block recompute: layers per model chunk that
// keep only their input; 0 = all with full), TRAINRUN_SP, TRAINRUN_ZERO and
// TRAINRUN_OFFLOAD are added beyond the contract's list so a trainer other
// than Megatron can apply the whole plan.
func PlanEnv(e Evaluation) [][2]string {
	var out [][2]string
	for _, v := range PlanVars(e.Layout) {
		out = append(out, [2]string{v.Key, v.Value})
	}
	return out
}

// RenderEnv writes PlanEnv as KEY=VALUE lines (values are plain words and
// numbers: no quoting needed).
func RenderEnv(w io.Writer, e Evaluation) error {
	var b strings.Builder
	for _, kv := range PlanEnv(e) {
		fmt.Fprintf(&b, "%s=%s\n", kv[0], kv[1])
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// MegatronLayoutArgs renders a layout alone as Megatron-LM flags, for a
// run whose layout is fixed without a model (`trainrun run --fix`): no
// model, so no layer counts, and flags Megatron defaults (cp 1, ep 1) left
// out. With a model and job, MegatronArgs gives the plan's full set; the
// two differ in those flags (--num-virtual-stages-per-pipeline-rank here,
// --num-layers-per-virtual-pipeline-stage there), so they are kept apart.
func MegatronLayoutArgs(l Layout) []string {
	a := []string{
		"--tensor-model-parallel-size", strconv.Itoa(l.TP),
		"--pipeline-model-parallel-size", strconv.Itoa(l.PP),
	}
	if l.VPP > 1 {
		a = append(a, "--num-virtual-stages-per-pipeline-rank", strconv.Itoa(l.VPP))
	}
	if l.CP > 1 {
		a = append(a, "--context-parallel-size", strconv.Itoa(l.CP))
	}
	if l.EP > 1 {
		a = append(a, "--expert-model-parallel-size", strconv.Itoa(l.EP))
	}
	if l.ETP > 0 {
		a = append(a, "--expert-tensor-parallel-size", strconv.Itoa(l.ETP))
	}
	a = append(a, "--micro-batch-size", strconv.Itoa(l.MicroBatch),
		"--global-batch-size", strconv.Itoa(l.MicroBatch*l.DP*l.GradAccum))
	if l.SP && l.TP > 1 {
		a = append(a, "--sequence-parallel")
	}
	switch l.Recompute {
	case "selective":
		a = append(a, "--recompute-granularity", "selective")
	case "full":
		a = append(a, "--recompute-granularity", "full", "--recompute-method", "uniform")
	}
	if l.Zero >= 1 {
		a = append(a, "--use-distributed-optimizer")
	}
	return a
}

// MegatronArgs returns the Megatron-LM (megatron/training/arguments.py)
// flags that apply the plan, one argv element each, for the launcher's
// {megatron_args}. It covers parallelism, batch, recompute, optimizer
// sharding, precision, sequence length and the model's shape. Positional
// embedding, normalisation, tokenizer and data flags stay the user's: Model
// does not record them. LoRA and parameter offload have no Megatron-LM flag
// (RenderMegatron says so in a comment).
func MegatronArgs(m Model, j Job, e Evaluation) []string {
	var a megatronArgv
	a.parallelism(m, e)
	a.batch(j, e)
	a.optimizer(j, e)
	a.model(m, j, e)
	return a
}

// megatronArgv is MegatronArgs' argv, built by group of flags.
type megatronArgv []string

func (a *megatronArgv) add(flag string, v ...any) {
	*a = append(*a, flag)
	for _, x := range v {
		*a = append(*a, fmt.Sprint(x))
	}
}

// parallelism: TP, PP (virtual stages, an uneven split), CP, EP, SP.
func (a *megatronArgv) parallelism(m Model, e Evaluation) {
	a.add("--tensor-model-parallel-size", e.TP)
	a.add("--pipeline-model-parallel-size", e.PP)
	if e.VPP > 1 && e.PP > 1 {
		a.add("--num-layers-per-virtual-pipeline-stage", m.Layers/(e.PP*e.VPP))
	}
	if e.PP > 1 && m.Layers%e.PP != 0 {
		if first, _, last, ok := unevenSplit(m.Layers, e.PP); ok {
			a.add("--decoder-first-pipeline-num-layers", first)
			a.add("--decoder-last-pipeline-num-layers", last)
		}
	}
	a.add("--context-parallel-size", e.CP)
	if m.Experts > 0 {
		a.add("--expert-model-parallel-size", e.EP)
		if e.ETP > 0 {
			a.add("--expert-tensor-parallel-size", e.ETP)
		}
	}
	if e.SP && e.TP > 1 {
		a.add("--sequence-parallel")
	}
}

// batch: the micro- and global batch, and activation recompute.
func (a *megatronArgv) batch(j Job, e Evaluation) {
	a.add("--micro-batch-size", e.MicroBatch)
	a.add("--global-batch-size", j.GlobalBatch)
	switch e.Recompute {
	case "selective":
		a.add("--recompute-granularity", "selective")
	case "full":
		a.add("--recompute-granularity", "full")
		if e.RecomputeLayers > 0 {
			// The first N layers of each model chunk keep only their input;
			// the rest keep all activations (the planner's least that fits).
			a.add("--recompute-method", "block")
			a.add("--recompute-num-layers", e.RecomputeLayers)
		} else {
			// Every layer keeps only its input: the 2·s·b·h per layer of
			// Korthikanti et al. 2022 Table 2 that the memory model assumes.
			a.add("--recompute-method", "uniform")
			a.add("--recompute-num-layers", 1)
		}
	}
}

// optimizer: sharding (ZeRO as Megatron's distributed optimizer and
// Megatron-FSDP), overlap, offload and precision.
func (a *megatronArgv) optimizer(j Job, e Evaluation) {
	switch e.Zero {
	case 1:
		a.add("--use-distributed-optimizer")
	case 2, 3:
		// Megatron-FSDP (Megatron-LM core ≥ 0.14; earlier --use-custom-fsdp),
		// which Megatron runs on top of the distributed optimizer.
		strategy := "optim_grads"
		if e.Zero == 3 {
			strategy = "optim_grads_params"
		}
		a.add("--use-distributed-optimizer")
		a.add("--use-megatron-fsdp")
		a.add("--data-parallel-sharding-strategy", strategy)
	}
	if e.DP*e.CP > 1 {
		// The time model hides the DP reduction behind backward: that needs these.
		a.add("--overlap-grad-reduce")
		if e.Zero >= 1 {
			a.add("--overlap-param-gather")
		}
	}
	if e.Offload == "optimizer" {
		a.add("--optimizer-cpu-offload")
		a.add("--optimizer-offload-fraction", "1.0")
	}
	switch j.Precision {
	case FP16:
		a.add("--fp16")
	case FP8:
		// FP8 GEMMs through Transformer Engine; weights and the rest stay BF16.
		a.add("--bf16")
		a.add("--fp8-format", "hybrid")
	default:
		a.add("--bf16")
	}
}

// model: the sequence and the model's shape (attention, MLP, experts).
func (a *megatronArgv) model(m Model, j Job, e Evaluation) {
	a.add("--seq-length", j.SeqLen)
	a.add("--max-position-embeddings", j.SeqLen)
	a.add("--num-layers", m.Layers)
	a.add("--hidden-size", m.Hidden)
	a.add("--num-attention-heads", m.Heads)
	if m.HeadDim > 0 && m.HeadDim*m.Heads != m.Hidden {
		a.add("--kv-channels", m.HeadDim)
	}
	if m.KVHeads > 0 && m.KVHeads < m.Heads {
		a.add("--group-query-attention")
		a.add("--num-query-groups", m.KVHeads)
	}
	a.add("--ffn-hidden-size", m.FFN)
	switch m.FFNType {
	case FFNSwiGLU:
		a.add("--swiglu")
	case FFNSquaredReLU:
		a.add("--squared-relu")
	}
	if !m.TiedEmbeddings {
		a.add("--untie-embeddings-and-output-weights")
	}
	if m.Experts > 0 {
		a.add("--num-experts", m.Experts)
		a.add("--moe-router-topk", m.TopK)
		a.add("--moe-ffn-hidden-size", m.MoEFFN)
		if m.SharedFFN > 0 {
			a.add("--moe-shared-expert-intermediate-size", m.SharedFFN)
		}
		if m.DenseLayers > 0 {
			a.add("--moe-layer-freq", fmt.Sprintf("([0]*%d+[1]*%d)", m.DenseLayers, m.Layers-m.DenseLayers))
		}
		if e.EP > 1 {
			a.add("--moe-token-dispatcher-type", "alltoall")
		}
	}
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

// RenderMegatron writes MegatronArgs as a shell continuation block, one flag
// per line, with comments for what Megatron-LM cannot express.
func RenderMegatron(w io.Writer, m Model, j Job, e Evaluation) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# Megatron-LM flags for %s: %s\n", m.Name, e.Layout.Config())
	if j.LoRARank > 0 {
		fmt.Fprintf(&b, "# LoRA r=%d: Megatron-LM has no LoRA flags; apply these parallel settings in NeMo/Megatron-Bridge PEFT\n", j.LoRARank)
	}
	if e.Offload == "params" || e.Offload == "nvme" {
		fmt.Fprintf(&b, "# offload=%s: Megatron-LM cannot offload parameters; use DeepSpeed ZeRO-3 offload (ZeRO-Infinity for nvme) with this layout\n", e.Offload)
	}
	if e.PP > 1 && m.Layers%e.PP != 0 {
		if _, _, _, ok := unevenSplit(m.Layers, e.PP); !ok {
			fmt.Fprintf(&b, "# %d layers over pp=%d: no --decoder-first/last-pipeline-num-layers split keeps every stage at or below %d layers; use --pipeline-model-parallel-layout\n",
				m.Layers, e.PP, (m.Layers+e.PP-1)/e.PP)
		}
	}
	if m.FFNType == FFNReLU {
		b.WriteString("# ffn_type=relu: Megatron-LM has no flag for a plain ReLU MLP; set the activation in your model code\n")
	}
	args := MegatronArgs(m, j, e)
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
	_, err := io.WriteString(w, b.String())
	return err
}

// shellQuote quotes s for a POSIX shell when it holds anything but
// [A-Za-z0-9_.,:=/+-].
func shellQuote(s string) string {
	safe := s != ""
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_.,:=/+-", r)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Formatting helpers shared by the text renderers.

const bytesPerGiB = 1 << 30

func fmtGiB(b float64) string { return fmt.Sprintf("%.2f", b/bytesPerGiB) }

// fmtCount prints large counts with thousands separators ("12,345").
func fmtCount(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return fmt.Sprint(v)
	}
	s := strconv.FormatFloat(math.Round(v), 'f', 0, 64)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var out []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}

// fmtMillis prints seconds as milliseconds with one decimal and thousands
// separators ("51,842.6").
func fmtMillis(s float64) string {
	if math.IsNaN(s) || math.IsInf(s, 0) {
		return fmt.Sprint(s)
	}
	f := strconv.FormatFloat(s*1e3, 'f', 1, 64)
	whole, frac, _ := strings.Cut(f, ".")
	w, _ := strconv.ParseFloat(whole, 64)
	out := fmtCount(w)
	if strings.HasPrefix(whole, "-") && !strings.HasPrefix(out, "-") {
		out = "-" + out // -0.4 ms
	}
	return out + "." + frac
}

// fmtTokens prints a token count the way people say it (300B, 1.5T).
func fmtTokens(t float64) string {
	switch {
	case t >= 1e12:
		return strconv.FormatFloat(t/1e12, 'g', 4, 64) + "T"
	case t >= 1e9:
		return strconv.FormatFloat(t/1e9, 'g', 4, 64) + "B"
	case t >= 1e6:
		return strconv.FormatFloat(t/1e6, 'g', 4, 64) + "M"
	}
	return fmtCount(t)
}

// TrainSeconds is the predicted time to train j.Tokens with e: steps of
// global_batch·seq_len tokens, each e.Time.Step long. 0 when Tokens is 0.
func TrainSeconds(j Job, e Evaluation) float64 {
	if j.Tokens <= 0 || j.GlobalBatch <= 0 || j.SeqLen <= 0 {
		return 0
	}
	steps := math.Ceil(j.Tokens / float64(j.GlobalBatch*j.SeqLen))
	return steps * e.Time.Step
}
