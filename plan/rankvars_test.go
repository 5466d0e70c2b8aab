package plan

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// Megatron's RankGenerator with order tp-cp-ep-dp-pp: TP varies fastest, PP
// slowest; EP is the position inside the dp·cp block modulo ep. (Moved from
// wrapper, whose copy of the maths this replaces.)
func TestMegatronCoords(t *testing.T) {
	type c struct{ tp, cp, ep, dp, pp int }
	cases := []struct {
		l    Layout
		want map[int]c
	}{
		{Layout{TP: 2, CP: 2, DP: 2, PP: 2, EP: 1}, map[int]c{0: {0, 0, 0, 0, 0}, 1: {1, 0, 0, 0, 0}, 2: {0, 1, 0, 0, 0}, 4: {0, 0, 0, 1, 0}, 7: {1, 1, 0, 1, 0}, 8: {0, 0, 0, 0, 1}, 15: {1, 1, 0, 1, 1}}},
		// Zero degrees count as 1; ep 2 over dp 4: dp 0,2 → ep 0, dp 1,3 → ep 1.
		{Layout{TP: 2, DP: 4, EP: 2}, map[int]c{0: {0, 0, 0, 0, 0}, 2: {0, 0, 1, 1, 0}, 5: {1, 0, 0, 2, 0}, 7: {1, 0, 1, 3, 0}}},
		// cp 2, ep 4: ep = (dp·cp + cp) mod 4.
		{Layout{TP: 1, CP: 2, DP: 2, EP: 4}, map[int]c{1: {0, 1, 1, 0, 0}, 2: {0, 0, 2, 1, 0}, 3: {0, 1, 3, 1, 0}}},
	}
	for _, tc := range cases {
		for r, w := range tc.want {
			tp, cp, ep, dp, pp := MegatronCoords(tc.l, r)
			if (c{tp, cp, ep, dp, pp}) != w {
				t.Errorf("%s rank %d: got tp%d cp%d ep%d dp%d pp%d, want %+v", tc.l.Config(), r, tp, cp, ep, dp, pp, w)
			}
		}
	}
}

func TestMegatronLayout(t *testing.T) {
	if l, err := MegatronLayout(Layout{TP: 8, PP: 2, DP: 8, EP: 2}, 128); err != nil || l.DP != 8 {
		t.Errorf("dp already Megatron's: got dp=%d, %v; want dp=8", l.DP, err)
	}
	if l, err := MegatronLayout(Layout{TP: 8, PP: 2, DP: 4, EP: 2}, 128); err != nil || l.DP != 8 {
		t.Errorf("dp per expert group: got dp=%d, %v; want dp=8 (4·ep 2)", l.DP, err)
	}
	_, err := MegatronLayout(Layout{TP: 4, PP: 2, DP: 2}, 32)
	if err == nil || err.Error() != "tp=4 cp=1 dp=2 pp=2 (ep=1) uses 16 GPUs" {
		t.Errorf("too few: %v", err)
	}
	var se *LayoutSizeError
	if !errors.As(err, &se) || se.Uses != 16 || se.World != 32 {
		t.Fatalf("error %T %+v, want *LayoutSizeError uses 16 of 32", err, se)
	}
	se.Unit = "tasks"
	if !strings.HasSuffix(err.Error(), "uses 16 tasks") {
		t.Errorf("with Unit tasks: %v", err)
	}
	big := 1 << 16
	if _, err := MegatronLayout(Layout{TP: big, CP: big, DP: big, PP: big}, 0); err == nil || !strings.Contains(err.Error(), "overflows") {
		t.Errorf("2^64 tasks: %v, want an overflow error", err)
	}
}

// The plan rows RankEnv injects are PlanEnv's contract rows, same keys in
// the same order and the same values, once the layout is whole.
func TestRankEnvPlanRowsArePlanEnv(t *testing.T) {
	l := Layout{TP: 8, PP: 1, VPP: 1, CP: 1, EP: 1, DP: 2, MicroBatch: 2, GradAccum: 4, Recompute: "selective", Zero: 1, Offload: "none"}
	p, err := Place(PlaceInput{Layout: l, GPUsPerNode: 8, Nodes: []PlaceNode{{Name: "n1"}, {Name: "n2"}}, Traffic: Traffic{TP: 1, DP: 1}})
	if err != nil {
		t.Fatal(err)
	}
	e, err := RankEnv(EnvInput{Placement: p, Rank: 3, Plan: l, MasterPort: 29500})
	if err != nil {
		t.Fatal(err)
	}
	var fromRank [][2]string
	for _, v := range e.Vars {
		if strings.HasPrefix(v.Key, "TRAINRUN_") && v.Key != "TRAINRUN_PLAN" {
			fromRank = append(fromRank, [2]string{v.Key, v.Value})
		}
	}
	want := PlanEnv(Evaluation{Layout: l})[:ContractPlanVars]
	if !slices.Equal(fromRank, want) {
		t.Errorf("RankEnv's plan variables\n%v\nPlanEnv's contract rows\n%v", fromRank, want)
	}
	if got := PlanEnv(Evaluation{Layout: l}); len(got) != len(PlanVars(l)) || got[len(got)-1] != [2]string{"TRAINRUN_OFFLOAD", "none"} {
		t.Errorf("PlanEnv %v: want every PlanVars row, TRAINRUN_OFFLOAD last", got)
	}
}

func TestRunVars(t *testing.T) {
	j := RunJob{PlanPath: "/j/plan.json", CkptDir: "/c", CkptSignal: "USR1", JobDir: "/j", RestartCount: 2}
	keys := func(vs []RankVar) (k []string) {
		for _, v := range vs {
			k = append(k, v.Key+"="+v.Value)
		}
		return k
	}
	got := keys(RunVars(j, "n7", 3))
	want := []string{"TRAINRUN_PLAN=/j/plan.json", "TRAINRUN_CKPT_DIR=/c", "TRAINRUN_RESUME_DIR=", "TRAINRUN_RESTART_COUNT=2",
		"TRAINRUN_CKPT_SIGNAL=USR1", "TRAINRUN_JOB_DIR=/j", "CUDA_DEVICE_ORDER=PCI_BUS_ID", "TRAINRUN_NODE=n7", "TRAINRUN_GPU=3"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
	if got := keys(RunVars(j, "n7", -1)); slices.Contains(got, "TRAINRUN_GPU=-1") || len(got) != len(want)-1 {
		t.Errorf("GPU not probed: got %q, want no TRAINRUN_GPU", got)
	}
}

func TestMegatronLayoutArgs(t *testing.T) {
	l := Layout{TP: 2, PP: 2, VPP: 2, CP: 1, EP: 1, DP: 2, SP: true, MicroBatch: 1, GradAccum: 4, Recompute: "full", Zero: 1}
	a, err := MegatronLayoutArgs(l, Job{Precision: FP16})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(a, " ")
	// The same flags MegatronArgs gives for the layout (no model: no split
	// by layer counts), with the batch from mbs·dp·grad_accum.
	want := "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --num-virtual-stages-per-pipeline-rank 2 " +
		"--context-parallel-size 1 --sequence-parallel --micro-batch-size 1 --global-batch-size 8 " +
		"--recompute-granularity full --recompute-method uniform --recompute-num-layers 1 " +
		"--use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather --fp16"
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}
