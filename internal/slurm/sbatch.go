package slurm

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// SbatchRequest is one `sbatch` submission. Zero fields are not passed;
// Slurm's defaults (and the script's #SBATCH lines) apply.
type SbatchRequest struct {
	Script        string        // path of the batch script
	Args          []string      // the script's arguments
	JobName       string        // --job-name
	Array         string        // --array, e.g. "0-5%2"
	Dependency    string        // --dependency, e.g. "afterok:123"
	Partition     string        // --partition
	Nodes         int           // --nodes
	NtasksPerNode int           // --ntasks-per-node
	GPUsPerNode   int           // --gpus-per-node
	Time          time.Duration // --time (rounded up to whole minutes)
	Output        string        // --output (%A array job, %a index, %j job id)
	Requeue       bool          // --requeue, with --open-mode=append so a requeued job's log continues
	Signal        string        // --signal, e.g. "B:USR1@90"
	Export        string        // --export, e.g. "ALL,TRAINRUN_SWEEP=x"
	Extra         []string      // further sbatch flags, as given
}

// Argv is the sbatch command line of r, without the program name and
// without --parsable (Submit adds it).
func (r SbatchRequest) Argv() []string {
	var a []string
	add := func(flag, v string) {
		if v != "" {
			a = append(a, flag+"="+v)
		}
	}
	add("--job-name", r.JobName)
	add("--array", r.Array)
	add("--dependency", r.Dependency)
	add("--partition", r.Partition)
	if r.Nodes > 0 {
		add("--nodes", strconv.Itoa(r.Nodes))
	}
	if r.NtasksPerNode > 0 {
		add("--ntasks-per-node", strconv.Itoa(r.NtasksPerNode))
	}
	if r.GPUsPerNode > 0 {
		add("--gpus-per-node", strconv.Itoa(r.GPUsPerNode))
	}
	if r.Time > 0 {
		add("--time", strconv.Itoa(int((r.Time+time.Minute-1)/time.Minute)))
	}
	add("--output", r.Output)
	if r.Requeue {
		a = append(a, "--requeue", "--open-mode=append")
	}
	add("--signal", r.Signal)
	add("--export", r.Export)
	a = append(a, r.Extra...)
	a = append(a, r.Script)
	return append(a, r.Args...)
}

// Sbatch submits r and returns the job id (of an array: the array's job id).
func (c Client) Sbatch(ctx context.Context, r SbatchRequest) (string, error) {
	if r.Script == "" {
		return "", fmt.Errorf("sbatch: no batch script")
	}
	id, _, err := c.Submit(ctx, r.Argv()...)
	return id, err
}

// ParseSbatchID reads `sbatch --parsable` output: "ID" or "ID;CLUSTER".
func ParseSbatchID(out string) (string, error) {
	line := strings.TrimSpace(out)
	if i := strings.LastIndexByte(line, '\n'); i >= 0 { // warnings before the id
		line = strings.TrimSpace(line[i+1:])
	}
	id, _, _ := strings.Cut(line, ";")
	if _, err := strconv.ParseUint(id, 10, 64); err != nil {
		return "", fmt.Errorf("sbatch --parsable printed %q, not a job id", clip(out, 200))
	}
	return id, nil
}

// ArrayTask is one element of a job array as `scontrol show job -o ARRAY`
// reports it.
type ArrayTask struct {
	Index    int
	JobID    string // the element's own job id; "" while it has not been split off the pending rest
	State    string // JobState
	Reason   string // Reason (None when there is none)
	ExitCode string // ExitCode, "STATUS:SIGNAL"
	Restarts int
}

// ArrayTasks runs `scontrol show job -o ID` for an array job and returns
// its elements by index. An array that Slurm no longer knows (it aged out
// after MinJobAge) is an *Error, as for any missing job.
func (c Client) ArrayTasks(ctx context.Context, arrayID string) (map[int]ArrayTask, error) {
	out, err := c.query(ctx, Scontrol, "show", "job", "-o", arrayID)
	if err != nil {
		return nil, err
	}
	return ParseArrayTasks(string(out))
}

// ParseArrayTasks reads `scontrol show job -o` of an array: one line per
// element that started, and one for the pending rest with ArrayTaskId a
// range expression such as "2-5%2" or "3,5-7".
func ParseArrayTasks(out string) (map[int]ArrayTask, error) {
	m := map[int]ArrayTask{}
	for _, r := range ParseRecords(out) {
		spec := r["ArrayTaskId"]
		if spec == "" {
			continue
		}
		idx, err := ParseArrayIndices(spec)
		if err != nil {
			return nil, fmt.Errorf("scontrol show job: JobId=%s ArrayTaskId=%q: %w", r["JobId"], spec, err)
		}
		t := ArrayTask{State: r["JobState"], Reason: r["Reason"], ExitCode: r["ExitCode"]}
		if t.Restarts, err = parseCount("scontrol show job: Restarts", r["Restarts"], maxRestarts); err != nil {
			return nil, fmt.Errorf("JobId=%s: %w", r["JobId"], err)
		}
		if len(idx) == 1 && !strings.ContainsAny(spec, "-,%") {
			t.JobID = r["JobId"]
		}
		for _, i := range idx {
			t.Index = i
			m[i] = t
		}
	}
	return m, nil
}

// maxArrayIndex bounds an array index: Slurm's MaxArraySize is at most
// 4000001 (slurm.conf(5)), so no index is above 4000000; the bound also
// keeps a forged expression from expanding past memory.
const maxArrayIndex = 4_000_000

// ParseArrayIndices expands an array index expression: "0-5%2", "3",
// "1,4-6", "0-10:2" (a step). The "%K" throttle is dropped.
func ParseArrayIndices(spec string) ([]int, error) {
	spec, _, _ = strings.Cut(spec, "%")
	var out []int
	for _, part := range strings.Split(spec, ",") {
		rng, stepS, hasStep := strings.Cut(part, ":")
		loS, hiS, isRange := strings.Cut(rng, "-")
		lo, err := strconv.Atoi(loS)
		if err != nil || lo < 0 || lo > maxArrayIndex {
			return nil, fmt.Errorf("%q is not an index (0 to %d) or a range LO-HI", clip(part, 40), maxArrayIndex)
		}
		hi, step := lo, 1
		if isRange {
			if hi, err = strconv.Atoi(hiS); err != nil || hi < lo || hi > maxArrayIndex {
				return nil, fmt.Errorf("%q: the range's end must be an integer from its start to %d", clip(part, 40), maxArrayIndex)
			}
		}
		if hasStep {
			if step, err = strconv.Atoi(stepS); err != nil || step <= 0 {
				return nil, fmt.Errorf("%q: the step must be a positive integer", clip(part, 40))
			}
		}
		if len(out)+(hi-lo)/step+1 > maxArrayIndex+1 {
			return nil, fmt.Errorf("%q expands to more than %d indices, more than Slurm's MaxArraySize allows", clip(spec, 60), maxArrayIndex)
		}
		for i := lo; i <= hi; i += step {
			out = append(out, i)
		}
	}
	return out, nil
}

// NodeGPUs is the GPU count of the partition's nodes (Nodes: typed GRES,
// every gpu entry counted as Node.GPUs does; partition "" is every node):
// the least of them, so a trial sized by it fits on any.
func (c Client) NodeGPUs(ctx context.Context, partition string) (int, error) {
	nodes, err := c.Nodes(ctx)
	if err != nil {
		return 0, err
	}
	least := 0
	for _, n := range nodes {
		if partition != "" && !slices.Contains(n.Partitions, partition) {
			continue
		}
		if g, _ := n.GPUs(); g > 0 && (least == 0 || g < least) {
			least = g
		}
	}
	if least == 0 {
		return 0, fmt.Errorf("scontrol show node: no node with GPUs (Gres=gpu:N) in partition %q; name a partition with GPUs (--partition) or give --gpus-per-node", partition)
	}
	return least, nil
}
