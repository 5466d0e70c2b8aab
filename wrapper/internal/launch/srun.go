package launch

import (
	"strconv"

	"github.com/trainrun/trainrun/internal/slurm"
)

// StepSpec is everything the main srun needs.
type StepSpec struct {
	Self       string // path of this trainrun binary (it must exist on every node)
	Shim       string // path of the lean shim binary (trainrun-shim; "": Self exec-task)
	LaunchDir  string
	Hostfile   string // path of the hostfile; used when Arbitrary
	Arbitrary  bool   // the rank order differs from Slurm's block order
	Nodes      int
	Tasks      int
	PerNode    int
	BindInShim bool // the shim binds each rank to its GPU's NUMA CPUs: srun must not bind
	Argv       []string
	// Wait: the step starts before its plan; each shim waits for the
	// controller's go (launch.Wait). ProbeDir: the first task of each node
	// first probes its node into ProbeDir/<node>.json.
	Wait     bool
	ProbeDir string
	// NodeList names the step's nodes when they are not all of the job's
	// (spare or lost nodes): srun --nodelist; unused with Arbitrary, whose
	// hostfile names them.
	NodeList string
	// Overlap: srun --overlap. A step relaunched after a lost node shares
	// the lost step's resources, which slurmctld holds until the node is
	// DOWN: without it the new step stayed pending for good, even after
	// the node's removal from the job (Slurm 22.05, --no-kill; seen on
	// the harness).
	Overlap bool
	// Extra are srun options trainrun passes through, after its own and
	// before the task: pyxis's --container-* options (container.PyxisArgs)
	// and the user's and the site's --srun-arg (checked by
	// container.CheckSrunArg never to name one of trainrun's own).
	Extra []string
}

// SrunCommand builds the main step's command line and the extra environment
// srun needs. Choices:
//   - one task per GPU (--ntasks, --ntasks-per-node); with a placement that
//     differs from Slurm's block order, --distribution=arbitrary and
//     SLURM_HOSTFILE (line i = host of rank i), as srun(1) documents;
//   - no --gpus-per-task: a step gets all the job's GPUs on each node by
//     default (srun(1), --gres), and the shim makes device LOCAL_RANK the
//     rank's planned GPU while the node's other GPUs stay visible for CUDA IPC
//     and NVLink peer access; --gpus-per-task would hide them and let Slurm,
//     not the plan, choose each task's GPU;
//   - --cpu-bind=none when the shim binds each rank to its GPU's NUMA node
//     (Slurm's per-task binding would forbid the shim's mask);
//   - --kill-on-bad-exit=1: one failed rank ends the step instead of leaving
//     the others hanging in a collective;
//   - --input=none: srun runs in its own process group (so a Ctrl-C goes to
//     the controller, which stops the step once); a background srun reading
//     the terminal would be stopped by SIGTTIN.
func SrunCommand(s StepSpec) (argv []string, env []string) {
	argv = []string{slurm.Srun,
		"--nodes=" + strconv.Itoa(s.Nodes),
		"--ntasks=" + strconv.Itoa(s.Tasks),
	}
	if s.Arbitrary {
		argv = append(argv, "--distribution=arbitrary")
		env = append(env, "SLURM_HOSTFILE="+s.Hostfile)
	} else {
		argv = append(argv, "--ntasks-per-node="+strconv.Itoa(s.PerNode), "--distribution=block")
		if s.NodeList != "" {
			argv = append(argv, "--nodelist="+s.NodeList)
		}
	}
	if s.BindInShim {
		argv = append(argv, "--cpu-bind=none")
	}
	if s.Overlap {
		argv = append(argv, "--overlap")
	}
	argv = append(argv, "--kill-on-bad-exit=1", "--input=none")
	argv = append(argv, s.Extra...)
	argv = append(argv, ShimArgv(s.Self, s.Shim)...)
	argv = append(argv, "--launch", s.LaunchDir)
	if s.Wait {
		argv = append(argv, "--wait")
	}
	if s.ProbeDir != "" {
		argv = append(argv, "--probe-node", s.ProbeDir)
	}
	argv = append(argv, "--")
	argv = append(argv, s.Argv...)
	return argv, env
}

// ShimArgv is the start of a shim's command line: the lean binary when
// there is one, else `trainrun exec-task`.
func ShimArgv(self, shim string) []string {
	if shim != "" {
		return []string{shim}
	}
	return []string{self, "exec-task"}
}
