package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/trainrun/trainrun/plan/policy"
	"github.com/trainrun/trainrun/spank"
	"github.com/trainrun/trainrun/topo"
	"github.com/trainrun/trainrun/topo/snapshot"
	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
)

// jsonDiff lists the paths at which a and b (decoded JSON) differ.
func jsonDiff(path string, a, b any) []string {
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: object vs %T", path, b)}
		}
		keys := map[string]bool{}
		for k := range av {
			keys[k] = true
		}
		for k := range bv {
			keys[k] = true
		}
		var ks []string
		for k := range keys {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		var out []string
		for _, k := range ks {
			out = append(out, jsonDiff(path+"."+k, av[k], bv[k])...)
		}
		return out
	case []any:
		bv, ok := b.([]any)
		if !ok || len(av) != len(bv) {
			return []string{fmt.Sprintf("%s: %d elements vs %v", path, len(av), b)}
		}
		var out []string
		for i := range av {
			out = append(out, jsonDiff(path+"["+strconv.Itoa(i)+"]", av[i], bv[i])...)
		}
		return out
	}
	if fmt.Sprint(a) != fmt.Sprint(b) {
		return []string{fmt.Sprintf("%s: %v vs %v", path, a, b)}
	}
	return nil
}

// leaves counts the scalar fields of decoded JSON (so that a comparison of
// two empty objects does not pass for a comparison of plans).
func leaves(v any) int {
	switch x := v.(type) {
	case map[string]any:
		n := 0
		for _, e := range x {
			n += leaves(e)
		}
		return n
	case []any:
		n := 0
		for _, e := range x {
			n += leaves(e)
		}
		return n
	}
	return 1
}

// The plugin's plan of a step (spank.ComputeStep with --train-model and
// --train-batch) is what `trainrun plan --format json` prints for the same
// job, field by field; the file TRAINRUN_PLAN names holds it, and the
// tasks' TRAINRUN_* degrees are its plan's.
func TestPluginPlanIsTrainrunPlan(t *testing.T) {
	dir, cleanup, err := snapshot.UnpackTemp("hgx-h100")
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	h100, _, err := spank.NodeTopology("", dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name           string
		node           *topo.Node
		root, policy   string
		model, batch   string
		layout         string
		nodes, perNode int
		planArgs       []string          // beyond --format json
		options        map[string]string // more of the job's --train-* options
	}{
		{"llama3-8b on fake GPUs, policy GPUType", &topo.Node{}, "", "GPUType=h100-sxm\n", "llama3-8b", "256x4096", "", 4, 8,
			[]string{"--model", "llama3-8b", "--gpu", "h100-sxm", "--gpus", "32", "--gpus-per-node", "8", "--seq-len", "4096", "--global-batch", "256"}, nil},
		{"llama3-70b on named H100s", h100, dir, "", "llama3-70b", "1024x8192", "", 8, 8,
			[]string{"--model", "llama3-70b", "--gpu", "h100-sxm", "--gpus", "64", "--gpus-per-node", "8", "--seq-len", "8192", "--global-batch", "1024"}, nil},
		{"pins from --train-layout, 4 tasks a node", &topo.Node{}, "", "PartitionName=p GPUType=a100-80gb\nGPUType=h200\n", "llama3-70b", "512x4096", "tp=4,recompute=full", 4, 4,
			[]string{"--model", "llama3-70b", "--gpu", "h200", "--gpus", "16", "--gpus-per-node", "4", "--seq-len", "4096", "--global-batch", "512", "--fix", "tp=4,recompute=full"}, nil},
		{"mixtral, MoE", &topo.Node{}, "", "GPUType=h100-sxm\n", "mixtral-8x7b", "512x4096", "", 4, 8,
			[]string{"--model", "mixtral-8x7b", "--gpu", "h100-sxm", "--gpus", "32", "--gpus-per-node", "8", "--seq-len", "4096", "--global-batch", "512"}, nil},
		{"llama3-8b, ZeRO-3 and FP8 from the options", &topo.Node{}, "", "GPUType=h100-sxm\n", "llama3-8b", "256x4096", "", 4, 8,
			[]string{"--model", "llama3-8b", "--gpu", "h100-sxm", "--gpus", "32", "--gpus-per-node", "8", "--seq-len", "4096", "--global-batch", "256", "--stack", "deepspeed:zero3", "--precision", "fp8"},
			map[string]string{"train-stack": "deepspeed:zero3", "train-precision": "fp8"}},
		{"llama3-70b offloaded to NVMe at the policy's NVMeBW", &topo.Node{}, "", "GPUType=h100-sxm\nNVMeBW=5\n", "llama3-70b", "256x4096", "offload=nvme", 4, 8,
			[]string{"--model", "llama3-70b", "--gpu", "h100-sxm", "--gpus", "32", "--gpus-per-node", "8", "--seq-len", "4096", "--global-batch", "256", "--fix", "offload=nvme", "--nvme-bw", "5"}, nil},
		{"llama3-70b, FSDP compile and LoRA from the policy", &topo.Node{}, "", "GPUType=a100-80gb\nStack=fsdp:compile\nFinetune=lora:8\n", "llama3-70b", "512x4096", "", 4, 8,
			[]string{"--model", "llama3-70b", "--gpu", "a100-80gb", "--gpus", "32", "--gpus-per-node", "8", "--seq-len", "4096", "--global-batch", "512", "--stack", "fsdp:compile", "--finetune", "lora:8"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pol, err := policy.Parse(strings.NewReader(tc.policy), "trainrun.conf")
			if err != nil {
				t.Fatal(err)
			}
			c := &spank.Config{Policy: pol, CacheDir: t.TempDir()}
			given := map[string]string{"train-model": tc.model, "train-batch": tc.batch}
			if tc.layout != "" {
				given["train-layout"] = tc.layout
			}
			for k, v := range tc.options {
				given[k] = v
			}
			r, err := spank.Resolve(c, "", given, func(string) string { return "" })
			if err != nil {
				t.Fatal(err)
			}
			st := spank.Step{JobID: 77, StepID: 1, NodeID: tc.nodes - 1, NNodes: tc.nodes, LocalTasks: tc.perNode, TotalTasks: tc.nodes * tc.perNode,
				Nodelist: fmt.Sprintf("gpu[1-%d]", tc.nodes), NodeAddrs: []string{"10.0.0.9"}, Root: tc.root}
			tasks, _, err := spank.ComputeStep(c, r, st, tc.node)
			if err != nil {
				t.Fatal(err)
			}
			want := filepath.Join(spank.JobDir(c.CacheDir, 77), "plan-1.json")
			var path string
			for _, kv := range tasks[0].Vars {
				if v, ok := strings.CutPrefix(kv, "TRAINRUN_PLAN="); ok {
					path = v
				}
			}
			if path != want {
				t.Fatalf("TRAINRUN_PLAN=%q, want %q", path, want)
			}
			pluginJSON, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			out, errOut, code := runPlanCmd(t, append(append([]string{"plan"}, tc.planArgs...), "--format", "json")...)
			if code != exitcode.OK {
				t.Fatalf("trainrun plan: exit %d: %s", code, errOut)
			}
			var a, b map[string]any
			if err := json.Unmarshal(pluginJSON, &a); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(out), &b); err != nil {
				t.Fatal(err)
			}
			checkContract(t, string(pluginJSON))
			if d := jsonDiff("", a, b); len(d) > 0 {
				t.Errorf("the plugin's plan differs from trainrun plan's in %d fields:\n%s", len(d), strings.Join(d, "\n"))
			}
			if n := leaves(a); n < 50 || len(a["alternatives"].([]any)) == 0 {
				t.Errorf("only %d fields compared (alternatives %v): not a whole plan", n, a["alternatives"])
			}
			if string(pluginJSON) != out {
				t.Errorf("the fields agree but the bytes differ")
			}
			p := b["plan"].(map[string]any)
			env := map[string]string{}
			for _, kv := range tasks[len(tasks)-1].Vars {
				k, v, _ := strings.Cut(kv, "=")
				env[k] = v
			}
			checkPluginMegatronArgs(t, env, tc.planArgs)
			for k, field := range map[string]string{"TRAINRUN_TP": "tp", "TRAINRUN_PP": "pp", "TRAINRUN_VPP": "vpp", "TRAINRUN_CP": "cp", "TRAINRUN_EP": "ep",
				"TRAINRUN_DP": "dp", "TRAINRUN_MICRO_BATCH": "micro_batch", "TRAINRUN_GRAD_ACCUM": "grad_accum", "TRAINRUN_RECOMPUTE": "recompute"} {
				if got := env[k]; got != fmt.Sprint(p[field]) {
					t.Errorf("%s=%q in the task, trainrun plan's %s is %v", k, got, field, p[field])
				}
			}
		})
	}
}

// checkPluginMegatronArgs: the plugin's TRAINRUN_MEGATRON_ARGS, read by
// bash as a script would (eval "set -- $TRAINRUN_MEGATRON_ARGS"), is word
// for word what bash reads from `trainrun plan ARGS --format megatron`; on a
// stack other than Megatron's, or a plan that format refuses, it is unset.
func checkPluginMegatronArgs(t *testing.T, env map[string]string, planArgs []string) {
	t.Helper()
	v, set := env["TRAINRUN_MEGATRON_ARGS"]
	out, errOut, code := runPlanCmd(t, append(append([]string{"plan"}, planArgs...), "--format", "megatron")...)
	st := ""
	for i, a := range planArgs {
		if a == "--stack" && i+1 < len(planArgs) {
			st = planArgs[i+1]
		}
	}
	if code != exitcode.OK || (st != "" && !strings.HasPrefix(st, "megatron") && st != "nemo") {
		if set {
			t.Errorf("TRAINRUN_MEGATRON_ARGS=%q set, but plan --format megatron exits %d (%s) on stack %q", v, code, strings.TrimSpace(errOut), st)
		}
		return
	}
	if !set {
		t.Fatalf("TRAINRUN_MEGATRON_ARGS not set; plan --format megatron gives:\n%s", out)
	}
	var body []string
	for _, l := range strings.Split(out, "\n") {
		if !strings.HasPrefix(l, "#") {
			body = append(body, l)
		}
	}
	plugin := bashWords(t, `eval "set -- $V"; printf '%s\0' "$@"`, v)
	planned := bashWords(t, "printf '%s\\0' "+strings.Join(body, "\n"), "")
	if len(planned) < 10 || !slices.Equal(plugin, planned) {
		t.Errorf("the plugin's TRAINRUN_MEGATRON_ARGS (%d words) differs from plan --format megatron's (%d words):\n%q\n%q", len(plugin), len(planned), plugin, planned)
	}
}

// bashWords runs script in bash with V=v and splits its NUL-separated output.
func bashWords(t *testing.T, script, v string) []string {
	t.Helper()
	cmd := exec.Command("bash", "-c", script)
	cmd.Env = append(os.Environ(), "V="+v)
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("bash -c %q: %v", script, err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
}

// dryRunEnv runs `trainrun run --dry-run` on a 4x8 allocation given by env
// and returns the rank's printed environment.
func dryRunEnv(t *testing.T, env map[string]string, args ...string) (map[string]string, string, error) {
	t.Helper()
	m := slurmEnv4x8()
	m["TRAINRUN_JOB_DIR"] = t.TempDir()
	for k, v := range env {
		m[k] = v
	}
	out, errb, err := cli{vars: m}.runRun(append([]string{"--dry-run", "--probe", "none"}, args...)...)
	vars := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(l, "="); ok && strings.HasPrefix(k, "TRAINRUN_") {
			vars[k] = v
		}
	}
	return vars, errb, err
}

// trainrun run takes --model from TRAINRUN_MODEL and --seq-len and
// --global-batch from TRAINRUN_BATCH (the plugin's #SBATCH --train-model and
// --train-batch) where the flags are not given.
func TestRunPlanInputsFromPluginTwins(t *testing.T) {
	planOf := func(args ...string) map[string]any {
		t.Helper()
		out, errOut, code := runPlanCmd(t, append(append([]string{"plan"}, args...), "--gpus", "32", "--gpus-per-node", "8", "--format", "json")...)
		if code != exitcode.OK {
			t.Fatalf("trainrun plan %v: exit %d: %s", args, code, errOut)
		}
		var doc struct{ Plan map[string]any }
		if err := json.Unmarshal([]byte(out), &doc); err != nil || doc.Plan == nil {
			t.Fatalf("trainrun plan: %v %s", err, out)
		}
		return doc.Plan
	}
	same := func(t *testing.T, vars map[string]string, p map[string]any) {
		t.Helper()
		for k, field := range map[string]string{"TRAINRUN_TP": "tp", "TRAINRUN_PP": "pp", "TRAINRUN_DP": "dp", "TRAINRUN_MICRO_BATCH": "micro_batch", "TRAINRUN_GRAD_ACCUM": "grad_accum", "TRAINRUN_RECOMPUTE": "recompute"} {
			if vars[k] != fmt.Sprint(p[field]) {
				t.Errorf("%s=%q, trainrun plan's %s is %v", k, vars[k], field, p[field])
			}
		}
	}
	t.Run("model and batch from the twins", func(t *testing.T) {
		vars, errOut, err := dryRunEnv(t, map[string]string{"TRAINRUN_MODEL": "llama3-70b", "TRAINRUN_BATCH": "1024x8192"}, "--gpu", "h100-sxm", "--", "true")
		if err != nil {
			t.Fatalf("%v\n%s", err, errOut)
		}
		same(t, vars, planOf("--model", "llama3-70b", "--gpu", "h100-sxm", "--seq-len", "8192", "--global-batch", "1024"))
	})
	t.Run("flags win over the twins, flag by flag", func(t *testing.T) {
		vars, errOut, err := dryRunEnv(t, map[string]string{"TRAINRUN_MODEL": "llama3-70b", "TRAINRUN_BATCH": "1024x8192"},
			"--gpu", "h100-sxm", "--model", "llama3-8b", "--seq-len", "2048", "--", "true")
		if err != nil {
			t.Fatalf("%v\n%s", err, errOut)
		}
		same(t, vars, planOf("--model", "llama3-8b", "--gpu", "h100-sxm", "--seq-len", "2048", "--global-batch", "1024"))
	})
	t.Run("the PRODUCT.md script: model from the directive, batch from the flags", func(t *testing.T) {
		vars, errOut, err := dryRunEnv(t, map[string]string{"TRAINRUN_MODEL": "llama3-8b"}, "--gpu", "h100-sxm", "--seq-len", "4096", "--global-batch", "256", "--", "true")
		if err != nil {
			t.Fatalf("%v\n%s", err, errOut)
		}
		same(t, vars, planOf("--model", "llama3-8b", "--gpu", "h100-sxm", "--seq-len", "4096", "--global-batch", "256"))
	})
	t.Run("the policy's GPUType where the probe names no GPU", func(t *testing.T) {
		pol := filepath.Join(t.TempDir(), "trainrun.conf")
		if err := os.WriteFile(pol, []byte("PartitionName=low GPUType=a100-80gb\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		vars, errOut, err := dryRunEnv(t, map[string]string{"TRAINRUN_MODEL": "llama3-8b", "TRAINRUN_BATCH": "256x4096"}, "--policy", pol, "--", "true")
		if err != nil {
			t.Fatalf("%v\n%s", err, errOut)
		}
		if !strings.Contains(errOut, "planning for a100-80gb, the policy's GPUType (partition low ("+pol+":1))") {
			t.Errorf("stderr does not say where the GPU type came from:\n%s", errOut)
		}
		same(t, vars, planOf("--model", "llama3-8b", "--gpu", "a100-80gb", "--seq-len", "4096", "--global-batch", "256"))
	})
	t.Run("model from the directive with a pinned layout and no batch", func(t *testing.T) {
		vars, errOut, err := dryRunEnv(t, map[string]string{"TRAINRUN_MODEL": "llama3-8b"}, "--fix", "tp=4", "--", "true")
		if err != nil || vars["TRAINRUN_TP"] != "4" || vars["TRAINRUN_DP"] != "8" || !strings.Contains(errOut, "--fix tp=4 is used as given, not evaluated") {
			t.Errorf("err %v, TP %s DP %s, stderr:\n%s", err, vars["TRAINRUN_TP"], vars["TRAINRUN_DP"], errOut)
		}
	})
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		msg  string
	}{
		{"bad TRAINRUN_BATCH", map[string]string{"TRAINRUN_BATCH": "1024"}, []string{"--gpu", "h100-sxm", "--model", "llama3-8b", "--", "true"},
			"TRAINRUN_BATCH=1024: want GLOBALxSEQLEN"},
		{"model from the directive, no batch", map[string]string{"TRAINRUN_MODEL": "llama3-8b"}, []string{"--gpu", "h100-sxm", "--", "true"},
			"the model llama3-8b comes from TRAINRUN_MODEL, which #SBATCH --train-model sets: give the batch with --seq-len and --global-batch, or #SBATCH --train-batch=GLOBALxSEQLEN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := dryRunEnv(t, tc.env, tc.args...)
			if err == nil || exitCodeOf(err) != exitcode.Usage || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("err = %v (code %d); want a usage error with %q", err, exitCodeOf(err), tc.msg)
			}
		})
	}
	t.Run("help", func(t *testing.T) {
		_, help, _ := cli{}.run("run", "--help")
		for _, w := range []string{"default: TRAINRUN_MODEL, which the plugin's #SBATCH --train-model sets", "default: from TRAINRUN_BATCH=GLOBALxSEQLEN", "#SBATCH --train-model=NAME --train-batch=GLOBALxSEQLEN"} {
			if !strings.Contains(help, w) {
				t.Errorf("trainrun run --help lacks %q", w)
			}
		}
	})
}

// For one job, the plugin's step plan and trainrun run's plan (the batch
// script sees the #SBATCH --train-* options as their TRAINRUN_* twins) use
// the same stack, precision and fine-tuning mode, from the option or the
// partition's policy: the tasks get the same degrees.
func TestPluginAndRunPlanTheSameSoftware(t *testing.T) {
	for _, tc := range []struct {
		name, policy string
		options      map[string]string
	}{
		{"options", "PartitionName=low GPUType=h100-sxm\n", map[string]string{"train-stack": "deepspeed:zero3", "train-precision": "fp8", "train-finetune": "full"}},
		{"the partition's policy", "PartitionName=low GPUType=a100-80gb Stack=fsdp:compile Finetune=lora:8\n", nil},
		{"an option over the policy", "PartitionName=low GPUType=a100-80gb Stack=fsdp:compile Finetune=lora:8\n", map[string]string{"train-finetune": "full"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			polFile := filepath.Join(t.TempDir(), "trainrun.conf")
			if err := os.WriteFile(polFile, []byte(tc.policy), 0o644); err != nil {
				t.Fatal(err)
			}
			pol, err := policy.Parse(strings.NewReader(tc.policy), polFile)
			if err != nil {
				t.Fatal(err)
			}
			c := &spank.Config{Policy: pol, CacheDir: t.TempDir()}
			given := map[string]string{"train-model": "llama3-70b", "train-batch": "512x4096"}
			twins := map[string]string{}
			for k, v := range tc.options {
				given[k] = v
			}
			for k, v := range given {
				twins["TRAINRUN_"+strings.ToUpper(strings.TrimPrefix(k, "train-"))] = v
			}
			r, err := spank.Resolve(c, "low", given, func(string) string { return "" })
			if err != nil {
				t.Fatal(err)
			}
			st := spank.Step{JobID: 42, StepID: 0, NodeID: 0, NNodes: 4, LocalTasks: 8, TotalTasks: 32, Nodelist: "n[1-4]", NodeAddrs: []string{"10.0.0.9"}}
			tasks, _, err := spank.ComputeStep(c, r, st, &topo.Node{})
			if err != nil {
				t.Fatal(err)
			}
			plugin := map[string]string{}
			for _, kv := range tasks[0].Vars {
				k, v, _ := strings.Cut(kv, "=")
				plugin[k] = v
			}
			vars, errOut, err := dryRunEnv(t, twins, "--policy", polFile, "--", "true")
			if err != nil {
				t.Fatalf("trainrun run: %v\n%s", err, errOut)
			}
			for _, k := range []string{"TRAINRUN_TP", "TRAINRUN_PP", "TRAINRUN_VPP", "TRAINRUN_CP", "TRAINRUN_EP", "TRAINRUN_DP", "TRAINRUN_MICRO_BATCH", "TRAINRUN_GRAD_ACCUM", "TRAINRUN_RECOMPUTE"} {
				if plugin[k] == "" || vars[k] != plugin[k] {
					t.Errorf("%s: the plugin's step has %q, trainrun run %q", k, plugin[k], vars[k])
				}
			}
		})
	}
}
