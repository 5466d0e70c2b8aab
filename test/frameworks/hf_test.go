package frameworks

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/trainrun/trainrun/plan"
)

// TestHFSettingsMatchSources hands what `trainrun plan --format peft` prints
// (bnb_config, training_arguments, accelerate) for every fine-tuning kind,
// DDP, FSDP and FSDP with the base offloaded, to hf_check.py, which reads
// accelerate's, TRL's and transformers' own classes from their sources (the
// config-file dataclass, `accelerate launch`'s arguments and FSDP value
// lists; SFTConfig; TrainingArguments, OptimizerNames and BitsAndBytesConfig)
// and fails on a key or value they do not have. TRAINRUN_ACCELERATE,
// TRAINRUN_TRL and TRAINRUN_TRANSFORMERS are the trees (make check-peft
// ACCELERATE=DIR TRL=DIR TRANSFORMERS=DIR); the test skips without any, and
// checks those given.
func TestHFSettingsMatchSources(t *testing.T) {
	trees := map[string]string{"accelerate": os.Getenv("TRAINRUN_ACCELERATE"), "trl": os.Getenv("TRAINRUN_TRL"), "transformers": os.Getenv("TRAINRUN_TRANSFORMERS")}
	var args, given []string
	for _, k := range []string{"accelerate", "trl", "transformers"} {
		if trees[k] != "" {
			args = append(args, "--"+k, trees[k])
			given = append(given, k)
		}
	}
	if len(args) == 0 {
		t.Skip("none of TRAINRUN_ACCELERATE, TRAINRUN_TRL, TRAINRUN_TRANSFORMERS is set: make check-peft ACCELERATE=DIR TRL=DIR TRANSFORMERS=DIR")
	}
	z3, off := 3, "params"
	cases := []peftCase{
		{"llama3-70b", "l40s", 1, 4096, 8, "qlora:16", plan.Pins{}},
		{"llama3-8b", "a100-80gb", 1, 4096, 16, "lora:16", plan.Pins{}},
		{"llama3-70b", "h100-sxm", 8, 4096, 64, "qlora:64:adamw32", plan.Pins{Zero: &z3}},
		{"llama3-70b", "a100-80gb", 2, 2048, 8, "qlora:8:adamw32", plan.Pins{Zero: &z3, Offload: &off}},
		{"llama3-8b", "h100-sxm", 8, 4096, 64, "lora:32:attn", plan.Pins{}},
		{"llama3-8b", "h100-sxm", 1, 2048, 8, "prefix:30", plan.Pins{}},
		{"llama3-8b", "l40s", 2, 2048, 8, "ia3", plan.Pins{}},
	}
	docs, lines := checkPEFTDocs(t, cases, "hf_check.py", args...)
	fsdpSeen := false
	for i, line := range lines {
		var got struct {
			Checked []string `json:"checked"`
			Errors  []string `json:"errors"`
		}
		if err := json.Unmarshal([]byte(line), &got); err != nil {
			t.Fatalf("case %d: %v: %s", i, err, line)
		}
		if strings.Join(got.Checked, ",") != strings.Join(given, ",") {
			t.Errorf("%+v: checked %v, want %v", cases[i], got.Checked, given)
		}
		for _, e := range got.Errors {
			t.Errorf("%+v: %s", cases[i], e)
		}
		fsdpSeen = fsdpSeen || docs[i].Accelerate["distributed_type"] == "FSDP"
		t.Logf("%s %s on %d %s: %v accelerate %v training %v bnb %v", cases[i].model, cases[i].finetune, cases[i].gpus, cases[i].gpu, got.Checked,
			docs[i].Accelerate["distributed_type"], docs[i].Training["optim"], docs[i].BNB)
	}
	if !fsdpSeen {
		t.Error("no case planned FSDP: the fsdp_config keys went unchecked")
	}
}
