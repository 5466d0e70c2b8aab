package run

import (
	"strings"
	"testing"

	"github.com/trainrun/trainrun/checkpoint"
)

// Only evidence against a node excludes it; every node the history names
// gets a verdict that says why (issue 35).
func TestJudgeNodes(t *testing.T) {
	crash := func(n string, exit int) checkpoint.FailedNode {
		return checkpoint.FailedNode{Node: n, Cause: checkpoint.CauseCrash, Exit: exit, Detail: "rank 0 (GPU 0) failed first"}
	}
	incs := []checkpoint.Incarnation{
		// The chaos seed 1796298728052878726: n1's rank SIGKILLed from
		// outside twice, then n4 lost.
		{FailedNodes: []checkpoint.FailedNode{crash("n1", 137)}},
		{FailedNodes: []checkpoint.FailedNode{crash("n1", 137)}},
		{FailedNodes: []checkpoint.FailedNode{{Node: "n4", Cause: checkpoint.CauseNodeFail, Detail: "ranks 1 never reported an exit"}, crash("n4", 137)}},
		// A Python exception three times, an OOM kill: the trainer's.
		{FailedNodes: []checkpoint.FailedNode{crash("n2", 1)}},
		{FailedNodes: []checkpoint.FailedNode{crash("n2", 1), crash("n5", 137)}},
		{FailedNodes: []checkpoint.FailedNode{crash("n2", 1)}},
		// Hangs: in the kernel (D) is the node's; sleeping (S) is a wait.
		{FailedNodes: []checkpoint.FailedNode{{Node: "n3", Cause: checkpoint.CauseHang, State: "D"}, {Node: "n6", Cause: checkpoint.CauseHang, State: "S"}}},
		{FailedNodes: []checkpoint.FailedNode{{Node: "n7", Cause: checkpoint.CauseStraggler}, {Node: "n8", Cause: checkpoint.CauseHang}, {Node: "", Cause: checkpoint.CauseNodeFail}}},
		{FailedNodes: []checkpoint.FailedNode{crash("n9", 134)}},
	}
	vs := JudgeNodes(incs)
	if got := strings.Join(Excluded(vs), ","); got != "n3,n4,n7" {
		t.Errorf("excluded %s, want n3,n4,n7", got)
	}
	want := map[string]string{
		"n1": "killed by SIGKILL (from outside",
		"n2": "exit 1, the trainer's own error (such as a Python exception)",
		"n3": "uninterruptible sleep (D",
		"n4": "the node was lost (ranks 1 never reported an exit)",
		"n5": "killed by SIGKILL",
		"n6": "running or sleeping (S)",
		"n7": "StragglerAction=exclude",
		"n8": "in a state not recorded",
		"n9": "killed by SIGABRT",
	}
	if len(vs) != len(want) {
		t.Errorf("%d verdicts, want %d: %+v", len(vs), len(want), vs)
	}
	for _, v := range vs {
		if !strings.Contains(v.Why, want[v.Node]) {
			t.Errorf("%s: %q, want it to say %q", v.Node, v.Why, want[v.Node])
		}
		if !v.Exclude && !strings.HasSuffix(v.Why, "no evidence against the node itself") {
			t.Errorf("%s kept without saying so: %q", v.Node, v.Why)
		}
	}
	if strings.Count(vs[0].Why, "SIGKILL") != 1 {
		t.Errorf("n1's two identical crashes are said twice: %q", vs[0].Why)
	}
}
