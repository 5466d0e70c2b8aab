package run

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trainrun/trainrun/checkpoint"
	"github.com/trainrun/trainrun/internal/slurm"
	"github.com/trainrun/trainrun/plan"
)

func TestDecideResize(t *testing.T) {
	s := time.Second
	// One node of 8 GPUs, dp 8 × micro 1 × grad accum 8 (global batch 64),
	// 100 steps left at 2 s/step: 10 s wait + 200 s staying. The planner
	// predicts 1 s at 2 nodes (half the micro batches per rank), 0.6 s at 4.
	base := func() ResizeInput {
		return ResizeInput{Nodes: 1, GPUsPerNode: 8, MinGPUs: 8, MaxGPUs: 32,
			Layout:    plan.Layout{TP: 1, PP: 1, CP: 1, DP: 8, MicroBatch: 1, GradAccum: 8},
			StepsLeft: 100, StepTime: 2 * s, Free: 4, RequeueWait: 10 * s, Margin: 0.10,
			Predict: map[int]float64{1: 2, 2: 1, 3: 0.7, 4: 0.6}}
	}
	tests := []struct {
		name   string
		change func(in *ResizeInput)
		resize bool
		nodes  int
		why    string // in Why
		notWhy string // not in Why: a size never weighed
	}{
		{name: "grow when idle nodes appear", change: func(in *ResizeInput) {}, resize: true, nodes: 4, why: "growing from 1 to 4 node(s)"},
		{name: "no idle node: stay", change: func(in *ResizeInput) {
			in.Free, in.FreeWhy = 1, "its own only: 2 other job(s) wait for partition hopper"
		},
			why: "2 node(s): 1 can start it at once (its own only: 2 other job(s) wait"},
		{name: "two free: the largest that starts at once", change: func(in *ResizeInput) { in.Free = 2 }, resize: true, nodes: 2, why: "growing from 1 to 2 node(s)"},
		{name: "gain under the margin", change: func(in *ResizeInput) { in.Predict = map[int]float64{1: 2, 2: 1.9, 4: 1.85} }, why: "not 10% sooner"},
		{name: "never beyond --max-gpus", change: func(in *ResizeInput) { in.MaxGPUs, in.Predict[2] = 16, 1.9 }, why: "2 node(s): finishes in", notWhy: "4 node(s)"},
		{name: "the largest allowed", change: func(in *ResizeInput) { in.MaxGPUs = 16 }, resize: true, nodes: 2},
		{name: "never below --min-gpus", change: func(in *ResizeInput) {
			// three of the job's four nodes failed and its size waits an
			// hour; 1 node would start at once, but the least allowed is 2
			in.Nodes, in.MinGPUs, in.Free, in.StayWait = 4, 16, 1, time.Hour
		}, why: "2 node(s): 1 can start it at once", notWhy: "1 node(s):"},
		{name: "shrink when the job's nodes are gone and its size would wait", change: func(in *ResizeInput) {
			in.Nodes, in.MinGPUs, in.Free, in.StayWait = 4, 8, 2, time.Hour
			in.StepTime = 600 * time.Millisecond
		}, resize: true, nodes: 2, why: "shrinking from 4 to 2 node(s)"},
		{name: "the wait at its size unknown: stay", change: func(in *ResizeInput) { in.Nodes, in.Free = 4, 2 }, why: "the wait to start again at 4 node(s) is not known"},
		{name: "global batch does not divide", change: func(in *ResizeInput) {
			in.Layout.GradAccum = 3 // global 24: not a multiple of dp 16 or 32
			in.Free = 4
		}, resize: true, nodes: 3, why: "growing from 1 to 3"},
		{name: "global batch divides at no other size", change: func(in *ResizeInput) {
			in.Layout.GradAccum, in.MaxGPUs = 3, 16 // global 24 at dp 16
		}, why: "2 node(s): the global batch 24 (dp 8 × micro batch 1 × grad accum 3) is not a multiple of dp 16 × micro batch 1"},
		{name: "tp×pp×cp kept: a size it does not divide", change: func(in *ResizeInput) {
			in.Layout = plan.Layout{TP: 8, PP: 2, CP: 1, DP: 1, MicroBatch: 1, GradAccum: 64}
			in.Nodes, in.MinGPUs, in.MaxGPUs, in.Free = 2, 16, 24, 3
		}, why: "3 node(s): 24 GPUs left are not a multiple of tp×pp×cp = 16"},
		{name: "does not fit memory", change: func(in *ResizeInput) {
			in.NoFit = map[int]string{2: "dp 16 needs 90 GiB", 3: "x", 4: "dp 32 needs 90 GiB"}
		},
			why: "4 node(s): dp 32 needs 90 GiB"},
		{name: "no prediction (no model)", change: func(in *ResizeInput) { in.Predict = nil }, why: "no predicted step time"},
		{name: "no step time observed", change: func(in *ResizeInput) { in.StepTime = 0 }, why: "no step time observed"},
		{name: "range smaller than a node", change: func(in *ResizeInput) { in.MinGPUs, in.MaxGPUs = 2, 4 }, why: "no whole-node size in 2-4 GPUs"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := base()
			tc.change(&in)
			v := DecideResize(in)
			if v.Resize != tc.resize || (tc.resize && v.Nodes != tc.nodes) || !strings.Contains(v.Why, tc.why) || tc.notWhy != "" && strings.Contains(v.Why, tc.notWhy) {
				t.Fatalf("DecideResize = resize %v to %d (%s), want %v to %d with %q", v.Resize, v.Nodes, v.Why, tc.resize, tc.nodes, tc.why)
			}
			if !v.Resize {
				if v.Nodes != in.Nodes || v.Layout != in.Layout {
					t.Fatalf("staying changed the size: %d nodes %+v", v.Nodes, v.Layout)
				}
				return
			}
			gpus := v.Nodes * in.GPUsPerNode
			if gpus < in.MinGPUs || gpus > in.MaxGPUs || v.Nodes > in.Free {
				t.Fatalf("%d nodes (%d GPUs): outside %d-%d GPUs or beyond the %d free", v.Nodes, gpus, in.MinGPUs, in.MaxGPUs, in.Free)
			}
			g0 := in.Layout.DP * in.Layout.MicroBatch * in.Layout.GradAccum
			if g := v.Layout.DP * v.Layout.MicroBatch * v.Layout.GradAccum; g != g0 || plan.LayoutGPUs(v.Layout) != gpus {
				t.Fatalf("layout %+v: global batch %d (want %d), %d GPUs (want %d)", v.Layout, g, g0, plan.LayoutGPUs(v.Layout), gpus)
			}
			if float64(v.Resized) > float64(v.Stay)*0.9 {
				t.Fatalf("resized %s is not 10%% under staying %s", v.Resized, v.Stay)
			}
		})
	}
	// The figures of the first case: staying 10 s + 100 × 2 s = 210 s;
	// 4 nodes 10 s + 100 × (2 s × 0.6/2) = 70 s, dp 32, grad accum 2.
	v := DecideResize(base())
	if v.Stay != 210*s || v.Resized != 70*s || v.StepTime != 600*time.Millisecond || v.Layout.DP != 32 || v.Layout.GradAccum != 2 {
		t.Fatalf("stay %s resized %s step %s dp %d accum %d, want 210s 70s 600ms 32 2", v.Stay, v.Resized, v.StepTime, v.Layout.DP, v.Layout.GradAccum)
	}
}

// The next incarnation on another number of GPUs than its plan's: with
// TRAINRUN_RESHARD=dp the layout keeps tp×pp×cp and the global batch;
// without it, or where the batch does not divide, the plan is not used.
func TestResizedPlan(t *testing.T) {
	dir := t.TempDir()
	m, _ := plan.LookupModel("gpt3-1.3b")
	g, _ := plan.LookupGPU("h100-80gb")
	j := plan.Job{SeqLen: 1024, GlobalBatch: 8, Precision: plan.BF16}
	c := plan.ClusterOf(g, 1)
	res := plan.Search(m, j, c, plan.SearchOptions{})
	if res.Plan == nil {
		t.Fatal("no plan")
	}
	res.Plan.Layout.MicroBatch, res.Plan.Layout.GradAccum = 1, 8
	var b strings.Builder
	if err := plan.RenderJSONWithInputs(&b, res, plan.InputsOf(m, j, c, "")); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "plan.json")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		reshard   string
		world     int
		dp, accum int // 0: not used
		why       string
	}{
		{"dp", 2, 2, 4, "dp 2 (was 1), grad accum 4 (was 8): the global batch 8 is kept"},
		{"dp", 4, 4, 2, "dp 4 (was 1), grad accum 2 (was 8)"},
		{"dp", 16, 0, 0, "its layout cannot be kept: the global batch 8"},
		{"", 2, 0, 0, ""},
		{"dp", 1, 0, 0, ""}, // its own size: ReadRunPlan takes it as it is
	} {
		var log strings.Builder
		r := &runner{env: &Deps{Stderr: &log, Getenv: func(k string) string {
			if k == ReshardEnv {
				return tc.reshard
			}
			return ""
		}}, alloc: &slurm.Allocation{TasksPerNode: 1}}
		l := r.resizedPlan(path, tc.world)
		if (l != nil) != (tc.dp > 0) || l != nil && (l.DP != tc.dp || l.GradAccum != tc.accum || l.TP != 1 || l.MicroBatch != 1) || !strings.Contains(log.String(), tc.why) {
			t.Errorf("reshard %q, %d GPUs: layout %+v, log %q; want dp %d grad accum %d, %q", tc.reshard, tc.world, l, log.String(), tc.dp, tc.accum, tc.why)
		}
	}
}

// resizeFree: the job's own nodes (less failed ones) and its partition's
// idle nodes, these only when no other job waits for the partition.
func TestResizeFree(t *testing.T) {
	nodes := "NodeName=n1 State=ALLOCATED Partitions=hopper Gres=gpu:h100:8 GresUsed=gpu:h100:8\n" +
		"NodeName=n2 State=ALLOCATED Partitions=hopper Gres=gpu:h100:8 GresUsed=gpu:h100:8\n" +
		"NodeName=n3 State=IDLE Partitions=hopper Gres=gpu:h100:8 GresUsed=gpu:h100:0\n" +
		"NodeName=n4 State=IDLE Partitions=ampere Gres=gpu:a100:8 GresUsed=gpu:a100:0\n" +
		"NodeName=n5 State=MIXED Partitions=hopper Gres=gpu:h100:8 GresUsed=gpu:h100:2\n"
	self := "JobId=7 JobName=me JobState=RUNNING Partition=hopper TimeLimit=01:00:00\n"
	for _, tc := range []struct {
		name   string
		jobs   string
		failed []string
		free   int
		why    string
	}{
		{"own and idle", self, nil, 3, ""},
		{"a job waits: own only", self + "JobId=8 JobName=small JobState=PENDING Partition=ampere,hopper TimeLimit=00:10:00\n", nil, 2, "1 other job(s) wait for partition hopper"},
		{"a failed own node", self, []string{"n2"}, 2, ""},
	} {
		canned := &slurm.Canned{Out: map[string]string{"scontrol -d show node -o": nodes, "scontrol show job -o": tc.jobs}}
		r := &runner{alloc: &slurm.Allocation{JobID: "7", Partition: "hopper", Nodes: []string{"n1", "n2"}, TasksPerNode: 8, TimeLimit: time.Hour},
			env: &Deps{Slurm: slurm.Client{Run: canned.Run, RunStderr: canned.RunStderr, Location: time.Local}}}
		for _, n := range tc.failed {
			r.sess.faults.nodes = append(r.sess.faults.nodes, checkpoint.FailedNode{Node: n, Cause: checkpoint.CauseNodeFail})
		}
		in := ResizeInput{Nodes: 2}
		r.resizeFree(&in)
		if in.Free != tc.free || !strings.Contains(in.FreeWhy, tc.why) || (tc.why == "") != (in.FreeWhy == "") {
			t.Errorf("%s: Free %d (%q), want %d (%q)", tc.name, in.Free, in.FreeWhy, tc.free, tc.why)
		}
	}
}

// resizeOff: the default behaviour stays without a range, without
// TRAINRUN_RESHARD=dp, and where the step's size is not the job's.
func TestResizeOff(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		set  func(r *runner)
		want string // "" : weighed
	}{
		{"weighed", nil, nil, ""},
		{"no range", map[string]string{"TRAINRUN_MIN_GPUS": "", "TRAINRUN_MAX_GPUS": ""}, nil, "no size range"},
		{"min == max", map[string]string{"TRAINRUN_MAX_GPUS": "8"}, nil, `TRAINRUN_MIN_GPUS="8" TRAINRUN_MAX_GPUS="8": want whole numbers 1 <= min < max`},
		{"not a number", map[string]string{"TRAINRUN_MAX_GPUS": "lots"}, nil, `TRAINRUN_MAX_GPUS="lots"`},
		{"no reshard", map[string]string{ReshardEnv: ""}, nil, "does not declare TRAINRUN_RESHARD=dp"},
		{"migrating", nil, func(r *runner) { r.sess.mig.to = "ampere" }, "moves to partition ampere"},
		{"spares", nil, func(r *runner) { r.sess.spare.all = []string{"n1", "n2", "n3"} }, "ran on 2 of the job's 3 nodes"},
		{"no budget", nil, func(r *runner) { r.cfg.obs.trainSteps = "" }, "--train-steps"},
	} {
		env := map[string]string{"TRAINRUN_MIN_GPUS": "8", "TRAINRUN_MAX_GPUS": "32", ReshardEnv: "dp"}
		for k, v := range tc.env {
			env[k] = v
		}
		r := &runner{env: &Deps{Getenv: func(k string) string { return env[k] }}, alloc: &slurm.Allocation{Nodes: []string{"n1", "n2"}, TasksPerNode: 8}}
		r.sess.spare.all = r.alloc.Nodes
		r.cfg.obs.trainSteps = "100"
		if tc.set != nil {
			tc.set(r)
		}
		if got := r.resizeOff(); (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: resizeOff = %q, want %q", tc.name, got, tc.want)
		}
	}
}
