package plan

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
)

// What the megatron format cannot express is an error naming what to use
// instead, and RenderMegatron writes nothing then (never a comment above
// flags that would train something else).
func TestMegatronRefuses(t *testing.T) {
	l70, _ := LookupModel("llama3-70b")
	bloom, _ := LookupModel("bloom-176b")
	geglu := l70
	geglu.FFNType = FFNGeGLU
	relu := l70
	relu.FFNType, relu.Norm, relu.Position, relu.Bias = FFNReLU, "", "", ""
	params := rdHandEval()
	params.Offload, params.Zero = "params", 3
	nvme := params
	nvme.Offload = "nvme"
	params2 := rdHandEval()
	params2.PP, params2.VPP = 2, 1
	cases := []struct {
		name string
		m    Model
		j    Job
		e    Evaluation
		want []string
	}{
		{"lora", l70, Job{SeqLen: 8192, GlobalBatch: 512, LoRARank: 16}, rdHandEval(), []string{"LoRA r=16", "NeMo / Megatron-Bridge PEFT"}},
		{"offload params", l70, rdJobL70, params, []string{"offload=params", "DeepSpeed ZeRO-3"}},
		{"offload nvme", l70, rdJobL70, nvme, []string{"offload=nvme", "ZeRO-Infinity"}},
		{"alibi", bloom, rdJobL70, params2, []string{"position=alibi", "Megatron-DeepSpeed"}},
		{"geglu", geglu, rdJobL70, rdHandEval(), []string{"ffn_type=geglu", "gated_linear_unit"}},
		{"relu", relu, rdJobL70, rdHandEval(), []string{"ffn_type=relu"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var b bytes.Buffer
			err := RenderMegatron(&b, c.m, c.j, c.e)
			var me *MegatronError
			if !errors.As(err, &me) {
				t.Fatalf("want a *MegatronError, got %v", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q lacks %q", err, w)
				}
			}
			if b.Len() != 0 {
				t.Errorf("wrote %q", b.String())
			}
		})
	}
	if _, err := MegatronLayoutArgs(params.Layout, Job{}); err == nil {
		t.Error("layout alone: offload=params accepted")
	}
}

// Megatron-LM's rules, as facts read from its source (megatron/training/
// arguments.py validate_args at core_v0.19.0 and main d98e8a64; line numbers
// of main), checked on trainrun's output so that CI keeps them without
// Megatron-LM present. test/frameworks runs Megatron's own code on the same
// output when a checkout is given.
func TestMegatronRules(t *testing.T) {
	l70, _ := LookupModel("llama3-70b")
	l405, _ := LookupModel("llama3.1-405b")
	qwen, _ := LookupModel("qwen2.5-7b")
	dsv3, _ := LookupModel("deepseek-v3")
	mix, _ := LookupModel("mixtral-8x7b")
	ev := func(f func(*Evaluation)) Evaluation { e := rdHandEval(); f(&e); return e }
	type rc struct {
		name string
		m    Model
		j    Job
		e    Evaluation
		ok   func(a []string) bool
		rule string
	}
	has := func(a []string, flags ...string) bool {
		s := " " + strings.Join(a, " ") + " "
		for _, f := range flags {
			if !strings.Contains(s, " "+f+" ") {
				return false
			}
		}
		return true
	}
	cases := []rc{
		{"uneven split with VPP: --num-virtual-stages-per-pipeline-rank, never the per-stage count", qwen, rdJobL70,
			ev(func(e *Evaluation) { e.PP, e.VPP = 2, 5 }),
			func(a []string) bool {
				return has(a, "--num-virtual-stages-per-pipeline-rank", "5", "--account-for-embedding-in-pipeline-split", "--account-for-loss-in-pipeline-split") &&
					!slices.Contains(a, "--num-layers-per-virtual-pipeline-stage")
			},
			"arguments.py:953-957: --num-layers-per-virtual-pipeline-stage with --decoder-first/last: 'please use --num-virtual-stages-per-pipeline-rank'; at most one of the VPP flags (:928)"},
		{"account-for flags: (layers+2) divisible by pp", l405, rdJobL70, ev(func(e *Evaluation) { e.PP, e.VPP = 16, 1 }),
			func(a []string) bool { return has(a, "--account-for-embedding-in-pipeline-split") && (126+2)%16 == 0 },
			"arguments.py:985-999: num_layers (+1 embedding, +1 loss) % pipeline size == 0"},
		{"Megatron-FSDP needs --ckpt-format fsdp_dtensor", l70, rdJobL70, ev(func(e *Evaluation) { e.Zero = 3 }),
			func(a []string) bool {
				return has(a, "--use-megatron-fsdp", "--ckpt-format", "fsdp_dtensor", "--data-parallel-sharding-strategy", "optim_grads_params")
			},
			"arguments.py:1169: 'Megatron-FSDP requires the `fsdp_dtensor` checkpointing format.'"},
		{"zero=2 is optim_grads", l70, rdJobL70, ev(func(e *Evaluation) { e.Zero = 2 }),
			func(a []string) bool {
				return has(a, "--data-parallel-sharding-strategy", "optim_grads", "--ckpt-format", "fsdp_dtensor")
			},
			"arguments.py:3190: --data-parallel-sharding-strategy choices no_shard|optim|optim_grads|optim_grads_params"},
		{"optimizer CPU offload needs the precision-aware optimizer", l70, rdJobL70, ev(func(e *Evaluation) { e.Offload = "optimizer" }),
			func(a []string) bool { return has(a, "--optimizer-cpu-offload", "--use-precision-aware-optimizer") },
			"arguments.py:1884-1888: 'The optimizer cpu offload must be used in conjunction with `--use-precision-aware-optimizer`'"},
		{"MLA excludes grouped-query attention", dsv3, rdJobL70, ev(func(e *Evaluation) { e.PP, e.VPP = 7, 1 }),
			func(a []string) bool {
				return has(a, "--multi-latent-attention") && !slices.Contains(a, "--group-query-attention")
			},
			"arguments.py:1973-1974: 'Group query attention is mutually exclusive with multi latent attention.'"},
		{"full recompute names its layers", l70, rdJobL70, ev(func(e *Evaluation) { e.Recompute = "full" }),
			func(a []string) bool {
				return has(a, "--recompute-granularity", "full", "--recompute-method", "uniform", "--recompute-num-layers", "1")
			},
			"core/transformer/transformer_config.py:1919-1924: full granularity needs recompute_num_layers; arguments.py:1425-1428: selective takes no method"},
		{"selective recompute takes no method", l70, rdJobL70, rdHandEval(),
			func(a []string) bool {
				return has(a, "--recompute-granularity", "selective") && !slices.Contains(a, "--recompute-method")
			},
			"arguments.py:1425-1428: 'recompute method is not yet supported for selective recomputing granularity'"},
		{"MoE with etp > 1 has no linear biases", mix, rdJobL70, ev(func(e *Evaluation) { e.EP, e.ETP, e.VPP = 4, 2, 1 }),
			func(a []string) bool { return has(a, "--disable-bias-linear", "--expert-tensor-parallel-size", "2") },
			"core/transformer/transformer_config.py:2612-2615: 'Bias in Moe is only supported when ETP==1'"},
		{"the expert bias needs sigmoid scores", dsv3, rdJobL70, ev(func(e *Evaluation) { e.PP, e.VPP = 7, 1 }),
			func(a []string) bool {
				return has(a, "--moe-router-enable-expert-bias", "--moe-router-score-function", "sigmoid")
			},
			"core/transformer/transformer_config.py:2617-2620: moe_router_enable_expert_bias needs score function sigmoid or sqrtsoftplus"},
		{"no biases for Llama (Megatron's default adds them)", l70, rdJobL70, rdHandEval(),
			func(a []string) bool {
				return has(a, "--disable-bias-linear", "--normalization", "RMSNorm", "--position-embedding-type", "rope")
			},
			"arguments.py: --disable-bias-linear (store_false add_bias_linear, default True), --normalization default LayerNorm, --position-embedding-type default learned_absolute"},
		{"MoE with the all-to-all dispatcher and grouped GEMM", mix, rdJobL70, ev(func(e *Evaluation) { e.EP, e.VPP = 8, 1 }),
			func(a []string) bool { return has(a, "--moe-grouped-gemm", "--moe-token-dispatcher-type", "alltoall") },
			"arguments.py:1378-1380: --moe-grouped-gemm asserts compute capability >= 8 (Ampere on)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, err := MegatronArgs(c.m, c.j, c.e)
			if err != nil {
				t.Fatal(err)
			}
			if !c.ok(a) {
				t.Errorf("breaks Megatron's rule (%s):\n%s", c.rule, strings.Join(a, " "))
			}
		})
	}
}

// CUDA_DEVICE_MAX_CONNECTIONS by Megatron-LM's rule (arguments.py:1452-1479
// and :1166-1167 at main d98e8a64): 1 with TP or CP, above 1 under
// Megatron-FSDP, nothing otherwise or for a stack other than Megatron's.
func TestMegatronEnv(t *testing.T) {
	cases := []struct {
		name string
		l    Layout
		st   Stack
		want string
	}{
		{"tp", Layout{TP: 8, PP: 1, CP: 1, DP: 2, Zero: 1}, StackMegatronCore, "1"},
		{"cp", Layout{TP: 1, PP: 1, CP: 2, DP: 2}, StackNeMo, "1"},
		{"fsdp with tp", Layout{TP: 2, PP: 1, CP: 1, DP: 4, Zero: 3}, StackMegatronCore, "32"},
		{"dp only", Layout{TP: 1, PP: 4, CP: 1, DP: 4, Zero: 1}, StackMegatronCore, ""},
		{"torch fsdp stack", Layout{TP: 8, PP: 1, CP: 1, DP: 2}, StackFSDP, ""},
	}
	for _, c := range cases {
		got := ""
		for _, v := range MegatronEnv(c.l, c.st) {
			if v.Key == "CUDA_DEVICE_MAX_CONNECTIONS" {
				got = v.Value
			}
		}
		if got != c.want {
			t.Errorf("%s: CUDA_DEVICE_MAX_CONNECTIONS=%q, want %q", c.name, got, c.want)
		}
	}
}

// Issue 29: a layout whose virtual stages cannot hold equal layer counts
// (DeepSeek-V3's 61 layers on PP 8 × VPP 4, NVIDIA's H100 recipe) renders
// Megatron-Core's explicit --pipeline-model-parallel-layout, with the
// heaviest rank holding what the memory and time model assume.
func TestMegatronPipelineLayout(t *testing.T) {
	got := pipelineLayout(61, 8, 4, 0)
	if n := strings.Count(got, "|") + 1; n != 32 {
		t.Fatalf("%s: %d virtual stages, want 32", got, n)
	}
	if !strings.HasPrefix(got, "Ett|") || !strings.HasSuffix(got, "|tL") || strings.Count(got, "t") != 61 {
		t.Errorf("layout %s: want 61 layers, the embedding first and the loss last", got)
	}
	// Per pipeline rank (virtual stage c on rank c mod 8): 8 on rank 0, 7 on rank 7.
	per := make([]int, 8)
	for c, chunk := range strings.Split(got, "|") {
		per[c%8] += strings.Count(chunk, "t")
	}
	if per[0] != 8 || per[7] != 7 {
		t.Errorf("layers per rank %v, want 8 first and 7 last (⌈61/8⌉, ⌊61/8⌋)", per)
	}
	l70, _ := LookupModel("llama3-70b")
	e := rdHandEval()
	e.VPP = 3 // 80 and 82 over 4·3: no equal split
	var b bytes.Buffer
	if err := RenderMegatron(&b, l70, rdJobL70, e); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "--pipeline-model-parallel-layout") || strings.Contains(b.String(), "--num-virtual-stages-per-pipeline-rank") {
		t.Errorf("uneven VPP: want the layout and no --num-virtual-stages-per-pipeline-rank:\n%s", b.String())
	}
}
