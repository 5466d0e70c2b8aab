// Package frameworks checks trainrun's framework output with the
// frameworks' own validation code, where checkouts of them are given
// (`make check-frameworks MEGATRON=DIR`); without them every test skips.
package frameworks

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"testing"

	"github.com/trainrun/trainrun/plan"
)

// megatronDirs are the Megatron-LM tree (holding megatron/) and the
// megatron-check tool (check.py, stubs.py), from TRAINRUN_MEGATRON and
// TRAINRUN_MEGATRON_CHECK; the test skips without both.
func megatronDirs(t *testing.T) (mlm, check string) {
	mlm, check = os.Getenv("TRAINRUN_MEGATRON"), os.Getenv("TRAINRUN_MEGATRON_CHECK")
	if mlm == "" || check == "" {
		t.Skip("TRAINRUN_MEGATRON (a Megatron-LM tree) and TRAINRUN_MEGATRON_CHECK (the megatron-check tool) are not both set: make check-frameworks MEGATRON=DIR MEGATRON_CHECK=DIR")
	}
	for _, p := range []string{filepath.Join(mlm, "megatron", "training", "arguments.py"), filepath.Join(check, "check.py")} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%v", err)
		}
	}
	return mlm, check
}

// dataFlags are all a user adds: mock data, a tokenizer, the schedule.
// --no-rope-fusion because the fused RoPE kernel needs Transformer Engine,
// which the checking machine has not.
var dataFlags = []string{"--mock-data", "--tokenizer-type", "NullTokenizer", "--train-iters", "10", "--lr", "1e-4", "--no-rope-fusion"}

// megatronCase is one plan to hand Megatron-LM.
type megatronCase struct {
	model, gpu string
	gpus       int
	seq, batch int
	prec       plan.Precision
	stack      plan.Stack
	fix        string // pins ("" = the planner's choice)
}

func (c megatronCase) String() string {
	return fmt.Sprintf("%s/%s:%d/s%d/gb%d/%s/%s", c.model, c.gpu, c.gpus, c.seq, c.batch, cmpOr(string(c.prec), "bf16"), cmpOr(c.fix, "auto"))
}

func cmpOr(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// layoutCases are the varied layouts: dense and MoE (etp 1 and > 1), MLA,
// uneven PP with and without VPP, CP, every recompute kind, ZeRO 0-3,
// optimizer offload, fp8/bf16/fp16, A100/H100/B200.
var layoutCases = []megatronCase{
	{model: "llama3-8b", gpu: "h100-sxm", gpus: 16, seq: 8192, batch: 256},
	{model: "llama3-8b", gpu: "h100-sxm", gpus: 16, seq: 8192, batch: 256, fix: "tp=2,pp=1,cp=2,zero=1"},
	{model: "llama3-8b", gpu: "h100-sxm", gpus: 8, seq: 8192, batch: 64, fix: "tp=1,pp=1,zero=0,recompute=full"},
	{model: "llama3-8b", gpu: "a100-80gb", gpus: 16, seq: 4096, batch: 256, prec: plan.FP16},
	{model: "llama3-8b", gpu: "a100-80gb", gpus: 16, seq: 4096, batch: 256, fix: "zero=2"},
	{model: "llama3-8b", gpu: "h100-sxm", gpus: 16, seq: 4096, batch: 256, fix: "zero=3,tp=1,pp=1"},
	{model: "llama3-8b", gpu: "h100-sxm", gpus: 16, seq: 4096, batch: 256, fix: "tp=2,zero=1,offload=optimizer"},
	{model: "llama3-8b", gpu: "b200", gpus: 16, seq: 8192, batch: 256, prec: plan.FP8},
	{model: "llama3-70b", gpu: "h100-sxm", gpus: 64, seq: 8192, batch: 512},
	{model: "llama3-70b", gpu: "h100-sxm", gpus: 64, seq: 8192, batch: 512, fix: "tp=8,pp=4,vpp=5"},
	{model: "llama3-70b", gpu: "h100-sxm", gpus: 64, seq: 8192, batch: 512, fix: "tp=8,pp=2,recompute=selective"},
	{model: "llama3-70b", gpu: "h100-sxm", gpus: 128, seq: 32768, batch: 256, fix: "tp=8,cp=4,pp=2"},
	{model: "llama3-70b", gpu: "h100-sxm", gpus: 64, seq: 8192, batch: 512, prec: plan.FP8},
	{model: "llama3-70b", gpu: "a100-80gb", gpus: 128, seq: 4096, batch: 512},
	{model: "llama3-70b", gpu: "b200", gpus: 64, seq: 8192, batch: 512},
	{model: "llama3.1-405b", gpu: "h100-sxm", gpus: 1024, seq: 8192, batch: 1024},
	{model: "llama3.1-405b", gpu: "h100-sxm", gpus: 1024, seq: 8192, batch: 1024, fix: "tp=8,pp=16"},
	{model: "llama3.1-405b", gpu: "h100-sxm", gpus: 1024, seq: 8192, batch: 1024, fix: "tp=8,pp=8,vpp=8"},
	{model: "llama3.1-405b", gpu: "h100-sxm", gpus: 512, seq: 8192, batch: 512, fix: "tp=8,pp=8,recompute=full"},
	{model: "qwen2.5-7b", gpu: "h100-sxm", gpus: 16, seq: 4096, batch: 256, fix: "tp=1,pp=2,vpp=5"},
	{model: "qwen2.5-7b", gpu: "h100-sxm", gpus: 8, seq: 4096, batch: 128, fix: "tp=4,pp=1"},
	{model: "qwen2.5-72b", gpu: "h100-sxm", gpus: 48, seq: 8192, batch: 480, fix: "tp=8,pp=3"},
	{model: "qwen2.5-32b", gpu: "h100-sxm", gpus: 32, seq: 4096, batch: 256, fix: "tp=4,pp=4"},
	{model: "mixtral-8x7b", gpu: "h100-sxm", gpus: 64, seq: 4096, batch: 512},
	{model: "mixtral-8x7b", gpu: "h100-sxm", gpus: 64, seq: 4096, batch: 512, fix: "tp=4,ep=8,etp=1"},
	{model: "mixtral-8x7b", gpu: "h100-sxm", gpus: 64, seq: 4096, batch: 512, fix: "tp=2,pp=4,ep=4,etp=2"},
	{model: "mixtral-8x22b", gpu: "h100-sxm", gpus: 256, seq: 4096, batch: 1024, fix: "tp=4,pp=4,ep=8,etp=1"},
	{model: "mixtral-8x22b", gpu: "h100-sxm", gpus: 128, seq: 4096, batch: 512, prec: plan.FP8},
	{model: "deepseek-v3", gpu: "h100-sxm", gpus: 512, seq: 4096, batch: 4096, stack: plan.StackNeMo, fix: "tp=2,pp=8,ep=64,etp=1,mbs=1,recompute=selective"},
	{model: "deepseek-v3", gpu: "h100-sxm", gpus: 1024, seq: 4096, batch: 4096},
	{model: "deepseek-v3", gpu: "b200", gpus: 256, seq: 4096, batch: 2048, prec: plan.FP8},
	{model: "deepseek-v2", gpu: "h100-sxm", gpus: 128, seq: 4096, batch: 1024},
	{model: "deepseek-v2", gpu: "h100-sxm", gpus: 128, seq: 4096, batch: 1024, fix: "tp=1,pp=4,ep=32"},
	{model: "gpt3-175b", gpu: "a100-80gb", gpus: 1024, seq: 2048, batch: 1536},
	{model: "gpt3-175b", gpu: "a100-80gb", gpus: 1024, seq: 2048, batch: 1536, fix: "tp=8,pp=16,vpp=3,recompute=selective"},
	{model: "gpt3-175b", gpu: "h100-sxm", gpus: 512, seq: 2048, batch: 1536, prec: plan.FP16},
	{model: "gpt3-13b", gpu: "a100-40gb", gpus: 64, seq: 2048, batch: 1024, fix: "tp=2,pp=4,zero=1"},
	{model: "gpt3-1.3b", gpu: "a100-80gb", gpus: 8, seq: 2048, batch: 512, fix: "zero=3"},
	{model: "llama2-70b", gpu: "h100-sxm", gpus: 64, seq: 4096, batch: 512, fix: "tp=4,pp=4,zero=1,recompute=full"},
	{model: "llama2-7b", gpu: "a100-80gb", gpus: 8, seq: 4096, batch: 128, fix: "tp=1,zero=2"},
	{model: "mistral-7b", gpu: "h100-sxm", gpus: 8, seq: 32768, batch: 32, fix: "tp=2,cp=4"},
	{model: "nemotron4-340b", gpu: "h100-sxm", gpus: 768, seq: 4096, batch: 768, fix: "tp=8,pp=12"},
	{model: "nemotron4-340b", gpu: "b200", gpus: 512, seq: 4096, batch: 1024},
	{model: "llama3.1-70b", gpu: "h100-sxm", gpus: 128, seq: 8192, batch: 1024, fix: "tp=4,pp=4,vpp=2,zero=1,recompute=full"},
	{model: "llama3.1-8b", gpu: "h100-sxm", gpus: 32, seq: 8192, batch: 512, prec: plan.FP8, fix: "tp=1,zero=1,offload=optimizer"},
}

// archOf is the compute capability major Megatron's checks read.
func archOf(g plan.GPU) int {
	return map[string]int{"volta": 7, "ampere": 8, "hopper": 9, "blackwell": 10}[g.Arch]
}

// planCase plans c with the planner.
func planCase(t *testing.T, c megatronCase) (plan.Model, plan.Job, plan.GPU, *plan.Evaluation) {
	m, err := plan.LookupModel(c.model)
	if err != nil {
		t.Fatal(err)
	}
	g, err := plan.LookupGPU(c.gpu)
	if err != nil {
		t.Fatal(err)
	}
	j := plan.Job{SeqLen: c.seq, GlobalBatch: c.batch, Precision: cmpPrec(c.prec), Stack: c.stack}
	pins, err := plan.ParsePins(c.fix)
	if err != nil {
		t.Fatal(err)
	}
	r := plan.Search(m, j, plan.ClusterOf(g, c.gpus), plan.SearchOptions{Pins: pins, TopK: -1})
	if r.Plan == nil {
		return m, j, g, nil
	}
	return m, j, g, r.Plan
}

func cmpPrec(p plan.Precision) plan.Precision {
	if p == "" {
		return plan.BF16
	}
	return p
}

// checkResult is the megatron-check tool's JSON line.
type checkResult struct {
	Stage   string         `json:"stage"`
	OK      bool           `json:"ok"`
	Error   string         `json:"error"`
	Where   string         `json:"where"`
	Derived map[string]any `json:"derived"`
}

// prepared is one case planned and rendered, ready for Megatron.
type prepared struct {
	c       megatronCase
	m       plan.Model
	e       *plan.Evaluation
	argv    []string
	env     map[string]string
	refused error
}

// manifestLine is one case for run_check.py and megatron_params.py.
type manifestLine struct {
	World int               `json:"world"`
	Arch  int               `json:"arch"`
	Argv  string            `json:"argv"`
	Env   map[string]string `json:"env"`
}

// prepare plans every case and writes the manifest of those Megatron is to
// check (one process checks them all: Megatron's imports take seconds).
func prepare(t *testing.T, cases []megatronCase) ([]prepared, string) {
	dir := t.TempDir()
	var manifest []byte
	var ps []prepared
	for i, c := range cases {
		m, j, g, e := planCase(t, c)
		p := prepared{c: c, m: m, e: e}
		if e != nil {
			args, err := plan.MegatronArgs(m, j, *e)
			p.refused = err
			if err == nil {
				p.argv = append(slices.Clone(args), dataFlags...)
				// The rank's environment: Megatron's variables, and none
				// inherited from this process.
				p.env = map[string]string{"CUDA_DEVICE_MAX_CONNECTIONS": ""}
				for _, v := range plan.MegatronEnv(e.Layout, j.Stack) {
					p.env[v.Key] = v.Value
				}
				f := filepath.Join(dir, fmt.Sprintf("argv-%d", i))
				if err := os.WriteFile(f, []byte(strings.Join(p.argv, "\n")+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				b, _ := json.Marshal(manifestLine{World: plan.LayoutGPUs(e.Layout), Arch: archOf(g), Argv: f, Env: p.env})
				manifest = append(append(manifest, b...), '\n')
			}
		}
		ps = append(ps, p)
	}
	mf := filepath.Join(dir, "manifest")
	if err := os.WriteFile(mf, manifest, 0o644); err != nil {
		t.Fatal(err)
	}
	return ps, mf
}

// runBatch runs one of the scripts on the manifest and returns its lines.
func runBatch(t *testing.T, script, manifest string, env ...string) []string {
	abs, err := filepath.Abs(script)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/usr/bin/python3", abs, manifest)
	cmd.Env = append(os.Environ(), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", script, err, stderr.String())
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

// TestMegatronAcceptsPlans hands every built-in model's plan and the varied
// layouts to Megatron-LM's own parse_args, validate_args,
// TransformerConfig, micro-batch calculator and parallel-group checks, with
// only dataFlags added and the environment trainrun gives a rank, and
// checks what Megatron derives against the plan, and Megatron's parameter
// count against the planner's (1 %).
func TestMegatronAcceptsPlans(t *testing.T) {
	mlm, check := megatronDirs(t)
	cases := slices.Clone(layoutCases)
	for _, name := range plan.ModelNames() {
		cases = append(cases, presetCase(name))
	}
	ps, manifest := prepare(t, cases)
	env := []string{"MLM_DIR=" + mlm, "MEGATRON=" + mlm, "MEGATRON_CHECK=" + check}
	checks := runBatch(t, "run_check.py", manifest, env...)
	params := runBatch(t, "megatron_params.py", manifest, env...)
	stats := map[string]int{}
	k := 0
	for _, p := range ps {
		t.Run(p.c.String(), func(t *testing.T) {
			switch {
			case p.e == nil:
				t.Errorf("no plan for %s", p.c)
				stats["no-plan"]++
				return
			case p.refused != nil:
				var me *plan.MegatronError
				if !errors.As(p.refused, &me) {
					t.Fatal(p.refused)
				}
				t.Logf("%s: the megatron format refuses it: %v", p.e.Layout.Config(), p.refused)
				stats["refused"]++
				return
			}
			i := k
			k++
			var res checkResult
			if i >= len(checks) || json.Unmarshal([]byte(checks[i]), &res) != nil {
				t.Fatalf("megatron-check line %d: %q", i, checks)
			}
			stats[res.Stage]++
			if !res.OK {
				t.Errorf("%s (%s): Megatron stops at %s: %s (%s)\nargv: %s\nenv: %v", p.e.Layout.Config(), p.c, res.Stage, res.Error, res.Where, strings.Join(p.argv, " "), p.env)
				return
			}
			compareDerived(t, p.m, *p.e, res.Derived)
			compareParams(t, p.m, params[i])
			stats["params within 1%"] += map[bool]int{true: 1}[!t.Failed()]
		})
	}
	t.Logf("Megatron-LM at %s: %d cases, %d checked; by stage reached: %v", mlm, len(cases), k, stats)
}

// compareDerived: what Megatron derived from the flags is the plan.
func compareDerived(t *testing.T, m plan.Model, e plan.Evaluation, d map[string]any) {
	num := func(k string) int {
		v, _ := d[k].(float64)
		return int(v)
	}
	l := e.Layout
	wantVPP := 0
	if l.VPP > 1 {
		wantVPP = l.VPP
	}
	wantNorm := map[string]string{plan.NormRMS: "RMSNorm"}[m.Arch().Norm]
	if wantNorm == "" {
		wantNorm = "LayerNorm"
	}
	for _, f := range []struct {
		what      string
		got, want any
	}{
		{"data-parallel size", num("dp"), l.DP},
		{"virtual stages", num("vpp"), wantVPP},
		{"micro-batches", num("num_microbatches"), l.GradAccum},
		{"distributed optimizer", d["dist_opt"], l.Zero >= 1},
		{"Megatron-FSDP", d["fsdp"], l.Zero >= 2},
		{"MLA", d["mla"], m.KVLoRA > 0},
		{"normalization", d["normalization"], wantNorm},
		{"linear biases", d["bias_linear"], m.Arch().Bias == plan.BiasAll},
		{"experts", num("moe"), m.Experts},
	} {
		if fmt.Sprint(f.got) != fmt.Sprint(f.want) {
			t.Errorf("%s: Megatron derives %s %v, the plan has %v", l.Config(), f.what, f.got, f.want)
		}
	}
}

// compareParams: Megatron's own count of the model its flags build is the
// planner's within 1 %.
func compareParams(t *testing.T, m plan.Model, line string) {
	var p struct {
		Params float64 `json:"params"`
		Error  string  `json:"error"`
	}
	if err := json.Unmarshal([]byte(line), &p); err != nil || p.Error != "" {
		t.Fatalf("megatron_params.py: %v %s", err, line)
	}
	want := m.Params()
	if d := p.Params/want - 1; d > 0.01 || d < -0.01 {
		t.Errorf("Megatron builds %.4g parameters, the planner counts %.4g (%+.2f%%)", p.Params, want, 100*d)
	} else {
		t.Logf("parameters: Megatron %.4g, planner %.4g (%+.2f%%)", p.Params, want, 100*d)
	}
}

// presetCase is a size of cluster on which a preset has a plan.
func presetCase(name string) megatronCase {
	m, _ := plan.LookupModel(name)
	p := m.Params()
	c := megatronCase{model: name, gpu: "h100-sxm", seq: 4096, batch: 512}
	switch {
	case p < 15e9:
		c.gpus = 16
	case p < 80e9:
		c.gpus = 64
	case p < 200e9:
		c.gpus = 256
	case p < 450e9:
		c.gpus = 512
	default:
		c.gpus, c.batch = 1024, 2048
	}
	return c
}
