package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
)

// The stack, precision and fine-tuning mode of trainrun run come from the
// flag, else the TRAINRUN_* twin the plugin exports, else the partition's
// policy; the step runs the Megatron flags of `trainrun plan` for those
// inputs, which differ between stacks (ZeRO-3 → Megatron FSDP), precisions
// (fp8 → --fp8-format) and modes (LoRA: refused by both, alike).
func TestRunSoftwareInputsPrecedence(t *testing.T) {
	const base = "--model llama3-8b --gpu h100-sxm --gpus 32 --gpus-per-node 8 --seq-len 4096 --global-batch 256"
	megatronOf := func(t *testing.T, extra string) string {
		t.Helper()
		out, errOut, code := runPlanCmd(t, append([]string{"plan", "--format", "megatron"}, strings.Fields(base+" "+extra)...)...)
		if r := refusal(errOut); code != exitcode.OK && r != "" {
			return r // LoRA: Megatron-LM core cannot express it, plan and run say so alike
		}
		if code != exitcode.OK {
			t.Fatalf("trainrun plan %s: exit %d: %s", extra, code, errOut)
		}
		var flags []string
		for _, l := range strings.Split(out, "\n") {
			if l = strings.TrimSpace(strings.TrimSuffix(l, "\\")); l != "" && !strings.HasPrefix(l, "#") {
				flags = append(flags, l)
			}
		}
		return strings.Join(flags, " ")
	}
	pol := func(t *testing.T, text string) string {
		p := filepath.Join(t.TempDir(), "trainrun.conf")
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// run dry-runs trainrun run on the 4x8 allocation of partition low and
	// returns the Megatron flags the step would get.
	run := func(t *testing.T, env map[string]string, args ...string) (string, string, error) {
		t.Helper()
		m := slurmEnv4x8()
		m["TRAINRUN_JOB_DIR"] = t.TempDir()
		for k, v := range env {
			m[k] = v
		}
		argv := append(append([]string{"--dry-run", "--probe", "none"}, strings.Fields(base)...), args...)
		argv = append(argv, "--", "train", "{megatron_args}")
		out, errb, err := cli{vars: m}.runRun(argv...)
		if err != nil && refusal(err.Error()) != "" {
			return refusal(err.Error()), errb, nil
		}
		for _, l := range strings.Split(out, "\n") {
			if _, after, ok := strings.Cut(l, " train "); ok {
				return strings.ReplaceAll(after, "'", ""), errb, err
			}
		}
		return "", errb, err
	}
	zero3fp8, lora8 := "--stack deepspeed:zero3 --precision fp8", "--finetune lora:8"
	if megatronOf(t, zero3fp8) == megatronOf(t, "") || megatronOf(t, lora8) == megatronOf(t, "") || megatronOf(t, "--precision fp8") == megatronOf(t, "") {
		t.Fatal("the inputs do not change the Megatron flags: this test would prove nothing")
	}
	for _, tc := range []struct {
		name   string
		env    map[string]string
		policy string // partition low's policy ("" = no --policy)
		args   []string
		want   string // trainrun plan's flags beyond base
		log    string // in stderr
	}{
		{"the twins", map[string]string{"TRAINRUN_STACK": "DeepSpeed:zero3", "TRAINRUN_PRECISION": "fp8", "TRAINRUN_FINETUNE": "full"}, "", nil,
			zero3fp8, "planning with stack DeepSpeed:zero3, from TRAINRUN_STACK=DeepSpeed:zero3 (the twin of #SBATCH --train-stack)"},
		{"the policy", nil, "PartitionName=low Stack=deepspeed:zero3 Precision=fp8\n", nil,
			zero3fp8, "planning with precision fp8, from the policy's Precision=fp8 (partition low ("},
		{"the policy's Finetune", nil, "Finetune=lora:8\nPartitionName=low\n", nil, lora8, "planning with finetune lora:8, from the policy's Finetune=lora:8 (site ("},
		{"a twin over the policy", map[string]string{"TRAINRUN_PRECISION": "bf16"}, "PartitionName=low Stack=deepspeed:zero3 Precision=fp8\n", nil,
			"--stack deepspeed:zero3", "from TRAINRUN_PRECISION=bf16"},
		{"a flag over the twin and the policy", map[string]string{"TRAINRUN_STACK": "deepspeed:zero3"}, "PartitionName=low Stack=deepspeed:zero3 Precision=fp8\n",
			[]string{"--stack", "megatron-core", "--precision", "bf16"}, "", ""},
		{"a twin equal to a policy that allows no override", map[string]string{"TRAINRUN_STACK": "deepspeed:zero3"},
			"PartitionName=low Stack=deepspeed:zero3 UserOverride=none\n", nil, "--stack deepspeed:zero3", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var args []string
			if tc.policy != "" {
				args = append(args, "--policy", pol(t, tc.policy))
			}
			got, errOut, err := run(t, tc.env, append(args, tc.args...)...)
			if err != nil {
				t.Fatalf("%v\n%s", err, errOut)
			}
			if want := megatronOf(t, tc.want); got != want {
				t.Errorf("the step's Megatron flags\n  %s\nare not trainrun plan %s's\n  %s", got, tc.want, want)
			}
			if !strings.Contains(errOut, tc.log) {
				t.Errorf("stderr lacks %q:\n%s", tc.log, errOut)
			}
		})
	}
	for _, tc := range []struct {
		name, policy string
		env          map[string]string
		args         []string
		msg          string
	}{
		{"bad twin", "", map[string]string{"TRAINRUN_STACK": "lightning"}, nil,
			`TRAINRUN_STACK=lightning (the twin of #SBATCH --train-stack): stack "lightning": accepted: megatron-core`},
		{"bad flag over a good twin", "", map[string]string{"TRAINRUN_PRECISION": "fp8"}, []string{"--precision", "int8"},
			`--precision int8: precision "int8": accepted: bf16, fp16, fp8`},
		{"bad LoRA rank in the twin", "", map[string]string{"TRAINRUN_FINETUNE": "lora:0"}, nil,
			`TRAINRUN_FINETUNE=lora:0 (the twin of #SBATCH --train-finetune): finetune "lora:0": the LoRA rank must be a positive integer`},
		{"a twin the policy does not allow", "PartitionName=low Stack=fsdp UserOverride=CkptLead\n", map[string]string{"TRAINRUN_STACK": "jax"}, nil,
			"TRAINRUN_STACK=jax (the twin of #SBATCH --train-stack): the site's policy"},
		{"a flag the policy does not allow", "PartitionName=low UserOverride=none\n", nil, []string{"--finetune", "lora"},
			"--finetune lora: the site's policy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var args []string
			if tc.policy != "" {
				args = append(args, "--policy", pol(t, tc.policy))
			}
			_, _, err := run(t, tc.env, append(args, tc.args...)...)
			if err == nil || exitcode.Of(err) != exitcode.Usage || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("err = %v (code %d); want a usage error with %q", err, exitcode.Of(err), tc.msg)
			}
		})
	}
	t.Run("help", func(t *testing.T) {
		_, help, _ := cli{}.run("run", "--help")
		for _, w := range []string{"default: TRAINRUN_STACK, which the plugin's #SBATCH --train-stack sets, else the partition's policy Stack=",
			"default: TRAINRUN_FINETUNE", "else that twin, else the partition's"} {
			if !strings.Contains(help, w) {
				t.Errorf("trainrun run --help lacks %q", w)
			}
		}
	})
}

// refusal is what the megatron format says it cannot express ("" if none).
func refusal(msg string) string {
	if _, r, ok := strings.Cut(msg, "cannot express "); ok {
		return "refused: " + strings.TrimSpace(strings.SplitN(r, "\n", 2)[0])
	}
	return ""
}
