package plan

// HasBF16 is whether the GPU's tensor cores take BF16. Volta (V100) does
// FP16 only: BF16 tensor cores came with Ampere (NVIDIA A100 Tensor Core GPU
// Architecture whitepaper, "New TF32 and BF16 data types"; V100 datasheet:
// FP16/FP32 tensor cores). Its PeakBF16 holds the 16-bit (FP16) peak.
func (g GPU) HasBF16() bool { return g.Arch != "volta" }

// PrecisionFor is the precision a job asked for with p trains in on g: p
// itself when given, else BF16, or FP16 on a GPU without BF16 (mixed FP16
// with loss scaling, as Megatron-LM and apex ran on V100).
func PrecisionFor(p Precision, g GPU) Precision {
	if p != "" {
		return p
	}
	if !g.HasBF16() {
		return FP16
	}
	return BF16
}

// Peak16Name names the 16-bit format whose dense peak PeakBF16 holds.
func (g GPU) Peak16Name() string {
	if !g.HasBF16() {
		return "FP16"
	}
	return "BF16"
}

// FP8Recipe is how FP8 tensors get their scales (Transformer Engine
// recipes). They differ in the passes over each tensor before the GEMM and
// in how fast the GEMM runs (fp8.go).
type FP8Recipe string

const (
	// FP8Delayed: one scale per tensor from the amax history of earlier
	// steps (TE DelayedScaling): the cast is one fused pass.
	FP8Delayed FP8Recipe = "delayed"
	// FP8Current: one scale per tensor from this tensor's own amax (TE
	// Float8CurrentScaling, NeMo "FP8-CS"): an amax pass before the cast.
	FP8Current FP8Recipe = "current"
	// FP8Blockwise: DeepSeek-V3's fine-grained scaling (1×128 activation
	// tiles, 128×128 weight blocks; TE Float8BlockScaling) on Hopper, whose
	// tensor cores have no block scales: partial sums are rescaled on the
	// CUDA cores (DeepSeek-V3 report §3.3.2).
	FP8Blockwise FP8Recipe = "blockwise"
	// FP8MX: MXFP8, 32-element blocks with E8M0 scales, applied by
	// Blackwell's tensor cores (OCP MX spec; TE MXFP8BlockScaling).
	FP8MX FP8Recipe = "mxfp8"
)
