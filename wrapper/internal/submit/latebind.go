package submit

import (
	"fmt"
	"time"

	"github.com/trainrun/trainrun/internal/units"
)

// Late binding (issue 34): a job bound to one partition at submission
// keeps a wrong guess of --test-only (which assumes every running job uses
// its whole limit) for good, while Slurm's own -p A,B list binds at the
// moment a partition frees. So the chosen candidate is submitted with the
// other partitions whose predicted finish is close to its own, as one job:
// Slurm starts it on the first that can, and the job's controller takes
// the plan written for the partition it landed in (TRAINRUN_PLAN_BY_PARTITION).

// LateBind lists, after the chosen candidate, the others that one sbatch
// request can also ask for (same nodes and GPUs per node, shared or not
// alike, within their partition's MaxTime) and that Slurm would start,
// each partition once, in order of finish, that hedge the chosen's start:
// a listed partition that frees first takes the job, so it is listed only
// when, at worst, it finishes no later than the chosen at worst plus
// margin times the chosen's wait. At worst is the start plus the run
// times (1 + the plan's error band): a partition that is idle now but
// slow is not listed against a fast one that frees in seconds, and when
// the chosen starts at once there is no wait to hedge. It marks their
// Why. margin <= 0 lists the chosen alone.
func LateBind(cands []Candidate, chosen int, margin float64, now time.Time) []int {
	list := []int{chosen}
	if chosen < 0 || chosen >= len(cands) || margin <= 0 {
		return list
	}
	best := &cands[chosen]
	wait := max(0, best.Start.Sub(now))
	hedge := time.Duration(float64(wait) * margin)
	bound := worstFinish(best).Add(hedge)
	seen := map[string]bool{best.Partition: true}
	var more []int
	for i := range cands {
		c := &cands[i]
		if i == chosen || seen[c.Partition] || !c.Fits || c.Start.IsZero() || c.StartErr != "" || c.Finish.IsZero() || c.Capped {
			continue
		}
		if c.Nodes != best.Nodes || c.GPUsPerNode != best.GPUsPerNode || c.Partial != best.Partial || worstFinish(c).After(bound) {
			continue
		}
		seen[c.Partition] = true
		more = append(more, i)
	}
	for i := 1; i < len(more); i++ { // insertion sort by finish: a handful
		for j := i; j > 0 && cands[more[j]].Finish.Before(cands[more[j-1]].Finish); j-- {
			more[j], more[j-1] = more[j-1], more[j]
		}
	}
	for _, i := range more {
		c := &cands[i]
		c.Why = fmt.Sprintf("late-bound with the chosen: finishes at worst %s after it at worst, within %.0f %% of its wait of %s; Slurm starts the job on whichever frees first, with this partition's plan",
			units.Seconds(max(0, worstFinish(c).Sub(worstFinish(best)).Seconds())), 100*margin, units.Seconds(wait.Seconds()))
		list = append(list, i)
	}
	return list
}

// worstFinish is a candidate's finish with its run at the top of the
// plan's error band.
func worstFinish(c *Candidate) time.Time {
	run := c.Finish.Sub(c.Start)
	if c.Eval != nil {
		run = time.Duration(float64(run) * (1 + Band(*c.Eval)))
	}
	return c.Start.Add(run)
}

// Limit is the --time of a late-bound job: valid on the slowest listed
// (the longest limit). There is no --time-min for the fastest: Slurm may
// lower the limit to the --time-min on whichever listed partition starts
// the job, and on a slower one the job then meets its limit before its
// end (trace 2 of make bench-sched, 2026-12-07: a job landed on ampere
// with hopper's minute and had to requeue).
func Limit(cands []Candidate, list []int) time.Duration {
	var limit time.Duration
	for _, i := range list {
		limit = max(limit, cands[i].TimeLimit)
	}
	return limit
}
