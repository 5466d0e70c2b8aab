package plan

import (
	"fmt"
	"strconv"
	"strings"
)

// DefaultLoRARank is the rank of a bare "lora" fine-tuning mode (a common choice).
const DefaultLoRARank = 16

// ParseFinetune reads a fine-tuning mode: full (0), lora (DefaultLoRARank)
// or lora:RANK, and returns the LoRA rank (0 = full training).
func ParseFinetune(s string) (int, error) {
	switch v := strings.ToLower(strings.TrimSpace(s)); {
	case v == "" || v == "full":
		return 0, nil
	case v == "lora":
		return DefaultLoRARank, nil
	case strings.HasPrefix(v, "lora:"):
		r, err := strconv.Atoi(v[len("lora:"):])
		if err != nil || r <= 0 {
			return 0, fmt.Errorf("finetune %q: the LoRA rank must be a positive integer, e.g. lora:16", s)
		}
		return r, nil
	}
	return 0, fmt.Errorf("finetune %q: accepted: full, lora, lora:RANK", s)
}

// ParsePrecision reads bf16, fp16 or fp8 (case-insensitive).
func ParsePrecision(s string) (Precision, error) {
	switch p := Precision(strings.ToLower(strings.TrimSpace(s))); p {
	case BF16, FP16, FP8:
		return p, nil
	}
	return "", fmt.Errorf("precision %q: accepted: bf16, fp16, fp8", s)
}
