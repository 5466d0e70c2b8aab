package slurm

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Allocation is what trainrun knows of the Slurm allocation it runs in.
// Every field names where it comes from.
type Allocation struct {
	JobID        string   // SLURM_JOB_ID
	Nodes        []string // SLURM_JOB_NODELIST, expanded, in Slurm's order
	NodeList     string   // SLURM_JOB_NODELIST as given (a hostlist expression)
	TasksPerNode int      // SLURM_TASKS_PER_NODE (all nodes equal), e.g. "8(x4)"
	GPUsPerNode  int      // SLURM_GPUS_ON_NODE, else SLURM_JOB_GPUS, else SLURM_GPUS_PER_NODE
	GPUIDs       []int    // SLURM_JOB_GPUS on the batch node (the GPU indices the job holds there); nil if unknown
	Partition    string   // SLURM_JOB_PARTITION
	RestartCount int      // SLURM_RESTART_COUNT (0 when unset: a first start)
	CPUsPerTask  int      // SLURM_CPUS_PER_TASK (0 when unset or not a positive count)
	SubmitDir    string   // SLURM_SUBMIT_DIR
	BatchNode    string   // SLURMD_NODENAME of the batch step
	InStep       bool     // SLURM_STEP_ID is set: trainrun itself runs inside a step (srun), not in the batch script

	// From Client.Job (`scontrol show job -o $SLURM_JOB_ID`), filled by the
	// caller; zero when scontrol did not say.
	TimeLimit time.Duration // TimeLimit; 0 = UNLIMITED
	EndTime   time.Time     // EndTime; zero = unknown
	Requeue   bool          // Requeue=1: the job may be requeued
}

// World is the number of training processes: one per GPU.
func (a *Allocation) World() int { return a.TasksPerNode * len(a.Nodes) }

// AllocationVars lists the variables AllocationFromEnv reads, for messages.
var AllocationVars = []string{"SLURM_JOB_ID", "SLURM_JOB_NODELIST", "SLURM_JOB_NUM_NODES", "SLURM_TASKS_PER_NODE",
	"SLURM_GPUS_ON_NODE", "SLURM_JOB_GPUS", "SLURM_GPUS_PER_NODE", "SLURM_JOB_PARTITION", "SLURM_RESTART_COUNT", "SLURM_SUBMIT_DIR", "SLURM_CPUS_PER_TASK"}

// batchStepID is SLURM_STEP_ID in the batch step (SLURM_BATCH_SCRIPT).
const batchStepID = "4294967294"

// EnvError is an allocation whose environment trainrun cannot use. It names
// the variable and its value, and says what would fix it.
type EnvError struct {
	Var   string // the variable at fault
	Value string // its value
	Want  string // what it should be ("a job number"); empty when Msg says it all
	Msg   string // the whole message, when Want is empty
}

func (e *EnvError) Error() string {
	if e.Want == "" {
		return e.Msg
	}
	return fmt.Sprintf("%s=%q is not %s; is this a Slurm job's own environment?", e.Var, e.Value, e.Want)
}

func varErr(name, value, want string) error { return &EnvError{Var: name, Value: value, Want: want} }

func envErrf(name, value, format string, a ...any) error {
	return &EnvError{Var: name, Value: value, Msg: fmt.Sprintf(format, a...)}
}

// Getenv reads a variable, trimmed.
type Getenv func(string) string

func (g Getenv) trimmed(k string) string { return strings.TrimSpace(g(k)) }

// first is the first of the variables that is set, and its name.
func (g Getenv) first(names ...string) (string, string) {
	for _, n := range names {
		if v := g.trimmed(n); v != "" {
			return v, n
		}
	}
	return "", names[0]
}

// AllocationFromEnv reads the allocation from Slurm's environment. expand
// turns a hostlist expression into host names. Every error is an *EnvError
// that names the variable, its value and the #SBATCH line that fixes it.
func AllocationFromEnv(getenv func(string) string, expand func(string) ([]string, error)) (*Allocation, error) {
	g := Getenv(getenv)
	a := &Allocation{}
	a.JobID, _ = g.first("SLURM_JOB_ID", "SLURM_JOBID")
	if a.JobID == "" {
		return nil, envErrf("SLURM_JOB_ID", "", "not inside a Slurm allocation (SLURM_JOB_ID is not set): "+
			"run trainrun run from a batch script (sbatch job.sh, see contrib/jobs/) or inside salloc; "+
			"to see what it would do without Slurm, use 'trainrun plan'")
	}
	if _, err := strconv.ParseUint(a.JobID, 10, 64); err != nil {
		return nil, varErr("SLURM_JOB_ID", a.JobID, "a job number")
	}
	if err := a.readNodes(g, expand); err != nil {
		return nil, err
	}
	tasks, tpnRaw, err := readTasks(g, len(a.Nodes), a.NodeList)
	if err != nil {
		return nil, err
	}
	gpus, ids, src, err := gpusPerNode(g)
	if err != nil {
		return nil, err
	}
	a.GPUsPerNode, a.GPUIDs = gpus, ids
	a.Partition = g.trimmed("SLURM_JOB_PARTITION")
	a.SubmitDir = getenv("SLURM_SUBMIT_DIR")
	a.BatchNode = g.trimmed("SLURMD_NODENAME")
	a.InStep = g.trimmed("SLURM_STEP_ID") != "" && getenv("SLURM_STEP_ID") != batchStepID
	if v := g.trimmed("SLURM_RESTART_COUNT"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return nil, varErr("SLURM_RESTART_COUNT", v, "a count of restarts (0, 1, ...)")
		}
		a.RestartCount = n
	}
	if n, err := strconv.Atoi(g.trimmed("SLURM_CPUS_PER_TASK")); err == nil && n > 0 {
		a.CPUsPerTask = n
	}
	if a.GPUsPerNode == 0 {
		part := a.Partition
		if part == "" {
			part = "(default)"
		}
		return nil, envErrf("SLURM_GPUS_ON_NODE", "", "the job holds no GPUs (partition %s, nodes %s: %s): "+
			"trainrun runs one process per GPU; ask for them with '#SBATCH --gpus-per-node=N' on a partition whose nodes have GPUs "+
			"('sinfo -o \"%%P %%G\"' lists each partition's GRES)", part, a.NodeList, src)
	}
	if err := a.checkOnePerGPU(tasks, tpnRaw, src); err != nil {
		return nil, err
	}
	a.TasksPerNode = tasks[0]
	return a, nil
}

// readNodes reads SLURM_JOB_NODELIST and checks it against SLURM_JOB_NUM_NODES.
func (a *Allocation) readNodes(g Getenv, expand func(string) ([]string, error)) error {
	a.NodeList, _ = g.first("SLURM_JOB_NODELIST", "SLURM_NODELIST")
	if a.NodeList == "" {
		return varErr("SLURM_JOB_NODELIST", "", "a hostlist such as n[1-4]")
	}
	nodes, err := expand(a.NodeList)
	if err != nil {
		return envErrf("SLURM_JOB_NODELIST", a.NodeList, "SLURM_JOB_NODELIST=%q: %v", a.NodeList, err)
	}
	if len(nodes) == 0 {
		return varErr("SLURM_JOB_NODELIST", a.NodeList, "a hostlist naming at least one node")
	}
	a.Nodes = nodes
	if v := g.trimmed("SLURM_JOB_NUM_NODES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return varErr("SLURM_JOB_NUM_NODES", v, "a positive number")
		}
		if n != len(nodes) {
			return envErrf("SLURM_JOB_NUM_NODES", v, "SLURM_JOB_NUM_NODES=%d but SLURM_JOB_NODELIST=%q names %d nodes: "+
				"the environment is not Slurm's own (was it copied from another job?)", n, a.NodeList, len(nodes))
		}
	}
	return nil
}

// readTasks reads the tasks per node: "8(x4)" or "8,8,4" or "2(x3),1"; nil
// when unset.
func readTasks(g Getenv, nodes int, nodeList string) ([]int, string, error) {
	raw, _ := g.first("SLURM_TASKS_PER_NODE", "SLURM_NTASKS_PER_NODE")
	if raw == "" {
		return nil, "", nil
	}
	tasks, err := ParseCounts(raw, nodes)
	if err != nil {
		return nil, raw, envErrf("SLURM_TASKS_PER_NODE", raw, "SLURM_TASKS_PER_NODE=%q: %v", raw, err)
	}
	if len(tasks) != nodes {
		return nil, raw, envErrf("SLURM_TASKS_PER_NODE", raw, "SLURM_TASKS_PER_NODE=%q gives %d nodes but the allocation has %d (%s)",
			raw, len(tasks), nodes, nodeList)
	}
	return tasks, raw, nil
}

// checkOnePerGPU: one process per GPU, so tasks per node must equal GPUs
// per node on every node.
func (a *Allocation) checkOnePerGPU(tasks []int, tpnRaw, src string) error {
	if tasks == nil {
		return envErrf("SLURM_TASKS_PER_NODE", "", "SLURM_TASKS_PER_NODE is not set: add '#SBATCH --ntasks-per-node=%d' (one task per GPU)", a.GPUsPerNode)
	}
	for i, t := range tasks {
		if t != tasks[0] {
			return envErrf("SLURM_TASKS_PER_NODE", tpnRaw, "SLURM_TASKS_PER_NODE=%q: node %s has %d tasks but %s has %d; trainrun needs the same number on every node: "+
				"add '#SBATCH --ntasks-per-node=%d' (one task per GPU)", tpnRaw, a.Nodes[0], tasks[0], a.Nodes[i], t, a.GPUsPerNode)
		}
	}
	if tasks[0] != a.GPUsPerNode {
		return envErrf("SLURM_TASKS_PER_NODE", tpnRaw, "the job has %d task(s) per node (SLURM_TASKS_PER_NODE=%q) but %d GPUs per node (%s); "+
			"trainrun runs one process per GPU: add '#SBATCH --ntasks-per-node=%d' (with --gpus-per-node=%d)",
			tasks[0], tpnRaw, a.GPUsPerNode, src, a.GPUsPerNode, a.GPUsPerNode)
	}
	return nil
}

// maxGPUIDs bounds SLURM_JOB_GPUS, SLURM_GPUS_ON_NODE and
// SLURM_GPUS_PER_NODE: no node holds more GPUs than this, and an unbounded
// count (9223372036854775807, with tasks per node to match) overflowed the
// world size computed from it.
const maxGPUIDs = 1024

// gpusPerNode reads the GPU count on the batch node. Slurm sets
// SLURM_GPUS_ON_NODE (a count) and SLURM_JOB_GPUS (indices) in the batch step
// when the job holds GPUs; SLURM_GPUS_PER_NODE ("8", "gpu:8", "h100:8") only
// when the user asked with --gpus-per-node. src says which was used.
func gpusPerNode(g Getenv) (n int, ids []int, src string, err error) {
	if v := g.trimmed("SLURM_JOB_GPUS"); v != "" {
		fields := strings.Split(v, ",")
		if len(fields) > maxGPUIDs {
			return 0, nil, "", varErr("SLURM_JOB_GPUS", v, fmt.Sprintf("a list of at most %d GPU indices", maxGPUIDs))
		}
		for _, f := range fields {
			id, e := strconv.Atoi(strings.TrimSpace(f))
			if e != nil || id < 0 {
				return 0, nil, "", varErr("SLURM_JOB_GPUS", v, "a comma-separated list of GPU indices")
			}
			ids = append(ids, id)
		}
	}
	if v := g.trimmed("SLURM_GPUS_ON_NODE"); v != "" {
		n, e := strconv.Atoi(v)
		if e != nil || n < 0 || n > maxGPUIDs {
			return 0, nil, "", varErr("SLURM_GPUS_ON_NODE", v, fmt.Sprintf("a GPU count up to %d", maxGPUIDs))
		}
		if ids != nil && len(ids) != n {
			return 0, nil, "", envErrf("SLURM_GPUS_ON_NODE", v, "SLURM_GPUS_ON_NODE=%d but SLURM_JOB_GPUS=%q lists %d GPUs", n, g("SLURM_JOB_GPUS"), len(ids))
		}
		return n, ids, "SLURM_GPUS_ON_NODE=" + v, nil
	}
	if ids != nil {
		return len(ids), ids, "SLURM_JOB_GPUS=" + g("SLURM_JOB_GPUS"), nil
	}
	if v := g.trimmed("SLURM_GPUS_PER_NODE"); v != "" {
		f := v[strings.LastIndexByte(v, ':')+1:]
		n, e := strconv.Atoi(f)
		if e != nil || n < 0 || n > maxGPUIDs {
			return 0, nil, "", varErr("SLURM_GPUS_PER_NODE", v, fmt.Sprintf("a GPU count up to %d, such as 8 or gpu:8", maxGPUIDs))
		}
		return n, nil, "SLURM_GPUS_PER_NODE=" + v, nil
	}
	return 0, nil, "none of SLURM_GPUS_ON_NODE, SLURM_JOB_GPUS, SLURM_GPUS_PER_NODE is set", nil
}

// JobEnv is the job's own SLURM_* variables that the commands other than
// `trainrun run` read, as given (not checked: each caller says what it
// needs).
type JobEnv struct {
	ID        string // SLURM_JOB_ID
	Name      string // SLURM_JOB_NAME
	User      string // SLURM_JOB_USER
	NodeList  string // SLURM_JOB_NODELIST
	Partition string // SLURM_JOB_PARTITION
	StepID    string // SLURM_STEP_ID ("" in the batch script outside a step)
}

// JobFromEnv reads JobEnv.
func JobFromEnv(getenv func(string) string) JobEnv {
	return JobEnv{ID: getenv("SLURM_JOB_ID"), Name: getenv("SLURM_JOB_NAME"), User: getenv("SLURM_JOB_USER"),
		NodeList: getenv("SLURM_JOB_NODELIST"), Partition: getenv("SLURM_JOB_PARTITION"), StepID: getenv("SLURM_STEP_ID")}
}

// Task is what one task of a step knows of itself from Slurm's
// environment, as given.
type Task struct {
	ProcID   string // SLURM_PROCID: the task's rank in the step
	LocalID  string // SLURM_LOCALID: the task's index among the step's tasks on its node
	Node     string // SLURMD_NODENAME: the node, by Slurm's name for it
	StepID   string // SLURM_STEP_ID ("" outside a step)
	StepGPUs string // SLURM_STEP_GPUS, else SLURM_JOB_GPUS: the node's GPU indices the step holds
	Restart  string // SLURM_RESTART_COUNT ("" on a first start)
}

// TaskFromEnv reads Task.
func TaskFromEnv(getenv func(string) string) Task {
	return Task{ProcID: getenv("SLURM_PROCID"), LocalID: getenv("SLURM_LOCALID"), Node: getenv("SLURMD_NODENAME"), StepID: getenv("SLURM_STEP_ID"),
		StepGPUs: cmp.Or(getenv("SLURM_STEP_GPUS"), getenv("SLURM_JOB_GPUS")), Restart: getenv("SLURM_RESTART_COUNT")}
}
