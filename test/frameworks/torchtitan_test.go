package frameworks

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trainrun/trainrun/plan"
)

// TestTorchTitanParses hands plan.TorchTitanArgs (what `trainrun plan
// --format torchtitan` prints and {torchtitan_args} expands to) for varied
// fsdp plans to torchtitan's own config dataclasses and tyro registry
// (torchtitan_check.py), and checks that they parse and that what torchtitan
// reads back (degrees, tokens, schedule, split, compile, checkpointing) is
// the plan's. TRAINRUN_TORCHTITAN is a torchtitan tree (checked at
// plan.TorchTitanVersion) and TRAINRUN_TORCHTITAN_PYTHONPATH where tyro and
// its dependencies are; the test skips without the first.
func TestTorchTitanParses(t *testing.T) {
	root := os.Getenv("TRAINRUN_TORCHTITAN")
	if root == "" {
		t.Skip("TRAINRUN_TORCHTITAN (a torchtitan tree) is not set: make check-frameworks TORCHTITAN=DIR [TORCHTITAN_PYTHONPATH=DIR]")
	}
	if _, err := os.Stat(filepath.Join(root, "torchtitan", "config", "configs.py")); err != nil {
		t.Fatal(err)
	}
	type tcase struct {
		model, gpu string
		gpus       int
		seq, batch int
		stack      plan.Stack
		fix        string
	}
	cases := []tcase{
		{"llama3-8b", "h100-sxm", 8, 8192, 64, plan.StackFSDP, ""},
		{"llama3-8b", "h100-sxm", 16, 8192, 256, plan.StackFSDPCompile, ""},
		{"llama3-70b", "h100-sxm", 64, 8192, 512, plan.StackFSDPCompile, ""},
		{"llama3-70b", "a100-80gb", 64, 4096, 512, plan.StackFSDP, "tp=8,recompute=full"},
		{"llama3-8b", "h100-sxm", 16, 8192, 64, plan.StackFSDP, "tp=2,pp=2,vpp=2,zero=3,recompute=full"},
		{"llama3-8b", "h100-sxm", 16, 4096, 64, plan.StackFSDP, "pp=2,zero=3,recompute=selective"},
		{"llama3-8b", "h100-sxm", 16, 4096, 256, plan.StackFSDP, "tp=4,sp=false,zero=0"},
		{"llama3-8b", "h100-sxm", 16, 8192, 64, plan.StackFSDP, "zero=2,cp=2"},
		{"mixtral-8x7b", "h100-sxm", 32, 4096, 256, plan.StackFSDP, "tp=2,ep=8,etp=1"},
		{"llama3-70b", "h100-sxm", 16, 4096, 64, plan.StackFSDP, "offload=params"},
	}
	var argvs [][]string
	var layouts []plan.Layout
	var jobs []plan.Job
	var layers []int
	for _, c := range cases {
		m, err := plan.LookupModel(c.model)
		if err != nil {
			t.Fatal(err)
		}
		g, err := plan.LookupGPU(c.gpu)
		if err != nil {
			t.Fatal(err)
		}
		j := plan.Job{SeqLen: c.seq, GlobalBatch: c.batch, Precision: plan.BF16, Stack: c.stack}
		so := plan.SearchOptions{}
		if c.fix != "" {
			if so.Pins, err = plan.ParsePins(c.fix); err != nil {
				t.Fatal(err)
			}
		}
		r := plan.Search(m, j, plan.ClusterOf(g, c.gpus), so)
		if r.Plan == nil {
			t.Fatalf("%+v: no plan", c)
		}
		args, err := plan.TorchTitanArgs(j, *r.Plan, m.Layers)
		if err != nil {
			t.Fatalf("%+v %s: %v", c, r.Plan.Layout.Config(), err)
		}
		argvs, layouts, jobs, layers = append(argvs, args), append(layouts, r.Plan.Layout), append(jobs, j), append(layers, m.Layers)
	}
	// One bad flag: the check must be able to fail.
	argvs = append(argvs, []string{"--parallelism.tensor_model_parallel_size", "2"})
	in, _ := json.Marshal(argvs)
	py := cmpOr(os.Getenv("TRAINRUN_PYTHON"), "/usr/bin/python3") // Debian's, with python3-torch
	cmd := exec.Command(py, "torchtitan_check.py", root)
	cmd.Stdin = strings.NewReader(string(in))
	cmd.Env = append(os.Environ(), "PYTHONPATH="+os.Getenv("TRAINRUN_TORCHTITAN_PYTHONPATH"))
	out, err := cmd.Output()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		t.Fatalf("torchtitan_check.py: %v\n%s", err, ee.Stderr)
	} else if err != nil {
		t.Fatal(err)
	}
	var res []struct {
		Error       string
		Training    map[string]any
		Parallelism map[string]any
		Compile     bool
		AC          *string `json:"activation_checkpoint"`
	}
	if err := json.Unmarshal(out, &res); err != nil || len(res) != len(argvs) {
		t.Fatalf("%v: %s", err, out)
	}
	if res[len(res)-1].Error == "" {
		t.Errorf("a flag torchtitan does not have was accepted")
	}
	for i, l := range layouts {
		r, j := res[i], jobs[i]
		name := fmt.Sprintf("%s %s", cases[i].model, l.Config())
		if r.Error != "" {
			t.Errorf("%s: torchtitan refuses %q: %s", name, argvs[i], r.Error)
			continue
		}
		num := func(sec map[string]any, k string) int { f, _ := sec[k].(float64); return int(f) }
		p := r.Parallelism
		world := num(p, "data_parallel_shard_degree") * num(p, "data_parallel_replicate_degree") * num(p, "context_parallel_degree") *
			num(p, "tensor_parallel_degree") * num(p, "pipeline_parallel_degree")
		if world != cases[i].gpus || num(p, "tensor_parallel_degree") != l.TP || num(p, "pipeline_parallel_degree") != l.PP ||
			num(p, "context_parallel_degree") != l.CP || num(p, "expert_parallel_degree") != max(l.EP, 1) {
			t.Errorf("%s: torchtitan reads %v", name, p)
		}
		ppmb := 1
		if l.PP > 1 {
			ppmb = num(p, "num_pp_microbatches")
			lps := num(p, "pipeline_parallel_layers_per_stage")
			stages := (layers[i] + num(p, "pipeline_parallel_first_stage_less_layers") + num(p, "pipeline_parallel_last_stage_less_layers") + lps - 1) / lps
			if stages != l.PP*l.VPP {
				t.Errorf("%s: %d stages (pipeline_parallel.py:223), plan has pp·vpp = %d", name, stages, l.PP*l.VPP)
			}
		}
		dp := num(p, "data_parallel_shard_degree") * num(p, "data_parallel_replicate_degree")
		step, mb := num(r.Training, "num_tokens_per_train_step"), num(r.Training, "num_tokens_per_microbatch_per_dp_rank")
		if step != j.GlobalBatch*j.SeqLen || step/(mb*ppmb*dp)*ppmb != l.GradAccum || num(r.Training, "max_context_length") != j.SeqLen {
			t.Errorf("%s: tokens %v, plan: accumulation %d", name, r.Training, l.GradAccum)
		}
		if r.Compile != (j.Stack == plan.StackFSDPCompile) {
			t.Errorf("%s: compile %v on %s", name, r.Compile, j.Stack)
		}
		want, got := map[string]string{"full": "FullAC.Config", "selective": "SelectiveAC.Config"}[l.Recompute], ""
		if r.AC != nil {
			got = *r.AC
		}
		if got != want {
			t.Errorf("%s: activation checkpointing %v, plan recompute=%s", name, r.AC, l.Recompute)
		}
	}
}
