package plan

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// `trainrun plan --format peft` (issue 37): the plan as the Hugging Face
// fine-tuning stack takes it. peft_config holds the keyword arguments of PEFT's
// LoraConfig / PrefixTuningConfig / PromptTuningConfig / IA3Config
// (peft_type names the class, PeftConfig.from_peft_type's key);
// bnb_config those of transformers' BitsAndBytesConfig for QLoRA;
// training_arguments those of transformers' TrainingArguments (TRL's
// SFTConfig adds max_length); accelerate the `accelerate launch` config,
// with the keys of PEFT's own examples/sft/configs/fsdp_config*.yaml.
// test/frameworks/peft_check.py loads peft_config into PEFT's own classes
// (make check-peft PEFT=DIR, PEFTVersion).

// PEFTVersion is the huggingface/peft commit the keys were checked against.
const PEFTVersion = "5d602fdbff04c33c1c4de55cda9d4ae1d7cb7e40"

// AccelerateVersion and TRLVersion are the huggingface/accelerate and
// huggingface/trl commits the accelerate config and SFTConfig's max_length
// were checked against (test/frameworks/hf_check.py, make check-peft
// ACCELERATE=DIR TRL=DIR). transformers' TrainingArguments and
// BitsAndBytesConfig are not checked yet (no tree here).
const (
	AccelerateVersion = "16cb6eb80dd9aa8b4df1a63ef57863e455d53b83"
	TRLVersion        = "f2cd57710ae345ea6428ae95363267fcf38a3dc8"
)

// PEFTConfig is the --format peft document.
type PEFTConfig struct {
	PEFT       map[string]any `json:"peft_config"`
	BNB        map[string]any `json:"bnb_config,omitempty"`
	Training   map[string]any `json:"training_arguments"`
	Accelerate map[string]any `json:"accelerate"`
	Notes      []string       `json:"notes"`
}

// hfModuleNames maps the planner's LoRA targets to Llama-family module names
// (Llama, Mistral, Qwen2, Gemma use them).
var hfModuleNames = map[string]string{"q": "q_proj", "k": "k_proj", "v": "v_proj", "o": "o_proj", "gate": "gate_proj", "up": "up_proj", "down": "down_proj"}

// PEFTConfigOf renders the plan for Hugging Face PEFT + TRL + accelerate; a
// plan element they cannot express is a *FormatError.
func PEFTConfigOf(m Model, j Job, c Cluster, e Evaluation) (*PEFTConfig, error) {
	f := FinetuneOf(j)
	refuse := func(what, instead string) (*PEFTConfig, error) {
		return nil, &FormatError{Format: "peft", What: what, Instead: instead}
	}
	l := e.Layout
	switch {
	case !f.Frozen():
		return refuse("full training (no adapter)", "plan with --finetune lora|qlora|prefix|prompt|ia3, or use --format deepspeed or torchtitan for full training")
	case l.TP > 1 || l.PP > 1 || l.CP > 1 || l.EP > 1:
		return refuse(fmt.Sprintf("tp=%d, pp=%d, cp=%d, ep=%d (the Hugging Face Trainer shards with DDP or FSDP only)", l.TP, l.PP, l.CP, l.EP),
			"plan with --stack hf (data parallelism and FSDP only), or run the adapters through NeMo / Megatron-Bridge PEFT")
	case l.Recompute == "selective" || (l.Recompute == "full" && l.RecomputeLayers > 0):
		return refuse("recompute="+l.Recompute+" of part of the model (gradient_checkpointing is the whole model's)", "plan with --stack hf, or pin --fix recompute=full or recompute=none")
	case l.Offload == "optimizer" || l.Offload == "nvme":
		return refuse("offload="+l.Offload+" (accelerate's FSDP offloads parameters, fsdp_offload_params)", "pin --fix offload=none or offload=params")
	}
	pc := map[string]any{"task_type": "CAUSAL_LM"}
	switch f.Kind {
	case FinetuneLoRA, FinetuneQLoRA:
		pc["peft_type"] = "LORA"
		pc["r"] = f.Rank
		pc["lora_alpha"] = 2 * f.Rank
		pc["lora_dropout"] = f.Dropout
		pc["bias"] = "none"
		if f.Targets == "" {
			pc["target_modules"] = "all-linear"
		} else {
			var mods []string
			for _, t := range strings.Split(f.Targets, ",") {
				mods = append(mods, hfModuleNames[t])
			}
			pc["target_modules"] = mods
		}
	case FinetunePrefix:
		pc["peft_type"] = "PREFIX_TUNING"
		pc["num_virtual_tokens"] = f.Tokens
		pc["prefix_projection"] = false
	case FinetunePrompt:
		pc["peft_type"] = "PROMPT_TUNING"
		pc["num_virtual_tokens"] = f.Tokens
		pc["prompt_tuning_init"] = "RANDOM"
	case FinetuneIA3:
		pc["peft_type"] = "IA3"
		pc["target_modules"] = []string{"k_proj", "v_proj", "down_proj"}
		pc["feedforward_modules"] = []string{"down_proj"}
	}
	out := &PEFTConfig{PEFT: pc}
	prec := PrecisionFor(j.Precision, c.GPU)
	dtype := map[Precision]string{BF16: "bfloat16", FP16: "float16"}[prec]
	if dtype == "" {
		return refuse("precision "+string(prec)+" (PEFT adapters train in bf16 or fp16)", "plan with --precision bf16")
	}
	fsdp := l.Zero == 3 || l.Offload == "params" // FSDP streams an offloaded base, one process included
	if f.Kind == FinetuneQLoRA {
		out.BNB = map[string]any{"load_in_4bit": true, "bnb_4bit_quant_type": "nf4", "bnb_4bit_use_double_quant": true, "bnb_4bit_compute_dtype": dtype}
		if fsdp {
			out.BNB["bnb_4bit_quant_storage"] = dtype // FSDP flattens the 4-bit weights with the rest
		}
	}
	optim := map[string]string{"adamw": "adamw_torch", "adamw8": "paged_adamw_8bit", "adamw32": "paged_adamw_32bit"}[f.Optim]
	if f.Kind == FinetuneLoRA && f.Optim == "adamw8" {
		optim = "adamw_bnb_8bit"
	}
	if optim == "" {
		optim = "adamw_torch"
	}
	out.Training = map[string]any{"per_device_train_batch_size": l.MicroBatch, "gradient_accumulation_steps": e.GradAccum,
		"gradient_checkpointing": l.Recompute == "full", "optim": optim, "bf16": prec == BF16, "fp16": prec == FP16, "max_length": j.SeqLen}
	out.Accelerate = peftAccelerate(c, l, f, fsdp, dtype)
	out.Notes = []string{
		fmt.Sprintf("planned: %s, %d GPUs, micro-batch %d × %d accumulation × DP %d = global batch %d", f.Label(), c.GPUs, l.MicroBatch, e.GradAccum, l.DP, j.GlobalBatch),
		"lora_alpha = 2·r is a convention the plan does not depend on; lora_dropout is the plan's (--finetune ...:dropout=P: each adapted layer keeps its dropped input); target module names are the Llama family's",
		"max_length is TRL SFTConfig's; TrainingArguments alone takes the other training_arguments",
		"checked against huggingface/peft " + PEFTVersion[:12] + " (make check-peft PEFT=DIR)",
		"accelerate keys checked against huggingface/accelerate " + AccelerateVersion[:12] + " and max_length against huggingface/trl " + TRLVersion[:12] +
			"; bnb_config and the other training_arguments not yet against transformers (make check-peft ACCELERATE=DIR TRL=DIR TRANSFORMERS=DIR)",
	}
	return out, nil
}

// peftAccelerate is the accelerate launch config: FSDP FULL_SHARD for
// zero=3 or a streamed base, DDP (MULTI_GPU) for more GPUs, NO for one.
func peftAccelerate(c Cluster, l Layout, f Finetune, fsdp bool, dtype string) map[string]any {
	perNode := max(min(c.GPUsPerNode, c.GPUs), 1)
	if perNode <= 1 && c.GPU.GPUsPerNode > 0 {
		perNode = min(c.GPU.GPUsPerNode, c.GPUs)
	}
	nodes := (c.GPUs + perNode - 1) / perNode
	mp := map[string]string{"bfloat16": "bf16", "float16": "fp16"}[dtype]
	if f.Kind == FinetuneQLoRA {
		mp = "no" // bitsandbytes computes in bnb_4bit_compute_dtype (PEFT's fsdp_config_qlora.yaml)
	}
	a := map[string]any{"compute_environment": "LOCAL_MACHINE", "num_machines": nodes, "num_processes": c.GPUs, "mixed_precision": mp, "distributed_type": "NO"}
	switch {
	case fsdp:
		a["distributed_type"] = "FSDP"
		a["fsdp_config"] = map[string]any{
			"fsdp_sharding_strategy": "FULL_SHARD", "fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
			"fsdp_offload_params": l.Offload == "params", "fsdp_backward_prefetch": "BACKWARD_PRE",
			"fsdp_state_dict_type": "SHARDED_STATE_DICT", "fsdp_cpu_ram_efficient_loading": true,
			"fsdp_sync_module_states": true, "fsdp_use_orig_params": false,
		}
	case c.GPUs > 1:
		a["distributed_type"] = "MULTI_GPU"
	}
	return a
}

// RenderPEFT writes PEFTConfigOf as indented JSON.
func RenderPEFT(w io.Writer, m Model, j Job, c Cluster, e Evaluation) error {
	pc, err := PEFTConfigOf(m, j, c, e)
	if err != nil {
		return err
	}
	b, err := json.MarshalIndent(pc, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}
