package run

import (
	"maps"
	"testing"

	"github.com/trainrun/trainrun/internal/slurm"
	"github.com/trainrun/trainrun/plan"
)

// runRankEnv gives run's ranks plan's rows: what is the same for every rank
// in Common, what differs in Ranks, with run's own values (VPP at least 1,
// LOCAL_WORLD_SIZE the tasks per node, TRAINRUN_GPU only where probed).
func TestRunRankEnv(t *testing.T) {
	a := &slurm.Allocation{Nodes: []string{"n1", "n2"}, TasksPerNode: 2, GPUsPerNode: 2}
	l := plan.Layout{TP: 2, PP: 1, CP: 1, EP: 1, DP: 2, MicroBatch: 1, GradAccum: 8, Recompute: "full"}
	slots, err := blockPlacement(a, l, map[string][]int{"n2": {6, 7}})
	if err != nil {
		t.Fatal(err)
	}
	e := runRankEnv(a, slots, envInputs{Layout: l, MasterAddr: "10.0.0.1", MasterPort: 21042, PlanPath: "/j/plan.json",
		CkptDir: "/c", CkptSignal: "USR1", JobDir: "/j", RestartCount: 1})
	wantCommon := map[string]string{
		"MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "21042", "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "2",
		"TRAINRUN_TP": "2", "TRAINRUN_PP": "1", "TRAINRUN_VPP": "1", "TRAINRUN_CP": "1", "TRAINRUN_EP": "1", "TRAINRUN_DP": "2",
		"TRAINRUN_MICRO_BATCH": "1", "TRAINRUN_GRAD_ACCUM": "8", "TRAINRUN_RECOMPUTE": "full", "TRAINRUN_PLAN": "/j/plan.json",
		"TRAINRUN_CKPT_DIR": "/c", "TRAINRUN_RESUME_DIR": "", "TRAINRUN_RESTART_COUNT": "1", "TRAINRUN_CKPT_SIGNAL": "USR1",
		"TRAINRUN_JOB_DIR": "/j", "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
	}
	if !maps.Equal(e.Common, wantCommon) {
		t.Errorf("Common\n%v\nwant\n%v", e.Common, wantCommon)
	}
	wantRanks := []map[string]string{
		{"RANK": "0", "LOCAL_RANK": "0", "NODE_RANK": "0", "GROUP_RANK": "0", "TRAINRUN_NODE": "n1"},
		{"RANK": "1", "LOCAL_RANK": "1", "NODE_RANK": "0", "GROUP_RANK": "0", "TRAINRUN_NODE": "n1"},
		{"RANK": "2", "LOCAL_RANK": "0", "NODE_RANK": "1", "GROUP_RANK": "1", "TRAINRUN_NODE": "n2", "TRAINRUN_GPU": "6"},
		{"RANK": "3", "LOCAL_RANK": "1", "NODE_RANK": "1", "GROUP_RANK": "1", "TRAINRUN_NODE": "n2", "TRAINRUN_GPU": "7"},
	}
	if len(e.Ranks) != len(wantRanks) {
		t.Fatalf("%d ranks, want %d", len(e.Ranks), len(wantRanks))
	}
	for i, w := range wantRanks {
		if !maps.Equal(e.Ranks[i], w) {
			t.Errorf("rank %d: %v, want %v", i, e.Ranks[i], w)
		}
	}
}
