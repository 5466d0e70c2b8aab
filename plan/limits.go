package plan

import (
	"fmt"
	"io"
)

// Limits on what the planner accepts from a user (issue 12 finding 6).
//
// A config.json, --train-batch and --train-layout reach the planner in root
// slurmstepd as well as in `trainrun plan`, and planning cost grows with the
// layer count, the head and expert counts (their divisors are searched) and
// the GPU count. Every cap below is at least 4x the largest published model
// or machine, so no real input comes near one; past them nothing physical is
// described and the input is refused with the field, its value and the cap.
// With these caps the worst accepted config.json plans in well under a
// second (BenchmarkPlanWorstConfig prints the figure).
const (
	// MaxConfigBytes bounds a config.json (the largest Hugging Face config
	// of the catalog's models, with id2label tables, is under 10 KB).
	MaxConfigBytes = 1 << 20
	// MaxLayers: Llama 3.1 405B has 126 layers, PaLM 540B 118.
	MaxLayers = 1024
	// MaxHidden: the widest published dense models are at 25,600
	// (Megatron's 1T) and 18,432 (PaLM 540B).
	MaxHidden = 1 << 17
	// MaxHeads bounds attention and KV heads (405B: 128; 1T: 160).
	MaxHeads = 1024
	// MaxHeadDim: published head dimensions are 64 to 256.
	MaxHeadDim = 4096
	// MaxFFN bounds the dense, expert and shared MLP hidden sizes
	// (405B: 53,248; PaLM: 73,728).
	MaxFFN = 1 << 20
	// MaxVocab: the largest vocabularies are about 262,000 (Gemma 3).
	MaxVocab = 1 << 22
	// MaxExperts: the most routed experts published per layer are 384
	// (Kimi K2); MaxTopK of them per token.
	MaxExperts = 4096
	MaxTopK    = 256
	// MaxSeqLen and MaxGlobalBatch bound --train-batch (longest context
	// trained: 1M-10M tokens; the largest batches about 16M tokens).
	MaxSeqLen      = 1 << 26
	MaxGlobalBatch = 1 << 24
)

// CheckModelLimits refuses a model whose figures exceed the caps above,
// naming the figure, its value and the cap.
func CheckModelLimits(m Model) error {
	for _, f := range []struct {
		name   string
		v, max int
	}{
		{"layers", m.Layers, MaxLayers}, {"hidden", m.Hidden, MaxHidden}, {"heads", m.Heads, MaxHeads},
		{"kv_heads", m.KVHeads, MaxHeads}, {"head_dim", m.HeadDim, MaxHeadDim}, {"ffn", m.FFN, MaxFFN},
		{"vocab", m.Vocab, MaxVocab}, {"experts", m.Experts, MaxExperts}, {"topk", m.TopK, MaxTopK},
		{"moe_ffn", m.MoEFFN, MaxFFN}, {"shared_ffn", m.SharedFFN, MaxFFN}, {"dense_layers", m.DenseLayers, MaxLayers},
	} {
		if f.v > f.max {
			return fmt.Errorf("%s = %d is beyond trainrun's limit of %d (no published model comes near it; plan/limits.go says why)", f.name, f.v, f.max)
		}
	}
	return nil
}

// validateWithLimits is ValidateModel, then CheckModelLimits (the config
// parser's one call).
func validateWithLimits(m Model) error {
	if err := ValidateModel(m); err != nil {
		return err
	}
	return CheckModelLimits(m)
}

// ReadConfigBytes reads r to its end, at most MaxConfigBytes: a larger
// input is an error naming file, without reading further.
func ReadConfigBytes(r io.Reader, file string) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxConfigBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if len(data) > MaxConfigBytes {
		return nil, fmt.Errorf("%s: larger than %d bytes; a config.json is a few KB", file, MaxConfigBytes)
	}
	return data, nil
}

// CheckBatchLimits refuses a global batch or sequence length beyond the caps.
func CheckBatchLimits(globalBatch, seqLen int) error {
	if globalBatch > MaxGlobalBatch {
		return fmt.Errorf("global batch %d is beyond trainrun's limit of %d sequences", globalBatch, MaxGlobalBatch)
	}
	if seqLen > MaxSeqLen {
		return fmt.Errorf("sequence length %d is beyond trainrun's limit of %d tokens", seqLen, MaxSeqLen)
	}
	return nil
}

// divisors lists n's divisors in increasing order, in O(√n) steps (the
// planner searches the divisors of head, layer and expert counts).
func divisors(n int) []int {
	var lo, hi []int
	for i := 1; i*i <= n; i++ {
		if n%i == 0 {
			lo = append(lo, i)
			if i != n/i {
				hi = append(hi, n/i)
			}
		}
	}
	for k := len(hi) - 1; k >= 0; k-- {
		lo = append(lo, hi[k])
	}
	return lo
}
