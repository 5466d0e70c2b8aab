package plan

// The architecture details beyond the sizes: what a framework needs to build
// the same model (normalisation, positions, biases, routing). The planner's
// figures do not depend on them; the framework renderers do.

// Norms, positions and bias kinds a Model can name.
const (
	NormRMS         = "rmsnorm"
	NormLayer       = "layernorm"
	NormLayer1P     = "layernorm1p" // LayerNorm with zero-centred gamma (Nemotron)
	PositionRoPE    = "rope"
	PositionLearned = "learned"
	PositionALiBi   = "alibi"
	BiasNone        = "none"
	BiasQKV         = "qkv" // biases on the Q, K and V projections only (Qwen2)
	BiasAll         = "all" // every linear layer (GPT-2/3, BLOOM)
	RouterSoftmax   = "softmax"
	RouterSigmoid   = "sigmoid"
)

// Arch is m with every architecture detail filled in: the model's own
// value, else its family's usual. A gated or squared-ReLU MLP is the
// Llama/Nemotron family (RMSNorm, RoPE base 10000, no biases); a plain
// GELU/ReLU MLP the GPT family (LayerNorm, learned positions, biases).
func (m Model) Arch() Model {
	gptLike := m.FFNType == FFNGelu || m.FFNType == FFNReLU
	if m.Norm == "" {
		m.Norm = map[bool]string{true: NormLayer, false: NormRMS}[gptLike]
	}
	if m.NormEps == 0 {
		m.NormEps = 1e-5
	}
	if m.Position == "" {
		m.Position = map[bool]string{true: PositionLearned, false: PositionRoPE}[gptLike]
	}
	if m.Position == PositionRoPE && m.RopeTheta == 0 {
		m.RopeTheta = 10000
	}
	if m.RotaryPercent == 0 {
		m.RotaryPercent = 1
	}
	if m.Bias == "" {
		m.Bias = map[bool]string{true: BiasAll, false: BiasNone}[gptLike]
	}
	if m.Experts > 0 && m.Router == "" {
		m.Router = RouterSoftmax
	}
	return m
}

// presetArch are the presets' architecture details, from the same sources
// as their sizes (models.go): the config.json fields rms_norm_eps,
// rope_theta, rope_scaling, attention_bias (Qwen2's Q/K/V biases are fixed
// by its modelling code), and DeepSeek's n_group, topk_group, scoring_func
// and routed_scaling_factor; Nemotron-4 340B: the report's §2.1 (rotary
// half of each head, LayerNorm with zero-centred gamma).
var presetArch = map[string]Model{
	"gpt3-1.3b": gptArch, "gpt3-2.7b": gptArch, "gpt3-6.7b": gptArch, "gpt3-13b": gptArch, "gpt3-175b": gptArch,
	"llama2-7b":     {Norm: NormRMS, NormEps: 1e-5, Position: PositionRoPE, RopeTheta: 10000, Bias: BiasNone},
	"llama2-13b":    {Norm: NormRMS, NormEps: 1e-5, Position: PositionRoPE, RopeTheta: 10000, Bias: BiasNone},
	"llama2-70b":    {Norm: NormRMS, NormEps: 1e-5, Position: PositionRoPE, RopeTheta: 10000, Bias: BiasNone},
	"llama3-8b":     {Norm: NormRMS, NormEps: 1e-5, Position: PositionRoPE, RopeTheta: 500000, Bias: BiasNone},
	"llama3-70b":    {Norm: NormRMS, NormEps: 1e-5, Position: PositionRoPE, RopeTheta: 500000, Bias: BiasNone},
	"llama3.1-8b":   llama31Arch,
	"llama3.1-70b":  llama31Arch,
	"llama3.1-405b": llama31Arch,
	"mistral-7b":    {Norm: NormRMS, NormEps: 1e-5, Position: PositionRoPE, RopeTheta: 10000, Bias: BiasNone},
	"mixtral-8x7b":  {Norm: NormRMS, NormEps: 1e-5, Position: PositionRoPE, RopeTheta: 1e6, Bias: BiasNone, Router: RouterSoftmax},
	"mixtral-8x22b": {Norm: NormRMS, NormEps: 1e-5, Position: PositionRoPE, RopeTheta: 1e6, Bias: BiasNone, Router: RouterSoftmax},
	// Qwen2.5: rms_norm_eps 1e-6 in the 7B's config.json, 1e-5 in the others'.
	"qwen2.5-7b": withEps(qwen25Arch, 1e-6), "qwen2.5-14b": qwen25Arch, "qwen2.5-32b": qwen25Arch, "qwen2.5-72b": qwen25Arch,
	"nemotron4-340b": {Norm: NormLayer1P, NormEps: 1e-5, Position: PositionRoPE, RopeTheta: 10000, RotaryPercent: 0.5, Bias: BiasNone},
	"deepseek-v3":    deepseekV3Arch,
	"deepseek-r1":    deepseekV3Arch,
	"deepseek-v2": {Norm: NormRMS, NormEps: 1e-6, Position: PositionRoPE, RopeTheta: 10000, RopeScaling: 40, Bias: BiasNone,
		Router: RouterSoftmax, RouterGroups: 8, RouterGroupTopK: 3, RouterScale: 16},
	"bloom-176b": {Norm: NormLayer, NormEps: 1e-5, Position: PositionALiBi, Bias: BiasAll},
}

var (
	gptArch     = Model{Norm: NormLayer, NormEps: 1e-5, Position: PositionLearned, Bias: BiasAll}
	llama31Arch = Model{Norm: NormRMS, NormEps: 1e-5, Position: PositionRoPE, RopeTheta: 500000, RopeScaling: 8, Bias: BiasNone}
	qwen25Arch  = Model{Norm: NormRMS, NormEps: 1e-5, Position: PositionRoPE, RopeTheta: 1e6, Bias: BiasQKV}
	// DeepSeek-V3: YaRN factor 40 on the RoPE part, sigmoid scores with
	// the auxiliary-loss-free expert bias, 8 groups of which 4 are kept.
	deepseekV3Arch = Model{Norm: NormRMS, NormEps: 1e-6, Position: PositionRoPE, RopeTheta: 10000, RopeScaling: 40, Bias: BiasNone,
		Router: RouterSigmoid, RouterGroups: 8, RouterGroupTopK: 4, RouterScale: 2.5}
)

func withEps(a Model, eps float64) Model { a.NormEps = eps; return a }

// withArch copies a's architecture details into m.
func withArch(m, a Model) Model {
	m.Norm, m.NormEps, m.Position, m.RopeTheta, m.RopeScaling, m.RotaryPercent, m.Bias = a.Norm, a.NormEps, a.Position, a.RopeTheta, a.RopeScaling, a.RotaryPercent, a.Bias
	m.Router, m.RouterGroups, m.RouterGroupTopK, m.RouterScale = a.Router, a.RouterGroups, a.RouterGroupTopK, a.RouterScale
	return m
}

func init() {
	for name, a := range presetArch {
		p, ok := presets[name]
		if !ok {
			panic("presetArch: no preset " + name)
		}
		p.model = withArch(p.model, a)
		presets[name] = p
	}
}
