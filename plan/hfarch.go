package plan

import (
	"encoding/json"
	"strings"
)

// hfArch reads the architecture details of a Hugging Face config.json
// (Model.Norm ... Model.RouterScale) from the fields transformers' modelling
// code reads for each model_type: llama/mistral/mixtral/qwen2(_moe)
// rms_norm_eps, rope_theta, rope_scaling {rope_type|type, factor},
// attention_bias (Qwen2's Q/K/V biases are fixed by Qwen2Attention, whatever
// the file says); nemotron norm_eps, partial_rotary_factor and its
// LayerNorm1P; gpt2 learned positions; gpt_neox rotary_pct and
// rotary_emb_base; bloom ALiBi; deepseek n_group, topk_group, scoring_func,
// routed_scaling_factor. A field that is absent leaves the family's usual.
func hfArch(d *hfDoc, fam hfFamily, m *Model) error {
	mt := d.str("model_type")
	switch mt {
	case "gpt2":
		m.Norm, m.Position, m.Bias = NormLayer, PositionLearned, BiasAll
	case "gpt_neox":
		m.Norm, m.Position, m.Bias = NormLayer, PositionRoPE, BiasAll
	case "bloom":
		m.Norm, m.Position, m.Bias = NormLayer, PositionALiBi, BiasAll
	case "nemotron":
		m.Norm, m.Position, m.Bias = NormLayer1P, PositionRoPE, BiasNone
	default:
		// Gemma's RMSNorm scales by 1+weight (zero-centred, like
		// LayerNorm1P): the same figures; its GeGLU MLP keeps it out of
		// the Megatron renderer anyway.
		m.Norm, m.Position, m.Bias = NormRMS, PositionRoPE, BiasNone
	}
	if mt == "qwen2" || mt == "qwen2_moe" {
		m.Bias = BiasQKV
	} else if b, err := d.boolean("attention_bias", false); err != nil {
		return err
	} else if b {
		m.Bias = BiasAll
	}
	for _, k := range []string{"rms_norm_eps", "norm_eps", "layer_norm_eps", "layer_norm_epsilon"} {
		if v, ok := d.float(k); ok {
			m.NormEps = v
			break
		}
	}
	if m.Position == PositionRoPE {
		m.RopeTheta = 10000
		for _, k := range []string{"rope_theta", "rotary_emb_base"} {
			if v, ok := d.float(k); ok {
				m.RopeTheta = v
				break
			}
		}
		for _, k := range []string{"partial_rotary_factor", "rotary_pct"} {
			if v, ok := d.float(k); ok && v != 1 {
				m.RotaryPercent = v
				break
			}
		}
		m.RopeScaling = d.ropeScaling()
	}
	if fam.moe == moeDeepSeek {
		m.Router = RouterSoftmax
		if s := d.str("scoring_func"); s == RouterSigmoid {
			m.Router = RouterSigmoid
		}
		if g, ok, _ := d.int("n_group"); ok && g > 1 {
			m.RouterGroups = g
			m.RouterGroupTopK, _, _ = d.int("topk_group")
		}
		if v, ok := d.float("routed_scaling_factor"); ok && v != 1 {
			m.RouterScale = v
		}
	} else if fam.moe != moeNone {
		m.Router = RouterSoftmax
	}
	return nil
}

// float reads a number field (ok false when absent, null or not a number).
func (d *hfDoc) float(key string) (float64, bool) {
	if !d.present(key) {
		return 0, false
	}
	var v float64
	if json.Unmarshal(d.vals[key], &v) != nil {
		return 0, false
	}
	return v, true
}

// ropeScaling is rope_scaling's factor for the kinds a framework rebuilds
// by a factor: Llama 3's frequency scaling and YaRN (0: none or another).
func (d *hfDoc) ropeScaling() float64 {
	if !d.present("rope_scaling") {
		return 0
	}
	var rs struct {
		RopeType string  `json:"rope_type"`
		Type     string  `json:"type"`
		Factor   float64 `json:"factor"`
	}
	if json.Unmarshal(d.vals["rope_scaling"], &rs) != nil {
		return 0
	}
	kind := strings.ToLower(rs.RopeType + rs.Type)
	if kind == "llama3" || kind == "yarn" {
		return rs.Factor
	}
	return 0
}
