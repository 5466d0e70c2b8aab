package plan

import (
	"fmt"
	"strconv"
	"strings"
)

// Fine-tuning kinds (issue 37): what is trained, and what the frozen rest
// costs. Every kind but full keeps the base model frozen: no gradients and no
// optimizer states for it, no weight-gradient GEMMs in the backward (time.go:
// kern.linear frozen), gradients and Adam states for the trainable
// parameters only.
//
//   - lora[:RANK[:TARGETS]] (Hu et al. 2021): A (r×in) and B (out×r) beside each
//     targeted linear layer. Default targets: every linear layer of attention
//     and the dense MLP, with one A for a fused QKV and one for a fused
//     gate+up (NeMo/Megatron-Bridge's linear_qkv and linear_fc1 adapters;
//     Hugging Face PEFT's separate q/k/v adapters have r·2h (+ r·h for
//     gate/up) more parameters per layer, ~15 % of the adapters, <0.1 % of
//     the memory).
//   - qlora[:RANK[:TARGETS][:adamw8|adamw32]] (Dettmers et al. 2023): the base's
//     linear layers stored as 4-bit NormalFloat with double quantisation, 4 +
//     8/64 + 32/(64·256) = 4.127 bits per weight (paper §3: 64-weight blocks,
//     8-bit absmax constants in 256-blocks of FP32 second-level constants);
//     embeddings, the output layer and the norms stay BF16 (bitsandbytes skips
//     lm_head). BF16 adapters and compute; a paged AdamW on the adapters only:
//     8-bit (bitsandbytes paged_adamw_8bit, the default here: 2 bytes of state
//     per parameter) or 32-bit (8 bytes). No FP32 master copy: bitsandbytes
//     updates the BF16 adapters in place. Each linear layer dequantises its
//     weight to BF16 before each GEMM (forward, input-gradient backward, and a
//     recomputed forward): read 4.127/8 + write 2 bytes per weight, HBM-bound,
//     and keeps one BF16 matrix as a transient buffer.
//   - prefix[:TOKENS] (Li & Liang 2021; PEFT PrefixTuningConfig): TOKENS
//     trainable keys and values per layer (kv-heads·head-dim wide each: PEFT
//     reshapes token_dim to the key/value heads for GQA models); attention
//     sees s + TOKENS keys.
//   - prompt[:TOKENS] (Lester et al. 2021; PEFT PromptTuningConfig): TOKENS
//     trainable input embeddings prepended to every sequence: the whole model
//     runs on s + TOKENS tokens (memory and compute), the throughput counts the
//     user's s.
//   - ia3 (Liu et al. 2022; PEFT IA3Config for Llama: k_proj, v_proj outputs and
//     the down_proj input scaled by learned vectors): 2·g·d + F parameters per
//     layer, elementwise (no matmul FLOPs).
//
// Activations of a frozen base (layerActivationBytes): a frozen linear layer
// without an adapter needs only its weight for the input gradient, so the
// input kept for its weight gradient goes unless another kernel keeps it
// anyway: flash attention keeps Q, K, V and its output (the output
// projection's input); the MLP's gate/up outputs are the activation
// function's inputs. What goes: the QKV input (2h) unless q, k or v has an
// adapter, the MLP input (2h) unless gate or up has one, the down
// projection's input (2F) unless it has an adapter (or IA³ scales it). Each
// adapter keeps x·A (2r bytes per token) for B's gradient, and with a LoRA
// dropout (lora:R:dropout=P) its dropped input and mask (3 bytes per input
// feature).

// FinetuneKind names a fine-tuning method.
type FinetuneKind string

const (
	FinetuneFull   FinetuneKind = "full"
	FinetuneLoRA   FinetuneKind = "lora"
	FinetuneQLoRA  FinetuneKind = "qlora"
	FinetunePrefix FinetuneKind = "prefix"
	FinetunePrompt FinetuneKind = "prompt"
	FinetuneIA3    FinetuneKind = "ia3"
)

// Bounds of a fine-tuning spec: a LoRA rank past the model's width is
// checked per model (FinetuneError), these keep the numbers finite first.
const (
	MaxLoRARank       = 65536
	MaxVirtualTokens  = 1 << 20
	DefaultVirtTokens = 20 // PEFT's examples and docs use 20 virtual tokens
)

// Finetune is a parsed --finetune spec.
type Finetune struct {
	Kind    FinetuneKind `json:"kind"`
	Rank    int          `json:"rank,omitempty"`    // lora, qlora
	Targets string       `json:"targets,omitempty"` // lora, qlora: modules with adapters, comma-separated (q,k,v,o,gate,up,down); "" = all linear
	Tokens  int          `json:"tokens,omitempty"`  // prefix, prompt: virtual tokens
	Optim   string       `json:"optim,omitempty"`   // adamw (mixed precision, 18 B/param), adamw8, adamw32 (qlora: paged)
	Dropout float64      `json:"dropout,omitempty"` // lora, qlora: LoRA dropout probability (PEFT lora_dropout); 0 = none
}

// loraModules are the linear layers of a block that LoRA can target, in
// Hugging Face Llama naming without the _proj suffix.
var loraModules = []string{"q", "k", "v", "o", "gate", "up", "down"}

var targetAliases = map[string][]string{
	"all": loraModules, "all-linear": loraModules,
	"attn": {"q", "k", "v", "o"}, "attention": {"q", "k", "v", "o"},
	"mlp": {"gate", "up", "down"},
	"fc1": {"up"}, "fc2": {"down"}, "qkv": {"q", "k", "v"},
}

// ParseFinetuneSpec reads full, lora[:RANK[:TARGETS]], qlora[:RANK[:TARGETS]][:adamw8|adamw32]
// (either with :dropout=P, the LoRA dropout),
// prefix[:TOKENS], prompt[:TOKENS] or ia3 (case-insensitive). TARGETS is a
// comma-separated list of q k v o gate up down (q_proj etc. accepted) or all,
// attn, mlp.
func ParseFinetuneSpec(s string) (Finetune, error) {
	v := strings.ToLower(strings.TrimSpace(s))
	if v == "" {
		v = "full"
	}
	fields := strings.Split(v, ":")
	kind, rest := FinetuneKind(fields[0]), fields[1:]
	bad := func(format string, a ...any) (Finetune, error) {
		return Finetune{}, fmt.Errorf("finetune %q: "+format, append([]any{s}, a...)...)
	}
	switch kind {
	case FinetuneFull, FinetuneIA3:
		if len(rest) > 0 {
			return bad("%s takes no parameters (accepted: full, lora[:RANK[:TARGETS]], qlora[:RANK], prefix[:TOKENS], prompt[:TOKENS], ia3)", kind)
		}
		return Finetune{Kind: kind}, nil
	case FinetunePrefix, FinetunePrompt:
		f := Finetune{Kind: kind, Tokens: DefaultVirtTokens}
		if len(rest) > 1 {
			return bad("%s takes one parameter, the virtual tokens, e.g. %s:20", kind, kind)
		}
		if len(rest) == 1 {
			n, err := strconv.Atoi(rest[0])
			if err != nil || n < 1 || n > MaxVirtualTokens {
				return bad("the virtual tokens must be an integer from 1 to %d, e.g. %s:20", MaxVirtualTokens, kind)
			}
			f.Tokens = n
		}
		return f, nil
	case FinetuneLoRA, FinetuneQLoRA:
		return parseLoRASpec(s, kind, rest)
	}
	return bad("accepted: full, lora[:RANK[:TARGETS]][:dropout=P], qlora[:RANK[:TARGETS]][:adamw8|adamw32][:dropout=P], prefix[:TOKENS], prompt[:TOKENS], ia3")
}

func parseLoRASpec(s string, kind FinetuneKind, rest []string) (Finetune, error) {
	f := Finetune{Kind: kind, Rank: DefaultLoRARank}
	bad := func(format string, a ...any) (Finetune, error) {
		return Finetune{}, fmt.Errorf("finetune %q: "+format, append([]any{s}, a...)...)
	}
	if len(rest) > 0 && rest[0] != "" {
		name := map[FinetuneKind]string{FinetuneLoRA: "LoRA", FinetuneQLoRA: "QLoRA"}[kind]
		r, err := strconv.Atoi(rest[0])
		switch {
		case err != nil && len(strings.Trim(rest[0], "0123456789")) == 0:
			return bad("the %s rank %s is past %d: ranks are usually 8-64, e.g. %s:16", name, rest[0], MaxLoRARank, kind)
		case err != nil || r < 1:
			return bad("the %s rank must be a positive integer, e.g. %s:16", name, kind)
		case r > MaxLoRARank:
			return bad("the %s rank %d is past %d: ranks are usually 8-64, e.g. %s:16", name, r, MaxLoRARank, kind)
		}
		f.Rank = r
	}
	for i, fld := range rest {
		if i == 0 {
			continue
		}
		if v, ok := strings.CutPrefix(fld, "dropout="); ok {
			p, err := strconv.ParseFloat(v, 64)
			if err != nil || !(p >= 0 && p < 1) {
				return bad("the LoRA dropout must be a probability from 0 to below 1, e.g. %s:16:dropout=0.05", kind)
			}
			f.Dropout = p
			continue
		}
		switch fld {
		case "adamw", "adamw8", "adamw32":
			if f.Optim != "" {
				return bad("two optimizers (%s and %s)", f.Optim, fld)
			}
			f.Optim = fld
			continue
		}
		if f.Targets != "" {
			return bad("two target lists (%s and %s): give one comma-separated list", f.Targets, fld)
		}
		t, err := parseTargets(fld)
		if err != nil {
			return bad("%v", err)
		}
		f.Targets = t
	}
	if kind == FinetuneLoRA && f.Optim == "" {
		f.Optim = "adamw"
	}
	if kind == FinetuneQLoRA && f.Optim == "" {
		f.Optim = "adamw8"
	}
	if kind == FinetuneQLoRA && f.Optim == "adamw" {
		return bad("qlora trains BF16 adapters with a paged AdamW: adamw8 or adamw32")
	}
	return f, nil
}

// parseTargets reads a comma-separated module list into loraModules order;
// all linear layers come back as "" (the default).
func parseTargets(s string) (string, error) {
	set := map[string]bool{}
	for _, t := range strings.Split(s, ",") {
		t = strings.TrimSuffix(strings.TrimSpace(t), "_proj")
		if a, ok := targetAliases[t]; ok {
			for _, x := range a {
				set[x] = true
			}
			continue
		}
		known := false
		for _, x := range loraModules {
			known = known || x == t
		}
		if !known {
			return "", fmt.Errorf("LoRA target %q: accepted q, k, v, o, gate, up, down (or q_proj ...), all, attn, mlp, comma-separated", t)
		}
		set[t] = true
	}
	var out []string
	for _, x := range loraModules {
		if set[x] {
			out = append(out, x)
		}
	}
	if len(out) == len(loraModules) {
		return "", nil
	}
	return strings.Join(out, ","), nil
}

// String is the canonical spec, which ParseFinetuneSpec reads back.
func (f Finetune) String() string {
	switch f.Kind {
	case "", FinetuneFull:
		return "full"
	case FinetunePrefix, FinetunePrompt:
		return fmt.Sprintf("%s:%d", f.Kind, f.Tokens)
	case FinetuneLoRA, FinetuneQLoRA:
		s := fmt.Sprintf("%s:%d", f.Kind, f.Rank)
		if f.Targets != "" {
			s += ":" + f.Targets
		}
		def := map[FinetuneKind]string{FinetuneLoRA: "adamw", FinetuneQLoRA: "adamw8"}[f.Kind]
		if f.Optim != "" && f.Optim != def {
			s += ":" + f.Optim
		}
		if f.Dropout > 0 {
			s += ":dropout=" + strconv.FormatFloat(f.Dropout, 'g', -1, 64)
		}
		return s
	}
	return string(f.Kind)
}

// Label is the spec in words for tables and Why lines.
func (f Finetune) Label() string {
	switch f.Kind {
	case "", FinetuneFull:
		return "full"
	case FinetuneLoRA:
		return fmt.Sprintf("LoRA r=%d%s", f.Rank, f.targetWords())
	case FinetuneQLoRA:
		return fmt.Sprintf("QLoRA r=%d%s (NF4 base, paged %s)", f.Rank, f.targetWords(), map[string]string{"adamw8": "8-bit AdamW", "adamw32": "32-bit AdamW"}[f.Optim])
	case FinetunePrefix:
		return fmt.Sprintf("prefix tuning, %d virtual tokens", f.Tokens)
	case FinetunePrompt:
		return fmt.Sprintf("prompt tuning, %d virtual tokens", f.Tokens)
	case FinetuneIA3:
		return "IA3"
	}
	return string(f.Kind)
}

func (f Finetune) targetWords() string {
	s := ""
	if f.Targets != "" {
		s = " on " + f.Targets
	}
	if f.Dropout > 0 {
		s += fmt.Sprintf(", dropout %g", f.Dropout)
	}
	return s
}

// Frozen reports whether the base model is frozen (every kind but full).
func (f Finetune) Frozen() bool { return f.Kind != "" && f.Kind != FinetuneFull }

// targets reports whether module name carries an adapter (lora, qlora).
func (f Finetune) targets(name string) bool {
	if f.Kind != FinetuneLoRA && f.Kind != FinetuneQLoRA {
		return false
	}
	if f.Targets == "" {
		return true
	}
	for _, t := range strings.Split(f.Targets, ",") {
		if t == name {
			return true
		}
	}
	return false
}

// FinetuneOf is the job's fine-tuning spec: Job.Finetune, or LoRA of
// Job.LoRARank for jobs built before the kinds existed.
func FinetuneOf(j Job) Finetune {
	if j.Finetune.Kind != "" {
		return j.Finetune
	}
	if j.LoRARank > 0 {
		return Finetune{Kind: FinetuneLoRA, Rank: j.LoRARank, Optim: "adamw"}
	}
	return Finetune{Kind: FinetuneFull}
}

// WithFinetune returns j training f: Finetune set, and LoRARank the rank of a
// LoRA or QLoRA (the renderers and the calibration read it), else 0.
func (j Job) WithFinetune(f Finetune) Job {
	j.Finetune = f
	j.LoRARank = 0
	if f.Kind == FinetuneLoRA || f.Kind == FinetuneQLoRA {
		j.LoRARank = f.Rank
	}
	if f.Kind == FinetuneFull {
		j.Finetune = Finetune{}
	}
	return j
}

// frozenBase reports whether the job's base model is frozen.
func (j Job) frozenBase() bool { return FinetuneOf(j).Frozen() }

// finetuneInvalid is why the model cannot take the spec, or "".
func finetuneInvalid(m Model, f Finetune) string {
	if f.Kind != FinetuneLoRA && f.Kind != FinetuneQLoRA {
		return ""
	}
	if f.targets("gate") && !m.FFNType.gated() && f.Targets != "" {
		return fmt.Sprintf("LoRA target gate: %s's MLP (%s) has no gate projection; target up and down", m.Name, m.FFNType)
	}
	if w := min(m.Hidden, m.kvHeads()*m.headDim()); f.Rank > w {
		return fmt.Sprintf("LoRA rank %d exceeds the %d-wide projections of %s (a rank past a layer's width adds nothing): use a rank up to %d", f.Rank, w, m.Name, w)
	}
	return ""
}

// adapterParamsTP is one layer's trainable parameters per GPU under TP t:
// LoRA's A and B (A replicated across TP for column-parallel layers, B
// sharded; the other way round for row-parallel ones), prefix keys and
// values, IA³ vectors. Prompt tuning's embeddings are not per layer
// (promptParams).
func (m Model) adapterParamsTP(f Finetune, t float64) float64 {
	h, d := float64(m.Hidden), float64(m.headDim())
	n, g := float64(m.Heads), float64(m.kvHeads())
	fw := float64(m.FFN)
	r := float64(f.Rank)
	switch f.Kind {
	case FinetunePrefix:
		return 2 * float64(f.Tokens) * g * d / t
	case FinetuneIA3:
		return (2*g*d + fw) / t
	case FinetuneLoRA, FinetuneQLoRA:
	default:
		return 0
	}
	var p float64
	q, k, v := f.targets("q"), f.targets("k"), f.targets("v")
	if q && k && v {
		p += r * (h + (n+2*g)*d/t) // fused linear_qkv: one A
	} else {
		for _, o := range []struct {
			on  bool
			out float64
		}{{q, n * d}, {k, g * d}, {v, g * d}} {
			if o.on {
				p += r * (h + o.out/t)
			}
		}
	}
	if f.targets("o") {
		p += r * (n*d/t + h)
	}
	gate, up := f.targets("gate") && m.FFNType.gated(), f.targets("up")
	switch {
	case gate && up:
		p += r * (h + 2*fw/t) // fused linear_fc1
	case gate || up:
		p += r * (h + fw/t)
	}
	if f.targets("down") {
		p += r * (fw/t + h)
	}
	return p
}

// promptParams is prompt tuning's trainable embeddings (whole model).
func (m Model) promptParams(f Finetune) float64 {
	if f.Kind != FinetunePrompt {
		return 0
	}
	return float64(f.Tokens) * float64(m.Hidden)
}

// TrainableParams is the parameters a job trains: all of them for full
// training, the adapters' otherwise.
func TrainableParams(m Model, j Job) float64 {
	f := FinetuneOf(j)
	if !f.Frozen() {
		return m.Params()
	}
	return float64(m.Layers)*m.adapterParamsTP(f, 1) + m.promptParams(f)
}

// adapterMatmulParams is the adapter parameters a token multiplies through
// (6 FLOPs each, forward and backward): LoRA's A and B; prefix, prompt and
// IA³ add no matmul with their parameters.
func (m Model) adapterMatmulParams(f Finetune) float64 {
	if f.Kind != FinetuneLoRA && f.Kind != FinetuneQLoRA {
		return 0
	}
	return float64(m.Layers) * m.adapterParamsTP(f, 1)
}

// nf4Bytes is QLoRA's storage per base weight: 4.127 bits (see the file comment).
const nf4Bytes = (4 + 8.0/64 + 32.0/(64*256)) / 8

// dequantBytes is the HBM traffic of dequantising one NF4 weight to BF16.
const dequantBytes = nf4Bytes + 2

// adapterStateBytes is the bytes per trainable parameter of weights,
// gradients and optimizer states: Megatron-style mixed precision (2, the
// stack's gradient bytes, 12) for adamw; QLoRA's BF16 adapters updated in
// place (2, 2, and 2 for 8-bit or 8 for 32-bit AdamW states).
func (x *shape) adapterStateBytes() (w, g, o float64) {
	switch FinetuneOf(x.j).Optim {
	case "adamw8":
		return 2, 2, 2
	case "adamw32":
		return 2, 2, 8
	}
	return wB, x.gradBytes(), oB
}

// baseWeightBytes is a frozen stage's base weights per GPU: NF4 linear layers
// for QLoRA (embeddings, output layer, norms, router BF16), else 16-bit.
func (x *shape) baseWeightBytes(sp stageParams, shard, expShard float64) float64 {
	dense, linear, expert := sp.dense, sp.linear, sp.expert
	if x.l.Zero == 3 {
		dense, linear, expert = dense/shard, linear/shard, expert/expShard
	}
	if FinetuneOf(x.j).Kind == FinetuneQLoRA {
		return nf4Bytes*(linear+expert) + wB*(dense-linear)
	}
	return wB * (dense + expert)
}

// frozenStates fills the model states of a frozen base: base weights (on the
// host with offload=params: streamed per layer), the adapters' weights,
// gradients and optimizer states; and what the host keeps.
func (x *shape) frozenStates(sp stageParams, shard, expShard float64) (mem Memory, hostPerGPU float64) {
	aw, ag, ao := x.adapterStateBytes()
	base := x.baseWeightBytes(sp, shard, expShard)
	mem.Weights = base + aw*sp.adapters
	mem.Grads = ag * sp.adapters
	mem.Optimizer = ao * sp.adapters
	if x.l.Zero >= 1 {
		mem.Optimizer /= shard
	}
	if x.l.Zero >= 2 {
		mem.Grads /= shard
	}
	switch x.l.Offload {
	case "optimizer":
		hostPerGPU = mem.Optimizer + mem.Grads
		mem.Optimizer = 0
	case "params":
		// The frozen base lives in pinned host memory and streams in layer by
		// layer (accelerate cpu_offload, FSDP CPUOffload(offload_params)); the
		// adapters and their states stay on the GPU (allowance: 2 layers'
		// buffers).
		hostPerGPU = base
		mem.Weights -= base
	}
	return mem, hostPerGPU
}

// layerBaseWeights is one transformer layer's base linear weights per GPU.
func (x *shape) layerBaseWeights(moe bool) float64 {
	m := &x.m
	w := m.attnParamsTP(x.t)
	if moe {
		return w + m.sharedParams()/x.t + float64(m.Experts)*m.expertParams()/(x.ep*x.etp) + float64(m.Hidden)*float64(m.Experts)
	}
	return w + m.denseMLPParams()/x.t
}

// largestMatrix is the parameters of the largest single weight matrix of a
// layer per GPU: bitsandbytes dequantises one nn.Linear at a time
// (MatMul4Bit), so QLoRA's transient BF16 copy is one matrix, not the FSDP
// unit that sp.layerMax is under a stack with fsdpUnits.
func (x *shape) largestMatrix() float64 {
	m := &x.m
	h := float64(m.Hidden)
	w := max(h*float64(m.Heads*m.headDim()), h*float64(m.FFN)) / x.t
	if m.isMoE() {
		w = max(w, h*float64(m.moeFFN())/x.etp)
	}
	return w
}

// frozenAllowance is what a frozen base adds to the allowance: QLoRA's
// transient BF16 copy of the largest dequantised matrix (largestMatrix), and with
// offload=params the current and the prefetched layer's weights.
func (x *shape) frozenAllowance(sp stageParams) float64 {
	f := FinetuneOf(x.j)
	var a float64
	if f.Kind == FinetuneQLoRA {
		a += wB * x.largestMatrix()
	}
	if x.l.Offload == "params" && x.l.Zero != 3 {
		b := wB
		if f.Kind == FinetuneQLoRA {
			b = nf4Bytes
		}
		a += 2 * b * x.layerBaseWeights(x.m.isMoE())
	}
	return a
}

// frozenActivationCut is the activation bytes per token (before the TP and
// SP division: replicated, sharded) that a frozen base does not keep, net of
// the adapters' x·A (see the file comment).
func (x *shape) frozenActivationCut() (rep, tp float64) {
	f := FinetuneOf(x.j)
	if !f.Frozen() {
		return 0, 0
	}
	m := &x.m
	h, fw := float64(m.Hidden), float64(m.FFN)
	if !(f.targets("q") || f.targets("k") || f.targets("v")) {
		rep += 2 * h
	}
	if !(f.targets("gate") || f.targets("up")) {
		rep += 2 * h
	}
	if !f.targets("down") && f.Kind != FinetuneIA3 {
		tp += 2 * fw
	}
	for _, mod := range loraModules {
		if f.targets(mod) {
			rep -= 2 * float64(f.Rank)
		}
	}
	if f.Dropout > 0 {
		// PEFT's LoRA layer runs lora_B(lora_A(dropout(x))): each adapted
		// nn.Linear (q, k and v apart) keeps its dropped BF16 input and the
		// one-byte mask for the backward, 3 bytes per input feature.
		for _, mod := range loraModules {
			switch {
			case !f.targets(mod) || (mod == "gate" && !m.FFNType.gated()):
			case mod == "o":
				tp -= 3 * float64(m.Heads*m.headDim())
			case mod == "down":
				tp -= 3 * fw
			default:
				rep -= 3 * h
			}
		}
	}
	return rep, tp
}

// prefixTokens is the extra keys every query attends to (prefix tuning).
func (j Job) prefixTokens() float64 {
	if f := FinetuneOf(j); f.Kind == FinetunePrefix {
		return float64(f.Tokens)
	}
	return 0
}

// promptTokens is the virtual tokens prepended to every sequence (prompt tuning).
func (j Job) promptTokens() int {
	if f := FinetuneOf(j); f.Kind == FinetunePrompt {
		return f.Tokens
	}
	return 0
}

// dequantTime is QLoRA's dequantisation for one layer and one micro-batch:
// once before the forward GEMMs and once before the input-gradient GEMMs
// (a recomputed forward counts in the recompute share of the forward).
func (x *shape) dequantTime(moe bool) (fwd, bwd float64) {
	if FinetuneOf(x.j).Kind != FinetuneQLoRA {
		return 0, 0
	}
	m := &x.m
	w := m.attnParamsTP(x.t)
	if moe {
		w += m.sharedParams()/x.t + float64(m.Experts)/x.ep*m.expertParams()/x.etp
	} else {
		w += m.denseMLPParams() / x.t
	}
	d := dequantBytes * w / x.k.hbmE
	return d, d
}

// paramsOffloadTime is the exposed host-to-device streaming of a frozen base
// with offload=params, per step: every micro-batch reads the stage's base
// weights for the forward, the backward and a recomputed forward, over PCIe
// at pcieEff, prefetched behind the micro-batch's compute.
func (x *shape) paramsOffloadTime(sp stageParams, perMB float64) float64 {
	shard, expShard := x.dp*x.cp, max(x.edp, 1)
	base := x.baseWeightBytes(sp, shard, expShard)
	passes := 2 + x.recomputeFraction()
	xfer := passes * base / (x.c.GPU.PCIeBandwidth * pcieEff)
	return x.mb * max(xfer-perMB, 0)
}

// finetuneWhy says what the fine-tuning kind trains and costs, and what
// limits the plan: the largest memory part and the largest time part.
func (x *shape) finetuneWhy(e *Evaluation) []string {
	f := FinetuneOf(x.j)
	if !f.Frozen() {
		return nil
	}
	tr := TrainableParams(x.m, x.j)
	aw, ag, ao := x.adapterStateBytes()
	w := []string{fmt.Sprintf("%s: %.3g trainable parameters (%.3f%% of %.3g), %.0f+%.0f+%.0f bytes each for weights, gradients and optimizer; frozen base %s",
		f.Label(), tr, 100*tr/x.m.Params(), x.m.Params(), aw, ag, ao, x.baseWords(f))}
	ms := e.Memory
	parts := []struct {
		n string
		v float64
	}{{"base weights", ms.Weights}, {"activations", ms.Activations}, {"optimizer", ms.Optimizer}, {"gradients", ms.Grads}, {"allowance", ms.Other}}
	big := parts[0]
	for _, p := range parts[1:] {
		if p.v > big.v {
			big = p
		}
	}
	tm := e.Time
	limit := "compute"
	if tm.Offload > tm.Compute/4 {
		limit = fmt.Sprintf("host-to-device streaming of the base (%.2f s exposed per step)", tm.Offload)
	}
	w = append(w, fmt.Sprintf("limits: memory by %s (%.1f of %.1f GiB), step by %s", big.n, big.v/gib, ms.PerGPU/gib, limit))
	return w
}

func (x *shape) baseWords(f Finetune) string {
	s := "16-bit, no gradients or optimizer states"
	if f.Kind == FinetuneQLoRA {
		s = fmt.Sprintf("NF4 with double quantisation (%.3f bits per linear weight), dequantised to BF16 per GEMM", 8*nf4Bytes)
	}
	if x.l.Offload == "params" {
		s += fmt.Sprintf(", in host memory (%.1f GiB pinned per GPU) streamed per layer over PCIe (%.0f GB/s at %.0f%%)", x.hostNeed/gib, x.c.GPU.PCIeBandwidth/1e9, 100*pcieEff)
	}
	if p := x.j.prefixTokens(); p > 0 {
		s += fmt.Sprintf("; attention sees %d+%.0f keys", x.j.SeqLen, p)
	}
	if p := x.j.promptTokens(); p > 0 {
		s += fmt.Sprintf("; the model runs on %d+%d tokens per sequence", x.j.SeqLen-p, p)
	}
	return s
}

// suggestFinetune is Suggest's fine-tuning part: LoRA r=16 for full
// training, then QLoRA of the same rank, then the frozen base offloaded to
// the host (offload=params) when the job does not pin an offload.
func suggestFinetune(m Model, j Job, c Cluster, o SearchOptions) []string {
	f := FinetuneOf(j)
	var tries []Finetune
	switch f.Kind {
	case FinetuneFull:
		tries = []Finetune{{Kind: FinetuneLoRA, Rank: DefaultLoRARank, Optim: "adamw"}, {Kind: FinetuneQLoRA, Rank: DefaultLoRARank, Optim: "adamw8"}}
	case FinetuneLoRA:
		tries = []Finetune{{Kind: FinetuneQLoRA, Rank: f.Rank, Targets: f.Targets, Optim: "adamw8"}}
	}
	for _, t := range tries {
		if r := Search(m, j.WithFinetune(t), c, o); r.Plan != nil && r.Plan.Memory.Fits {
			return []string{fmt.Sprintf("fits with %s (--finetune %s)", t.Label(), t)}
		}
	}
	return nil
}

// gatheredBytes is the bytes per weight ZeRO-3/FSDP gathers: QLoRA's frozen
// linear layers travel and stay in NF4 (bnb_4bit_quant_storage flattens
// them with FSDP); the rest in 16 bits.
func (x *shape) gatheredBytes() float64 {
	if FinetuneOf(x.j).Kind == FinetuneQLoRA {
		return nf4Bytes
	}
	return wB
}

// FinetuneNote is the plan JSON's "finetune" object: what a frozen-base
// plan trains and what binds it.
type FinetuneNote struct {
	Spec            string  `json:"spec"` // canonical --finetune spec
	TrainableParams float64 `json:"trainable_params"`
	TrainableShare  float64 `json:"trainable_share"`           // of all parameters
	StateBytes      float64 `json:"state_bytes_per_trainable"` // weights + gradients + optimizer
	BaseBits        float64 `json:"base_bits_per_linear_weight"`
	BaseOnHost      bool    `json:"base_on_host"`       // offload=params: streamed per layer
	HostBytesPerGPU float64 `json:"host_bytes_per_gpu"` // pinned host memory the offload keeps
	Limits          string  `json:"limits"`
}

func (x *shape) finetuneNote(e *Evaluation) *FinetuneNote {
	f := FinetuneOf(x.j)
	if !f.Frozen() || e.Memory.PerGPU == 0 {
		return nil
	}
	aw, ag, ao := x.adapterStateBytes()
	tr := TrainableParams(x.m, x.j)
	bits := 8 * wB
	if f.Kind == FinetuneQLoRA {
		bits = 8 * nf4Bytes
	}
	return &FinetuneNote{Spec: f.String(), TrainableParams: tr, TrainableShare: tr / x.m.Params(), StateBytes: aw + ag + ao,
		BaseBits: bits, BaseOnHost: x.l.Offload == "params" || x.l.Offload == "nvme", HostBytesPerGPU: x.hostNeed, Limits: limitsOf(e)}
}

// CheckFinetune is an error when model m cannot take spec f (a LoRA rank past
// its projections' width, a gate target without a gated MLP): a usage
// error, found before any layout is searched.
func CheckFinetune(m Model, f Finetune) error {
	if r := finetuneInvalid(m, f); r != "" {
		return fmt.Errorf("finetune %s: %s", f, r)
	}
	return nil
}
