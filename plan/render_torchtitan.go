package plan

import (
	"fmt"
	"io"
	"strconv"
	"strings"
)

// TorchTitanVersion is the torchtitan whose config rules the torchtitan
// format follows. At that commit a run's JobConfig (Trainer.Config) is built
// by a Python config function (--module M --config F,
// torchtitan/config/manager.py:48-159) and then overridden by
// --section.option flags parsed by tyro (manager.py:40-42): there is no TOML
// loader any more, so only the command-line form is offered.
const TorchTitanVersion = "torchtitan main b5bcd76c (2026-08-21)"

// TorchTitanArgs returns the torchtitan command-line overrides for the plan
// (`--stack fsdp[:compile]`), one argv element each, field names exactly as
// the dataclasses spell them at TorchTitanVersion
// (torchtitan/config/configs.py, torchtitan/trainer.py:70-116,
// torchtitan/distributed/activation_checkpoint.py:332-337). layers is the
// model's layer count (0 unknown: the pipeline split is left to
// torchtitan's default). The activation-checkpoint subcommand comes last:
// tyro reads the flags of a subcommand's parent before it. A plan torchtitan
// cannot run as planned is a *FormatError.
func TorchTitanArgs(j Job, e Evaluation, layers int) ([]string, error) {
	l := normalizeLayout(e.Layout)
	if err := torchTitanCheck(j, l); err != nil {
		return nil, err
	}
	var a []string
	add := func(flag string, v ...any) {
		a = append(a, flag)
		for _, x := range v {
			a = append(a, fmt.Sprint(x))
		}
	}
	// Degrees (configs.py:120-290). ParallelDims asserts
	// dp_replicate·dp_shard·cp·tp·pp = world (parallel_dims.py:182).
	shard, replicate := l.DP, 1
	if l.Zero == 0 {
		shard, replicate = 1, l.DP // DDP: weights replicated (configs.py:122-131)
	}
	add("--parallelism.data_parallel_shard_degree", shard)
	add("--parallelism.data_parallel_replicate_degree", replicate)
	if l.Zero == 2 {
		// ZeRO-2: parameters stay gathered between forward and backward.
		add("--parallelism.fsdp_reshard_after_forward", "never")
	}
	add("--parallelism.tensor_parallel_degree", l.TP)
	if l.TP > 1 {
		if l.SP {
			add("--parallelism.enable_sequence_parallel")
		} else {
			add("--parallelism.no_enable_sequence_parallel")
		}
	}
	add("--parallelism.context_parallel_degree", l.CP)
	add("--parallelism.expert_parallel_degree", l.EP)
	add("--parallelism.pipeline_parallel_degree", l.PP)
	if l.PP > 1 {
		split, err := torchTitanSplit(layers, l)
		if err != nil {
			return nil, err
		}
		a = append(a, split...)
		add("--parallelism.num_pp_microbatches", l.GradAccum)
	}
	// The batch, in tokens (configs.py:36-52; trainer.py:413-428 derives the
	// accumulation steps as num_tokens_per_train_step / (tokens per
	// microbatch · num_pp_microbatches · dp)).
	if j.SeqLen > 0 {
		gb := j.GlobalBatch
		if gb <= 0 {
			gb = l.MicroBatch * l.GradAccum * l.DP
		}
		add("--training.num_tokens_per_microbatch_per_dp_rank", l.MicroBatch*j.SeqLen)
		add("--training.num_tokens_per_train_step", gb*j.SeqLen)
		add("--training.max_context_length", j.SeqLen)
	}
	if l.PP > 1 || l.EP > 1 {
		// Trainer.Config refuses CUDA graphs (on by default) with PP, and
		// with EP unless the model's token dispatcher never syncs with the
		// host (trainer.py:168-199): the config function's dispatcher is
		// not known here, so off.
		add("--training.disable_cuda_graphs")
	}
	add("--training.mixed_precision_param", "bfloat16")
	add("--training.mixed_precision_reduce", "float32")
	if l.Offload == "params" {
		add("--training.enable_cpu_offload")
	}
	if j.Stack == StackFSDPCompile {
		add("--compile.enable")
	} else {
		add("--compile.no_enable")
	}
	switch l.Recompute {
	case "full":
		a = append(a, "activation-checkpoint:full")
	case "selective":
		a = append(a, "activation-checkpoint:selective")
	default:
		a = append(a, "activation-checkpoint:none")
	}
	return a, nil
}

// torchTitanCheck: what the config tree at TorchTitanVersion has no knob
// for.
func torchTitanCheck(j Job, l Layout) error {
	f := func(what, instead string) error { return &FormatError{"torchtitan", what, instead} }
	switch {
	case j.Stack != StackFSDP && j.Stack != StackFSDPCompile:
		st := string(j.Stack)
		if st == "" {
			st = "megatron-core"
		}
		return f(fmt.Sprintf("--stack %s (its overrides are for torchtitan's FSDP2 trainer)", st),
			"plan with --stack fsdp or fsdp:compile, or use --format megatron (Megatron stacks) or deepspeed")
	case FinetuneOf(j).Kind == FinetuneLoRA:
		return f(fmt.Sprintf("LoRA r=%d (LoRA is a model converter set in the config function, torchtitan/components/lora.py, not a command-line option)", j.LoRARank),
			"add the LoRA converter in your --config function and take these overrides from a plan with --finetune full")
	case j.frozenBase():
		return f(FinetuneOf(j).Label()+" (torchtitan has no such model converter)",
			"use --format peft (Hugging Face PEFT + accelerate FSDP), or plan with --finetune full or lora")
	case j.Precision == FP16:
		return f("precision fp16 (training.mixed_precision_param takes bfloat16 or float32, configs.py:94)",
			"plan with --precision bf16, or use --stack megatron-core / deepspeed for fp16")
	case j.Precision == FP8:
		return f("precision fp8 (Float8 training is a quantization converter in the config function, not a command-line option)",
			"plan with --precision bf16 and add the float8 converter to your --config function")
	case l.Zero == 1:
		return f("zero=1 (FSDP2 shards parameters with the optimizer state; there is no optimizer-only sharding)",
			"pin zero=2 or zero=3 (--fix zero=3), or use Megatron's distributed optimizer (--stack megatron-core)")
	case l.Offload == "optimizer":
		return f("offload=optimizer (training.enable_cpu_offload moves parameters, gradients and optimizer state together, configs.py:70)",
			"pin offload=params (--fix offload=params), or use --stack deepspeed:zero3 for optimizer-only offload")
	case l.Offload == "nvme":
		return f("offload=nvme (torchtitan offloads only to CPU memory)", "use --stack deepspeed:zero3 (ZeRO-Infinity) or pin offload=params")
	case l.Recompute == "full" && l.RecomputeLayers > 0:
		return f(fmt.Sprintf("full recompute of %d layers per chunk (FullAC wraps every block, activation_checkpoint.py:166-182)", l.RecomputeLayers),
			"pin recompute=full (every layer) or recompute=selective")
	case l.EP > 1 && l.TP > 1 && l.ETP != 1:
		return f(fmt.Sprintf("expert tensor parallelism %d with ep=%d (torchtitan's experts take their ranks from FSDP and TP: expert TP is 1, configs.py:282-290)", max(l.ETP, l.TP), l.EP),
			"pin etp=1 (--fix etp=1), or use --stack megatron-core")
	}
	if l.EP > 1 {
		shard := l.DP
		if l.Zero == 0 {
			shard = 1
		}
		if (shard*l.CP*l.TP)%l.EP != 0 {
			// parallel_dims.py:187-192.
			return f(fmt.Sprintf("ep=%d, which does not divide dp_shard·cp·tp = %d", l.EP, shard*l.CP*l.TP),
				"pin an ep that divides it (--fix ep=N)")
		}
	}
	return nil
}

// torchTitanSplit: the pipeline split as the planner's memory model makes it
// (Megatron's pipelineSplit): even, or with the embedding and the loss
// counted as one layer each. torchtitan makes ceil((layers + first_less +
// last_less) / layers_per_stage) stages and wants them a multiple of pp, one
// per rank for 1F1B and at least two for a looped schedule
// (distributed/pipeline_parallel.py:215-257).
func torchTitanSplit(layers int, l Layout) ([]string, error) {
	sched := "1F1B"
	if l.VPP > 1 {
		sched = "Interleaved1F1B"
	}
	out := []string{"--parallelism.pipeline_parallel_schedule", sched}
	stages := l.PP * l.VPP
	if layers <= 0 {
		if l.VPP > 2 {
			return nil, &FormatError{"torchtitan", fmt.Sprintf("vpp=%d without the model's layer count (torchtitan's default is 2 stages per rank, pipeline_parallel.py:259-263)", l.VPP),
				"give the model (--model) so the layers per stage can be set"}
		}
		return out, nil
	}
	var less, per int
	switch {
	case layers%stages == 0:
		less, per = 0, layers/stages
	case (layers+2)%stages == 0:
		less, per = 1, (layers+2)/stages
	default:
		return nil, &FormatError{"torchtitan", fmt.Sprintf("%d layers over pp=%d vpp=%d (neither %d nor %d divides by %d)", layers, l.PP, l.VPP, layers, layers+2, stages),
			"pin another pp or vpp, or give --parallelism.module_fqns_per_model_part in the config function"}
	}
	return append(out,
		"--parallelism.pipeline_parallel_first_stage_less_layers", strconv.Itoa(less),
		"--parallelism.pipeline_parallel_last_stage_less_layers", strconv.Itoa(less),
		"--parallelism.pipeline_parallel_layers_per_stage", strconv.Itoa(per)), nil
}

// RenderTorchTitan writes TorchTitanArgs as a shell continuation block under
// a header naming the torchtitan commit; what torchtitan cannot express is
// an error and nothing is written.
func RenderTorchTitan(w io.Writer, m Model, j Job, e Evaluation) error {
	args, err := TorchTitanArgs(j, e, m.Layers)
	if err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# torchtitan overrides for %s: %s\n", m.Name, e.Layout.Config())
	fmt.Fprintf(&b, "# for %s: python -m torchtitan.train --module M --config F <these>\n", TorchTitanVersion)
	b.WriteString("# (the config function gives the model, data and optimizer; the activation-checkpoint subcommand stays last)\n")
	b.WriteString(ShellLines(args))
	_, err = io.WriteString(w, b.String())
	return err
}
