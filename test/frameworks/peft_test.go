package frameworks

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/trainrun/trainrun/plan"
)

// TestPEFTConfigsLoad hands what `trainrun plan --format peft` prints for
// every fine-tuning kind to Hugging Face PEFT's own config classes
// (peft_check.py: LoraConfig, PrefixTuningConfig, PromptTuningConfig,
// IA3Config, called with the keys as given, warnings as errors), and checks
// that each builds, that what PEFT keeps is the planned value, and that the
// accelerate keys are ones PEFT's own examples/sft/configs/fsdp_config*.yaml
// use. TRAINRUN_PEFT is a huggingface/peft tree (checked at
// plan.PEFTVersion); the test skips without it.
func TestPEFTConfigsLoad(t *testing.T) {
	root := os.Getenv("TRAINRUN_PEFT")
	if root == "" {
		t.Skip("TRAINRUN_PEFT (a huggingface/peft tree) is not set: make check-peft PEFT=DIR")
	}
	if _, err := os.Stat(filepath.Join(root, "src", "peft", "tuners", "lora", "config.py")); err != nil {
		t.Fatal(err)
	}
	cases := []peftCase{
		{"llama3-70b", "l40s", 1, 4096, 8, "qlora:16", plan.Pins{}},
		{"llama3-8b", "a100-80gb", 1, 4096, 16, "lora:16", plan.Pins{}},
		{"llama2-7b", "a100-40gb", 1, 2048, 8, "lora:8:q,v:dropout=0.1", plan.Pins{}},
		{"llama3-70b", "h100-sxm", 8, 4096, 64, "qlora:64:adamw32", plan.Pins{}},
		{"llama3-8b", "h100-sxm", 8, 4096, 64, "lora:32:attn", plan.Pins{}},
		{"llama3-8b", "h100-sxm", 1, 2048, 8, "prefix:30", plan.Pins{}},
		{"llama3-8b", "l40s", 1, 2048, 8, "prompt:20", plan.Pins{}},
		{"llama3-8b", "l40s", 2, 2048, 8, "ia3", plan.Pins{}},
	}
	docs, lines := checkPEFTDocs(t, cases, "peft_check.py", root)
	for i, line := range lines {
		var got struct {
			Class   string         `json:"class"`
			Config  map[string]any `json:"config"`
			Unknown []string       `json:"unknown_accelerate_keys"`
			Error   string         `json:"error"`
		}
		if err := json.Unmarshal([]byte(line), &got); err != nil {
			t.Fatalf("case %d: %v: %s", i, err, line)
		}
		if got.Error != "" {
			t.Errorf("%+v: PEFT refused the config: %s", cases[i], got.Error)
			continue
		}
		want := map[string]any{}
		b, _ := json.Marshal(docs[i].PEFT)
		_ = json.Unmarshal(b, &want)
		for k, v := range want {
			g := got.Config[k]
			if gl, ok := g.([]any); ok {
				if wl, ok := v.([]any); ok && sameSet(gl, wl) {
					continue
				}
			}
			if !reflect.DeepEqual(g, v) {
				t.Errorf("%+v: %s.%s = %v, planned %v", cases[i], got.Class, k, g, v)
			}
		}
		if len(got.Unknown) > 0 {
			t.Errorf("%+v: accelerate keys PEFT's example configs do not use: %v", cases[i], got.Unknown)
		}
		t.Logf("%s %s: %s %v", cases[i].model, cases[i].finetune, got.Class, got.Config)
	}
}

// sameSet: PEFT keeps target_modules as a set.
func sameSet(a, b []any) bool {
	if len(a) != len(b) {
		return false
	}
	seen := map[string]int{}
	for _, x := range a {
		seen[fmt.Sprint(x)]++
	}
	for _, x := range b {
		seen[fmt.Sprint(x)]--
	}
	for _, n := range seen {
		if n != 0 {
			return false
		}
	}
	return true
}

// peftCase is one planned fine-tuning whose --format peft document a
// framework's checker loads.
type peftCase struct {
	model, gpu string
	gpus       int
	seq, batch int
	finetune   string
	fix        plan.Pins
}

// checkPEFTDocs plans each case (HF stack), renders its PEFT document, gives
// them all as JSON to the Python checker script with args, and returns its
// documents and its answers, one line per case.
func checkPEFTDocs(t *testing.T, cases []peftCase, script string, args ...string) ([]*plan.PEFTConfig, []string) {
	t.Helper()
	var docs []*plan.PEFTConfig
	for _, c := range cases {
		m, err := plan.LookupModel(c.model)
		if err != nil {
			t.Fatal(err)
		}
		g, err := plan.LookupGPU(c.gpu)
		if err != nil {
			t.Fatal(err)
		}
		f, err := plan.ParseFinetuneSpec(c.finetune)
		if err != nil {
			t.Fatal(err)
		}
		j := plan.Job{SeqLen: c.seq, GlobalBatch: c.batch, Stack: plan.StackHF}.WithFinetune(f)
		cl := plan.ClusterOf(g, c.gpus)
		r := plan.Search(m, j, cl, plan.SearchOptions{Pins: c.fix})
		if r.Plan == nil || !r.Plan.Memory.Fits {
			t.Fatalf("%+v: no plan fits", c)
		}
		d, err := plan.PEFTConfigOf(m, j, cl, *r.Plan)
		if err != nil {
			t.Fatalf("%+v %s: %v", c, r.Plan.Layout.Config(), err)
		}
		docs = append(docs, d)
	}
	in, err := json.Marshal(docs)
	if err != nil {
		t.Fatal(err)
	}
	py := cmpOr(os.Getenv("TRAINRUN_PYTHON"), "/usr/bin/python3")
	cmd := exec.Command(py, append([]string{script}, args...)...)
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", script, err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != len(docs) {
		t.Fatalf("%d answers for %d cases:\n%s", len(lines), len(docs), out)
	}
	return docs, lines
}
