package slurm

import "context"

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
