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
// whose time to finish from now is at most (1+margin) times the chosen's,
// each partition once, in order of finish. It marks their Why. margin <= 0
// lists the chosen alone. (A rule that listed a partition only as a hedge
// of the chosen's wait, at worst within margin × the wait, was measured on
// trace 2 of make bench-sched on 2026-12-07 and lost: fixed-size 1.15×
// and 1.17× of the perfect router against 1.06× with this one, sizing the
// same; the listing here also spreads the jobs as Slurm's list does.)
func LateBind(cands []Candidate, chosen int, margin float64, now time.Time) []int {
	list := []int{chosen}
	if chosen < 0 || chosen >= len(cands) || margin <= 0 {
		return list
	}
	best := &cands[chosen]
	bound := now.Add(time.Duration(float64(best.Finish.Sub(now)) * (1 + margin)))
	seen := map[string]bool{best.Partition: true}
	var more []int
	for i := range cands {
		c := &cands[i]
		if i == chosen || seen[c.Partition] || !c.Fits || c.Start.IsZero() || c.StartErr != "" || c.Finish.IsZero() || c.Capped {
			continue
		}
		if c.Nodes != best.Nodes || c.GPUsPerNode != best.GPUsPerNode || c.Partial != best.Partial || c.Finish.After(bound) {
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
		c.Why = fmt.Sprintf("late-bound with the chosen: finishes %s after it (within %.0f %%), Slurm starts the job on whichever frees first, with this partition's plan",
			units.Seconds(c.Finish.Sub(best.Finish).Seconds()), 100*margin)
		list = append(list, i)
	}
	return list
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
