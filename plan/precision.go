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
