package plan

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// torchtitan's config rules at TorchTitanVersion (pytorch/torchtitan
// b5bcd76c66d0acb1a08b176d9639425bc55e0b2a), read from its source and
// recorded here as facts: its parser (tyro over Trainer.Config) was not run
// on this machine (no tyro, and torch 1.13 lacks the modules
// torchtitan.trainer imports). Flag spelling: tyro (brentyi/tyro d0f2e3fb,
// _cli.py:242-245, 506-509) treats '_' and '-' alike and spells a bool's
// inverse --section.no_FIELD (_arguments.py:40-55, a pair for every bool,
// _arguments.py:404-409; underscores normalised, _tyro_backend.py:147).
func TestTorchTitanRules(t *testing.T) {
	base := func(f func(*Layout)) Evaluation {
		l := Layout{TP: 1, PP: 1, VPP: 1, CP: 1, EP: 1, DP: 16, MicroBatch: 2, GradAccum: 8, Recompute: "none", Zero: 3, Offload: "none"}
		if f != nil {
			f(&l)
		}
		return Evaluation{Layout: l}
	}
	j := Job{SeqLen: 4096, GlobalBatch: 256, Precision: BF16, Stack: StackFSDP}
	with := func(f func(*Job)) Job { k := j; f(&k); return k }
	cases := []struct {
		name   string
		j      Job
		e      Evaluation
		layers int
		want   map[string]string // flag → value ("" for a bare flag)
		absent []string
		err    string
	}{
		{"FSDP: shard degree = dp, replicate 1 (configs.py:122-143)", j, base(nil), 32,
			map[string]string{"--parallelism.data_parallel_shard_degree": "16", "--parallelism.data_parallel_replicate_degree": "1"},
			[]string{"--parallelism.fsdp_reshard_after_forward"}, ""},
		{"zero=0 is DDP: replicate = dp, shard 1 (configs.py:122-131)", j, base(func(l *Layout) { l.Zero = 0 }), 32,
			map[string]string{"--parallelism.data_parallel_shard_degree": "1", "--parallelism.data_parallel_replicate_degree": "16"}, nil, ""},
		{"zero=2 keeps parameters gathered after forward (configs.py:145-158)", j, base(func(l *Layout) { l.Zero = 2 }), 32,
			map[string]string{"--parallelism.fsdp_reshard_after_forward": "never"}, nil, ""},
		{"batch in tokens; accumulation = step tokens / (mb tokens · dp) (configs.py:37-52, trainer.py:413-428)", j, base(nil), 32,
			map[string]string{"--training.num_tokens_per_microbatch_per_dp_rank": "8192", "--training.num_tokens_per_train_step": "1048576", "--training.max_context_length": "4096"},
			[]string{"--parallelism.num_pp_microbatches"}, ""},
		{"TP with sequence parallel (configs.py:166-170)", j, base(func(l *Layout) { l.TP, l.DP, l.SP = 4, 4, true; l.GradAccum = 32 }), 32,
			map[string]string{"--parallelism.tensor_parallel_degree": "4", "--parallelism.enable_sequence_parallel": ""}, nil, ""},
		{"TP without sequence parallel: the inverse flag (default True)", j, base(func(l *Layout) { l.TP, l.DP = 4, 4; l.GradAccum = 32 }), 32,
			map[string]string{"--parallelism.no_enable_sequence_parallel": ""}, nil, ""},
		{"CP and EP (configs.py:239, 282)", j, base(func(l *Layout) { l.CP, l.DP, l.EP = 2, 8, 4; l.GradAccum = 16 }), 32,
			map[string]string{"--parallelism.context_parallel_degree": "2", "--parallelism.expert_parallel_degree": "4"}, nil, ""},
		{"even PP: no stage lighter, layers per stage (pipeline_parallel.py:215-242)", j, base(func(l *Layout) { l.PP, l.DP = 2, 8; l.GradAccum = 16 }), 32,
			map[string]string{"--parallelism.pipeline_parallel_degree": "2", "--parallelism.pipeline_parallel_schedule": "1F1B",
				"--parallelism.pipeline_parallel_first_stage_less_layers": "0", "--parallelism.pipeline_parallel_layers_per_stage": "16",
				"--parallelism.num_pp_microbatches": "16"}, nil, ""},
		{"VPP: a looped schedule, ceil((L+in+out)/lps) = pp·vpp stages (pipeline_parallel.py:223-257)", j, base(func(l *Layout) { l.PP, l.VPP, l.DP = 4, 2, 4; l.GradAccum = 32 }), 30,
			map[string]string{"--parallelism.pipeline_parallel_schedule": "Interleaved1F1B", "--parallelism.pipeline_parallel_first_stage_less_layers": "1",
				"--parallelism.pipeline_parallel_last_stage_less_layers": "1", "--parallelism.pipeline_parallel_layers_per_stage": "4"}, nil, ""},
		{"PP: CUDA graphs off, Trainer.Config refuses them (trainer.py:172-176)", j, base(func(l *Layout) { l.PP, l.DP = 2, 8; l.GradAccum = 16 }), 32,
			map[string]string{"--training.disable_cuda_graphs": ""}, nil, ""},
		{"EP: CUDA graphs off unless the dispatcher never syncs (trainer.py:178-199)", j, base(func(l *Layout) { l.EP = 4 }), 32,
			map[string]string{"--training.disable_cuda_graphs": ""}, nil, ""},
		{"neither: CUDA graphs left as the config function has them", j, base(nil), 32, nil, []string{"--training.disable_cuda_graphs"}, ""},
		{"a split torchtitan cannot make", j, base(func(l *Layout) { l.PP, l.VPP, l.DP = 4, 2, 4; l.GradAccum = 32 }), 29, nil, nil, "29 layers over pp=4 vpp=2"},
		{"compile (configs.py:294-296)", with(func(k *Job) { k.Stack = StackFSDPCompile }), base(nil), 32, map[string]string{"--compile.enable": ""}, []string{"--compile.no_enable"}, ""},
		{"eager: compile off whatever the config function says", j, base(nil), 32, map[string]string{"--compile.no_enable": ""}, nil, ""},
		{"bf16 params, fp32 reductions (configs.py:94-106)", j, base(nil), 32,
			map[string]string{"--training.mixed_precision_param": "bfloat16", "--training.mixed_precision_reduce": "float32"}, nil, ""},
		{"params offload is enable_cpu_offload (configs.py:70-73)", j, base(func(l *Layout) { l.Offload = "params" }), 32, map[string]string{"--training.enable_cpu_offload": ""}, nil, ""},
		{"full recompute: the full subcommand (activation_checkpoint.py:332-337)", j, base(func(l *Layout) { l.Recompute = "full" }), 32, map[string]string{"activation-checkpoint:full": ""}, nil, ""},
		{"no recompute must say none: selective is the default (trainer.py:108-110)", j, base(nil), 32, map[string]string{"activation-checkpoint:none": ""}, nil, ""},
		{"fp16: mixed_precision_param has no float16 (configs.py:94)", with(func(k *Job) { k.Precision = FP16 }), base(nil), 32, nil, nil, "precision fp16"},
		{"fp8 is a converter, not a flag", with(func(k *Job) { k.Precision = FP8 }), base(nil), 32, nil, nil, "precision fp8"},
		{"LoRA is a converter, not a flag", with(func(k *Job) { k.LoRARank = 16 }), base(nil), 32, nil, nil, "LoRA r=16"},
		{"a Megatron stack", with(func(k *Job) { k.Stack = StackMegatronCore }), base(nil), 32, nil, nil, "--stack megatron-core"},
		{"ZeRO-1 has no FSDP2 form", j, base(func(l *Layout) { l.Zero = 1 }), 32, nil, nil, "zero=1"},
		{"optimizer-only offload has no knob (configs.py:70)", j, base(func(l *Layout) { l.Offload = "optimizer" }), 32, nil, nil, "offload=optimizer"},
		{"nvme offload has no knob", j, base(func(l *Layout) { l.Offload = "nvme" }), 32, nil, nil, "offload=nvme"},
		{"partial full recompute has no knob (activation_checkpoint.py:166-182)", j, base(func(l *Layout) { l.Recompute, l.RecomputeLayers = "full", 4 }), 32, nil, nil, "full recompute of 4 layers"},
		{"expert TP > 1 (configs.py:282-290)", j, base(func(l *Layout) { l.TP, l.DP, l.EP = 2, 8, 4; l.GradAccum = 16 }), 32, nil, nil, "expert tensor parallelism 2"},
		{"ep must divide dp_shard·cp·tp (parallel_dims.py:187-192)", j, base(func(l *Layout) { l.Zero, l.EP = 0, 2 }), 32, nil, nil, "ep=2, which does not divide"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args, err := TorchTitanArgs(c.j, c.e, c.layers)
			if c.err != "" {
				var fe *FormatError
				if !errors.As(err, &fe) || !strings.Contains(err.Error(), c.err) || fe.Instead == "" {
					t.Fatalf("err = %v, want a FormatError naming %q and what to use", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := torchTitanFlags(args)
			for k, v := range c.want {
				if g, ok := got[k]; !ok || g != v {
					t.Errorf("%s = %q (present %v), want %q; args %q", k, g, ok, v, args)
				}
			}
			for _, k := range c.absent {
				if _, ok := got[k]; ok {
					t.Errorf("%s present; args %q", k, args)
				}
			}
			for k := range got {
				if name, ok := strings.CutPrefix(k, "--"); ok && !torchTitanCLI[strings.Replace(name, ".no_", ".", 1)] {
					t.Errorf("%s is not one of torchtitan's command-line options", k)
				}
			}
			// tyro reads a subcommand's parent flags before it: exactly one, last.
			if n := len(args); n == 0 || !strings.HasPrefix(args[n-1], "activation-checkpoint:") ||
				slices.IndexFunc(args[:n-1], func(s string) bool { return strings.HasPrefix(s, "activation-checkpoint:") }) >= 0 {
				t.Errorf("the activation-checkpoint subcommand is not once and last: %q", args)
			}
		})
	}
}

// TestTorchTitanDegreesMultiply: ParallelDims asserts dp_replicate·dp_shard·
// cp·tp·pp = world (parallel_dims.py:182-185), and the token counts give
// back the plan's accumulation (trainer.py:413-428), for planned layouts.
func TestTorchTitanDegreesMultiply(t *testing.T) {
	m, err := LookupModel("llama3-8b")
	if err != nil {
		t.Fatal(err)
	}
	for _, gpus := range []int{8, 16, 64} {
		for _, st := range []Stack{StackFSDP, StackFSDPCompile} {
			j := Job{SeqLen: 8192, GlobalBatch: 256, Precision: BF16, Stack: st}
			g, _ := LookupGPU("h100-sxm")
			r := Search(m, j, ClusterOf(g, gpus), SearchOptions{})
			if r.Plan == nil {
				t.Fatalf("%d GPUs %s: no plan", gpus, st)
			}
			args, err := TorchTitanArgs(j, *r.Plan, m.Layers)
			if err != nil {
				t.Fatalf("%d GPUs %s %s: %v", gpus, st, r.Plan.Layout.Config(), err)
			}
			f := torchTitanFlags(args)
			n := 1
			for _, k := range []string{"data_parallel_shard_degree", "data_parallel_replicate_degree", "context_parallel_degree", "tensor_parallel_degree", "pipeline_parallel_degree"} {
				n *= atoiOr(f["--parallelism."+k])
			}
			if n != gpus {
				t.Errorf("%d GPUs: degrees multiply to %d: %q", gpus, n, args)
			}
			l := r.Plan.Layout
			dp := atoiOr(f["--parallelism.data_parallel_shard_degree"]) * atoiOr(f["--parallelism.data_parallel_replicate_degree"])
			ppmb := 1
			if l.PP > 1 {
				ppmb = atoiOr(f["--parallelism.num_pp_microbatches"])
			}
			step, mb := atoiOr(f["--training.num_tokens_per_train_step"]), atoiOr(f["--training.num_tokens_per_microbatch_per_dp_rank"])
			if step%(mb*ppmb*dp) != 0 || step/(mb*ppmb*dp)*ppmb != l.GradAccum {
				t.Errorf("%d GPUs: accumulation %d·%d from the tokens, plan has %d: %q", gpus, step/(mb*ppmb*dp), ppmb, l.GradAccum, args)
			}
		}
	}
}

// torchTitanCLI are the options of torchtitan's command line that the
// format uses, each in its frozen list at TorchTitanVersion
// (tests/unit_tests/test_no_new_cli_options.py:18-243: "The set of
// --section.option CLI flags will not grow", config/README.md).
var torchTitanCLI = map[string]bool{
	"compile.enable":                      true,                                                     // :51
	"parallelism.context_parallel_degree": true, "parallelism.data_parallel_replicate_degree": true, // :140, 143
	"parallelism.data_parallel_shard_degree": true, "parallelism.enable_sequence_parallel": true, // :144, 146
	"parallelism.expert_parallel_degree": true, "parallelism.fsdp_reshard_after_forward": true, // :147-148
	"parallelism.pipeline_parallel_degree": true, "parallelism.pipeline_parallel_first_stage_less_layers": true, // :150-151
	"parallelism.pipeline_parallel_last_stage_less_layers": true, "parallelism.pipeline_parallel_layers_per_stage": true, // :152-153
	"parallelism.num_pp_microbatches": true, "parallelism.pipeline_parallel_schedule": true, // :154-155
	"parallelism.tensor_parallel_degree": true, "training.disable_cuda_graphs": true, // :158, 180
	"training.enable_cpu_offload": true, "training.max_context_length": true, // :182, 185
	"training.mixed_precision_param": true, "training.mixed_precision_reduce": true, // :187-188
	"training.num_tokens_per_microbatch_per_dp_rank": true, "training.num_tokens_per_train_step": true, // :189-190
}

// torchTitanFlags maps each flag (and the subcommand) to its value.
func torchTitanFlags(args []string) map[string]string {
	out := map[string]string{}
	for i := 0; i < len(args); i++ {
		k, v := args[i], ""
		if strings.HasPrefix(k, "--") && i+1 < len(args) && !strings.HasPrefix(args[i+1], "--") && !strings.HasPrefix(args[i+1], "activation-checkpoint:") {
			v = args[i+1]
			i++
		}
		out[k] = v
	}
	return out
}

func atoiOr(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}
