package plan

// Parameter and FLOP counts. Conventions: planner-formulas.md §1.3 and §2.4.
//
// FlopsPerToken is the contract's model_flops_per_token: the model's matmul
// FLOPs for forward and backward (= 3 × forward: the backward computes the
// input and the weight gradients, each as costly as the forward) with causal
// attention (the masked half of QKᵀ and AV not counted) and no recomputation.
// Norms, activations, softmax and the embedding lookup are not counted. This is
// Megatron-LM's num_floating_point_operations after commit 20d66d5c (Jan 2026)
// and NeMo's flops_formulas after 6251117f (Aug 2025). For GPT with F = 4h it
// equals 72·l·h² + 6·l·h·s + 6·h·V per token, i.e. Korthikanti's
// 72·l·h²·(1 + s/6h + V/12lh) with the s² term halved.

func (m Model) headDim() int {
	if m.HeadDim > 0 {
		return m.HeadDim
	}
	if m.Heads > 0 {
		return m.Hidden / m.Heads
	}
	return 0
}

func (m Model) kvHeads() int {
	if m.KVHeads > 0 {
		return m.KVHeads
	}
	return m.Heads
}

func (t FFNType) gated() bool { return t == FFNSwiGLU || t == FFNGeGLU }

// mlpMatrices is 3 for gated MLPs (gate, up, down), else 2.
func (t FFNType) mlpMatrices() float64 {
	if t.gated() {
		return 3
	}
	return 2
}

// isMoE reports whether the model has routed experts.
func (m Model) isMoE() bool { return m.Experts > 0 && m.TopK > 0 }

// moeLayers is the number of MoE layers (the first DenseLayers are dense).
func (m Model) moeLayers() int {
	if !m.isMoE() {
		return 0
	}
	return max(m.Layers-m.DenseLayers, 0)
}

func (m Model) moeFFN() int {
	if m.MoEFFN > 0 {
		return m.MoEFFN
	}
	return m.FFN
}

// isMLA reports multi-head latent attention.
func (m Model) isMLA() bool { return m.KVLoRA > 0 }

// qkDim is the per-head width of queries and keys (MLA adds the RoPE part).
func (m Model) qkDim() int { return m.headDim() + m.QKRopeDim }

// vDim is the per-head width of values.
func (m Model) vDim() int {
	if m.VHeadDim > 0 {
		return m.VHeadDim
	}
	return m.headDim()
}

// attnLinear is one linear layer of attention: in×out weights, out sharded
// by TP (column parallel) when colTP, in sharded by TP (row parallel) when
// rowTP, neither when replicated (MLA's down projections).
type attnLinear struct {
	in, out      float64
	colTP, rowTP bool
}

// attnLinears lists attention's linear layers without allocating: for MHA/GQA
// QKV (h → (n+2g)·d) and the output projection; for MLA (DeepSeek-V2 §2.1;
// Megatron-Core multi_latent_attention.py) the Q down/up projections (or one
// full-rank Q), the KV down projection (latent + shared RoPE key), the KV up
// projection (no-RoPE keys and values of every head) and the output.
func (m Model) attnLinears() (ls [5]attnLinear, n int) {
	h := float64(m.Hidden)
	nh, g := float64(m.Heads), float64(m.kvHeads())
	if !m.isMLA() {
		d := float64(m.headDim())
		ls[0] = attnLinear{in: h, out: (nh + 2*g) * d, colTP: true}
		ls[1] = attnLinear{in: nh * d, out: h, rowTP: true}
		return ls, 2
	}
	qk, v := float64(m.qkDim()), float64(m.vDim())
	if m.QLoRA > 0 {
		ls[n] = attnLinear{in: h, out: float64(m.QLoRA)}
		n++
		ls[n] = attnLinear{in: float64(m.QLoRA), out: nh * qk, colTP: true}
	} else {
		ls[n] = attnLinear{in: h, out: nh * qk, colTP: true}
	}
	n++
	kvl := float64(m.KVLoRA)
	ls[n] = attnLinear{in: h, out: kvl + float64(m.QKRopeDim)}
	ls[n+1] = attnLinear{in: kvl, out: nh * (float64(m.headDim()) + v), colTP: true}
	ls[n+2] = attnLinear{in: nh * v, out: h, rowTP: true}
	return ls, n + 3
}

// attnParams: Q and O are h×(n·d), K and V h×(g·d) (Megatron
// theoretical_memory_usage.py: 2h²·(1+g/n)·(q/h)); MLA per attnLinears.
// Biases and MLA's latent norms are left out (< 0.01 % of the parameters).
func (m Model) attnParams() float64 {
	ls, n := m.attnLinears()
	var p float64
	for _, l := range ls[:n] {
		p += l.in * l.out
	}
	return p
}

// attnParamsTP is attention's parameters per GPU under TP t.
func (m Model) attnParamsTP(t float64) float64 {
	ls, n := m.attnLinears()
	var p float64
	for _, l := range ls[:n] {
		if l.colTP || l.rowTP {
			p += l.in * l.out / t
		} else {
			p += l.in * l.out
		}
	}
	return p
}

func (m Model) denseMLPParams() float64 {
	return m.FFNType.mlpMatrices() * float64(m.Hidden) * float64(m.FFN)
}

func (m Model) expertParams() float64 {
	return m.FFNType.mlpMatrices() * float64(m.Hidden) * float64(m.moeFFN())
}

func (m Model) sharedParams() float64 {
	return m.FFNType.mlpMatrices() * float64(m.Hidden) * float64(m.SharedFFN)
}

// normParams: two norms per layer; LayerNorm has a bias, RMSNorm (Llama
// family, gated MLPs) does not.
func (m Model) normParams() float64 {
	if m.FFNType.gated() {
		return 2 * float64(m.Hidden)
	}
	return 4 * float64(m.Hidden)
}

func (m Model) embeddingParams() float64 { return float64(m.Vocab) * float64(m.Hidden) }

// Params is the total parameter count: layers, input embedding, and the output
// layer unless tied (GPT-3 175B: 12·l·h² + V·h ≈ 174.6e9 with V = 51200;
// Llama-3-70B: 70.55e9).
func (m Model) Params() float64 {
	dense := float64(m.Layers - m.moeLayers())
	moe := float64(m.moeLayers())
	p := float64(m.Layers)*(m.attnParams()+m.normParams()) + dense*m.denseMLPParams()
	p += moe * (float64(m.Experts)*m.expertParams() + m.sharedParams() + float64(m.Hidden)*float64(m.Experts))
	p += m.embeddingParams()
	if !m.TiedEmbeddings {
		p += m.embeddingParams()
	}
	return p + float64(m.Hidden) // final norm
}

// ActiveParams is the parameters one token passes through: for MoE only TopK
// routed experts (plus shared experts and the router) count.
func (m Model) ActiveParams() float64 {
	if !m.isMoE() {
		return m.Params()
	}
	moe := float64(m.moeLayers())
	return m.Params() - moe*float64(m.Experts-m.TopK)*m.expertParams()
}

// forwardFlopsPerToken returns the forward matmul FLOPs per token: the linear
// layers (2 FLOPs per weight a token passes through, the embedding lookup
// excluded) and the attention core (QKᵀ and AV: 2·2·s·n·d per token per layer
// non-causal; causal counts half).
func (m Model) forwardFlopsPerToken(seqLen int, causal bool) (linear, attention float64) {
	h := float64(m.Hidden)
	l := float64(m.Layers)
	moe := float64(m.moeLayers())
	linear = 2 * (l*m.attnParams() + (l-moe)*m.denseMLPParams())
	if moe > 0 {
		linear += 2 * moe * (float64(m.TopK)*m.expertParams() + m.sharedParams() + h*float64(m.Experts))
	}
	linear += 2 * h * float64(m.Vocab) // output layer (tied or not, it is computed)
	attention = 2 * float64(seqLen) * float64(m.Heads) * float64(m.qkDim()+m.vDim()) * l
	if causal {
		attention /= 2
	}
	return linear, attention
}

// FlopsPerToken is the model FLOPs per trained token, forward + backward, causal
// attention, no recomputation (see the file comment).
func FlopsPerToken(m Model, seqLen int) float64 {
	lin, att := m.forwardFlopsPerToken(seqLen, true)
	return 3 * (lin + att)
}

// FlopsPerTokenNonCausal counts the full s² attention term: the convention of
// NeMo before Aug 2025 and Megatron-LM mid-2024, kept to compare with figures
// published on it.
func FlopsPerTokenNonCausal(m Model, seqLen int) float64 {
	lin, att := m.forwardFlopsPerToken(seqLen, false)
	return 3 * (lin + att)
}

// JobFlopsPerToken is FlopsPerToken for the job: LoRA trains no frozen weight,
// so its backward has no weight-gradient GEMMs for them; the matmuls a token
// needs are the forward and the input-gradient GEMMs (2× forward) of the
// linear layers, the attention core's 3×, and the adapters' 6 FLOPs per
// parameter (Hu et al. 2021). Prefix tuning adds every prefix key to each
// query's attention; prompt tuning runs s + P tokens for each s the user
// trains (finetune.go), counted per user token. Full training: FlopsPerToken.
func JobFlopsPerToken(m Model, j Job) float64 {
	f := FinetuneOf(j)
	if !f.Frozen() || j.SeqLen <= 0 {
		return FlopsPerToken(m, j.SeqLen)
	}
	s := j.SeqLen + j.promptTokens()
	lin, att := m.forwardFlopsPerToken(s, true)
	att += 2 * j.prefixTokens() * float64(m.Heads) * float64(m.qkDim()+m.vDim()) * float64(m.Layers)
	return (2*lin + 3*att + 6*m.adapterMatmulParams(f)) * float64(s) / float64(j.SeqLen)
}
