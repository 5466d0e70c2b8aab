package main

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/trainrun/trainrun/internal/golden"
	"github.com/trainrun/trainrun/internal/slurm"
	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
	"github.com/trainrun/trainrun/wrapper/internal/planflags"
)

func planGolden(t *testing.T, name, got string) {
	t.Helper()
	golden.CheckString(t, filepath.Join("testdata", "plan", name), got)
}

// runPlanCmd runs `trainrun args...` in-process.
func runPlanCmd(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	code, stdout, stderr = cli{}.run(args...)
	return stdout, stderr, code
}

// The acceptance command.
var acceptance = []string{"plan", "--model", "llama3-70b", "--gpu", "h100-sxm", "--gpus", "64", "--seq-len", "8192", "--global-batch", "512"}

func with(base []string, extra ...string) []string {
	return append(append([]string{}, base...), extra...)
}

// The contract's keys, copied from PRODUCT.md ("`trainrun plan`").
var (
	cTop    = []string{"plan", "alternatives", "rejected", "inputs"} // inputs: "The plan JSON carries its inputs" (PRODUCT.md)
	cPlan   = []string{"tp", "pp", "vpp", "cp", "ep", "dp", "sp", "micro_batch", "grad_accum", "recompute", "zero", "offload", "memory", "time", "tokens_per_s_per_gpu", "model_flops_per_token", "model_tflops_per_gpu", "mfu", "why"}
	cMemory = []string{"per_gpu_bytes", "capacity_bytes", "fits", "weights_bytes", "grads_bytes", "optimizer_bytes", "activations_bytes", "other_bytes"}
	cTime   = []string{"step_s", "compute_s", "tp_comm_s", "pp_bubble_s", "dp_comm_exposed_s", "cp_comm_s", "ep_comm_s", "offload_s"}
	cReject = []string{"config", "reason"}
)

func objKeys(t *testing.T, what string, v any) []string {
	t.Helper()
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("%s: want an object, got %T", what, v)
	}
	var k []string
	for key := range m {
		k = append(k, key)
	}
	sort.Strings(k)
	return k
}

func sameKeys(t *testing.T, what string, v any, want []string) {
	t.Helper()
	w := append([]string{}, want...)
	sort.Strings(w)
	if got := objKeys(t, what, v); !reflect.DeepEqual(got, w) {
		t.Errorf("%s keys:\n got %v\nwant %v", what, got, w)
	}
}

// checkContract fails unless out is exactly the contract's object; it
// returns the decoded object.
func checkContract(t *testing.T, out string) map[string]any {
	t.Helper()
	var top map[string]any
	if err := json.Unmarshal([]byte(out), &top); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, out)
	}
	sameKeys(t, "top", top, cTop)
	var plans []any
	if top["plan"] != nil {
		plans = append(plans, top["plan"])
	}
	alts, ok := top["alternatives"].([]any)
	if !ok {
		t.Fatalf("alternatives: %T, want an array", top["alternatives"])
	}
	for _, p := range append(plans, alts...) {
		pm := p.(map[string]any)
		// finetune was added by issue 37 (a frozen-base plan's note, an object).
		if ft, ok := pm["finetune"]; ok {
			if _, isObj := ft.(map[string]any); !isObj {
				t.Errorf("finetune: %T, want an object", ft)
			}
			pm = maps.Clone(pm)
			delete(pm, "finetune")
		}
		// tight was added by issue 30: present, and true, for a plan inside
		// the memory margin only.
		if v, ok := pm["tight"]; ok {
			if v != true {
				t.Errorf("tight: %v, want true or absent", v)
			}
			pm = maps.Clone(pm)
			delete(pm, "tight")
		}
		sameKeys(t, "plan", pm, cPlan)
		sameKeys(t, "memory", pm["memory"], cMemory)
		// step_s_range was added by issue 13 (a band, not a part of step_s).
		sameKeys(t, "time", pm["time"], append(append([]string(nil), cTime...), "step_s_range"))
		if _, ok := pm["why"].([]any); !ok {
			t.Errorf("why: %T, want an array", pm["why"])
		}
	}
	rej, ok := top["rejected"].([]any)
	if !ok {
		t.Fatalf("rejected: %T, want an array", top["rejected"])
	}
	for _, r := range rej {
		sameKeys(t, "rejected", r, cReject)
	}
	return top
}

func TestPlanAcceptanceJSON(t *testing.T) {
	out, errOut, code := runPlanCmd(t, with(acceptance, "--format", "json")...)
	if code != exitcode.OK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	top := checkContract(t, out)
	p, ok := top["plan"].(map[string]any)
	if !ok {
		t.Fatalf("plan is %v, want an object", top["plan"])
	}
	n := func(k string) int { return int(p[k].(float64)) }
	if got := n("tp") * n("pp") * n("cp") * n("dp"); got != 64 {
		t.Errorf("tp·pp·cp·dp = %d, want 64", got)
	}
	if n("tp") > 8 {
		t.Errorf("tp=%d leaves the 8-GPU NVLink domain", n("tp"))
	}
	if 64%n("tp") != 0 || 80%(n("pp")*n("vpp")) != 0 || 512%(n("micro_batch")*n("dp")) != 0 || n("grad_accum") != 512/(n("micro_batch")*n("dp")) {
		t.Errorf("layout breaks a divisibility rule: %v", p)
	}
	mem := p["memory"].(map[string]any)
	if mem["fits"] != true || mem["per_gpu_bytes"].(float64) > mem["capacity_bytes"].(float64) {
		t.Errorf("chosen plan does not fit: %v", mem)
	}
	tm := p["time"].(map[string]any)
	sum := 0.0
	for _, k := range cTime[1:] {
		sum += tm[k].(float64)
	}
	if step := tm["step_s"].(float64); step <= 0 || (sum-step)/step > 1e-9 || (step-sum)/step > 1e-9 {
		t.Errorf("time parts sum to %g, step_s %g", sum, step)
	}
	if len(p["why"].([]any)) == 0 {
		t.Error("no why lines")
	}
}

func TestPlanAcceptanceGolden(t *testing.T) {
	cases := []struct {
		name string
		args []string
	}{
		{"acceptance-table.golden", acceptance},
		{"acceptance-tokens-table.golden", with(acceptance, "--tokens", "1T")},
		{"acceptance-megatron.golden", with(acceptance, "--format", "megatron")},
		{"acceptance-env.golden", with(acceptance, "--format", "env")},
		{"acceptance-sbatch.golden", with(acceptance, "--format", "sbatch", "--tokens", "1T")},
		{"acceptance-json.golden", with(acceptance, "--format", "json")},
		{"mixtral-8x7b-table.golden", []string{"plan", "--model", "mixtral-8x7b", "--gpu", "h100-sxm", "--gpus", "32", "--seq-len", "4096", "--global-batch", "256"}},
		{"mixtral-8x7b-megatron.golden", []string{"plan", "--model", "mixtral-8x7b", "--gpu", "h100-sxm", "--gpus", "32", "--seq-len", "4096", "--global-batch", "256", "--format", "megatron"}},
		{"compare-table.golden", []string{"plan", "--model", "llama3-70b", "--gpu", "h100-sxm:64,a100-80gb:128", "--seq-len", "8192", "--global-batch", "512", "--tokens", "2T", "--top", "1"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, errOut, code := runPlanCmd(t, c.args...)
			if code != exitcode.OK {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			planGolden(t, c.name, out)
		})
	}
}

// What a person sees when nothing fits, and when a pinned layout does not.
func TestPlanNoFitGolden(t *testing.T) {
	cases := []struct {
		name string
		args []string
	}{
		{"nofit-405b-8gpu-table.golden", []string{"plan", "--model", "llama3.1-405b", "--gpu", "h100-sxm", "--gpus", "8", "--seq-len", "8192", "--global-batch", "64"}},
		{"pinned-nofit-table.golden", with(acceptance, "--fix", "tp=1,pp=1,cp=1,dp=64,mbs=1,vpp=1,recompute=none,zero=0,sp=false,offload=none")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, errOut, code := runPlanCmd(t, c.args...)
			if code != exitcode.NoFit {
				t.Fatalf("exit %d, want %d: %s", code, exitcode.NoFit, errOut)
			}
			planGolden(t, c.name, out+"--- stderr\n"+errOut)
		})
	}
}

func TestPlanErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "config.json")
	if err := os.WriteFile(bad, []byte("{\n  \"model_type\": \"llama\",\n  \"hidden_size\": 4096\n  \"num_hidden_layers\": 32\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	job := []string{"--seq-len", "4096", "--global-batch", "64"}
	cases := []struct {
		name   string
		args   []string
		code   int
		stderr []string
		stdout string
	}{
		{"unknown model names nearest", with([]string{"plan", "--model", "lama3-70b", "--gpu", "h100-sxm", "--gpus", "8"}, job...), exitcode.Usage,
			[]string{`unknown model "lama3-70b"; nearest: llama3-70b`}, ""},
		{"unknown GPU names nearest", with([]string{"plan", "--model", "llama3-8b", "--gpu", "h100-sxn", "--gpus", "8"}, job...), exitcode.Usage,
			[]string{`unknown GPU type "h100-sxn"`, "h100-sxm"}, ""},
		{"malformed config.json names the file", with([]string{"plan", "--model", bad, "--gpu", "h100-sxm", "--gpus", "8"}, job...), exitcode.Usage,
			[]string{bad + ":4:3: malformed JSON"}, ""},
		{"config.json directory", with([]string{"plan", "--model", dir, "--gpu", "h100-sxm", "--gpus", "8"}, job...), exitcode.Usage,
			[]string{bad + ":4:3"}, ""},
		{"missing config file", with([]string{"plan", "--model", filepath.Join(dir, "nope.json"), "--gpu", "h100-sxm", "--gpus", "8"}, job...), exitcode.Usage,
			[]string{"nope.json", "no such file"}, ""},
		{"deepseek-v3 on one node: too big, with the way out", with([]string{"plan", "--model", "deepseek-v3", "--gpu", "h100-sxm", "--gpus", "8"}, job...), exitcode.NoFit,
			[]string{"no layout of deepseek-v3 fits 8 x h100-sxm", "fits with"}, "No layout fits."},
		{"no seq len", []string{"plan", "--model", "llama3-8b", "--gpu", "h100-sxm", "--gpus", "8", "--global-batch", "8"}, exitcode.Usage,
			[]string{"--seq-len 0: give the training sequence length"}, ""},
		{"no gpu count", with([]string{"plan", "--model", "llama3-8b", "--gpu", "h100-sxm"}, job...), exitcode.Usage,
			[]string{"--gpu h100-sxm: how many? give --gpus N or --gpu h100-sxm:N"}, ""},
		{"bad fix key", with([]string{"plan", "--model", "llama3-8b", "--gpu", "h100-sxm", "--gpus", "8", "--fix", "tp=2,ppp=2"}, job...), exitcode.Usage,
			[]string{`--fix "tp=2,ppp=2": unknown key "ppp"; accepted: tp pp vpp cp ep etp dp mbs grad_accum recompute zero sp offload`}, ""},
		{"bad format", with([]string{"plan", "--model", "llama3-8b", "--gpu", "h100-sxm", "--gpus", "8", "--format", "yaml"}, job...), exitcode.Usage,
			[]string{`--format "yaml": accepted: table, json`}, ""},
		{"bad stack", with([]string{"plan", "--model", "llama3-8b", "--gpu", "h100-sxm", "--gpus", "8", "--stack", "pytorch-lightning"}, job...), exitcode.Usage,
			[]string{`--stack "pytorch-lightning": accepted: megatron-core, nemo, megatron-2022, fsdp`}, ""},
		{"bad tokens", with([]string{"plan", "--model", "llama3-8b", "--gpu", "h100-sxm", "--gpus", "8", "--tokens", "lots"}, job...), exitcode.Usage,
			[]string{`--tokens "lots"`}, ""},
		{"kv heads do not divide heads", with([]string{"plan", "--model", "llama3-8b", "--kv-heads", "6", "--gpu", "h100-sxm", "--gpus", "8"}, job...), exitcode.Usage,
			[]string{"kv_heads = 6: must divide heads = 32"}, ""},
		{"hostfile needs placement", with([]string{"plan", "--model", "llama3-8b", "--gpu", "h100-sxm", "--gpus", "8", "--format", "hostfile"}, job...), exitcode.Usage,
			[]string{"placement needs the nodes: pass --nodelist"}, ""},
		{"list with one-layout format", with([]string{"plan", "--model", "llama3-8b", "--gpu", "h100-sxm:8,a100-80gb:8", "--format", "megatron"}, job...), exitcode.Usage,
			[]string{"--format megatron describes one layout"}, ""},
		{"torchtitan refuses a Megatron stack, naming what to use", with([]string{"plan", "--model", "llama3-8b", "--gpu", "h100-sxm", "--gpus", "8", "--format", "torchtitan"}, job...), exitcode.Usage,
			[]string{"the torchtitan format cannot express --stack megatron-core", "plan with --stack fsdp or fsdp:compile"}, ""},
		{"torchtitan refuses fp16", with([]string{"plan", "--model", "llama3-8b", "--gpu", "h100-sxm", "--gpus", "8", "--stack", "fsdp", "--precision", "fp16", "--format", "torchtitan"}, job...), exitcode.Usage,
			[]string{"cannot express precision fp16", "--precision bf16"}, ""},
		{"megatron refuses LoRA", with([]string{"plan", "--model", "llama3-8b", "--gpu", "h100-sxm", "--gpus", "8", "--finetune", "lora:8", "--format", "megatron"}, job...), exitcode.Usage,
			[]string{"cannot express LoRA r=8", "Megatron-Bridge PEFT"}, ""},
		{"nothing fits: json plan null, suggestion", []string{"plan", "--model", "llama3.1-405b", "--gpu", "h100-sxm", "--gpus", "8", "--seq-len", "8192", "--global-batch", "64", "--format", "json"}, exitcode.NoFit,
			[]string{"no layout of llama3.1-405b fits 8 x h100-sxm", "fits with"}, `"plan": null`},
		{"nothing fits: table", []string{"plan", "--model", "llama3.1-405b", "--gpu", "h100-sxm", "--gpus", "8", "--seq-len", "8192", "--global-batch", "64"}, exitcode.NoFit,
			[]string{"no layout of llama3.1-405b fits"}, "No layout fits."},
		{"nothing fits: megatron prints nothing", []string{"plan", "--model", "llama3.1-405b", "--gpu", "h100-sxm", "--gpus", "8", "--seq-len", "8192", "--global-batch", "64", "--format", "megatron"}, exitcode.NoFit,
			[]string{"no layout of llama3.1-405b fits"}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, errOut, code := runPlanCmd(t, c.args...)
			if code != c.code {
				t.Fatalf("exit %d, want %d\nstderr: %s", code, c.code, errOut)
			}
			for _, s := range c.stderr {
				if !strings.Contains(errOut, s) {
					t.Errorf("stderr lacks %q:\n%s", s, errOut)
				}
			}
			switch {
			case c.stdout == "":
				if out != "" {
					t.Errorf("want nothing on stdout, got %q", out)
				}
			case !strings.Contains(out, c.stdout):
				t.Errorf("stdout lacks %q:\n%s", c.stdout, out)
			}
			if strings.HasPrefix(c.stdout, "{") || strings.Contains(c.stdout, `"plan"`) {
				checkContract(t, out)
			}
		})
	}
}

// A fully pinned layout is evaluated and reported even when it does not fit.
func TestPlanPinnedNoFit(t *testing.T) {
	args := []string{"plan", "--model", "llama3-70b", "--gpu", "h100-sxm", "--gpus", "64", "--seq-len", "8192", "--global-batch", "512",
		"--fix", "tp=1,pp=1,cp=1,dp=64,mbs=1,vpp=1,recompute=none,zero=0,sp=false,offload=none", "--format", "json"}
	out, errOut, code := runPlanCmd(t, args...)
	if code != exitcode.NoFit {
		t.Fatalf("exit %d, want %d (no-fit)\n%s", code, exitcode.NoFit, errOut)
	}
	top := checkContract(t, out)
	p, ok := top["plan"].(map[string]any)
	if !ok {
		t.Fatalf("plan %v: want the pinned layout reported", top["plan"])
	}
	if p["tp"] != 1.0 || p["dp"] != 64.0 || p["memory"].(map[string]any)["fits"] != false {
		t.Errorf("pinned plan %v", p)
	}
	if !strings.Contains(errOut, "the pinned layout tp=1,pp=1") || !strings.Contains(errOut, "does not fit") {
		t.Errorf("stderr: %s", errOut)
	}
}

// A pinned value is honoured by the search.
func TestPlanFixHonoured(t *testing.T) {
	out, errOut, code := runPlanCmd(t, with(acceptance, "--fix", "tp=4,pp=4", "--format", "json")...)
	if code != exitcode.OK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	top := checkContract(t, out)
	for _, p := range append([]any{top["plan"]}, top["alternatives"].([]any)...) {
		pm := p.(map[string]any)
		if pm["tp"] != 4.0 || pm["pp"] != 4.0 {
			t.Errorf("--fix tp=4,pp=4 not honoured: tp=%v pp=%v", pm["tp"], pm["pp"])
		}
	}
}

// Explicit shape flags describe a model without a preset, and override one.
func TestPlanExplicitModel(t *testing.T) {
	args := []string{"plan", "--layers", "32", "--hidden", "4096", "--heads", "32", "--kv-heads", "8", "--ffn", "14336", "--ffn-type", "swiglu",
		"--vocab", "128256", "--gpu", "h100-sxm", "--gpus", "8", "--seq-len", "8192", "--global-batch", "64", "--format", "json"}
	out, errOut, code := runPlanCmd(t, args...)
	if code != exitcode.OK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	// The same shape as the llama3-8b preset gives the same plan.
	preset, _, _ := runPlanCmd(t, "plan", "--model", "llama3-8b", "--gpu", "h100-sxm", "--gpus", "8", "--seq-len", "8192", "--global-batch", "64", "--format", "json")
	// The inputs name the model as given (a preset, or none).
	if o, p := withoutInputs(t, out), withoutInputs(t, preset); o != p {
		t.Errorf("explicit llama3-8b shape and the preset differ:\n%s\n---\n%s", out, preset)
	}
	out, _, _ = runPlanCmd(t, "plan", "--model", "llama3-8b", "--layers", "16", "--gpu", "h100-sxm", "--gpus", "8", "--seq-len", "8192", "--global-batch", "64")
	if !strings.Contains(out, "llama3-8b (modified): 16 layers") {
		t.Errorf("override not shown:\n%s", out)
	}
	_, errOut, code = runPlanCmd(t, "plan", "--hidden", "4096", "--gpu", "h100-sxm", "--gpus", "8", "--seq-len", "8192", "--global-batch", "64")
	if code != exitcode.Usage || !strings.Contains(errOut, "missing --layers --heads --vocab") {
		t.Errorf("exit %d: %s", code, errOut)
	}
}

func TestPlanHFConfig(t *testing.T) {
	path := filepath.Join("..", "plan", "testdata", "hf", "llama3-70b.json")
	hf, errOut, code := runPlanCmd(t, "plan", "--model", path, "--gpu", "h100-sxm", "--gpus", "64", "--seq-len", "8192", "--global-batch", "512", "--format", "json")
	if code != exitcode.OK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	preset, _, _ := runPlanCmd(t, with(acceptance, "--format", "json")...)
	if hf != preset {
		t.Error("the llama3-70b config.json and the preset plan differently")
	}
}

// withoutInputs is plan JSON without its "inputs" object.
func withoutInputs(t *testing.T, s string) string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	delete(m, "inputs")
	b, _ := json.Marshal(m)
	return string(b)
}

// Issue 29: the MoE and FP8 job flags reach the job, and a bad value is a
// usage error that names the flag.
func TestPlanMoEJobFlags(t *testing.T) {
	o := planflags.Options{SeqLen: 4096, GlobalBatch: 512, Precision: "fp8", Stack: "megatron-core",
		FP8Recipe: "current", MoEDispatcher: "flex", MoEA2AOverlap: true, MoECapacity: 1.25, Finetune: "full"}
	j, err := o.Job()
	if err != nil {
		t.Fatal(err)
	}
	if j.FP8Recipe != "current" || j.MoEDispatcher != "flex" || !j.MoEA2AOverlap || j.MoECapacity != 1.25 {
		t.Errorf("job %+v", j)
	}
	for _, bad := range []planflags.Options{
		{FP8Recipe: "nvfp4", Precision: "fp8"}, {FP8Recipe: "current", Precision: "bf16"},
		{MoEDispatcher: "nccl"}, {MoECapacity: -1},
	} {
		bad.SeqLen, bad.GlobalBatch, bad.Stack, bad.Finetune = 4096, 512, "megatron-core", "full"
		_, err := bad.Job()
		if err == nil || exitCodeOf(err) != exitcode.Usage || !strings.Contains(err.Error(), "--") {
			t.Errorf("%+v: err %v, want a usage error naming the flag", bad, err)
		}
	}
}

// Issue 30: a vision-language config.json (Gemma 3) is planned as its text
// decoder, and the user is told what is left out.
func TestPlanMultimodalConfigNote(t *testing.T) {
	out, errOut, code := runPlanCmd(t, "plan", "--model", filepath.Join("..", "plan", "testdata", "hf", "gemma-3-12b-it.json"),
		"--gpu", "h100-sxm", "--gpus", "8", "--seq-len", "4096", "--global-batch", "256")
	if code != exitcode.OK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(errOut, "vision-language model (model_type gemma3)") || !strings.Contains(errOut, "vision tower") {
		t.Errorf("stderr lacks the note on the vision tower:\n%s", errOut)
	}
	if !strings.Contains(out, "48 layers, hidden 3840") || !strings.Contains(out, "geglu") {
		t.Errorf("not the text decoder's plan:\n%s", out)
	}
}

// Issue 30: the header plan --format sbatch writes keeps every
// incarnation's log (Slurm's reading of it, as trainrun run checks), and
// says how to run the job.
func TestPlanSbatchAppendsAndSaysTheCommand(t *testing.T) {
	out, errOut, code := runPlanCmd(t, with(acceptance, "--format", "sbatch", "--tokens", "1T")...)
	if code != exitcode.OK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if appends, _ := slurm.OpenModeAppend([]byte(out), nil); !appends {
		t.Errorf("no --open-mode=append Slurm would read:\n%s", out)
	}
	if !strings.Contains(out, "# exec trainrun run --model llama3-70b --seq-len 8192 --global-batch 512 --tokens 1T ") {
		t.Errorf("no command line:\n%s", out)
	}
}
