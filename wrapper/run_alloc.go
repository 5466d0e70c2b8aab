package main

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// allocation is what trainrun knows of the Slurm allocation it runs in.
// Every field names where it comes from.
type allocation struct {
	JobID        string   // SLURM_JOB_ID
	Nodes        []string // SLURM_JOB_NODELIST, expanded, in Slurm's order
	NodeList     string   // SLURM_JOB_NODELIST as given (a hostlist expression)
	TasksPerNode int      // SLURM_TASKS_PER_NODE (all nodes equal), e.g. "8(x4)"
	GPUsPerNode  int      // SLURM_GPUS_ON_NODE, else SLURM_JOB_GPUS, else SLURM_GPUS_PER_NODE
	GPUIDs       []int    // SLURM_JOB_GPUS on the batch node (the GPU indices the job holds there); nil if unknown
	Partition    string   // SLURM_JOB_PARTITION
	RestartCount int      // SLURM_RESTART_COUNT (0 when unset: a first start)
	SubmitDir    string   // SLURM_SUBMIT_DIR
	BatchNode    string   // SLURMD_NODENAME of the batch step
	InStep       bool     // SLURM_STEP_ID is set: trainrun itself runs inside a step (srun), not in the batch script

	// From `scontrol show job -o $SLURM_JOB_ID` (zero when scontrol did not say).
	TimeLimit time.Duration // TimeLimit; 0 = UNLIMITED
	EndTime   time.Time     // EndTime; zero = unknown
	Requeue   bool          // Requeue=1: the job may be requeued
}

// World is the number of training processes: one per GPU.
func (a *allocation) World() int { return a.TasksPerNode * len(a.Nodes) }

// allocEnvVars lists the variables parseAllocation reads, for messages.
var allocEnvVars = []string{"SLURM_JOB_ID", "SLURM_JOB_NODELIST", "SLURM_JOB_NUM_NODES", "SLURM_TASKS_PER_NODE",
	"SLURM_GPUS_ON_NODE", "SLURM_JOB_GPUS", "SLURM_GPUS_PER_NODE", "SLURM_JOB_PARTITION", "SLURM_RESTART_COUNT", "SLURM_SUBMIT_DIR"}

// parseAllocation reads the allocation from Slurm's environment. expand turns a
// hostlist expression into host names. Errors carry ExitSlurm and name the
// variable, its value and the #SBATCH line that fixes it.
func parseAllocation(getenv func(string) string, expand func(string) ([]string, error)) (*allocation, error) {
	a := &allocation{}
	a.JobID = strings.TrimSpace(getenv("SLURM_JOB_ID"))
	if a.JobID == "" {
		a.JobID = strings.TrimSpace(getenv("SLURM_JOBID"))
	}
	if a.JobID == "" {
		return nil, withCode(ExitSlurm, errors.New("not inside a Slurm allocation (SLURM_JOB_ID is not set): "+
			"run trainrun run from a batch script (sbatch job.sh, see contrib/jobs/) or inside salloc; "+
			"to see what it would do without Slurm, use 'trainrun plan'"))
	}
	if _, err := strconv.ParseUint(a.JobID, 10, 64); err != nil {
		return nil, slurmVarErr("SLURM_JOB_ID", a.JobID, "a job number")
	}
	a.NodeList = strings.TrimSpace(getenv("SLURM_JOB_NODELIST"))
	if a.NodeList == "" {
		a.NodeList = strings.TrimSpace(getenv("SLURM_NODELIST"))
	}
	if a.NodeList == "" {
		return nil, slurmVarErr("SLURM_JOB_NODELIST", "", "a hostlist such as n[1-4]")
	}
	nodes, err := expand(a.NodeList)
	if err != nil {
		return nil, withCode(ExitSlurm, fmt.Errorf("SLURM_JOB_NODELIST=%q: %w", a.NodeList, err))
	}
	if len(nodes) == 0 {
		return nil, slurmVarErr("SLURM_JOB_NODELIST", a.NodeList, "a hostlist naming at least one node")
	}
	a.Nodes = nodes
	if v := strings.TrimSpace(getenv("SLURM_JOB_NUM_NODES")); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return nil, slurmVarErr("SLURM_JOB_NUM_NODES", v, "a positive number")
		}
		if n != len(nodes) {
			return nil, withCode(ExitSlurm, fmt.Errorf("SLURM_JOB_NUM_NODES=%d but SLURM_JOB_NODELIST=%q names %d nodes: "+
				"the environment is not Slurm's own (was it copied from another job?)", n, a.NodeList, len(nodes)))
		}
	}

	// Tasks per node: "8(x4)" or "8,8,4" or "2(x3),1".
	tpnRaw := strings.TrimSpace(getenv("SLURM_TASKS_PER_NODE"))
	if tpnRaw == "" {
		tpnRaw = strings.TrimSpace(getenv("SLURM_NTASKS_PER_NODE"))
	}
	var tasks []int
	if tpnRaw != "" {
		tasks, err = parseSlurmCounts(tpnRaw)
		if err != nil {
			return nil, withCode(ExitSlurm, fmt.Errorf("SLURM_TASKS_PER_NODE=%q: %w", tpnRaw, err))
		}
		if len(tasks) != len(nodes) {
			return nil, withCode(ExitSlurm, fmt.Errorf("SLURM_TASKS_PER_NODE=%q gives %d nodes but the allocation has %d (%s)",
				tpnRaw, len(tasks), len(nodes), a.NodeList))
		}
	}

	// GPUs on each node.
	gpus, ids, src, err := parseGPUsPerNode(getenv)
	if err != nil {
		return nil, err
	}
	a.GPUsPerNode, a.GPUIDs = gpus, ids
	a.Partition = strings.TrimSpace(getenv("SLURM_JOB_PARTITION"))
	a.SubmitDir = getenv("SLURM_SUBMIT_DIR")
	a.BatchNode = strings.TrimSpace(getenv("SLURMD_NODENAME"))
	a.InStep = strings.TrimSpace(getenv("SLURM_STEP_ID")) != "" && getenv("SLURM_STEP_ID") != "4294967294" // batch step id
	if v := strings.TrimSpace(getenv("SLURM_RESTART_COUNT")); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return nil, slurmVarErr("SLURM_RESTART_COUNT", v, "a count of restarts (0, 1, ...)")
		}
		a.RestartCount = n
	}
	if a.GPUsPerNode == 0 {
		part := a.Partition
		if part == "" {
			part = "(default)"
		}
		return nil, withCode(ExitSlurm, fmt.Errorf("the job holds no GPUs (partition %s, nodes %s: %s): "+
			"trainrun runs one process per GPU; ask for them with '#SBATCH --gpus-per-node=N' on a partition whose nodes have GPUs "+
			"('sinfo -o \"%%P %%G\"' lists each partition's GRES)", part, a.NodeList, src))
	}

	// One process per GPU: tasks per node must equal GPUs per node on every node.
	if tasks == nil {
		return nil, withCode(ExitSlurm, fmt.Errorf("SLURM_TASKS_PER_NODE is not set: add '#SBATCH --ntasks-per-node=%d' (one task per GPU)", a.GPUsPerNode))
	}
	for i, t := range tasks {
		if t != tasks[0] {
			return nil, withCode(ExitSlurm, fmt.Errorf("SLURM_TASKS_PER_NODE=%q: node %s has %d tasks but %s has %d; trainrun needs the same number on every node: "+
				"add '#SBATCH --ntasks-per-node=%d' (one task per GPU)", tpnRaw, nodes[0], tasks[0], nodes[i], t, a.GPUsPerNode))
		}
	}
	if tasks[0] != a.GPUsPerNode {
		return nil, withCode(ExitSlurm, fmt.Errorf("the job has %d task(s) per node (SLURM_TASKS_PER_NODE=%q) but %d GPUs per node (%s); "+
			"trainrun runs one process per GPU: add '#SBATCH --ntasks-per-node=%d' (with --gpus-per-node=%d)",
			tasks[0], tpnRaw, a.GPUsPerNode, src, a.GPUsPerNode, a.GPUsPerNode))
	}
	a.TasksPerNode = tasks[0]
	return a, nil
}

func slurmVarErr(name, value, want string) error {
	return withCode(ExitSlurm, fmt.Errorf("%s=%q is not %s; is this a Slurm job's own environment?", name, value, want))
}

// parseSlurmCounts expands Slurm's compressed per-node counts: "8(x4)" is
// four nodes of 8; "2(x3),1" is 2,2,2,1.
func parseSlurmCounts(s string) ([]int, error) {
	var out []int
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		count, rep := part, "1"
		if i := strings.IndexByte(part, '('); i >= 0 {
			if !strings.HasPrefix(part[i:], "(x") || !strings.HasSuffix(part, ")") {
				return nil, fmt.Errorf("%q is not N or N(xM)", part)
			}
			count, rep = part[:i], part[i+2:len(part)-1]
		}
		n, err := strconv.Atoi(count)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%q is not N or N(xM)", part)
		}
		r, err := strconv.Atoi(rep)
		if err != nil || r <= 0 {
			return nil, fmt.Errorf("%q is not N or N(xM)", part)
		}
		for ; r > 0; r-- {
			out = append(out, n)
		}
	}
	return out, nil
}

// parseGPUsPerNode reads the GPU count on the batch node. Slurm sets
// SLURM_GPUS_ON_NODE (a count) and SLURM_JOB_GPUS (indices) in the batch step
// when the job holds GPUs; SLURM_GPUS_PER_NODE ("8", "gpu:8", "h100:8") only
// when the user asked with --gpus-per-node. src says which was used.
func parseGPUsPerNode(getenv func(string) string) (n int, ids []int, src string, err error) {
	if v := strings.TrimSpace(getenv("SLURM_JOB_GPUS")); v != "" {
		for _, f := range strings.Split(v, ",") {
			id, e := strconv.Atoi(strings.TrimSpace(f))
			if e != nil || id < 0 {
				return 0, nil, "", slurmVarErr("SLURM_JOB_GPUS", v, "a comma-separated list of GPU indices")
			}
			ids = append(ids, id)
		}
	}
	if v := strings.TrimSpace(getenv("SLURM_GPUS_ON_NODE")); v != "" {
		n, e := strconv.Atoi(v)
		if e != nil || n < 0 {
			return 0, nil, "", slurmVarErr("SLURM_GPUS_ON_NODE", v, "a GPU count")
		}
		if ids != nil && len(ids) != n {
			return 0, nil, "", withCode(ExitSlurm, fmt.Errorf("SLURM_GPUS_ON_NODE=%d but SLURM_JOB_GPUS=%q lists %d GPUs", n, getenv("SLURM_JOB_GPUS"), len(ids)))
		}
		return n, ids, "SLURM_GPUS_ON_NODE=" + v, nil
	}
	if ids != nil {
		return len(ids), ids, "SLURM_JOB_GPUS=" + getenv("SLURM_JOB_GPUS"), nil
	}
	if v := strings.TrimSpace(getenv("SLURM_GPUS_PER_NODE")); v != "" {
		f := v[strings.LastIndexByte(v, ':')+1:]
		n, e := strconv.Atoi(f)
		if e != nil || n < 0 {
			return 0, nil, "", slurmVarErr("SLURM_GPUS_PER_NODE", v, "a GPU count such as 8 or gpu:8")
		}
		return n, nil, "SLURM_GPUS_PER_NODE=" + v, nil
	}
	return 0, nil, "none of SLURM_GPUS_ON_NODE, SLURM_JOB_GPUS, SLURM_GPUS_PER_NODE is set", nil
}

// jobInfo is what `scontrol show job -o` says that the environment does not.
type jobInfo struct {
	TimeLimit time.Duration
	EndTime   time.Time
	Requeue   bool
	fields    map[string]string
}

// parseScontrolJob reads one line of `scontrol show job -o`. Values do not
// contain spaces except in a few free-text fields (Comment, Reason), which are
// not used; loc is the time zone scontrol prints times in (the local one).
func parseScontrolJob(line string, loc *time.Location) (*jobInfo, error) {
	f := map[string]string{}
	for _, tok := range strings.Fields(line) {
		if k, v, ok := strings.Cut(tok, "="); ok {
			if _, dup := f[k]; !dup {
				f[k] = v
			}
		}
	}
	if f["JobId"] == "" {
		return nil, fmt.Errorf("scontrol show job printed no JobId: %q", truncate(line, 200))
	}
	ji := &jobInfo{fields: f}
	if v, ok := f["TimeLimit"]; ok {
		d, err := parseSlurmDuration(v)
		if err != nil {
			return nil, fmt.Errorf("scontrol show job: TimeLimit=%q: %w", v, err)
		}
		ji.TimeLimit = d
	}
	if v, ok := f["EndTime"]; ok && v != "Unknown" && v != "None" && v != "" {
		t, err := time.ParseInLocation("2006-01-02T15:04:05", v, loc)
		if err != nil {
			return nil, fmt.Errorf("scontrol show job: EndTime=%q is not YYYY-MM-DDTHH:MM:SS", v)
		}
		ji.EndTime = t
	}
	ji.Requeue = f["Requeue"] == "1"
	return ji, nil
}

// parseSlurmDuration reads Slurm's time format: "UNLIMITED", "INFINITE",
// "minutes", "minutes:seconds", "hours:minutes:seconds", "days-hours",
// "days-hours:minutes", "days-hours:minutes:seconds". 0 means unlimited.
func parseSlurmDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	switch s {
	case "UNLIMITED", "INFINITE", "Partition_Limit", "NONE":
		return 0, nil
	}
	bad := fmt.Errorf("%q is not a Slurm time ([days-]hours:minutes:seconds, minutes, or UNLIMITED)", s)
	days := 0
	rest := s
	if d, r, ok := strings.Cut(s, "-"); ok {
		n, err := strconv.Atoi(d)
		if err != nil || n < 0 {
			return 0, bad
		}
		days, rest = n, r
	}
	parts := strings.Split(rest, ":")
	nums := make([]int, len(parts))
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return 0, bad
		}
		nums[i] = n
	}
	var h, m, sec int
	switch {
	case days > 0 || strings.Contains(s, "-"):
		switch len(nums) {
		case 1:
			h = nums[0]
		case 2:
			h, m = nums[0], nums[1]
		case 3:
			h, m, sec = nums[0], nums[1], nums[2]
		default:
			return 0, bad
		}
	default:
		switch len(nums) {
		case 1:
			m = nums[0]
		case 2:
			m, sec = nums[0], nums[1]
		case 3:
			h, m, sec = nums[0], nums[1], nums[2]
		default:
			return 0, bad
		}
	}
	return time.Duration(days)*24*time.Hour + time.Duration(h)*time.Hour + time.Duration(m)*time.Minute + time.Duration(sec)*time.Second, nil
}

// scontrolJob runs `scontrol show job -o JOBID`.
func scontrolJob(ctx context.Context, jobID string) (*jobInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "scontrol", "show", "job", "-o", jobID).Output()
	if err != nil {
		return nil, fmt.Errorf("scontrol show job -o %s: %w%s", jobID, err, stderrOf(err))
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return parseScontrolJob(line, time.Local)
}

// scontrolNodeAddrs maps node names to their NodeAddr (`scontrol show node -o`):
// the address Slurm itself uses to reach the node, so the rendezvous address
// works even where node names do not resolve.
func scontrolNodeAddrs(ctx context.Context, nodelist string) (map[string]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "scontrol", "show", "node", "-o", nodelist).Output()
	if err != nil {
		return nil, fmt.Errorf("scontrol show node -o %s: %w%s", nodelist, err, stderrOf(err))
	}
	return parseNodeAddrs(string(out)), nil
}

func parseNodeAddrs(out string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		var name, addr string
		for _, tok := range strings.Fields(line) {
			if v, ok := strings.CutPrefix(tok, "NodeName="); ok {
				name = v
			} else if v, ok := strings.CutPrefix(tok, "NodeAddr="); ok {
				addr = v
			}
		}
		if name != "" && addr != "" {
			m[name] = addr
		}
	}
	return m
}

func stderrOf(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) && len(ee.Stderr) > 0 {
		return ": " + strings.TrimSpace(string(ee.Stderr))
	}
	return ""
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
