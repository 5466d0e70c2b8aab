package plan

import (
	"errors"
	"strings"
	"testing"
)

func TestPEFTConfigOf(t *testing.T) {
	m := mustModel(t, "llama3-70b")
	c := ClusterOf(mustGPU(t, "l40s"), 1)
	j := Job{SeqLen: 4096, GlobalBatch: 8, Stack: StackHF}.WithFinetune(Finetune{Kind: FinetuneQLoRA, Rank: 16, Optim: "adamw8"})
	r := Search(m, j, c, SearchOptions{})
	if r.Plan == nil || !r.Plan.Memory.Fits {
		t.Fatal("llama3-70b qlora:16 --stack hf does not fit one L40S")
	}
	d, err := PEFTConfigOf(m, j, c, *r.Plan)
	if err != nil {
		t.Fatal(err)
	}
	if d.PEFT["peft_type"] != "LORA" || d.PEFT["r"] != 16 || d.BNB["bnb_4bit_quant_type"] != "nf4" || d.BNB["bnb_4bit_use_double_quant"] != true ||
		d.Training["optim"] != "paged_adamw_8bit" || d.Training["per_device_train_batch_size"] != r.Plan.MicroBatch || d.Training["gradient_accumulation_steps"] != r.Plan.GradAccum {
		t.Errorf("qlora:16: %+v", d)
	}
	if (r.Plan.Offload == "params") != (d.Accelerate["distributed_type"] == "FSDP") {
		t.Errorf("offload %s but accelerate %v", r.Plan.Offload, d.Accelerate)
	}
	// What the Hugging Face stack cannot express is refused, naming it.
	mc := Job{SeqLen: 4096, GlobalBatch: 64}.WithFinetune(Finetune{Kind: FinetuneLoRA, Rank: 16, Optim: "adamw"})
	for name, tc := range map[string]struct {
		j    Job
		l    Layout
		want string
	}{
		"full":      {Job{SeqLen: 4096, GlobalBatch: 64}, Layout{TP: 1, PP: 1, DP: 8, MicroBatch: 1}, "full training"},
		"tp":        {mc, Layout{TP: 8, PP: 1, DP: 1, MicroBatch: 1}, "tp=8"},
		"selective": {mc, Layout{TP: 1, PP: 1, DP: 8, MicroBatch: 1, Recompute: "selective"}, "recompute=selective"},
		"block":     {mc, Layout{TP: 1, PP: 1, DP: 8, MicroBatch: 1, Recompute: "full", RecomputeLayers: 4}, "part of the model"},
		"optimizer": {mc, Layout{TP: 1, PP: 1, DP: 8, MicroBatch: 1, Offload: "optimizer"}, "offload=optimizer"},
	} {
		e := Evaluate(m, tc.j, ClusterOf(mustGPU(t, "h100-sxm"), 8), tc.l)
		_, err := PEFTConfigOf(m, tc.j, ClusterOf(mustGPU(t, "h100-sxm"), 8), e)
		var fe *FormatError
		if !errors.As(err, &fe) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want a FormatError naming %q", name, err, tc.want)
		}
	}
}
