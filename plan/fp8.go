package plan

import "fmt"

// FP8 recipes as the time model sees them. Every recipe runs the GEMMs at
// the FP8 rate (time.go: kern.gemm); they differ in the passes that make the
// FP8 operands, which are HBM-bound elementwise work:
//
//   - delayed: one fused cast+transpose kernel: read 2 bytes, write the FP8
//     copy and its transpose (1+1) = 4 bytes per element (TE cast_transpose);
//     the amax of this step is recorded for later steps.
//   - current: the tensor's own amax first (a read of 2 bytes), then the
//     cast+transpose: 6 bytes per element.
//   - blockwise (Hopper, DeepSeek-V3's 1×128 / 128×128 scaling): scales come
//     from each tile inside the quantizing kernel, which writes a row-wise and
//     a column-wise copy (a tile-scaled tensor cannot be transposed without
//     requantizing): 4 bytes, plus one FP32 scale per 128 elements of each
//     copy. The rescaling of partial sums on the CUDA cores (report §3.3.2)
//     overlaps the tensor cores (DeepGEMM) and is not charged.
//   - mxfp8 (Blackwell): as blockwise with one 1-byte E8M0 scale per 32
//     elements of each copy, applied by the tensor cores.
//
// In a MoE layer the expert GEMMs' inputs are the permuted routed copies:
// TopK × (h + F) elements per token are quantized, not h + F.

// fp8Recipe is the recipe j runs: as asked, else delayed scaling (what
// --format megatron passes when no recipe is asked for; it runs on every
// FP8 GPU, Blackwell included).
func fp8Recipe(j Job, _ GPU) FP8Recipe {
	if j.FP8Recipe != "" {
		return j.FP8Recipe
	}
	return FP8Delayed
}

// fp8CastBytes is the HBM bytes per quantized element of a recipe.
func fp8CastBytes(r FP8Recipe) float64 {
	switch r {
	case FP8Current:
		return 6
	case FP8Blockwise:
		return 4 + 2*4.0/128
	case FP8MX:
		return 4 + 2*1.0/32
	}
	return 4
}

// validFP8Recipe says why recipe r cannot run on g, or "".
func validFP8Recipe(r FP8Recipe, g GPU) string {
	switch r {
	case "", FP8Delayed, FP8Current, FP8Blockwise:
		return ""
	case FP8MX:
		if g.Arch != "blackwell" {
			return fmt.Sprintf("fp8_recipe mxfp8 needs Blackwell tensor cores (block scales); %s is %s: use delayed, current or blockwise", g.Name, g.Arch)
		}
		return ""
	}
	return fmt.Sprintf("fp8_recipe %q: accepted delayed, current, blockwise, mxfp8", r)
}

// fp8Casts is the bytes per token of the FP8 casts of one layer: rep is
// replicated on every TP rank without SP (the QKV input, the dense or shared
// MLP input), tp is split by TP (the projection and fc2 inputs, and in a
// MoE layer the routed copies' fc1 and fc2 inputs).
func (x *shape) fp8Casts(moe bool) (rep, tp float64) {
	m := &x.m
	cb := fp8CastBytes(fp8Recipe(x.j, x.c.GPU))
	h := float64(m.Hidden)
	rep = cb * h
	tp = cb * float64(m.Heads) * float64(m.headDim())
	if !moe {
		return rep + cb*h, tp + cb*float64(m.FFN)
	}
	tp += cb * float64(m.TopK) * (h + float64(m.moeFFN()))
	if m.SharedFFN > 0 {
		rep += cb * h
		tp += cb * float64(m.SharedFFN)
	}
	return rep, tp
}
