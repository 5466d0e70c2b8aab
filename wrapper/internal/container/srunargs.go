package container

import (
	"fmt"
	"strings"
)

// trainrunSets are the srun options trainrun run sets itself (launch.
// SrunCommand) or owns another way, with what to do instead: a user's
// --srun-arg may not name them (long and short spellings).
var trainrunSets = []struct {
	names []string
	why   string
}{
	{[]string{"nodes", "N"}, "trainrun runs the step on the allocation's nodes (less its spare ones)"},
	{[]string{"ntasks", "n", "ntasks-per-node", "ntasks-per-gpu", "ntasks-per-socket", "ntasks-per-core", "cpus-per-task", "c"}, "trainrun runs one task per GPU of the layout"},
	{[]string{"distribution", "m", "nodelist", "w", "exclude", "x", "relative", "r", "arbitrary"}, "trainrun places the ranks (its hostfile and --distribution)"},
	{[]string{"gres", "gpus", "G", "gpus-per-node", "gpus-per-task", "gpus-per-socket", "gpu-bind"}, "the step has all the job's GPUs and the shim gives each rank its own (CUDA_VISIBLE_DEVICES)"},
	{[]string{"export"}, "trainrun gives each rank its environment itself; export variables in the batch script instead"},
	{[]string{"kill-on-bad-exit", "K", "wait", "W"}, "trainrun ends the step when a rank fails and decides what follows"},
	{[]string{"input", "i", "output", "o", "error", "e", "pty", "unbuffered", "u", "label", "l"}, "trainrun owns the step's input and output"},
	{[]string{"overlap", "overcommit", "O", "exclusive", "whole"}, "trainrun decides how its steps share the allocation"},
	{[]string{"jobid", "het-group", "job-name", "J", "signal", "time", "t", "dependency", "d", "no-kill", "k"}, "trainrun runs its steps inside this job and handles its signals"},
}

// CheckSrunArg refuses a --srun-arg (from says where it came from) that is
// not one srun option, or that names one trainrun sets.
func CheckSrunArg(arg, from string) error {
	name := ""
	switch {
	case strings.HasPrefix(arg, "--") && len(arg) > 2:
		name, _, _ = strings.Cut(arg[2:], "=")
	case strings.HasPrefix(arg, "-") && len(arg) > 1 && arg[1] != '-':
		name = arg[1:2]
	default:
		return fmt.Errorf("%s %q: not an srun option; give the option and its value as one argument, e.g. --srun-arg=--mpi=pmix", from, arg)
	}
	if strings.HasPrefix(name, "container-") || strings.HasPrefix(name, "no-container-") {
		return fmt.Errorf("%s %q: pyxis's options are trainrun run's own: give --%s to trainrun run", from, arg, name)
	}
	for _, s := range trainrunSets {
		for _, n := range s.names {
			if n == name {
				return fmt.Errorf("%s %q: trainrun sets srun's %s itself (%s); drop it", from, arg, spelled(n), s.why)
			}
		}
	}
	return nil
}

// spelled is an option's name as srun's command line writes it.
func spelled(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// SetsCPUBind says whether args hold srun's --cpu-bind: then srun binds
// each task and trainrun's own NUMA binding in the shim steps aside.
func SetsCPUBind(args []string) bool {
	for _, a := range args {
		if a == "--cpu-bind" || strings.HasPrefix(a, "--cpu-bind=") || strings.HasPrefix(a, "--cpu_bind") {
			return true
		}
	}
	return false
}
