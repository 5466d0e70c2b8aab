package spank

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trainrun/trainrun/plan"
	"github.com/trainrun/trainrun/topo"
)

func resolveWith(t *testing.T, c *Config, given map[string]string) *Request {
	t.Helper()
	r, err := Resolve(c, "", given, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A 4-node step of 8 tasks a node with --train-model and --train-batch: every
// node plans the same layout, writes the same plan file, and every task's
// TRAINRUN_* degrees come from that plan.
func TestComputeStepPlans(t *testing.T) {
	root, node := machine(t, "hgx-h100") // GPU names: NVIDIA H100 80GB HBM3
	c := &Config{Policy: policyConfig(t, "").Policy, CacheDir: t.TempDir()}
	r := resolveWith(t, c, map[string]string{"train-model": "llama3-70b", "train-batch": "1024x8192"})
	var first []byte
	var firstPlan *plan.Evaluation
	for nodeID := 0; nodeID < 4; nodeID++ {
		st := Step{JobID: 42, StepID: 3, NodeID: nodeID, NNodes: 4, LocalTasks: 8, TotalTasks: 32, Nodelist: "gpu[1-4]",
			NodeAddrs: []string{"10.0.0.1"}, Root: root}
		sp, _, err := PlanStep(c, r, st, node)
		if err != nil || sp == nil {
			t.Fatalf("node %d: PlanStep: %v, %v", nodeID, sp, err)
		}
		tasks, notes, err := ComputeStep(c, r, st, node)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(JobDir(c.CacheDir, 42), "plan-3.json")
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o644 {
			t.Errorf("plan file mode %v, want 0644", fi.Mode().Perm())
		}
		if !bytes.Equal(data, sp.JSON) {
			t.Errorf("node %d: the plan file differs from the plan", nodeID)
		}
		if first == nil {
			first, firstPlan = data, sp.Result.Plan
			if !strings.Contains(strings.Join(notes, "\n"), "planned llama3-70b, 1024x8192, on 32 x h100-sxm (from the node's GPUs \"NVIDIA H100 80GB HBM3\")") {
				t.Errorf("notes %q lack the plan", notes)
			}
		} else if !bytes.Equal(first, data) {
			t.Errorf("node %d planned differently from node 0:\n%s\nvs\n%s", nodeID, data, first)
		}
		p := sp.Result.Plan
		want := map[string]string{"TRAINRUN_PLAN": path, "TRAINRUN_BATCH": "1024x8192", "TRAINRUN_MODEL": "llama3-70b"}
		for _, kv := range plan.PlanEnv(*p)[:9] { // TP ... RECOMPUTE, the contract's list
			want[kv[0]] = kv[1]
		}
		for i, task := range tasks {
			for k, v := range want {
				if got, ok := lookup(task.Vars, k); !ok || got != v {
					t.Errorf("node %d task %d: %s=%q, want %q", nodeID, i, k, got, v)
				}
			}
		}
	}
	// Not the trivial layout: the 70B model needs model parallelism, so the
	// degrees above are the planner's and not the plugin's default DP=32.
	if firstPlan.TP*firstPlan.PP == 1 || firstPlan.GradAccum < 2 {
		t.Errorf("plan %s: want model parallelism and gradient accumulation for a 70B model at 1024x8192", firstPlan.Layout.Config())
	}
	var doc struct {
		Plan *struct{ TP, DP int } `json:"plan"`
	}
	if err := json.Unmarshal(first, &doc); err != nil || doc.Plan == nil || doc.Plan.TP != firstPlan.TP {
		t.Errorf("plan file is not the contract's JSON: %v %s", err, first)
	}
}

func TestPlanStepGPUType(t *testing.T) {
	_, h100 := machine(t, "hgx-h100")
	fake := &topo.Node{GPUs: []topo.GPU{{Index: 0}, {Index: 1}}} // the harness: devices without names
	t4 := &topo.Node{GPUs: []topo.GPU{{Index: 0, Name: "Tesla T4"}}}
	st := Step{JobID: 1, NodeID: 0, NNodes: 2, LocalTasks: 8, TotalTasks: 16, Nodelist: "n[1-2]"}
	given := map[string]string{"train-model": "llama3-8b", "train-batch": "256x4096"}
	for _, tc := range []struct {
		name, policy string
		node         *topo.Node
		wantGPU      string // "" = an error
		want         string // in the notes, or in the error
	}{
		{"named GPUs", "", h100, "h100-sxm", `from the node's GPUs "NVIDIA H100 80GB HBM3"`},
		{"named GPUs over the policy", "GPUType=h200\n", h100, "h100-sxm", "the policy's GPUType=h200 (site (trainrun.conf:1)) applies only where the GPUs cannot be identified"},
		{"fake GPUs, policy", "GPUType=a100-40gb\nPartitionName=other GPUType=h200\n", fake, "a100-40gb", "the policy's GPUType=a100-40gb, site (trainrun.conf:1)"},
		{"fake GPUs, auto", "", fake, "", "this node's GPUs have no names (fake or hidden devices) and the policy has GPUType=auto (default): ask the site to set GPUType for the partition (one of a100-40gb"},
		{"no GPUs, auto", "", &topo.Node{}, "", "this node shows no GPUs and the policy has GPUType=auto"},
		{"unlisted GPUs, auto", "", t4, "", `this node's GPUs "Tesla T4" are not one GPU type of the planner's catalog`},
		{"unlisted GPUs, policy", "GPUType=l40s\n", t4, "l40s", "GPUType=l40s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := policyConfig(t, tc.policy)
			sp, notes, err := PlanStep(c, resolveWith(t, c, given), st, tc.node)
			if tc.wantGPU == "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "cannot plan llama3-8b: ") {
					t.Errorf("err = %v; want one containing %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if sp.Cluster.GPU.Name != tc.wantGPU || sp.Cluster.GPUs != 16 || sp.Cluster.GPUsPerNode != 8 {
				t.Errorf("planned for %d x %s, %d a node; want 16 x %s, 8 a node", sp.Cluster.GPUs, sp.Cluster.GPU.Name, sp.Cluster.GPUsPerNode, tc.wantGPU)
			}
			if all := strings.Join(append(notes, sp.GPUFrom), "\n"); !strings.Contains(all, tc.want) {
				t.Errorf("notes %q, from %q; want %q", notes, sp.GPUFrom, tc.want)
			}
		})
	}
}

// When no plan is made the step gets what it got before (the layout given,
// or one data-parallel replica per task) and a note says why.
func TestPlanStepNotPlanned(t *testing.T) {
	root, node := machine(t, "hgx-h100")
	st := Step{JobID: 5, NodeID: 0, NNodes: 1, LocalTasks: 8, TotalTasks: 8, Nodelist: "gpu1", NodeAddrs: []string{"10.0.0.1"}, Root: root}
	for _, tc := range []struct {
		name, policy string
		given        map[string]string
		note         string
		wantTP       string
	}{
		{"model without batch", "", map[string]string{"train-model": "llama3-8b"}, "--train-model=llama3-8b without --train-batch: no plan made (TRAINRUN_MODEL exported); add --train-batch=GLOBALxSEQLEN", "1"},
		{"batch without model", "", map[string]string{"train-batch": "64x2048"}, "--train-batch=64x2048 without --train-model: nothing to plan", "1"},
		{"AutoPlan=no", "AutoPlan=no\n", map[string]string{"train-model": "llama3-8b", "train-batch": "64x2048"}, "the policy's AutoPlan=no (site (trainrun.conf:1)): no plan made", "1"},
		{"every degree pinned", "", map[string]string{"train-model": "llama3-8b", "train-batch": "64x2048", "train-layout": "tp=2,pp=2,mbs=1"}, "--train-layout=tp=2,pp=2,mbs=1 pins every degree: used as given, not planned", "2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := policyConfig(t, tc.policy)
			c.CacheDir = t.TempDir()
			r := resolveWith(t, c, tc.given)
			tasks, notes, err := ComputeStep(c, r, st, node)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(strings.Join(notes, "\n"), tc.note) {
				t.Errorf("notes %q; want %q", notes, tc.note)
			}
			if v, _ := lookup(tasks[0].Vars, "TRAINRUN_TP"); v != tc.wantTP {
				t.Errorf("TRAINRUN_TP=%s, want %s", v, tc.wantTP)
			}
			if v, ok := lookup(tasks[0].Vars, "TRAINRUN_PLAN"); ok {
				t.Errorf("TRAINRUN_PLAN=%s without a plan", v)
			}
			if _, err := os.Stat(JobDir(c.CacheDir, 5)); err == nil {
				if m, _ := filepath.Glob(filepath.Join(JobDir(c.CacheDir, 5), "plan-*.json")); len(m) > 0 {
					t.Errorf("plan files %q without a plan", m)
				}
			}
		})
	}
}

// --train-layout's degrees are pins; a job that cannot fit fails the step
// with the planner's reason; a grad_accum the batch contradicts is refused.
func TestPlanStepPinsAndNoFit(t *testing.T) {
	c := policyConfig(t, "GPUType=h100-sxm\n")
	c.CacheDir = t.TempDir()
	fake := &topo.Node{}
	st := Step{JobID: 6, NodeID: 0, NNodes: 2, LocalTasks: 8, TotalTasks: 16, Nodelist: "n[1-2]", NodeAddrs: []string{"10.0.0.1"}}

	sp, _, err := PlanStep(c, resolveWith(t, c, map[string]string{"train-model": "llama3-70b", "train-batch": "512x4096", "train-layout": "tp=4"}), st, fake)
	if err != nil {
		t.Fatal(err)
	}
	if sp.Result.Plan.TP != 4 || sp.Options.Pins.TP == nil || *sp.Options.Pins.TP != 4 || sp.Options.Pins.PP != nil {
		t.Errorf("tp=4 pinned: plan %s, pins %+v", sp.Result.Plan.Layout.Config(), sp.Options.Pins)
	}

	_, _, err = PlanStep(c, resolveWith(t, c, map[string]string{"train-model": "llama3.1-405b", "train-batch": "64x8192"}), Step{JobID: 6, NodeID: 0, NNodes: 1, LocalTasks: 2, TotalTasks: 2, Nodelist: "n1"}, fake)
	if err == nil || !strings.Contains(err.Error(), "plan for --train-model=llama3.1-405b --train-batch=64x8192 on the step's 2 tasks (h100-sxm, the policy's GPUType=h100-sxm, site (trainrun.conf:1)): no layout of llama3.1-405b fits 2 x h100-sxm") {
		t.Errorf("405B on 2 GPUs: err = %v", err)
	}
	tasks, _, err := ComputeStep(c, resolveWith(t, c, map[string]string{"train-model": "llama3.1-405b", "train-batch": "64x8192"}), Step{JobID: 6, NodeID: 0, NNodes: 1, LocalTasks: 2, TotalTasks: 2, Nodelist: "n1", NodeAddrs: []string{"10.0.0.1"}}, fake)
	if err == nil || tasks != nil {
		t.Errorf("ComputeStep of a job that does not fit: tasks %v, err %v; want the step to fail", tasks, err)
	}

	_, _, err = PlanStep(c, resolveWith(t, c, map[string]string{"train-model": "llama3-8b", "train-batch": "256x4096", "train-layout": "tp=1,grad_accum=3"}), st, fake)
	if err == nil || !strings.Contains(err.Error(), "grad_accum=3 pinned, but global batch 256 over micro_batch·dp = 1·16 gives 16") {
		t.Errorf("grad_accum=3 against the batch: err = %v", err)
	}
}

// Every node of a step plans alone, so the plan must not depend on anything
// but its inputs: repeated plans (map order varies from call to call in Go)
// and every node index give the same bytes.
func TestPlanStepDeterministic(t *testing.T) {
	c := policyConfig(t, "GPUType=h100-sxm\n")
	for _, job := range []struct{ model, batch string }{
		{"llama3-8b", "256x4096"}, {"llama3-70b", "1024x8192"}, {"mixtral-8x7b", "512x4096"}, {"llama3.1-405b", "1024x8192"},
	} {
		r := resolveWith(t, c, map[string]string{"train-model": job.model, "train-batch": job.batch})
		var first []byte
		for i := 0; i < 16; i++ {
			st := Step{JobID: 1, NodeID: i % 8, NNodes: 8, LocalTasks: 8, TotalTasks: 64, Nodelist: "n[1-8]"}
			sp, _, err := PlanStep(c, r, st, &topo.Node{})
			if err != nil {
				t.Fatalf("%s: %v", job.model, err)
			}
			if first == nil {
				first = sp.JSON
			} else if !bytes.Equal(first, sp.JSON) {
				t.Fatalf("%s %s: plan %d (node %d) differs from the first", job.model, job.batch, i, i%8)
			}
		}
	}
}

// The plan assumes the stack, precision and fine-tuning mode the job names,
// else the partition's Stack=, Precision=, Finetune=; a partition that does
// not let users override them rejects the options at submission.
func TestPlanStepStackPrecisionFinetune(t *testing.T) {
	_, h100 := machine(t, "hgx-h100")
	st := Step{JobID: 1, NodeID: 0, NNodes: 2, LocalTasks: 8, TotalTasks: 16, Nodelist: "n[1-2]"}
	c := policyConfig(t, "PartitionName=fsdp Stack=fsdp:compile Precision=fp8 Finetune=lora:8 UserOverride=none\n")
	given := map[string]string{"train-model": "llama3-8b", "train-batch": "256x4096"}
	plain, _, err := PlanStep(c, resolveWith(t, c, given), st, h100)
	if err != nil {
		t.Fatal(err)
	}
	if j := plain.Job; j.Stack != plan.StackMegatronCore || j.Precision != plan.BF16 || j.LoRARank != 0 {
		t.Errorf("site defaults: job %+v", j)
	}
	r, err := Resolve(c, "fsdp", given, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	sp, _, err := PlanStep(c, r, st, h100)
	if err != nil {
		t.Fatal(err)
	}
	if j := sp.Job; j.Stack != plan.StackFSDPCompile || j.Precision != plan.FP8 || j.LoRARank != 8 {
		t.Errorf("partition fsdp: job %+v", j)
	}
	if sp.Result.Plan.Time.Step >= plain.Result.Plan.Time.Step {
		t.Errorf("LoRA in FP8 (%.3f s) not faster than full BF16 training (%.3f s)", sp.Result.Plan.Time.Step, plain.Result.Plan.Time.Step)
	}
	_, err = Resolve(c, "fsdp", map[string]string{"train-stack": "nemo"}, func(string) string { return "" })
	if err == nil || !strings.Contains(err.Error(), "--train-stack=nemo: partition fsdp's policy") || !strings.Contains(err.Error(), "does not let users override Stack") {
		t.Errorf("locked partition, --train-stack=nemo: %v", err)
	}
	_, err = Resolve(c, "", nil, func(k string) string { return map[string]string{"TRAINRUN_PRECISION": "int8"}[k] })
	if err == nil || !strings.Contains(err.Error(), `TRAINRUN_PRECISION=int8: precision "int8": accepted: bf16, fp16, fp8`) {
		t.Errorf("TRAINRUN_PRECISION=int8: %v", err)
	}
}

// The plugin plans a V100 step in FP16 when no precision was chosen (V100
// has no BF16: issue 30), and an explicit --train-precision=bf16 there is
// refused, as trainrun plan refuses it.
func TestPlanStepNoBF16OnVolta(t *testing.T) {
	st := Step{JobID: 1, NodeID: 0, NNodes: 1, LocalTasks: 8, TotalTasks: 8, Nodelist: "n1"}
	fake := &topo.Node{GPUs: []topo.GPU{{Index: 0}, {Index: 1}}}
	c := policyConfig(t, "GPUType=v100-32gb\n")
	given := map[string]string{"train-model": "llama3-8b", "train-batch": "64x2048"}
	sp, _, err := PlanStep(c, resolveWith(t, c, given), st, fake)
	if err != nil {
		t.Fatal(err)
	}
	if sp.Job.Precision != plan.FP16 {
		t.Errorf("V100 with the default precision: %s", sp.Job.Precision)
	}
	given["train-precision"] = "bf16"
	if _, _, err := PlanStep(c, resolveWith(t, c, given), st, fake); err == nil || !strings.Contains(err.Error(), "has no BF16") {
		t.Errorf("--train-precision=bf16 on V100: %v", err)
	}
}
