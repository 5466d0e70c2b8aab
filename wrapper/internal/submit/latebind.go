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
// lists the chosen alone. A partition is listed only where the chosen's
// size is about as good there as its best (LateSizeMargin): sizing may
// pick 8 GPUs on hopper where 16 are best on ampere, and listing ampere at
// 8 would land the job there at a size that takes twice as long (trace 2
// of make bench-sched, 2026-12-07: a qwen2.5-14b job ran 76 s on 8 a100s,
// where 16 were predicted to take 45 s). Nor where another size there
// finishes no later with fewer GPU-seconds (dominating): the chosen's size
// would be the wasteful one there. (A rule that listed a partition only as a hedge
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
	top := bestFinish(cands)
	var more []int
	for i := range cands {
		c := &cands[i]
		if i == chosen || seen[c.Partition] || !c.Fits || c.Start.IsZero() || c.StartErr != "" || c.Finish.IsZero() || c.Capped {
			continue
		}
		if c.Nodes != best.Nodes || c.GPUsPerNode != best.GPUsPerNode || c.Partial != best.Partial || c.Finish.After(bound) {
			continue
		}
		if b := top[c.Partition]; b.Before(c.Finish) && float64(c.Finish.Sub(now)) > float64(b.Sub(now))*(1+LateSizeMargin) {
			c.Why = fmt.Sprintf("not late-bound: at %d GPUs it finishes %s after the best size on %s",
				c.GPUs, units.Seconds(c.Finish.Sub(b).Seconds()), c.Partition)
			continue
		}
		if d := dominating(cands, c); d != nil {
			c.Why = fmt.Sprintf("not late-bound: %d GPUs on %s finish sooner (%s earlier) and take fewer GPU-seconds (%.0f against %.0f)",
				d.GPUs, c.Partition, units.Seconds(c.Finish.Sub(d.Finish).Seconds()), float64(d.GPUs)*d.TrainS, float64(c.GPUs)*c.TrainS)
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

// LateSizeMargin: a partition is late-bound at the chosen's size only
// when that size's time to finish there is within this share of the
// partition's best size's.
const LateSizeMargin = 0.15

// dominating is a qualified candidate of c's partition at another size
// that finishes no later and takes fewer GPU-seconds (nil: none): c would
// only waste the partition.
func dominating(cands []Candidate, c *Candidate) *Candidate {
	for i := range cands {
		d := &cands[i]
		if d == c || d.Partition != c.Partition || d.GPUs == c.GPUs || !d.Fits || d.Dropped != "" || d.StartErr != "" || d.Finish.IsZero() || d.TrainS <= 0 {
			continue
		}
		if !d.Finish.After(c.Finish) && float64(d.GPUs)*d.TrainS < float64(c.GPUs)*c.TrainS {
			return d
		}
	}
	return nil
}

// bestFinish is each partition's earliest finish among the candidates
// that qualified (Choose set their Finish; dropped ones have none).
func bestFinish(cands []Candidate) map[string]time.Time {
	out := map[string]time.Time{}
	for i := range cands {
		c := &cands[i]
		if !c.Fits || c.Dropped != "" || c.StartErr != "" || c.Finish.IsZero() {
			continue
		}
		if b, ok := out[c.Partition]; !ok || c.Finish.Before(b) {
			out[c.Partition] = c.Finish
		}
	}
	return out
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
