package run

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trainrun/trainrun/plan"
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
