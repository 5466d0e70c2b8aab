package run

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trainrun/trainrun/plan"
	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
)

// {megatron_args} inside a longer word is shell-quoted (a bash -c script
// must not break on --moe-layer-freq's parentheses); standalone, one
// argument per flag, unquoted.
func TestMegatronArgsSubstitutionQuotes(t *testing.T) {
	meg := []string{"--moe-layer-freq", "([0]*3+[1]*58)", "--num-layers", "61"}
	got, _ := substituteTemplates([]string{"bash", "-c", "python p.py {megatron_args}"}, nil, meg)
	if want := "python p.py --moe-layer-freq '([0]*3+[1]*58)' --num-layers 61"; got[2] != want {
		t.Errorf("inside a word: %q, want %q", got[2], want)
	}
	got, _ = substituteTemplates([]string{"python", "{megatron_args}"}, nil, meg)
	if strings.Join(got, "|") != "python|--moe-layer-freq|([0]*3+[1]*58)|--num-layers|61" {
		t.Errorf("standalone: %q", got)
	}
}

// deepSpeedConfig writes the plan's ds_config.json into the job directory,
// holding what `trainrun plan --format deepspeed` prints (plan.RenderDeepSpeed).
func TestDeepSpeedConfigWritten(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ds_config.json")
	r := &runner{cfg: Config{argv: []string{"{deepspeed_config}"}}, dirs: runDirs{jobDir: dir}}
	m, _ := plan.LookupModel("llama3-8b")
	g, _ := plan.LookupGPU("h100-sxm")
	j := plan.Job{SeqLen: 4096, GlobalBatch: 256, Precision: plan.BF16, Stack: plan.StackDeepSpeed + ":zero3"}
	res := plan.Search(m, j, plan.ClusterOf(g, 16), plan.SearchOptions{})
	if res.Plan == nil {
		t.Fatal("no plan")
	}
	e := *res.Plan
	r.choice = choice{Layout: e.Layout, Eval: &e, Model: &m, Job: j}
	vals := map[string]string{}
	if err := r.deepSpeedConfig(vals); err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	if err := plan.RenderDeepSpeed(&want, j, e); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil || string(b) != want.String() {
		t.Errorf("ds_config.json (%v):\n%s\nplan --format deepspeed:\n%s", err, b, want.String())
	}
}

// {torchtitan_args} inside a longer word is the list shell-joined as plan
// quotes it (plan.ShellJoin); standalone, one argument per item.
func TestTorchTitanArgsSubstitution(t *testing.T) {
	args := []string{"--training.steps", "100", "--job.description", "a b"}
	sub, _ := substituteTemplates([]string{"bash", "-c", "exec python -m torchtitan.train {torchtitan_args}"}, nil, nil, map[string][]string{"torchtitan_args": args})
	if len(sub) != 3 || sub[2] != "exec python -m torchtitan.train "+plan.ShellJoin(args) {
		t.Errorf("inside a word: %q", sub)
	}
	sub, _ = substituteTemplates([]string{"python", "{torchtitan_args}"}, nil, nil, map[string][]string{"torchtitan_args": args})
	if strings.Join(sub, "|") != "python|--training.steps|100|--job.description|a b" {
		t.Errorf("standalone: %q", sub)
	}
}

// The plan file's "inputs" are read by the one plan-JSON reader: a symbolic
// link (or a FIFO, or a file over planjson.MaxBytes) is refused as --plan
// itself is, and a file without inputs has none.
func TestReadPlanInputsOneReader(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "plan.json")
	if err := os.WriteFile(path, []byte(`{"plan": null, "inputs": {"model": {"name": "m", "layers": 2}, "seq_len": 4096, "global_batch": 64}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	in, err := readPlanInputs(path)
	if err != nil || in == nil || in.SeqLen != 4096 || in.GlobalBatch != 64 || in.Model.Layers != 2 {
		t.Fatalf("readPlanInputs: %+v, %v", in, err)
	}
	link := filepath.Join(dir, "link.json")
	if err := os.Symlink(path, link); err != nil {
		t.Fatal(err)
	}
	if in, err := readPlanInputs(link); err == nil || exitcode.Of(err) != exitcode.Usage {
		t.Errorf("a symbolic link: %+v, %v; want a usage error", in, err)
	}
	bare := filepath.Join(dir, "bare.json")
	if err := os.WriteFile(bare, []byte(`{"plan": null}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if in, err := readPlanInputs(bare); in != nil || err != nil {
		t.Errorf("no inputs: %+v, %v; want none", in, err)
	}
}
