package run

import (
	"io"
	"testing"

	"github.com/trainrun/trainrun/checkpoint"
)

// A hung rank's node is always recorded for the requeue to keep out; a
// straggler's only under the policy's StragglerAction=exclude.
func TestFaultsRecordTheirNodes(t *testing.T) {
	for _, tc := range []struct {
		kind    string
		exclude bool
		want    checkpoint.Cause // "" = nothing recorded
	}{
		{"hang", false, checkpoint.CauseHang},
		{"straggler", false, ""},
		{"straggler", true, checkpoint.CauseStraggler},
	} {
		r := &runner{env: &Deps{Stderr: io.Discard}, placed: placed{Slots: []rankSlot{{Node: "n1", GPU: 0}, {Node: "n2", GPU: 3}}}, cfg: Config{excludeStragglers: tc.exclude}}
		f := r.fault(tc.kind, 1, "slow", 2, "D")
		got := r.failedNodes()
		if f.Node != "n2" || f.GPU != 3 {
			t.Errorf("%s: fault %+v, want rank 1 on n2 GPU 3", tc.kind, f)
		}
		switch {
		case tc.want == "" && len(got) != 0:
			t.Errorf("%s (exclude %v): recorded %+v, want nothing", tc.kind, tc.exclude, got)
		case tc.want != "" && (len(got) != 1 || got[0].Node != "n2" || got[0].Cause != tc.want):
			t.Errorf("%s (exclude %v): recorded %+v, want n2 %s", tc.kind, tc.exclude, got, tc.want)
		case tc.kind == "hang" && got[0].State != "D": // the evidence JudgeNodes reads
			t.Errorf("hang recorded without its process state: %+v", got)
		}
	}
}
