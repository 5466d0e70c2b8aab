package launch

import (
	"slices"
	"strings"
	"testing"
)

func TestSrunCommand(t *testing.T) {
	argv, env := SrunCommand(StepSpec{Self: "/bin/trainrun", LaunchDir: "/j/launch", Hostfile: "/j/hostfile", Nodes: 2, Tasks: 16, PerNode: 8, Argv: []string{"python", "t.py"}})
	if got := strings.Join(argv, " "); got != "srun --nodes=2 --ntasks=16 --ntasks-per-node=8 --distribution=block --kill-on-bad-exit=1 --input=none /bin/trainrun exec-task --launch /j/launch -- python t.py" || env != nil {
		t.Errorf("block: %s %v", got, env)
	}
	argv, env = SrunCommand(StepSpec{Self: "/bin/trainrun", LaunchDir: "/j/launch", Hostfile: "/j/hostfile", Arbitrary: true, BindInShim: true, Nodes: 2, Tasks: 16, PerNode: 8, Argv: []string{"x"}})
	if got := strings.Join(argv, " "); got != "srun --nodes=2 --ntasks=16 --distribution=arbitrary --cpu-bind=none --kill-on-bad-exit=1 --input=none /bin/trainrun exec-task --launch /j/launch -- x" ||
		!slices.Equal(env, []string{"SLURM_HOSTFILE=/j/hostfile"}) {
		t.Errorf("arbitrary: %s %v", got, env)
	}
	argv, _ = SrunCommand(StepSpec{Self: "/bin/trainrun", LaunchDir: "/j/launch", Nodes: 2, Tasks: 16, PerNode: 8, Wait: true, ProbeDir: "/j/topo", Argv: []string{"python", "t.py", "--tp", "{tp}"}})
	if got := strings.Join(argv, " "); got != "srun --nodes=2 --ntasks=16 --ntasks-per-node=8 --distribution=block --kill-on-bad-exit=1 --input=none /bin/trainrun exec-task --launch /j/launch --wait --probe-node /j/topo -- python t.py --tp {tp}" {
		t.Errorf("started before the plan: %s", got)
	}
}

// A step on some of the job's nodes (spare or lost ones held back) names
// them; an arbitrary distribution's hostfile names them already.
func TestSrunCommandNodeList(t *testing.T) {
	s := StepSpec{Self: "/bin/trainrun", LaunchDir: "/j/launch", Nodes: 2, Tasks: 2, PerNode: 1, NodeList: "n1,n3", Argv: []string{"python"}}
	argv, _ := SrunCommand(s)
	if !slices.Contains(argv, "--nodelist=n1,n3") {
		t.Errorf("argv %v lacks --nodelist=n1,n3", argv)
	}
	s.Arbitrary, s.Hostfile = true, "/j/hostfile"
	if argv, _ := SrunCommand(s); slices.ContainsFunc(argv, func(a string) bool { return strings.HasPrefix(a, "--nodelist") }) {
		t.Errorf("arbitrary: argv %v has a --nodelist beside SLURM_HOSTFILE", argv)
	}
	s.Arbitrary, s.NodeList = false, ""
	if argv, _ := SrunCommand(s); slices.ContainsFunc(argv, func(a string) bool { return strings.HasPrefix(a, "--nodelist") }) || slices.Contains(argv, "--overlap") {
		t.Errorf("whole allocation: argv %v has a --nodelist or --overlap", argv)
	}
	s.Overlap = true
	if argv, _ := SrunCommand(s); !slices.Contains(argv[:slices.Index(argv, "exec-task")], "--overlap") {
		t.Errorf("after a lost node: argv %v lacks srun's --overlap", argv)
	}
}
