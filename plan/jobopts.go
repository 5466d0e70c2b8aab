package plan

import (
	"fmt"
	"strings"
)

// DefaultLoRARank is the rank of a bare "lora" fine-tuning mode (a common choice).
const DefaultLoRARank = 16

// ParseFinetune reads a fine-tuning mode (ParseFinetuneSpec) and returns its
// LoRA or QLoRA rank: 0 for full training and the kinds without a rank.
func ParseFinetune(s string) (int, error) {
	f, err := ParseFinetuneSpec(s)
	if err != nil {
		return 0, err
	}
	return f.Rank, nil
}

// ParsePrecision reads bf16, fp16 or fp8 (case-insensitive).
func ParsePrecision(s string) (Precision, error) {
	switch p := Precision(strings.ToLower(strings.TrimSpace(s))); p {
	case BF16, FP16, FP8:
		return p, nil
	}
	return "", fmt.Errorf("precision %q: accepted: bf16, fp16, fp8", s)
}
