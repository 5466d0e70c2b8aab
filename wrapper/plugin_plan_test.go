package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/trainrun/trainrun/plan/policy"
	"github.com/trainrun/trainrun/spank"
	"github.com/trainrun/trainrun/topo"
	"github.com/trainrun/trainrun/topo/snapshot"
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
		planArgs       []string // beyond --format json
	}{
		{"llama3-8b on fake GPUs, policy GPUType", &topo.Node{}, "", "GPUType=h100-sxm\n", "llama3-8b", "256x4096", "", 4, 8,
			[]string{"--model", "llama3-8b", "--gpu", "h100-sxm", "--gpus", "32", "--gpus-per-node", "8", "--seq-len", "4096", "--global-batch", "256"}},
		{"llama3-70b on named H100s", h100, dir, "", "llama3-70b", "1024x8192", "", 8, 8,
			[]string{"--model", "llama3-70b", "--gpu", "h100-sxm", "--gpus", "64", "--gpus-per-node", "8", "--seq-len", "8192", "--global-batch", "1024"}},
		{"pins from --train-layout, 4 tasks a node", &topo.Node{}, "", "PartitionName=p GPUType=a100-80gb\nGPUType=h200\n", "llama3-70b", "512x4096", "tp=4,recompute=full", 4, 4,
			[]string{"--model", "llama3-70b", "--gpu", "h200", "--gpus", "16", "--gpus-per-node", "4", "--seq-len", "4096", "--global-batch", "512", "--fix", "tp=4,recompute=full"}},
		{"mixtral, MoE", &topo.Node{}, "", "GPUType=h100-sxm\n", "mixtral-8x7b", "512x4096", "", 4, 8,
			[]string{"--model", "mixtral-8x7b", "--gpu", "h100-sxm", "--gpus", "32", "--gpus-per-node", "8", "--seq-len", "4096", "--global-batch", "512"}},
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
			if code != ExitOK {
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
			for k, field := range map[string]string{"TRAINRUN_TP": "tp", "TRAINRUN_PP": "pp", "TRAINRUN_VPP": "vpp", "TRAINRUN_CP": "cp", "TRAINRUN_EP": "ep",
				"TRAINRUN_DP": "dp", "TRAINRUN_MICRO_BATCH": "micro_batch", "TRAINRUN_GRAD_ACCUM": "grad_accum", "TRAINRUN_RECOMPUTE": "recompute"} {
				if got := env[k]; got != fmt.Sprint(p[field]) {
					t.Errorf("%s=%q in the task, trainrun plan's %s is %v", k, got, field, p[field])
				}
			}
		})
	}
}
