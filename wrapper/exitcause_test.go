package main

import (
	"strings"
	"testing"

	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
	"github.com/trainrun/trainrun/wrapper/internal/planflags"
)

// Issue 30 point 3: a layout the rules forbid and a job the GPU cannot run
// are not "does not fit" (exit 3), and their advice is the change that
// applies, never "no nearby change (more GPUs, ...) makes it fit".
func TestPlanExitCodeByCause(t *testing.T) {
	base := []string{"plan", "--model", "llama3-8b", "--gpus", "8", "--seq-len", "4096"}
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"tp does not divide the GPUs", []string{"--gpu", "h100-sxm", "--global-batch", "64", "--fix", "tp=3"}, exitcode.Layout,
			"tp·pp·cp = 3 does not divide the 8 GPUs; choose degrees whose product divides 8, or ask for a multiple of 3 GPUs"},
		{"batch not divisible by dp", []string{"--gpu", "h100-sxm", "--global-batch", "60", "--fix", "dp=8"}, exitcode.Layout,
			"use --global-batch 56 or 64"},
		{"heads not divisible by tp", []string{"--gpu", "h100-sxm", "--global-batch", "64", "--fix", "tp=8,pp=1,dp=1", "--gpus", "8", "--heads", "36", "--kv-heads", "12", "--hidden", "4608"}, exitcode.Layout,
			"tp must divide the 36 attention and 12 KV heads: tp=1,2,3,4,6"},
		{"fp8 on V100", []string{"--gpu", "v100-32gb", "--global-batch", "64", "--precision", "fp8"}, exitcode.Capability,
			"v100-32gb has no FP8 tensor cores; use --precision fp16, or a GPU with FP8"},
		{"bf16 asked for on V100", []string{"--gpu", "v100-32gb", "--global-batch", "64", "--precision", "bf16"}, exitcode.Capability,
			"v100-32gb has no BF16 (its tensor cores do FP16); use --precision fp16"},
		{"short of memory stays no-fit", []string{"--gpu", "h100-sxm", "--global-batch", "64", "--model", "gpt3-175b"}, exitcode.NoFit, "fits with"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := cli{}.run(append(append([]string{}, base...), tc.args...)...)
			if code != tc.code || !strings.Contains(errOut, tc.want) {
				t.Errorf("exit %d, want %d; stderr lacks %q:\n%s", code, tc.code, tc.want, errOut)
			}
			if tc.code != exitcode.NoFit && strings.Contains(errOut, "no nearby change") {
				t.Errorf("memory advice for a rule or capability error:\n%s", errOut)
			}
		})
	}
}

// `trainrun run --fix` without a model checks divisibility only: exit 10.
func TestRunFixedLayoutDivisibility(t *testing.T) {
	_, err := planflags.FixedLayout("tp=3", 8, 64)
	if exitCodeOf(err) != exitcode.Layout {
		t.Errorf("planflags.FixedLayout(tp=3, 8 GPUs): %v (exit %d), want exit %d", err, exitCodeOf(err), exitcode.Layout)
	}
}

// A GPU without BF16 is planned in FP16 unless asked otherwise, and its
// peak is labelled FP16.
func TestPlanV100DefaultsToFP16(t *testing.T) {
	code, out, errOut := cli{}.run("plan", "--model", "llama3-8b", "--gpu", "v100-32gb", "--gpus", "8", "--seq-len", "4096", "--global-batch", "64")
	if code != exitcode.OK || !strings.Contains(out, ", fp16, ") || !strings.Contains(out, "dense FP16") || strings.Contains(out, "BF16") {
		t.Errorf("exit %d\n%s\n%s", code, out, errOut)
	}
	_, mg, _ := cli{}.run("plan", "--model", "llama3-8b", "--gpu", "v100-32gb", "--gpus", "8", "--seq-len", "4096", "--global-batch", "64", "--format", "megatron")
	if !strings.Contains(mg, "--fp16") || strings.Contains(mg, "--bf16") {
		t.Errorf("megatron flags for V100:\n%s", mg)
	}
	_, h, _ := cli{}.run("plan", "--model", "llama3-8b", "--gpu", "h100-sxm", "--gpus", "8", "--seq-len", "4096", "--global-batch", "64", "--format", "megatron")
	if !strings.Contains(h, "--bf16") {
		t.Errorf("megatron flags for H100 lack --bf16:\n%s", h)
	}
}

// 8 GPUs are not a whole number of 3-GPU nodes (it was planned as
// "3 per node").
func TestPlanGPUsWholeNodes(t *testing.T) {
	code, _, errOut := cli{}.run("plan", "--model", "llama3-8b", "--gpu", "h100-sxm", "--gpus", "8", "--gpus-per-node", "3", "--seq-len", "4096", "--global-batch", "64")
	if code != exitcode.Usage || !strings.Contains(errOut, "give --gpus 6 or 9") {
		t.Errorf("exit %d: %s", code, errOut)
	}
	if code, _, errOut := (cli{}).run("plan", "--model", "llama3-8b", "--gpu", "h100-sxm", "--gpus", "2", "--gpus-per-node", "4", "--seq-len", "4096", "--global-batch", "64"); code != exitcode.OK {
		t.Errorf("2 GPUs of a 4-GPU node: exit %d: %s", code, errOut)
	}
}
