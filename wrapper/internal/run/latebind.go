package run

import (
	"os"
	"strings"
)

// planByPartitionEnv names the plans of a late-bound job (trainrun submit
// --late-bind): submitted to several partitions at once (-p A,B), it has a
// plan for each, at this path with %p the partition. The controller takes
// the one for the partition Slurm started it in, so its layout (and GPU
// type) is the one planned for the GPUs it got.
const planByPartitionEnv = "TRAINRUN_PLAN_BY_PARTITION"

// partitionPlan is the late-bound plan for the job's partition; ok is false
// when the job is not late-bound, or (said in the log) its partition is
// unknown or has no plan: TRAINRUN_PLAN is used then.
func (r *runner) partitionPlan() (string, bool) {
	tmpl := r.env.Getenv(planByPartitionEnv)
	if tmpl == "" || !strings.Contains(tmpl, "%p") {
		return "", false
	}
	part := r.partition()
	if strings.Contains(part, ",") { // some Slurm versions give a job's steps its whole -p list: scontrol names the one it runs in
		part = r.facts.job.Partition
	}
	if part == "" || strings.ContainsAny(part, "/,") {
		r.logf("%s is not used: the job's partition is not known (SLURM_JOB_PARTITION %q)", planByPartitionEnv, part)
		return "", false
	}
	path := strings.ReplaceAll(tmpl, "%p", part)
	if _, err := os.Stat(path); err != nil {
		r.logf("%s is not used: partition %s has no plan: %v", planByPartitionEnv, part, err)
		return "", false
	}
	r.logf("late binding: the job landed in partition %s: its plan %s", part, path)
	return path, true
}
