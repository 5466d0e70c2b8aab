package spank

import (
	"testing"

	"github.com/trainrun/trainrun/plan/policy"
)

// What planning and TRAINRUN_RESUME_DIR add to a step in slurmstepd: the
// same 8-node, 64-task step on an HGX H100 node computed with a layout given
// (no plan, no store), planned (--train-model llama3-70b --train-batch
// 1024x8192, plan file written), with a store of two committed checkpoints
// of 64 ranks, and both. The difference in ns/op from "layout" is the cost
// per step on each node.
func BenchmarkComputeStep(b *testing.B) {
	root, node := machine(b, "hgx-h100")
	ckpt := makeStore(b, 64, "step-100", "step-200")
	for _, bc := range []struct {
		name  string
		given map[string]string
	}{
		{"layout", map[string]string{"train-layout": "tp=8,pp=2"}},
		{"plan", map[string]string{"train-model": "llama3-70b", "train-batch": "1024x8192"}},
		{"resume", map[string]string{"train-layout": "tp=8,pp=2", "train-ckpt": ckpt}},
		{"plan+resume", map[string]string{"train-model": "llama3-70b", "train-batch": "1024x8192", "train-ckpt": ckpt}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c := &Config{Policy: policy.Default(), CacheDir: b.TempDir()}
			r, err := Resolve(c, "", bc.given, func(string) string { return "" })
			if err != nil {
				b.Fatal(err)
			}
			st := Step{JobID: 4242, StepID: 1, NodeID: 3, NNodes: 8, LocalTasks: 8, TotalTasks: 64, Nodelist: "gpu[01-08]",
				NodeAddrs: []string{"10.0.0.11"}, Root: root}
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := ComputeStep(c, r, st, node); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// The parts alone: the planner's search and JSON, and the store lookup.
func BenchmarkPlanStep(b *testing.B) {
	_, node := machine(b, "hgx-h100")
	c := &Config{Policy: policy.Default()}
	r, err := Resolve(c, "", map[string]string{"train-model": "llama3-70b", "train-batch": "1024x8192"}, func(string) string { return "" })
	if err != nil {
		b.Fatal(err)
	}
	st := Step{JobID: 4242, StepID: 1, NodeID: 3, NNodes: 8, LocalTasks: 8, TotalTasks: 64, Nodelist: "gpu[01-08]"}
	for b.Loop() {
		if sp, _, err := PlanStep(c, r, st, node); err != nil || sp == nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkResumeDir(b *testing.B) {
	ckpt := makeStore(b, 64, "step-100", "step-200")
	for b.Loop() {
		if _, ok, _ := ResumeDir(ckpt); !ok {
			b.Fatal("store unreadable")
		}
	}
}
