package plan

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
)

// Hugging Face config.json parsing.
//
// A field is either read (it sets a Model figure), known-harmless (it does
// not change the sizes, FLOPs or memory the planner models, and is ignored),
// or unknown. An unknown field is an error naming it: a new field may change
// the architecture (a latent attention rank, an interleaved MoE pattern, a
// quantised base), and guessing would print confident wrong numbers. Keys
// beginning with "_" (_name_or_path, _attn_implementation) are Hugging Face's
// bookkeeping and are ignored.
//
// Known-harmless fields, and why they are harmless here:
//   - identity and tooling: architectures, transformers_version, torch_dtype,
//     dtype (the training precision comes from --precision), tokenizer_class,
//     auto_map, id2label, label2id, problem_type, task_specific_params,
//     return_dict, output_attentions, output_hidden_states, torchscript,
//     use_cache (inference KV cache), *_token_id;
//   - initialisation and regularisation: initializer_range, *dropout*,
//     *_pdrop, layer/RMS norm epsilons (norms have h parameters, no matmul);
//   - positions: max_position_embeddings, n_positions, n_ctx, seq_length
//     (the sequence length comes from --seq-len), rope_theta, rope_scaling,
//     rope_parameters, partial_rotary_factor, rotary_pct, rotary_emb_base,
//     offset_alibi (rotary/ALiBi have no weights and negligible FLOPs);
//   - biases: attention_bias, mlp_bias (below 0.1 % of parameters);
//   - kernel choices that keep the maths: pretraining_tp, slow_but_exact,
//     masked_softmax_fusion, bias_dropout_fusion, attention_softmax_in_fp32,
//     skip_bias_add*, use_parallel_residual, apply_residual_connection_post_layernorm;
//   - MoE training knobs: output_router_logits, router_aux_loss_coef,
//     router_jitter_noise, norm_topk_prob;
//   - sliding_window, use_sliding_window, max_window_layers: accepted but not
//     modelled; attention is counted as full causal, an upper bound on its
//     cost when the sequence is longer than the window.

// hfFamily describes one model_type: which field spells each figure and what
// the architecture fixes.
type hfFamily struct {
	hidden, layers, heads []string // field names, first present wins (aliases must agree)
	kvHeads, headDim      string   // "" = not a field of this family (MHA / hidden/heads)
	ffn                   string   // "" = 4·hidden fixed by the architecture (BLOOM)
	ffnOptional           bool     // gpt2 n_inner: null means 4·hidden
	act                   string   // activation field
	actDefault            string
	gated                 bool // MLP has gate, up and down projections
	tieDefault            bool // transformers' default for tie_word_embeddings
	moe                   string
	mla                   bool // multi-head latent attention (hfMLA reads its widths)
	gatedGELU             bool // gated MLP with a GELU (GeGLU, Gemma) instead of SiLU
	qkNorm                bool // RMSNorm on each head's queries and keys
	// defaults are transformers' class defaults for fields a file may omit
	// (a multimodal config's text_config holds only what differs from them).
	defaults map[string]string
	read     []string // all fields the parser reads (for the unknown-field check)
	harmless []string // family-specific known-harmless fields
}

const (
	moeNone     = ""
	moeMixtral  = "mixtral"   // num_local_experts, num_experts_per_tok; expert size = intermediate_size
	moeQwen2MoE = "qwen2_moe" // num_experts, moe_intermediate_size, shared expert
	moeDeepSeek = "deepseek"  // n_routed_experts, n_shared_experts × moe_intermediate_size, first_k_dense_replace
)

var llamaLike = hfFamily{
	hidden: []string{"hidden_size"}, layers: []string{"num_hidden_layers"}, heads: []string{"num_attention_heads"},
	kvHeads: "num_key_value_heads", headDim: "head_dim", ffn: "intermediate_size",
	act: "hidden_act", actDefault: "silu", gated: true,
	read:     []string{"hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim", "intermediate_size", "vocab_size", "tie_word_embeddings", "hidden_act"},
	harmless: []string{"rms_norm_eps", "rope_theta", "rope_scaling", "rope_parameters", "attention_bias", "mlp_bias", "pretraining_tp", "sliding_window", "use_sliding_window", "max_window_layers"},
}

func withMoE(f hfFamily, kind string, read, harmless []string) hfFamily {
	f.moe = kind
	f.read = append(append([]string{}, f.read...), read...)
	f.harmless = append(append([]string{}, f.harmless...), harmless...)
	return f
}

// deepseekLike is DeepSeek-V2/V3's config.json (also Kimi-K2's, which uses
// model_type deepseek_v3): multi-head latent attention, DeepSeekMoE with
// shared experts and leading dense layers. Known-harmless here: the router's
// training knobs (n_group, topk_group, topk_method, scoring_func,
// routed_scaling_factor, aux_loss_alpha, seq_aux, norm_topk_prob), ep_size (a
// parallelism hint of the reference code; the layout is trainrun's), and
// quantization_config (how the released weights are stored, FP8 blocks for
// V3, accepted for every family by hfQuantization; the training precision
// comes from --precision). Accepted but not
// modelled: num_nextn_predict_layers, the multi-token-prediction modules
// (DeepSeek-V3 §2.2: one more MoE block each, about 1/61 of V3's compute).
var deepseekLike = hfFamily{
	hidden: []string{"hidden_size"}, layers: []string{"num_hidden_layers"}, heads: []string{"num_attention_heads"},
	kvHeads: "num_key_value_heads", ffn: "intermediate_size", act: "hidden_act", actDefault: "silu", gated: true, moe: moeDeepSeek, mla: true,
	read: []string{"hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "intermediate_size", "vocab_size",
		"tie_word_embeddings", "hidden_act", "n_routed_experts", "num_experts_per_tok", "moe_intermediate_size", "n_shared_experts",
		"first_k_dense_replace", "moe_layer_freq", "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"},
	harmless: []string{"rms_norm_eps", "rope_theta", "rope_scaling", "rope_interleave", "attention_bias", "pretraining_tp", "ep_size",
		"n_group", "topk_group", "topk_method", "scoring_func", "routed_scaling_factor", "aux_loss_alpha", "seq_aux", "norm_topk_prob",
		"num_nextn_predict_layers"},
}

// qwen3Like is Qwen3's config.json (transformers' Qwen3Config): Llama's
// shape with an explicit head_dim, no Q/K/V biases and an RMSNorm on each
// head's queries and keys (Qwen3 technical report §2: "QK-Norm").
// layer_types (full or sliding attention per layer, which newer
// transformers write) is counted as full causal attention, as every
// sliding window here.
var qwen3Like = func() hfFamily {
	f := withMoE(llamaLike, moeNone, nil, []string{"layer_types"})
	f.qkNorm = true
	return f
}()

// phi3Like is Phi-3's config.json (transformers' Phi3Config): Llama's shape
// with fused qkv_proj and gate_up_proj (the same weights). Known-harmless:
// original_max_position_embeddings and LongRoPE's rope_scaling lists
// (positions, no weights), partial_rotary_factor (read as the rotary share).
var phi3Like = withMoE(llamaLike, moeNone, nil,
	[]string{"original_max_position_embeddings", "partial_rotary_factor", "embd_pdrop", "resid_pdrop"})

// gemmaLike is Gemma 1/2/3's config.json (transformers' GemmaConfig,
// Gemma2Config, Gemma3TextConfig): a GELU-gated MLP (hidden_activation
// gelu_pytorch_tanh), head_dim apart from hidden/heads, tied embeddings.
// Known-harmless: query_pre_attn_scalar (the attention's scale), the logit
// soft-caps, cache_implementation, rope_local_base_freq, and the
// sliding-window pattern (sliding_window_pattern, layer_types), counted as
// full causal attention like every sliding window here. Not modelled, each
// below 0.1 % of the parameters: Gemma 2/3's extra norms after attention
// and the MLP.
var gemmaLike = hfFamily{
	hidden: []string{"hidden_size"}, layers: []string{"num_hidden_layers"}, heads: []string{"num_attention_heads"},
	kvHeads: "num_key_value_heads", headDim: "head_dim", ffn: "intermediate_size",
	act: "hidden_activation", actDefault: "gelu_pytorch_tanh", gated: true, gatedGELU: true, tieDefault: true,
	read: []string{"hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim", "intermediate_size", "vocab_size", "tie_word_embeddings", "hidden_activation"},
	harmless: []string{"hidden_act", "rms_norm_eps", "rope_theta", "rope_scaling", "attention_bias", "query_pre_attn_scalar",
		"attn_logit_softcapping", "final_logit_softcapping", "cache_implementation", "sliding_window", "sliding_window_size",
		"sliding_window_pattern", "layer_types", "rope_local_base_freq"},
}

// gemma3Text adds Gemma 3's QK-norm and Gemma3TextConfig's defaults
// (transformers src/transformers/models/gemma3/configuration_gemma3.py):
// the released multimodal configs (google/gemma-3-12b-it ...) write only
// what differs from them.
var gemma3Text = func() hfFamily {
	f := gemmaLike
	f.qkNorm = true
	f.defaults = map[string]string{"vocab_size": "262208", "hidden_size": "2304", "intermediate_size": "9216", "num_hidden_layers": "26",
		"num_attention_heads": "8", "num_key_value_heads": "4", "head_dim": "256", "rope_theta": "1000000.0", "rms_norm_eps": "1e-06"}
	return f
}()

var hfFamilies = map[string]hfFamily{
	"qwen3": qwen3Like,
	// Qwen3-MoE: Qwen2-MoE's fields without its shared expert, and Qwen3's
	// QK-norm (transformers' Qwen3MoeConfig).
	"qwen3_moe": withMoE(qwen3Like, moeQwen2MoE,
		[]string{"num_experts", "num_experts_per_tok", "moe_intermediate_size", "shared_expert_intermediate_size", "decoder_sparse_step", "mlp_only_layers"},
		[]string{"output_router_logits", "router_aux_loss_coef", "norm_topk_prob"}),
	"phi3":        phi3Like,
	"gemma":       gemmaLike,
	"gemma2":      gemmaLike,
	"gemma3_text": gemma3Text,
	"deepseek_v2": deepseekLike,
	"deepseek_v3": deepseekLike,
	"llama":       llamaLike,
	"mistral":     llamaLike,
	"qwen2":       llamaLike,
	"mixtral": withMoE(llamaLike, moeMixtral, []string{"num_local_experts", "num_experts_per_tok"},
		[]string{"output_router_logits", "router_aux_loss_coef", "router_jitter_noise"}),
	"qwen2_moe": withMoE(llamaLike, moeQwen2MoE,
		[]string{"num_experts", "num_experts_per_tok", "moe_intermediate_size", "shared_expert_intermediate_size", "decoder_sparse_step", "mlp_only_layers"},
		[]string{"output_router_logits", "router_aux_loss_coef", "norm_topk_prob"}),
	"nemotron": {
		hidden: []string{"hidden_size"}, layers: []string{"num_hidden_layers"}, heads: []string{"num_attention_heads"},
		kvHeads: "num_key_value_heads", headDim: "head_dim", ffn: "intermediate_size",
		act: "hidden_act", actDefault: "relu2",
		read:     []string{"hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim", "intermediate_size", "vocab_size", "tie_word_embeddings", "hidden_act"},
		harmless: []string{"norm_eps", "rope_theta", "rope_scaling", "partial_rotary_factor", "attention_bias", "mlp_bias"},
	},
	"gpt2": {
		hidden: []string{"n_embd"}, layers: []string{"n_layer"}, heads: []string{"n_head"},
		ffn: "n_inner", ffnOptional: true, act: "activation_function", actDefault: "gelu_new", tieDefault: true,
		read: []string{"n_embd", "n_layer", "n_head", "n_inner", "vocab_size", "tie_word_embeddings", "activation_function", "add_cross_attention"},
		harmless: []string{"n_positions", "n_ctx", "resid_pdrop", "embd_pdrop", "attn_pdrop", "layer_norm_epsilon",
			"summary_type", "summary_use_proj", "summary_activation", "summary_proj_to_labels", "summary_first_dropout",
			"scale_attn_weights", "scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn"},
	},
	"gpt_neox": {
		hidden: []string{"hidden_size"}, layers: []string{"num_hidden_layers"}, heads: []string{"num_attention_heads"},
		ffn: "intermediate_size", act: "hidden_act", actDefault: "gelu",
		read:     []string{"hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "vocab_size", "tie_word_embeddings", "hidden_act"},
		harmless: []string{"rotary_pct", "rotary_emb_base", "rope_theta", "rope_scaling", "use_parallel_residual", "layer_norm_eps", "classifier_dropout", "attention_bias"},
	},
	"bloom": {
		hidden: []string{"hidden_size", "n_embed"}, layers: []string{"n_layer", "num_hidden_layers"}, heads: []string{"n_head", "num_attention_heads"},
		actDefault: "gelu", tieDefault: true, // BloomMLP is 4h→GeLU→h, no field sets it
		read: []string{"hidden_size", "n_embed", "n_layer", "num_hidden_layers", "n_head", "num_attention_heads", "vocab_size", "tie_word_embeddings", "n_inner"},
		harmless: []string{"layer_norm_epsilon", "apply_residual_connection_post_layernorm", "attention_softmax_in_fp32", "bias_dropout_fusion",
			"masked_softmax_fusion", "pretraining_tp", "slow_but_exact", "offset_alibi", "skip_bias_add", "skip_bias_add_qkv", "seq_length"},
	},
}

// hfCommonHarmless are ignored in every family (see the list above).
var hfCommonHarmless = []string{
	"architectures", "model_type", "transformers_version", "torch_dtype", "dtype", "tokenizer_class", "auto_map",
	"id2label", "label2id", "problem_type", "task_specific_params", "return_dict", "output_attentions",
	"output_hidden_states", "torchscript", "use_cache", "bos_token_id", "eos_token_id", "pad_token_id",
	"unk_token_id", "sep_token_id", "decoder_start_token_id", "initializer_range", "max_position_embeddings",
	"attention_dropout", "hidden_dropout",
}

// hfHarmlessPattern matches the families of harmless names listed above:
// dropouts, token ids and norm epsilons, however a model spells them
// (attention_probs_dropout_prob, resid_pdrop, decoder_start_token_id, norm_epsilon).
func hfHarmlessPattern(k string) bool {
	return strings.Contains(k, "dropout") || strings.HasSuffix(k, "_pdrop") || strings.HasSuffix(k, "_token_id") ||
		strings.HasSuffix(k, "_eps") || strings.HasSuffix(k, "epsilon")
}

// hfMLAFields belong to multi-head latent attention (DeepSeek-V2/V3): only
// the deepseek model types read them.
var hfMLAFields = map[string]bool{"kv_lora_rank": true, "q_lora_rank": true, "qk_rope_head_dim": true, "qk_nope_head_dim": true, "v_head_dim": true}

// hfUnsupportedTypes are model types refused with a reason (none today:
// DeepSeek-V2/V3 were, until MLA was modelled).
var hfUnsupportedTypes = map[string]string{}

// HFModelTypes lists the config.json model_type values ParseHFConfig reads.
func HFModelTypes() []string {
	t := make([]string, 0, len(hfFamilies)+len(hfMultimodal))
	for k := range hfFamilies {
		t = append(t, k)
	}
	for k := range hfMultimodal {
		t = append(t, k)
	}
	sort.Strings(t)
	return t
}

// hfDoc is a parsed config.json: its top-level values and where each key is.
type hfDoc struct {
	file string
	data []byte
	vals map[string]json.RawMessage
	at   map[string]int // byte offset of each key
	keys []string       // file order
	// outer and base: for a nested object (text_config), the file's
	// document and where the object starts in it.
	outer *hfDoc
	base  int
}

func (d *hfDoc) pos(off int) string {
	data := d.data
	if d.outer != nil { // a nested object: positions in the whole file
		data, off = d.outer.data, off+d.base
	}
	line, col := lineCol(data, off)
	return fmt.Sprintf("%s:%d:%d", d.file, line, col)
}

// errf names the file, the field's line:col and the field.
func (d *hfDoc) errf(key, format string, a ...any) error {
	return fmt.Errorf("%s: %s", d.pos(d.at[key]), fmt.Sprintf(format, a...))
}

func lineCol(data []byte, off int) (line, col int) {
	off = min(max(off, 0), len(data))
	line = 1 + bytes.Count(data[:off], []byte{'\n'})
	col = off - bytes.LastIndexByte(data[:off], '\n')
	return line, col
}

// present reports whether key is there and not null.
func (d *hfDoc) present(key string) bool {
	v, ok := d.vals[key]
	return ok && string(v) != "null"
}

// int reads a non-null integer field. ok is false when it is absent or null.
func (d *hfDoc) int(key string) (v int, ok bool, err error) {
	if !d.present(key) {
		return 0, false, nil
	}
	var n json.Number // accepts "123" too: reject strings first
	if raw := d.vals[key]; len(raw) == 0 || raw[0] == '"' || json.Unmarshal(raw, &n) != nil {
		return 0, false, d.errf(key, "%s = %s: want an integer", key, d.vals[key])
	}
	i, err := n.Int64()
	if err != nil || i > 1<<40 || i < -(1<<40) {
		return 0, false, d.errf(key, "%s = %s: want an integer", key, n)
	}
	return int(i), true, nil
}

// size reads a required (or optional) positive integer.
func (d *hfDoc) size(key string, required bool) (int, bool, error) {
	v, ok, err := d.int(key)
	if err != nil {
		return 0, false, err
	}
	if !ok {
		if required {
			return 0, false, fmt.Errorf("%s: %s is missing (model_type %s needs it)", d.file, key, d.str("model_type"))
		}
		return 0, false, nil
	}
	if v <= 0 {
		return 0, false, d.errf(key, "%s = %d: must be positive", key, v)
	}
	return v, true, nil
}

// alias reads the first present of several spellings; they must agree.
func (d *hfDoc) alias(keys []string) (int, error) {
	first, val := "", 0
	for _, k := range keys {
		v, ok, err := d.size(k, false)
		if err != nil {
			return 0, err
		}
		if !ok {
			continue
		}
		if first == "" {
			first, val = k, v
		} else if v != val {
			return 0, d.errf(k, "%s = %d contradicts %s = %d", k, v, first, val)
		}
	}
	if first == "" {
		return 0, fmt.Errorf("%s: %s is missing (model_type %s needs it)", d.file, strings.Join(keys, " or "), d.str("model_type"))
	}
	return val, nil
}

func (d *hfDoc) str(key string) string {
	var s string
	if d.present(key) {
		_ = json.Unmarshal(d.vals[key], &s)
	}
	return s
}

func (d *hfDoc) boolean(key string, def bool) (bool, error) {
	if !d.present(key) {
		return def, nil
	}
	var b bool
	if err := json.Unmarshal(d.vals[key], &b); err != nil {
		return false, d.errf(key, "%s = %s: want true or false", key, d.vals[key])
	}
	return b, nil
}

// readHFDoc tokenises the top-level object, keeping each key's position so
// errors can point at it.
func readHFDoc(r io.Reader, file string) (*hfDoc, error) {
	data, err := ReadConfigBytes(r, file)
	if err != nil {
		return nil, err
	}
	return tokenizeHFDoc(data, file)
}

func tokenizeHFDoc(data []byte, file string) (*hfDoc, error) {
	d := &hfDoc{file: file, data: data, vals: map[string]json.RawMessage{}, at: map[string]int{}}
	syntax := func(err error) error {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return fmt.Errorf("%s: malformed JSON: %v", d.pos(int(se.Offset)), se)
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("%s: malformed JSON: unexpected end of file", d.pos(len(data)))
		}
		return fmt.Errorf("%s: malformed JSON: %v", file, err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s: empty file, want a config.json object", file)
		}
		return nil, syntax(err)
	}
	if delim, ok := tok.(json.Delim); !ok || delim != '{' {
		return nil, fmt.Errorf("%s: want a JSON object ({...}), found %v", d.pos(int(dec.InputOffset())), tok)
	}
	for dec.More() {
		start := int(dec.InputOffset())
		tok, err := dec.Token()
		if err != nil {
			return nil, syntax(err)
		}
		key := tok.(string) // object keys are always strings
		if i := bytes.IndexByte(data[start:], '"'); i >= 0 {
			start += i
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, syntax(err)
		}
		if _, dup := d.vals[key]; dup {
			first, _ := lineCol(data, d.at[key])
			return nil, fmt.Errorf("%s: %s appears twice (first on line %d)", d.pos(start), key, first)
		}
		d.vals[key], d.at[key] = raw, start
		d.keys = append(d.keys, key)
	}
	if _, err := dec.Token(); err != nil {
		return nil, syntax(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: malformed JSON: data after the closing }", d.pos(int(dec.InputOffset())))
	}
	return d, nil
}

// ParseHFConfig reads a Hugging Face config.json (model_type llama, mistral,
// mixtral, qwen2, qwen2_moe, qwen3, qwen3_moe, phi3, gemma, gemma2, gemma3_text,
// gemma3's text_config, nemotron, gpt2, gpt_neox or bloom). name is the
// file name used in errors and as the Model's Name. Errors name the file,
// the line:col and the field.
func ParseHFConfig(r io.Reader, name string) (Model, error) {
	m, _, err := ParseHFConfigNotes(r, name)
	return m, err
}

// ParseHFConfigNotes is ParseHFConfig, and says what of the file the model
// leaves out (a vision-language model's vision tower), for the user.
func ParseHFConfigNotes(r io.Reader, name string) (Model, []string, error) {
	d, err := readHFDoc(r, name)
	if err != nil {
		return Model{}, nil, err
	}
	var notes []string
	if d, notes, err = hfTextDecoder(d); err != nil {
		return Model{}, nil, err
	}
	m, err := parseHFDoc(d, name)
	return m, notes, err
}

func parseHFDoc(d *hfDoc, name string) (Model, error) {
	fam, err := hfFamilyOf(d, name)
	if err != nil {
		return Model{}, err
	}
	m := Model{Name: name}
	if m.Hidden, err = d.alias(fam.hidden); err != nil {
		return Model{}, err
	}
	if m.Layers, err = d.alias(fam.layers); err != nil {
		return Model{}, err
	}
	if m.Heads, err = d.alias(fam.heads); err != nil {
		return Model{}, err
	}
	if m.Vocab, _, err = d.size("vocab_size", true); err != nil {
		return Model{}, err
	}
	if m.TiedEmbeddings, err = d.boolean("tie_word_embeddings", fam.tieDefault); err != nil {
		return Model{}, err
	}
	m.QKNorm = fam.qkNorm
	for _, step := range []func(*hfDoc, hfFamily, *Model) error{hfAttention, hfMLA, hfMLP, hfMoE, hfArch} {
		if err := step(d, fam, &m); err != nil {
			return Model{}, err
		}
	}
	if err := validateWithLimits(m); err != nil {
		return Model{}, fmt.Errorf("%s: %w", name, err)
	}
	return m, nil
}

// hfFamilyOf is the family of d's model_type, after checking that every
// field of d is one the family reads or knows to be harmless.
func hfFamilyOf(d *hfDoc, name string) (hfFamily, error) {
	if !d.present("model_type") {
		return hfFamily{}, fmt.Errorf("%s: model_type is missing; supported: %s", name, strings.Join(HFModelTypes(), ", "))
	}
	mt := d.str("model_type")
	if why, bad := hfUnsupportedTypes[mt]; bad {
		return hfFamily{}, d.errf("model_type", "model_type %q: %s", mt, why)
	}
	fam, ok := hfFamilies[mt]
	if !ok {
		return hfFamily{}, d.errf("model_type", "model_type %q is not supported; supported: %s (or describe the model with --layers, --hidden, --heads, ... flags)",
			mt, strings.Join(HFModelTypes(), ", "))
	}
	for k, v := range fam.defaults {
		if _, given := d.vals[k]; !given {
			d.vals[k], d.at[k] = json.RawMessage(v), d.at["model_type"]
		}
	}
	known := map[string]bool{}
	for _, list := range [][]string{hfCommonHarmless, fam.read, fam.harmless} {
		for _, k := range list {
			known[k] = true
		}
	}
	for _, k := range d.keys {
		switch {
		case strings.HasPrefix(k, "_") || known[k] || hfHarmlessPattern(k):
		case k == "quantization_config":
			if err := hfQuantization(d); err != nil {
				return hfFamily{}, err
			}
		case hfMLAFields[k]:
			return hfFamily{}, d.errf(k, "field %q is multi-head latent attention's, which model_type %s does not have: "+
				"use model_type deepseek_v3 (or deepseek_v2) if this is such a model, or describe it with --kv-lora-rank ... flags", k, mt)
		default:
			return hfFamily{}, d.errf(k, "unknown field %q for model_type %s: it may change the architecture, so the planner will not guess; "+
				"remove it if you know it is harmless, or describe the model with --layers, --hidden, --heads, ... flags", k, mt)
		}
	}

	return fam, nil
}

// hfQuantization accepts the quantization_config of weights released in
// FP8 blocks (DeepSeek-V3's): how the checkpoint is stored, not what is
// trained; the training precision comes from --precision. Any other method
// (4-bit GPTQ/AWQ/bitsandbytes bases) is refused: training on a quantised
// base keeps it in that format, which the memory model does not represent.
func hfQuantization(d *hfDoc) error {
	var q struct {
		Method string `json:"quant_method"`
	}
	if err := json.Unmarshal(d.vals["quantization_config"], &q); err != nil || q.Method != "fp8" {
		return d.errf("quantization_config", "quantization_config: a quantised base (quant_method %q) is not modelled, only weights released in FP8 blocks "+
			"(quant_method \"fp8\"); the planner models training at --precision from full-precision weights: remove the field to plan that", q.Method)
	}
	return nil
}

// hfAttention reads the attention shape: KV heads and the head size.
func hfAttention(d *hfDoc, fam hfFamily, m *Model) error {
	var err error
	headsKey := firstPresent(d, fam.heads)
	hiddenKey := firstPresent(d, fam.hidden)

	m.KVHeads = m.Heads
	if fam.kvHeads != "" {
		if v, ok, err := d.size(fam.kvHeads, false); err != nil {
			return err
		} else if ok {
			if v > m.Heads || m.Heads%v != 0 {
				return d.errf(fam.kvHeads, "%s = %d does not divide %s = %d", fam.kvHeads, v, headsKey, m.Heads)
			}
			m.KVHeads = v
		}
	}
	hd, hdOK := 0, false
	if fam.headDim != "" {
		if hd, hdOK, err = d.size(fam.headDim, false); err != nil {
			return err
		}
	}
	if hdOK {
		m.HeadDim = hd
	} else {
		if m.Hidden%m.Heads != 0 {
			return d.errf(headsKey, "%s = %d does not divide %s = %d and no head_dim is given", headsKey, m.Heads, hiddenKey, m.Hidden)
		}
		m.HeadDim = m.Hidden / m.Heads
	}
	return nil
}

// hfMLA reads multi-head latent attention's widths (DeepSeek-V2 §2.1):
// the KV latent (kv_lora_rank, required), the Q latent (q_lora_rank; null
// or absent is a full-rank Q, as in DeepSeek-V2-Lite), each head's no-RoPE
// query/key part (qk_nope_head_dim, the planner's HeadDim), its RoPE part
// and the value width. Every head has its own keys and values (the latent
// is shared instead): num_key_value_heads must equal the heads.
func hfMLA(d *hfDoc, fam hfFamily, m *Model) error {
	if !fam.mla {
		return nil
	}
	var err error
	if m.KVLoRA, _, err = d.size("kv_lora_rank", true); err != nil {
		return err
	}
	if v, ok, err := d.size("q_lora_rank", false); err != nil {
		return err
	} else if ok {
		m.QLoRA = v
	}
	if m.HeadDim, _, err = d.size("qk_nope_head_dim", true); err != nil {
		return err
	}
	if m.QKRopeDim, _, err = d.size("qk_rope_head_dim", true); err != nil {
		return err
	}
	if m.VHeadDim, _, err = d.size("v_head_dim", true); err != nil {
		return err
	}
	if m.KVHeads != m.Heads {
		return d.errf(fam.kvHeads, "%s = %d: multi-head latent attention gives every one of the %d heads its keys and values; want %d",
			fam.kvHeads, m.KVHeads, m.Heads, m.Heads)
	}
	return nil
}

// hfMLP reads the MLP's width and activation.
func hfMLP(d *hfDoc, fam hfFamily, m *Model) error {
	var err error
	// MLP width and activation.
	switch {
	case fam.ffn == "": // BLOOM: fixed 4h
		if v, ok, err := d.int("n_inner"); err != nil {
			return err
		} else if ok && v != 4*m.Hidden {
			return d.errf("n_inner", "n_inner = %d: BLOOM's MLP is 4·hidden = %d and transformers ignores n_inner; remove it or use --ffn", v, 4*m.Hidden)
		}
		m.FFN = 4 * m.Hidden
	case fam.ffnOptional:
		v, ok, err := d.size(fam.ffn, false)
		if err != nil {
			return err
		}
		m.FFN = 4 * m.Hidden
		if ok {
			m.FFN = v
		}
	case fam.moe == moeMixtral:
		// In Mixtral intermediate_size is each expert's width; every layer is MoE.
		if m.MoEFFN, _, err = d.size(fam.ffn, true); err != nil {
			return err
		}
		m.FFN = m.MoEFFN
	default:
		if m.FFN, _, err = d.size(fam.ffn, true); err != nil {
			return err
		}
	}
	act := fam.actDefault
	if fam.act != "" && d.present(fam.act) {
		act = d.str(fam.act)
	}
	if m.FFNType, err = hfActivation(d, fam, act); err != nil {
		return err
	}
	if fam.act == "activation_function" {
		if cross, err := d.boolean("add_cross_attention", false); err != nil {
			return err
		} else if cross {
			return d.errf("add_cross_attention", "add_cross_attention = true: encoder-decoder cross-attention is not modelled")
		}
	}
	return nil
}

// hfMoE reads the experts, top-k, expert widths and leading dense layers.
func hfMoE(d *hfDoc, fam hfFamily, m *Model) error {
	var err error
	switch fam.moe {
	case moeMixtral:
		if m.Experts, _, err = d.size("num_local_experts", true); err != nil {
			return err
		}
		if m.TopK, _, err = d.size("num_experts_per_tok", true); err != nil {
			return err
		}
	case moeQwen2MoE:
		if m.Experts, _, err = d.size("num_experts", true); err != nil {
			return err
		}
		if m.TopK, _, err = d.size("num_experts_per_tok", true); err != nil {
			return err
		}
		if m.MoEFFN, _, err = d.size("moe_intermediate_size", true); err != nil {
			return err
		}
		if v, ok, err := d.int("shared_expert_intermediate_size"); err != nil {
			return err
		} else if ok {
			if v < 0 {
				return d.errf("shared_expert_intermediate_size", "shared_expert_intermediate_size = %d: must not be negative", v)
			}
			m.SharedFFN = v
		}
		if v, ok, err := d.int("decoder_sparse_step"); err != nil {
			return err
		} else if ok && v != 1 {
			return d.errf("decoder_sparse_step", "decoder_sparse_step = %d: MoE on every %d-th layer is not modelled (only leading dense layers are); use 1", v, v)
		}
		if d.present("mlp_only_layers") {
			var dense []int
			if err := json.Unmarshal(d.vals["mlp_only_layers"], &dense); err != nil {
				return d.errf("mlp_only_layers", "mlp_only_layers = %s: want a list of layer indices", d.vals["mlp_only_layers"])
			}
			for i, l := range dense {
				if l != i {
					return d.errf("mlp_only_layers", "mlp_only_layers = %v: only leading dense layers [0 1 ... k-1] are modelled", dense)
				}
			}
			m.DenseLayers = len(dense)
		}
	case moeDeepSeek:
		if err := hfDeepSeekMoE(d, m); err != nil {
			return err
		}
	}
	if m.Experts > 0 && m.TopK > m.Experts {
		return d.errf("num_experts_per_tok", "num_experts_per_tok = %d exceeds the %d experts", m.TopK, m.Experts)
	}
	return nil
}

// hfDeepSeekMoE reads DeepSeekMoE: routed experts and top-k, each expert's
// width, n_shared_experts shared experts of that width (the planner's
// SharedFFN is their total width), and first_k_dense_replace leading dense
// layers of intermediate_size; moe_layer_freq must be 1 (absent: 1).
func hfDeepSeekMoE(d *hfDoc, m *Model) error {
	var err error
	if m.Experts, _, err = d.size("n_routed_experts", true); err != nil {
		return err
	}
	if m.TopK, _, err = d.size("num_experts_per_tok", true); err != nil {
		return err
	}
	if m.MoEFFN, _, err = d.size("moe_intermediate_size", true); err != nil {
		return err
	}
	if v, ok, err := d.int("n_shared_experts"); err != nil {
		return err
	} else if ok {
		if v < 0 || v > 1<<10 {
			return d.errf("n_shared_experts", "n_shared_experts = %d: want 0 to 1024", v)
		}
		m.SharedFFN = v * m.MoEFFN
	}
	if v, ok, err := d.int("first_k_dense_replace"); err != nil {
		return err
	} else if ok {
		if v < 0 || v > m.Layers {
			return d.errf("first_k_dense_replace", "first_k_dense_replace = %d: want 0 to num_hidden_layers = %d", v, m.Layers)
		}
		m.DenseLayers = v
	}
	if v, ok, err := d.int("moe_layer_freq"); err != nil {
		return err
	} else if ok && v != 1 {
		return d.errf("moe_layer_freq", "moe_layer_freq = %d: MoE on every %d-th layer is not modelled (only leading dense layers are); use 1", v, v)
	}
	return nil
}

func firstPresent(d *hfDoc, keys []string) string {
	for _, k := range keys {
		if d.present(k) {
			return k
		}
	}
	return keys[0]
}

// hfActivation maps transformers' activation names onto the MLP shapes the
// planner models.
func hfActivation(d *hfDoc, fam hfFamily, act string) (FFNType, error) {
	key := fam.act
	if fam.gatedGELU {
		switch act {
		case "gelu", "gelu_new", "gelu_fast", "gelu_pytorch_tanh", "gelu_python", "gelu_accurate":
			return FFNGeGLU, nil
		}
		return "", d.errf(key, "%s = %q: only a GELU-gated MLP (GeGLU) is modelled for this model_type; describe it with --ffn-type", key, act)
	}
	if fam.gated {
		switch act {
		case "silu", "swish":
			return FFNSwiGLU, nil
		}
		return "", d.errf(key, "%s = %q: only a SiLU-gated MLP (SwiGLU) is modelled for this model_type; describe it with --ffn-type", key, act)
	}
	switch act {
	case "gelu", "gelu_new", "gelu_fast", "gelu_pytorch_tanh", "gelu_python", "gelu_accurate":
		return FFNGelu, nil
	case "relu":
		return FFNReLU, nil
	case "relu2":
		return FFNSquaredReLU, nil
	}
	if key == "" {
		key = "activation"
	}
	return "", d.errf(key, "%s = %q: accepted: gelu (and its approximations), relu, relu2", key, act)
}

// hfMultimodal are the vision-language model types whose text_config is a
// decoder the planner models: what they add (the vision tower and its
// projector) is left out, and the notes say so.
var hfMultimodal = map[string]struct {
	text     string   // text_config's model_type
	harmless []string // the wrapper's own fields
	vision   string   // what is left out, for the note
}{
	// Gemma3ForConditionalGeneration (transformers' Gemma3Config): a SigLIP
	// So400m tower (about 0.4B parameters) whose mm_tokens_per_image (256)
	// tokens per image enter the decoder.
	"gemma3": {text: "gemma3_text", harmless: []string{"text_config", "vision_config", "mm_tokens_per_image",
		"boi_token_index", "eoi_token_index", "image_token_index"},
		vision: "its SigLIP vision tower (vision_config, about 0.4B parameters) and projector are not planned"},
}

// hfTextDecoder is d itself, or for a vision-language config its
// text_config, with a note of what is left out.
func hfTextDecoder(d *hfDoc) (*hfDoc, []string, error) {
	mt := d.str("model_type")
	mm, ok := hfMultimodal[mt]
	if !ok {
		return d, nil, nil
	}
	known := map[string]bool{}
	for _, k := range append(append([]string{}, hfCommonHarmless...), mm.harmless...) {
		known[k] = true
	}
	for _, k := range d.keys {
		if !strings.HasPrefix(k, "_") && !known[k] && !hfHarmlessPattern(k) {
			return nil, nil, d.errf(k, "unknown field %q for model_type %s: it may change the architecture, so the planner will not guess; "+
				"remove it if you know it is harmless, or describe the model with --layers, --hidden, --heads, ... flags", k, mt)
		}
	}
	raw, ok := d.vals["text_config"]
	if !ok || string(raw) == "null" || len(raw) == 0 || raw[0] != '{' {
		return nil, nil, fmt.Errorf("%s: model_type %s needs a text_config object (the decoder the planner models)", d.file, mt)
	}
	base := d.at["text_config"]
	if i := bytes.Index(d.data[base:], raw); i >= 0 {
		base += i
	}
	t, err := tokenizeHFDoc(raw, d.file)
	if err != nil {
		return nil, nil, err
	}
	t.outer, t.base = d, base
	switch got := t.str("model_type"); {
	case !t.present("model_type"):
		t.vals["model_type"], t.at["model_type"] = json.RawMessage(strconv.Quote(mm.text)), 0
		t.keys = append(t.keys, "model_type")
	case got != mm.text:
		return nil, nil, t.errf("model_type", "text_config's model_type %q: model_type %s's decoder is %s", got, mt, mm.text)
	}
	return t, []string{fmt.Sprintf("%s is a vision-language model (model_type %s): planning its text decoder (text_config, %s); %s",
		d.file, mt, mm.text, mm.vision)}, nil
}
