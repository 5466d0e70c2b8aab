package slurm

import (
	"context"
	"fmt"
	"strconv"
)

// SetPartition sets the job's partition list (`scontrol update jobid=ID
// Partition=LIST`). Slurm takes it only for a pending job: call it after
// Requeue, as SetExcNodeList. trainrun run --migrate uses it to send a
// requeued late-bound job (-p A,B) to the one partition it moves to, so
// that it does not start again where it left.
func (c Client) SetPartition(ctx context.Context, jobID, partitions string) error {
	_, err := c.query(ctx, Scontrol, "update", "jobid="+jobID, "Partition="+partitions)
	return err
}

// IdleNodes is how many nodes of partition are idle now (State IDLE, no
// GPU allocated), from `scontrol -d show node -o`: a cheap estimate of
// what a job requeued into it could start on at once.
func IdleNodes(nodes []Node, partition string) int {
	n := 0
	for _, nd := range nodes {
		in := false
		for _, p := range nd.Partitions {
			in = in || p == partition
		}
		if in && nd.State == "IDLE" && nd.GPUsUsed() == 0 {
			n++
		}
	}
	return n
}

// SetNodes sets a pending job's size (`scontrol update jobid=ID
// NumNodes=N-N NumTasks=T NumCPUs=C`): N nodes exactly, T tasks in all and
// C CPUs in all (T × CPUs per task). Slurm 22.05 takes it only while the
// job is pending (call it after Requeue, as SetPartition). Tried on the e2e
// harness (Slurm 22.05.8, one task per node): growing with NumNodes=2 (with
// or without NumTasks) is refused ("Node count specification invalid") and
// leaves the job pending with BadConstraints; NumNodes=2-2 grows it;
// shrinking with NumNodes=1-1, alone or with NumTasks in either order,
// leaves it pending with BadConstraints (its memory is still the old CPU
// count's); all three together start it at the new size both ways.
// trainrun run resizes a requeued job's data parallelism with it (issue 34).
func (c Client) SetNodes(ctx context.Context, jobID string, nodes, tasks, cpus int) error {
	if nodes < 1 || tasks < nodes || cpus < tasks {
		return fmt.Errorf("job %s: setting %d node(s), %d task(s), %d CPU(s): want 1 <= nodes <= tasks <= CPUs", jobID, nodes, tasks, cpus)
	}
	_, err := c.query(ctx, Scontrol, "update", "jobid="+jobID, fmt.Sprintf("NumNodes=%d-%d", nodes, nodes),
		"NumTasks="+strconv.Itoa(tasks), "NumCPUs="+strconv.Itoa(cpus))
	return err
}
