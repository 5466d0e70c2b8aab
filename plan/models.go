package plan

import (
	"github.com/trainrun/trainrun/topo"

	"fmt"
	"sort"
	"strings"
)

// Model presets. Every figure is copied from the model's published
// configuration: the config.json of the official Hugging Face repository
// where one exists, otherwise the paper's table. The source is written beside
// each entry and returned by ModelSource.
//
// Conventions for all presets:
//   - FFN is the dense MLP's hidden size; for a model whose every layer is MoE
//     (Mixtral) it equals the expert size and is unused by the MoE layers.
//   - Biases and learned position embeddings are not part of Model; they are
//     below 0.3 % of the parameters of every preset here (models_test.go
//     checks Model.Params against each published total).

type modelPreset struct {
	model  Model
	source string
}

// presets is keyed by the canonical name users type.
var presets = map[string]modelPreset{
	// GPT-3: Brown et al. 2020, "Language Models are Few-Shot Learners",
	// Table 2.1 (n_layers, d_model, n_heads, d_head; FFN = 4·d_model, §2.1;
	// GPT-2 BPE vocabulary of 50257 tokens with tied input/output embeddings).
	// Two rows of Table 2.1 are inconsistent and are corrected the way
	// Megatron-LM and NeMo configure these models: "GPT-3 XL" lists 24 heads of
	// 128 for d_model 2048 (24·128 = 3072), used here as 16 heads of 128; "13B"
	// lists d_model 5140, not divisible by its 40 heads, used here as 5120.
	"gpt3-1.3b": {Model{Name: "gpt3-1.3b", Layers: 24, Hidden: 2048, Heads: 16, KVHeads: 16, HeadDim: 128,
		FFN: 8192, FFNType: FFNGelu, Vocab: 50257, TiedEmbeddings: true},
		"Brown et al. 2020 Table 2.1 (GPT-3 XL; 16 heads as in Megatron-LM/NeMo, the table's 24x128 does not match d_model 2048)"},
	"gpt3-2.7b": {Model{Name: "gpt3-2.7b", Layers: 32, Hidden: 2560, Heads: 32, KVHeads: 32, HeadDim: 80,
		FFN: 10240, FFNType: FFNGelu, Vocab: 50257, TiedEmbeddings: true},
		"Brown et al. 2020 Table 2.1"},
	"gpt3-6.7b": {Model{Name: "gpt3-6.7b", Layers: 32, Hidden: 4096, Heads: 32, KVHeads: 32, HeadDim: 128,
		FFN: 16384, FFNType: FFNGelu, Vocab: 50257, TiedEmbeddings: true},
		"Brown et al. 2020 Table 2.1"},
	"gpt3-13b": {Model{Name: "gpt3-13b", Layers: 40, Hidden: 5120, Heads: 40, KVHeads: 40, HeadDim: 128,
		FFN: 20480, FFNType: FFNGelu, Vocab: 50257, TiedEmbeddings: true},
		"Brown et al. 2020 Table 2.1 (d_model 5120 = 40x128; the table prints 5140)"},
	"gpt3-175b": {Model{Name: "gpt3-175b", Layers: 96, Hidden: 12288, Heads: 96, KVHeads: 96, HeadDim: 128,
		FFN: 49152, FFNType: FFNGelu, Vocab: 50257, TiedEmbeddings: true},
		"Brown et al. 2020 Table 2.1"},

	// Llama 2: Touvron et al. 2023 and the config.json of meta-llama/Llama-2-{7b,13b,70b}-hf.
	"llama2-7b": {Model{Name: "llama2-7b", Layers: 32, Hidden: 4096, Heads: 32, KVHeads: 32, HeadDim: 128,
		FFN: 11008, FFNType: FFNSwiGLU, Vocab: 32000},
		"HF meta-llama/Llama-2-7b-hf config.json"},
	"llama2-13b": {Model{Name: "llama2-13b", Layers: 40, Hidden: 5120, Heads: 40, KVHeads: 40, HeadDim: 128,
		FFN: 13824, FFNType: FFNSwiGLU, Vocab: 32000},
		"HF meta-llama/Llama-2-13b-hf config.json"},
	"llama2-70b": {Model{Name: "llama2-70b", Layers: 80, Hidden: 8192, Heads: 64, KVHeads: 8, HeadDim: 128,
		FFN: 28672, FFNType: FFNSwiGLU, Vocab: 32000},
		"HF meta-llama/Llama-2-70b-hf config.json"},

	// Llama 3 and 3.1: the 3.1 8B/70B shapes equal 3's (3.1 adds rope_scaling,
	// which changes positions, not sizes).
	"llama3-8b": {Model{Name: "llama3-8b", Layers: 32, Hidden: 4096, Heads: 32, KVHeads: 8, HeadDim: 128,
		FFN: 14336, FFNType: FFNSwiGLU, Vocab: 128256},
		"HF meta-llama/Meta-Llama-3-8B config.json"},
	"llama3-70b": {Model{Name: "llama3-70b", Layers: 80, Hidden: 8192, Heads: 64, KVHeads: 8, HeadDim: 128,
		FFN: 28672, FFNType: FFNSwiGLU, Vocab: 128256},
		"HF meta-llama/Meta-Llama-3-70B config.json"},
	"llama3.1-8b": {Model{Name: "llama3.1-8b", Layers: 32, Hidden: 4096, Heads: 32, KVHeads: 8, HeadDim: 128,
		FFN: 14336, FFNType: FFNSwiGLU, Vocab: 128256},
		"HF meta-llama/Llama-3.1-8B config.json"},
	"llama3.1-70b": {Model{Name: "llama3.1-70b", Layers: 80, Hidden: 8192, Heads: 64, KVHeads: 8, HeadDim: 128,
		FFN: 28672, FFNType: FFNSwiGLU, Vocab: 128256},
		"HF meta-llama/Llama-3.1-70B config.json"},
	"llama3.1-405b": {Model{Name: "llama3.1-405b", Layers: 126, Hidden: 16384, Heads: 128, KVHeads: 8, HeadDim: 128,
		FFN: 53248, FFNType: FFNSwiGLU, Vocab: 128256},
		"HF meta-llama/Llama-3.1-405B config.json; Llama 3 paper (Dubey et al. 2024) Table 3"},

	// Mistral AI.
	"mistral-7b": {Model{Name: "mistral-7b", Layers: 32, Hidden: 4096, Heads: 32, KVHeads: 8, HeadDim: 128,
		FFN: 14336, FFNType: FFNSwiGLU, Vocab: 32000},
		"HF mistralai/Mistral-7B-v0.1 config.json (sliding_window 4096 not modelled: attention counted as full causal)"},
	"mixtral-8x7b": {Model{Name: "mixtral-8x7b", Layers: 32, Hidden: 4096, Heads: 32, KVHeads: 8, HeadDim: 128,
		FFN: 14336, FFNType: FFNSwiGLU, Vocab: 32000, Experts: 8, TopK: 2, MoEFFN: 14336},
		"HF mistralai/Mixtral-8x7B-v0.1 config.json"},
	"mixtral-8x22b": {Model{Name: "mixtral-8x22b", Layers: 56, Hidden: 6144, Heads: 48, KVHeads: 8, HeadDim: 128,
		FFN: 16384, FFNType: FFNSwiGLU, Vocab: 32000, Experts: 8, TopK: 2, MoEFFN: 16384},
		"HF mistralai/Mixtral-8x22B-v0.1 config.json"},

	// Qwen2.5 (all untied above 3B; q/k/v biases are not counted).
	"qwen2.5-7b": {Model{Name: "qwen2.5-7b", Layers: 28, Hidden: 3584, Heads: 28, KVHeads: 4, HeadDim: 128,
		FFN: 18944, FFNType: FFNSwiGLU, Vocab: 152064},
		"HF Qwen/Qwen2.5-7B config.json"},
	"qwen2.5-14b": {Model{Name: "qwen2.5-14b", Layers: 48, Hidden: 5120, Heads: 40, KVHeads: 8, HeadDim: 128,
		FFN: 13824, FFNType: FFNSwiGLU, Vocab: 152064},
		"HF Qwen/Qwen2.5-14B config.json"},
	"qwen2.5-32b": {Model{Name: "qwen2.5-32b", Layers: 64, Hidden: 5120, Heads: 40, KVHeads: 8, HeadDim: 128,
		FFN: 27648, FFNType: FFNSwiGLU, Vocab: 152064},
		"HF Qwen/Qwen2.5-32B config.json"},
	"qwen2.5-72b": {Model{Name: "qwen2.5-72b", Layers: 80, Hidden: 8192, Heads: 64, KVHeads: 8, HeadDim: 128,
		FFN: 29568, FFNType: FFNSwiGLU, Vocab: 152064},
		"HF Qwen/Qwen2.5-72B config.json"},

	// Nemotron-4 340B: Nvidia 2024, "Nemotron-4 340B Technical Report"
	// Table 1 (96 layers, hidden 18432, 96 heads, 8 KV heads, squared-ReLU
	// MLP without gating, FFN 4·h = 73728, vocabulary 256000, untied
	// embeddings); the checkpoint ships as .nemo, not a HF config.json.
	"nemotron4-340b": {Model{Name: "nemotron4-340b", Layers: 96, Hidden: 18432, Heads: 96, KVHeads: 8, HeadDim: 192,
		FFN: 73728, FFNType: FFNSquaredReLU, Vocab: 256000},
		"Nemotron-4 340B Technical Report (arXiv 2406.11704) Table 1"},

	// DeepSeek: multi-head latent attention and DeepSeekMoE (routed experts,
	// shared experts of the routed width, leading dense layers). V3's
	// multi-token-prediction module (num_nextn_predict_layers 1, 14B of HF's
	// 685B) is not part of the preset: the main model is 671B.
	"deepseek-v3": {deepseekV3Model("deepseek-v3"),
		"HF deepseek-ai/DeepSeek-V3 config.json; DeepSeek-V3 report (arXiv 2412.19437) §2, §4.2 (MTP module not included)"},
	"deepseek-r1": {deepseekV3Model("deepseek-r1"),
		"HF deepseek-ai/DeepSeek-R1 config.json (DeepSeek-V3's architecture)"},
	// Kimi K2 (Moonshot AI 2025): DeepSeek-V3's architecture with 384 routed
	// experts, 64 heads and one leading dense layer.
	"kimi-k2": {Model{Name: "kimi-k2", Layers: 61, Hidden: 7168, Heads: 64, KVHeads: 64, HeadDim: 128,
		FFN: 18432, FFNType: FFNSwiGLU, Vocab: 163840, Experts: 384, TopK: 8, MoEFFN: 2048, SharedFFN: 2048, DenseLayers: 1,
		QLoRA: 1536, KVLoRA: 512, QKRopeDim: 64, VHeadDim: 128},
		"HF moonshotai/Kimi-K2-Instruct config.json (n_routed_experts 384, num_experts_per_tok 8, n_shared_experts 1, moe_intermediate_size 2048, first_k_dense_replace 1, 64 heads, vocab 163840; MLA as DeepSeek-V3)"},
	"deepseek-v2": {Model{Name: "deepseek-v2", Layers: 60, Hidden: 5120, Heads: 128, KVHeads: 128, HeadDim: 128,
		FFN: 12288, FFNType: FFNSwiGLU, Vocab: 102400, Experts: 160, TopK: 6, MoEFFN: 1536, SharedFFN: 2 * 1536, DenseLayers: 1,
		QLoRA: 1536, KVLoRA: 512, QKRopeDim: 64, VHeadDim: 128},
		"HF deepseek-ai/DeepSeek-V2 config.json; DeepSeek-V2 paper (arXiv 2405.04434) §3.1.2"},

	// BLOOM: HF bigscience/bloom config.json (n_embed 14336, n_layer 70,
	// 112 heads, vocab 250880); FFN = 4·h with GeLU (BloomMLP), tied embeddings.
	"bloom-176b": {Model{Name: "bloom-176b", Layers: 70, Hidden: 14336, Heads: 112, KVHeads: 112, HeadDim: 128,
		FFN: 57344, FFNType: FFNGelu, Vocab: 250880, TiedEmbeddings: true},
		"HF bigscience/bloom config.json (MLP 4h fixed by BloomMLP)"},
}

// deepseekV3Model is DeepSeek-V3's (and R1's) architecture.
func deepseekV3Model(name string) Model {
	return Model{Name: name, Layers: 61, Hidden: 7168, Heads: 128, KVHeads: 128, HeadDim: 128,
		FFN: 18432, FFNType: FFNSwiGLU, Vocab: 129280, Experts: 256, TopK: 8, MoEFFN: 2048, SharedFFN: 2048, DenseLayers: 3,
		QLoRA: 1536, KVLoRA: 512, QKRopeDim: 64, VHeadDim: 128}
}

// unsupportedModels are known names the planner refuses, with the reason
// (none today: the DeepSeek models were, until MLA was modelled).
var unsupportedModels = map[string]string{}

// normName folds case and the separators people type differently
// ("Llama-3-70B", "llama3_70b"); dots are kept so gpt3-1.3b and gpt3-13b stay apart.
func normName(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(s)) {
		switch r {
		case '-', '_', ' ':
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

var presetByNorm = func() map[string]string {
	m := map[string]string{}
	for name := range presets {
		m[normName(name)] = name
	}
	for name := range unsupportedModels {
		m[normName(name)] = name
	}
	return m
}()

// ModelNames lists the presets' canonical names, sorted.
func ModelNames() []string {
	names := make([]string, 0, len(presets))
	for n := range presets {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// LookupModel returns the preset called name (case and '-', '_' ignored).
// An unknown name's error names the input, the nearest preset and the list.
func LookupModel(name string) (Model, error) {
	canon, ok := presetByNorm[normName(name)]
	if !ok {
		return Model{}, fmt.Errorf("unknown model %q; nearest: %s; known: %s (or give a config.json path, or --layers/--hidden/... flags)",
			name, nearestName(name, ModelNames()), strings.Join(ModelNames(), ", "))
	}
	if why, bad := unsupportedModels[canon]; bad {
		return Model{}, fmt.Errorf("model %q: %s", name, why)
	}
	return presets[canon].model, nil
}

// ModelSource says where a preset's figures come from ("" if unknown).
func ModelSource(name string) string {
	return presets[presetByNorm[normName(name)]].source
}

// nearest returns the candidate with the smallest edit distance to s after
// normalisation (ties: the alphabetically first).
func nearestName(s string, candidates []string) string {
	best, bestD := "", -1
	ns := normName(s)
	for _, c := range candidates {
		d := topo.EditDistance(ns, normName(c))
		if bestD < 0 || d < bestD || (d == bestD && c < best) {
			best, bestD = c, d
		}
	}
	return best
}

// ValidateModel checks the rules every model must satisfy before the planner
// uses it; the error names the field (by its JSON name) and the value.
func ValidateModel(m Model) error {
	pos := []struct {
		name string
		v    int
	}{{"layers", m.Layers}, {"hidden", m.Hidden}, {"heads", m.Heads}, {"kv_heads", m.KVHeads}, {"head_dim", m.HeadDim}, {"vocab", m.Vocab}}
	for _, p := range pos {
		if p.v <= 0 {
			return fmt.Errorf("%s = %d: must be positive", p.name, p.v)
		}
	}
	if m.KVHeads > m.Heads || m.Heads%m.KVHeads != 0 {
		return fmt.Errorf("kv_heads = %d: must divide heads = %d (grouped-query attention shares each KV head among heads/kv_heads query heads)", m.KVHeads, m.Heads)
	}
	switch m.FFNType {
	case FFNGelu, FFNSwiGLU, FFNReLU, FFNSquaredReLU, FFNGeGLU:
	default:
		return fmt.Errorf("ffn_type = %q: accepted: gelu, swiglu, geglu, relu, squared-relu", m.FFNType)
	}
	for _, p := range []struct {
		name string
		v    int
	}{{"ffn", m.FFN}, {"experts", m.Experts}, {"topk", m.TopK}, {"moe_ffn", m.MoEFFN}, {"shared_ffn", m.SharedFFN}, {"dense_layers", m.DenseLayers}} {
		if p.v < 0 {
			return fmt.Errorf("%s = %d: must not be negative", p.name, p.v)
		}
	}
	if m.Experts == 0 {
		if m.FFN == 0 {
			return fmt.Errorf("ffn = 0: a dense model needs the MLP hidden size")
		}
		if m.TopK != 0 || m.MoEFFN != 0 || m.SharedFFN != 0 || m.DenseLayers != 0 {
			return fmt.Errorf("topk = %d, moe_ffn = %d, shared_ffn = %d, dense_layers = %d given without experts: set experts for a MoE model",
				m.TopK, m.MoEFFN, m.SharedFFN, m.DenseLayers)
		}
		return nil
	}
	if m.Experts == 1 {
		return fmt.Errorf("experts = 1: a single expert is a dense MLP; use ffn instead")
	}
	if m.TopK < 1 || m.TopK > m.Experts {
		return fmt.Errorf("topk = %d: must be between 1 and experts = %d", m.TopK, m.Experts)
	}
	if m.MoEFFN <= 0 {
		return fmt.Errorf("moe_ffn = %d: a MoE model needs each expert's MLP hidden size", m.MoEFFN)
	}
	if m.DenseLayers >= m.Layers {
		return fmt.Errorf("dense_layers = %d: must be below layers = %d", m.DenseLayers, m.Layers)
	}
	if m.DenseLayers > 0 && m.FFN == 0 {
		return fmt.Errorf("ffn = 0 with dense_layers = %d: the dense layers need the MLP hidden size", m.DenseLayers)
	}
	return nil
}
