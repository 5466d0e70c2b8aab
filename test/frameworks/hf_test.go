package frameworks

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/trainrun/trainrun/plan"
)

// TestHFSettingsMatchSources hands what `trainrun plan --format peft` prints
// (bnb_config, training_arguments, accelerate) for every fine-tuning kind,
// DDP, FSDP and FSDP with the base offloaded, to hf_check.py, which reads
// accelerate's, TRL's and transformers' own classes from their sources (the
// config-file dataclass, `accelerate launch`'s arguments and FSDP value
// lists; SFTConfig; TrainingArguments, OptimizerNames and BitsAndBytesConfig)
// and fails on a key or value they do not have. TRAINRUN_ACCELERATE,
// TRAINRUN_TRL and TRAINRUN_TRANSFORMERS are the trees (make check-peft
// ACCELERATE=DIR TRL=DIR TRANSFORMERS=DIR); the test skips without any, and
// checks those given.
func TestHFSettingsMatchSources(t *testing.T) {
	trees := map[string]string{"accelerate": os.Getenv("TRAINRUN_ACCELERATE"), "trl": os.Getenv("TRAINRUN_TRL"), "transformers": os.Getenv("TRAINRUN_TRANSFORMERS")}
	var args, given []string
	for _, k := range []string{"accelerate", "trl", "transformers"} {
		if trees[k] != "" {
			args = append(args, "--"+k, trees[k])
			given = append(given, k)
		}
	}
	if len(args) == 0 {
		t.Skip("none of TRAINRUN_ACCELERATE, TRAINRUN_TRL, TRAINRUN_TRANSFORMERS is set: make check-peft ACCELERATE=DIR TRL=DIR TRANSFORMERS=DIR")
	}
	type tcase struct {
		model, gpu string
		gpus       int
		seq, batch int
		finetune   string
		fix        plan.Pins
	}
	z3, off := 3, "params"
	cases := []tcase{
		{"llama3-70b", "l40s", 1, 4096, 8, "qlora:16", plan.Pins{}},
		{"llama3-8b", "a100-80gb", 1, 4096, 16, "lora:16", plan.Pins{}},
		{"llama3-70b", "h100-sxm", 8, 4096, 64, "qlora:64:adamw32", plan.Pins{Zero: &z3}},
		{"llama3-70b", "a100-80gb", 2, 2048, 8, "qlora:8:adamw32", plan.Pins{Zero: &z3, Offload: &off}},
		{"llama3-8b", "h100-sxm", 8, 4096, 64, "lora:32:attn", plan.Pins{}},
		{"llama3-8b", "h100-sxm", 1, 2048, 8, "prefix:30", plan.Pins{}},
		{"llama3-8b", "l40s", 2, 2048, 8, "ia3", plan.Pins{}},
	}
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
	cmd := exec.Command(py, append([]string{"hf_check.py"}, args...)...)
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("hf_check.py: %v\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != len(docs) {
		t.Fatalf("%d answers for %d cases:\n%s", len(lines), len(docs), out)
	}
	fsdpSeen := false
	for i, line := range lines {
		var got struct {
			Checked []string `json:"checked"`
			Errors  []string `json:"errors"`
		}
		if err := json.Unmarshal([]byte(line), &got); err != nil {
			t.Fatalf("case %d: %v: %s", i, err, line)
		}
		if strings.Join(got.Checked, ",") != strings.Join(given, ",") {
			t.Errorf("%+v: checked %v, want %v", cases[i], got.Checked, given)
		}
		for _, e := range got.Errors {
			t.Errorf("%+v: %s", cases[i], e)
		}
		fsdpSeen = fsdpSeen || docs[i].Accelerate["distributed_type"] == "FSDP"
		t.Logf("%s %s on %d %s: %v accelerate %v training %v bnb %v", cases[i].model, cases[i].finetune, cases[i].gpus, cases[i].gpu, got.Checked,
			docs[i].Accelerate["distributed_type"], docs[i].Training["optim"], docs[i].BNB)
	}
	if !fsdpSeen {
		t.Error("no case planned FSDP: the fsdp_config keys went unchecked")
	}
}
