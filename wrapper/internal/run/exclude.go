package run

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/trainrun/trainrun/checkpoint"
)

// NodeVerdict is the exclusion decision on one node that the job's history
// names: whether a requeued job keeps it out, and why, in words for the log.
type NodeVerdict struct {
	Node    string
	Exclude bool
	Why     string
}

// JudgeNodes decides, from the history's failed nodes, which nodes a
// requeued job keeps out of its allocation (issue 35). Only evidence that
// points at the node excludes it:
//
//   - the node was lost (CauseNodeFail: its ranks never reported an exit, or
//     Slurm marked it DOWN);
//   - a hang whose suspect process was in uninterruptible sleep (State "D"):
//     stuck in the kernel, in a driver or a file system of that node;
//   - a straggler, recorded only where the admin's policy says
//     StragglerAction=exclude.
//
// A rank that failed first (CauseCrash) is never evidence, however often:
// killed by a signal from outside (scancel, an admin, a test), by the OOM
// killer, or ended by its own error (a Python exception), it says nothing of
// the node's hardware, and excluding on it walked a job off healthy nodes.
// A hang without a D-state suspect is the trainer (or a peer) waiting,
// which no other node cures. The verdicts are sorted by node; those with
// Exclude set are the nodes to exclude.
func JudgeNodes(incs []checkpoint.Incarnation) []NodeVerdict {
	type seen struct {
		evidence string   // the first record that points at the node
		other    []string // the records that do not, each once
	}
	byNode := map[string]*seen{}
	for _, in := range incs {
		for _, f := range in.FailedNodes {
			if f.Node == "" {
				continue
			}
			s := byNode[f.Node]
			if s == nil {
				s = &seen{}
				byNode[f.Node] = s
			}
			why, ok := nodeEvidence(f)
			switch {
			case ok && s.evidence == "":
				s.evidence = why
			case !ok && !slices.Contains(s.other, why):
				s.other = append(s.other, why)
			}
		}
	}
	out := make([]NodeVerdict, 0, len(byNode))
	for n, s := range byNode {
		v := NodeVerdict{Node: n, Exclude: s.evidence != ""}
		if v.Exclude {
			v.Why = s.evidence
		} else {
			v.Why = strings.Join(s.other, "; ") + ": no evidence against the node itself"
		}
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b NodeVerdict) int { return cmp.Compare(a.Node, b.Node) })
	return out
}

// Excluded are the nodes of the verdicts that exclude, in order.
func Excluded(vs []NodeVerdict) []string {
	var out []string
	for _, v := range vs {
		if v.Exclude {
			out = append(out, v.Node)
		}
	}
	return out
}

// nodeEvidence says whether one failed-node record points at the node, and
// why (or why not), in words.
func nodeEvidence(f checkpoint.FailedNode) (string, bool) {
	detail := ""
	if f.Detail != "" {
		detail = " (" + f.Detail + ")"
	}
	switch f.Cause {
	case checkpoint.CauseNodeFail:
		return "the node was lost" + detail, true
	case checkpoint.CauseNodeFault:
		return "its rank's failure class excludes it (RestartOn=)" + detail, true
	case checkpoint.CauseStraggler:
		return "its rank straggled under StragglerAction=exclude" + detail, true
	case checkpoint.CauseHang:
		if f.State == "D" {
			return "a hang with its rank's process in uninterruptible sleep (D: stuck in the node's kernel, a driver or file system)", true
		}
		return fmt.Sprintf("a hang with its rank's process %s (the trainer or a peer waiting, not the node)", stateWords(f.State)), false
	case checkpoint.CauseCrash:
		return "its rank failed first: " + ExitWords(f.Exit), false
	}
	return fmt.Sprintf("a failure of cause %q", f.Cause), false
}

func stateWords(s string) string {
	switch s {
	case "":
		return "in a state not recorded"
	case "R", "S":
		return "running or sleeping (" + s + ")"
	}
	return "in state " + s
}

// ExitWords says what a rank's exit code (128+n for signal n, as the shim
// reports it) tells of the node: nothing, in each case, but the words say
// why.
func ExitWords(code int) string {
	switch {
	case code == 128+int(syscall.SIGKILL):
		return fmt.Sprintf("exit %d, killed by SIGKILL (from outside: scancel, an admin or a test, or the OOM killer)", code)
	case code > 128 && code < 128+65:
		return fmt.Sprintf("exit %d, killed by %s (a signal from outside the trainer, or its own abort)", code, unix.SignalName(syscall.Signal(code-128)))
	case code > 0:
		return fmt.Sprintf("exit %d, the trainer's own error (such as a Python exception)", code)
	}
	return "exit status not recorded"
}
