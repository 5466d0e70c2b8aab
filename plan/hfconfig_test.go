package plan

import (
	"cmp"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func hfParseFile(t *testing.T, file string) (Model, error) {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "hf", file))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return ParseHFConfig(f, file)
}

// deepseekV3JSON is testdata/hf/deepseek-v3.json, for mutations.
func deepseekV3JSON(t *testing.T) string {
	b, err := os.ReadFile(filepath.Join("testdata", "hf", "deepseek-v3.json"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Configs of models we have presets for must give exactly the preset.
func TestHFConfigMatchesPreset(t *testing.T) {
	cases := []struct{ file, preset string }{
		{"llama3-70b.json", "llama3-70b"},
		{"llama3.1-405b.json", "llama3.1-405b"},
		{"mistral-7b-v0.1.json", "mistral-7b"},
		{"mixtral-8x7b-v0.1.json", "mixtral-8x7b"},
		{"qwen2.5-72b.json", "qwen2.5-72b"},
		{"bloom.json", "bloom-176b"},
		{"deepseek-v3.json", "deepseek-v3"},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			got, err := hfParseFile(t, c.file)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := LookupModel(c.preset)
			got.Name = want.Name
			if got != want {
				t.Errorf("parsed %+v\n preset %+v", got, want)
			}
		})
	}
}

// Configs without a preset: checked against their published parameter totals.
func TestHFConfigParamCounts(t *testing.T) {
	cases := []struct {
		file          string
		total, active float64
		ffnType       FFNType
		tied          bool
		source        string
		activeTol     float64 // 0: half a unit of the published figure's last digit
	}{
		{"gpt2.json", 124.44e6, 0, FFNGelu, true, "HF openai-community/gpt2: 124,439,808 (incl. position embeddings and biases)", 0},
		{"gpt-neox-20b.json", 20.55e9, 0, FFNGelu, false, "Black et al. 2022: 20,554,567,680", 0},
		{"qwen1.5-moe-a2.7b.json", 14.3e9, 2.7e9, FFNSwiGLU, false, "Qwen1.5-MoE-A2.7B model card: 14.3B total, 2.7B activated", 0},
		{"minitron-4b-base.json", 4.19e9, 0, FFNSquaredReLU, false, "HF nvidia/Minitron-4B-Base: 4.19B", 0},
		// Issue 30: the model types a newcomer found refused.
		{"qwen3-4b.json", 4.0e9, 0, FFNSwiGLU, true, "HF Qwen/Qwen3-4B model card: 4.0B (3.6B non-embedding)", 0},
		{"qwen3-235b-a22b-instruct-2507.json", 235e9, 22e9, FFNSwiGLU, false, "HF Qwen/Qwen3-235B-A22B-Instruct-2507 model card: 235B in total, 22B activated",
			0.5 / 22}, // "22B" printed without a decimal: half a unit is 2.3 %
		{"phi-3-mini-4k-instruct.json", 3.821e9, 0, FFNSwiGLU, false, "keras-hub phi3_mini_4k_instruct_en preset: 3,821,079,552 (HF microsoft/Phi-3-mini-4k-instruct: 3.8B)", 0},
		{"gemma-2-9b.json", 9.24e9, 0, FFNGeGLU, true, "HF google/gemma-2-9b: 9.24B (safetensors 9,241,705,984)", 0},
		{"gemma-3-1b.json", 0.99989e9, 0, FFNGeGLU, true, "google/gemma-3-1b weights: embedding 262144×1152 and 26 layers, 999,885,952", 0},
		{"deepseek-v2-lite.json", 15.7e9, 2.4e9, FFNSwiGLU, false, "HF deepseek-ai/DeepSeek-V2-Lite: 15.7B total, 2.4B activated (full-rank Q: q_lora_rank null)",
			// 2.451B here without the input embedding: the card's 2.4B is 2.1 % below, just past half a unit.
			0.025},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			m, err := hfParseFile(t, c.file)
			if err != nil {
				t.Fatal(err)
			}
			if m.FFNType != c.ffnType || m.TiedEmbeddings != c.tied {
				t.Errorf("ffn_type %s tied %v, want %s %v", m.FFNType, m.TiedEmbeddings, c.ffnType, c.tied)
			}
			total, active := m.Params(), m.ActiveParams()
			if e := total/c.total - 1; math.Abs(e) > 0.01 {
				t.Errorf("total %.4g, published %.4g (%s): %+.2f%%", total, c.total, c.source, 100*e)
			}
			if c.active > 0 {
				tol := cmp.Or(c.activeTol, 0.05/(c.active/1e9)) // 2.7B: printed to two digits, half a unit is 1.9 %
				if e := activeAsPublished(m, active)/c.active - 1; math.Abs(e) > tol {
					t.Errorf("active %.4g, published %.4g (%s): %+.2f%%", active, c.active, c.source, 100*e)
				}
			}
		})
	}
}

func TestHFConfigQwenMoEFields(t *testing.T) {
	m, err := hfParseFile(t, "qwen1.5-moe-a2.7b.json")
	if err != nil {
		t.Fatal(err)
	}
	want := Model{Name: "qwen1.5-moe-a2.7b.json", Layers: 24, Hidden: 2048, Heads: 16, KVHeads: 16, HeadDim: 128, FFN: 5632,
		FFNType: FFNSwiGLU, Vocab: 151936, Experts: 60, TopK: 4, MoEFFN: 1408, SharedFFN: 5632,
		// Qwen2MoeAttention has Q/K/V biases whatever the file says.
		Norm: NormRMS, NormEps: 1e-6, Position: PositionRoPE, RopeTheta: 1e6, Bias: BiasQKV, Router: RouterSoftmax}
	if m != want {
		t.Errorf("got %+v\nwant %+v", m, want)
	}
}

// Each bad input names the file, the position and the field.
func TestHFConfigErrors(t *testing.T) {
	base := `{
  "model_type": "llama",
  "hidden_size": 8192,
  "num_hidden_layers": 80,
  "num_attention_heads": 64,
  "num_key_value_heads": 8,
  "intermediate_size": 28672,
  "vocab_size": 128256%s
}`
	extra := func(s string) string { return strings.Replace(base, "%s", s, 1) }
	cases := []struct {
		name, in, want string
	}{
		{"valid base", extra(""), ""},
		{"malformed: missing comma", strings.Replace(extra(""), `8192,`, `8192`, 1), "c.json:4:3: malformed JSON"},
		{"malformed: truncated", extra("")[:60], "c.json:4:11: malformed JSON: unexpected end of file"},
		{"not an object", `[1,2]`, "want a JSON object"},
		{"empty", ``, "c.json: empty file"},
		{"trailing data", extra("") + "{}", "data after the closing }"},
		{"duplicate key", extra(`,
  "hidden_size": 4096`), `c.json:9:3: hidden_size appears twice (first on line 3)`},
		{"unknown field", extra(`,
  "num_experts_per_layer": 4`), `c.json:9:3: unknown field "num_experts_per_layer" for model_type llama`},
		{"MLA field", extra(`,
  "kv_lora_rank": 512`), `c.json:9:3: field "kv_lora_rank" is multi-head latent attention's, which model_type llama does not have`},
		{"quantised base is not harmless", extra(`,
  "quantization_config": {"bits": 4}`), `quantization_config: a quantised base (quant_method "") is not modelled`},
		{"4-bit base refused", extra(`,
  "quantization_config": {"quant_method": "gptq", "bits": 4}`), `a quantised base (quant_method "gptq")`},
		{"FP8-released weights accepted", extra(`,
  "quantization_config": {"quant_method": "fp8", "fmt": "e4m3"}`), ""},
		{"harmless fields ignored", extra(`,
  "rope_theta": 500000.0, "torch_dtype": "bfloat16", "_name_or_path": "x", "rope_scaling": null`), ""},
		{"harmless name patterns", extra(`,
  "attention_probs_dropout_prob": 0.1, "hidden_dropout_prob": 0.1, "resid_pdrop": 0.1, "decoder_start_token_id": 0, "norm_epsilon": 1e-5`), ""},
		{"kv heads do not divide heads", strings.Replace(extra(""), `"num_key_value_heads": 8`, `"num_key_value_heads": 6`, 1),
			"c.json:6:3: num_key_value_heads = 6 does not divide num_attention_heads = 64"},
		{"heads do not divide hidden", strings.Replace(strings.Replace(extra(""), `"num_attention_heads": 64`, `"num_attention_heads": 48`, 1), `"num_key_value_heads": 8`, `"num_key_value_heads": 48`, 1),
			"c.json:5:3: num_attention_heads = 48 does not divide hidden_size = 8192 and no head_dim is given"},
		{"head_dim resolves it", strings.Replace(strings.Replace(extra(`,
  "head_dim": 128`), `"num_attention_heads": 64`, `"num_attention_heads": 48`, 1), `"num_key_value_heads": 8`, `"num_key_value_heads": 48`, 1), ""},
		{"negative size", strings.Replace(extra(""), `28672`, `-1`, 1), "c.json:7:3: intermediate_size = -1: must be positive"},
		{"fractional size", strings.Replace(extra(""), `28672`, `28672.5`, 1), "intermediate_size = 28672.5: want an integer"},
		{"string size", strings.Replace(extra(""), `28672`, `"28672"`, 1), `intermediate_size = "28672": want an integer`},
		{"missing field", strings.Replace(extra(""), `"vocab_size": 128256`, `"rope_theta": 1`, 1), "c.json: vocab_size is missing (model_type llama needs it)"},
		{"gated gelu not modelled", extra(`,
  "hidden_act": "gelu"`), `hidden_act = "gelu": only a SiLU-gated MLP`},
		{"tie wrong type", extra(`,
  "tie_word_embeddings": "yes"`), `tie_word_embeddings = "yes": want true or false`},
		{"unknown model_type", `{"model_type": "t5"}`, `model_type "t5" is not supported; supported: bloom, deepseek_v2, deepseek_v3, gemma, gemma2, gemma3, gemma3_text, gpt2, gpt_neox, llama`},
		{"deepseek without its latent", strings.Replace(deepseekV3JSON(t), `"kv_lora_rank": 512,`, ``, 1), "kv_lora_rank is missing (model_type deepseek_v3 needs it)"},
		{"deepseek with grouped KV", strings.Replace(deepseekV3JSON(t), `"num_key_value_heads": 128`, `"num_key_value_heads": 8`, 1),
			"num_key_value_heads = 8: multi-head latent attention gives every one of the 128 heads its keys and values"},
		{"deepseek interleaved MoE", strings.Replace(deepseekV3JSON(t), `"moe_layer_freq": 1`, `"moe_layer_freq": 2`, 1), "moe_layer_freq = 2: MoE on every 2-th layer is not modelled"},
		{"deepseek dense layers beyond depth", strings.Replace(deepseekV3JSON(t), `"first_k_dense_replace": 3`, `"first_k_dense_replace": 62`, 1),
			"first_k_dense_replace = 62: want 0 to num_hidden_layers = 61"},
		{"no model_type", `{"hidden_size": 1}`, "model_type is missing"},
		{"bloom aliases disagree", `{"model_type": "bloom", "n_embed": 14336, "hidden_size": 4096, "n_layer": 2, "n_head": 112, "vocab_size": 10}`,
			"n_embed = 14336 contradicts hidden_size = 4096"},
		{"qwen2_moe interleaved", `{"model_type": "qwen2_moe", "hidden_size": 2048, "num_hidden_layers": 24, "num_attention_heads": 16, "intermediate_size": 5632,
			"vocab_size": 10, "num_experts": 60, "num_experts_per_tok": 4, "moe_intermediate_size": 1408, "decoder_sparse_step": 2}`,
			"decoder_sparse_step = 2: MoE on every 2-th layer is not modelled"},
		{"qwen2_moe dense prefix", `{"model_type": "qwen2_moe", "hidden_size": 2048, "num_hidden_layers": 24, "num_attention_heads": 16, "intermediate_size": 5632,
			"vocab_size": 10, "num_experts": 60, "num_experts_per_tok": 4, "moe_intermediate_size": 1408, "mlp_only_layers": [0, 2]}`,
			"mlp_only_layers = [0 2]: only leading dense layers"},
		{"mixtral topk > experts", `{"model_type": "mixtral", "hidden_size": 4096, "num_hidden_layers": 2, "num_attention_heads": 32, "intermediate_size": 14336,
			"vocab_size": 10, "num_local_experts": 2, "num_experts_per_tok": 4}`, "num_experts_per_tok = 4 exceeds the 2 experts"},
		{"mixtral field in llama", extra(`,
  "num_local_experts": 8`), `unknown field "num_local_experts" for model_type llama`},
		{"gpt2 cross attention", `{"model_type": "gpt2", "n_embd": 768, "n_layer": 12, "n_head": 12, "vocab_size": 50257, "add_cross_attention": true}`,
			"add_cross_attention = true: encoder-decoder cross-attention is not modelled"},
		{"nemotron unknown act", `{"model_type": "nemotron", "hidden_size": 3072, "num_hidden_layers": 2, "num_attention_heads": 24, "intermediate_size": 9216,
			"vocab_size": 10, "hidden_act": "silu"}`, `hidden_act = "silu": accepted: gelu (and its approximations), relu, relu2`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseHFConfig(strings.NewReader(c.in), "c.json")
			if c.want == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v\nwant it to contain %q", err, c.want)
			}
		})
	}
}

// Issue 30: Qwen3 and Gemma 3 norm each head's queries and keys, Phi-3 is
// Llama's shape, Gemma's MLP is GELU-gated; Gemma 3's multimodal config is
// planned as its text decoder, from Gemma3TextConfig's defaults where the
// file's text_config is silent, and says what it leaves out.
func TestHFConfigQwen3GemmaPhi3(t *testing.T) {
	q, err := hfParseFile(t, "qwen3-4b.json")
	if err != nil {
		t.Fatal(err)
	}
	if !q.QKNorm || q.Bias != BiasNone || q.HeadDim != 128 || q.KVHeads != 8 || q.RopeTheta != 5e6 {
		t.Errorf("qwen3: %+v", q)
	}
	var b strings.Builder
	qj := Job{SeqLen: 4096, GlobalBatch: 64}
	r := Search(q, qj, ClusterOf(mustGPU(t, "h100-sxm"), 8), SearchOptions{})
	if r.Plan == nil {
		t.Fatal("qwen3-4b: no plan on 8 H100s")
	}
	if err := RenderMegatron(&b, q, qj, *r.Plan); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "--qk-layernorm") {
		t.Errorf("qwen3's Megatron flags lack --qk-layernorm:\n%s", b.String())
	}
	// transformers 4.56+ writes layer_types into Qwen3's config.json.
	q4, _ := os.ReadFile(filepath.Join("testdata", "hf", "qwen3-4b.json"))
	lt := `"layer_types": [` + strings.TrimSuffix(strings.Repeat(`"full_attention", `, 36), ", ") + `],`
	if q2, err := ParseHFConfig(strings.NewReader(strings.Replace(string(q4), `"max_window_layers": 36,`, `"max_window_layers": 36, `+lt, 1)), "q.json"); err != nil || q2.Layers != 36 {
		t.Errorf("qwen3 with layer_types: %v", err)
	}
	p, err := hfParseFile(t, "phi-3-mini-4k-instruct.json")
	if err != nil {
		t.Fatal(err)
	}
	if p.QKNorm || p.KVHeads != 32 || p.HeadDim != 96 || p.FFN != 8192 {
		t.Errorf("phi3: %+v", p)
	}
	g1, err := hfParseFile(t, "gemma-3-1b.json")
	if err != nil {
		t.Fatal(err)
	}
	if !g1.QKNorm || g1.HeadDim != 256 || g1.KVHeads != 1 {
		t.Errorf("gemma3_text: %+v", g1)
	}
	if g2, _ := hfParseFile(t, "gemma-2-9b.json"); g2.QKNorm {
		t.Errorf("gemma2 has no QK-norm (it soft-caps): %+v", g2)
	}

	f, err := os.Open(filepath.Join("testdata", "hf", "gemma-3-12b-it.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, notes, err := ParseHFConfigNotes(f, "gemma-3-12b-it.json")
	if err != nil {
		t.Fatal(err)
	}
	want := Model{Name: "gemma-3-12b-it.json", Layers: 48, Hidden: 3840, Heads: 16, KVHeads: 8, HeadDim: 256, FFN: 15360, FFNType: FFNGeGLU,
		Vocab: 262208, TiedEmbeddings: true, QKNorm: true, Norm: NormRMS, NormEps: 1e-6, Position: PositionRoPE, RopeTheta: 1e6, Bias: BiasNone}
	if m != want {
		t.Errorf("gemma3 text_config:\n got %+v\nwant %+v", m, want)
	}
	// "12B" counts the 0.4B SigLIP tower too: the decoder is under it.
	if p := m.Params(); p < 11e9 || p > 12.2e9 {
		t.Errorf("gemma-3-12b decoder %.4g parameters, want 11e9..12.2e9", p)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "vision tower") {
		t.Errorf("notes %q, want one saying the vision tower is left out", notes)
	}
	for _, c := range []struct{ from, to, want string }{
		{`"mm_tokens_per_image": 256,`, `"mm_tokens_per_image": 256, "audio_config": {},`, `gemma-3-12b-it.json:13:31: unknown field "audio_config" for model_type gemma3`},
		{`"model_type": "gemma3_text",`, `"model_type": "gemma2",`, `gemma-3-12b-it.json:18:5: text_config's model_type "gemma2"`},
		{`"num_key_value_heads": 8,`, `"num_key_value_heads": 7,`, `gemma-3-12b-it.json:21:5: num_key_value_heads = 7 does not divide`},
	} {
		b, _ := os.ReadFile(filepath.Join("testdata", "hf", "gemma-3-12b-it.json"))
		in := strings.Replace(string(b), c.from, c.to, 1)
		if _, _, err := ParseHFConfigNotes(strings.NewReader(in), "gemma-3-12b-it.json"); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s -> %s: error %v, want %q", c.from, c.to, err, c.want)
		}
	}
}
