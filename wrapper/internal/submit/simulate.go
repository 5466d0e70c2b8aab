package submit

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/trainrun/trainrun/internal/slurm"
	"github.com/trainrun/trainrun/topo"
)

// A queue simulation for start estimates (issue 34). sbatch --test-only
// weighs every running and pending job by its whole time limit, and a
// minute-rounded limit with a margin and a checkpoint lead is often several
// times a job's real run. Where jobs wait, Queue.FreesAt cannot say when a
// partition frees, so the estimate was Slurm's alone; a job could then be
// sent to a slow idle partition because the fast one looked minutes away
// when it was seconds away. The timeline here replays the queue with what
// trainrun knows: each node frees when the jobs on it end (trainrun's
// jobs as predicted or as their trainer's rate says, others at their
// limits), then the waiting jobs start in priority order, each on the
// first listed partition where enough nodes are free, for its predicted
// run (trainrun's jobs, from their mark) or its limit. A new job starts
// after them (no backfill: Slurm's own answer, which backfills by limits,
// is kept when it is sooner). Whole nodes only: a partial-node job holds
// its node until it ends.

// Timeline is the simulated queue: when each node is next free once the
// waiting jobs have started.
type Timeline struct {
	now   time.Time
	free  map[string]time.Time // node → predicted free; absent = unknown (a job trainrun cannot see holds it)
	parts map[string][]string  // partition → its usable nodes
	// ahead counts the waiting jobs simulated on each partition; predicted
	// says that trainrun's own figures (not limits alone) moved a node of
	// it; unknown says why a partition's estimate cannot be made.
	ahead     map[string]int
	predicted map[string]bool
	unknown   map[string]string
}

// Simulate builds the timeline from the partitions' nodes and Slurm's
// jobs; progress is QueuesObserved's (nil = none read).
func Simulate(infos []PartitionInfo, jobs []slurm.Job, loc *time.Location, now time.Time, progress func(slurm.Job) (Progress, bool)) *Timeline {
	tl := &Timeline{now: now, free: map[string]time.Time{}, parts: map[string][]string{}, ahead: map[string]int{},
		predicted: map[string]bool{}, unknown: map[string]string{}}
	nodePart := map[string][]string{}
	for _, pi := range infos {
		for _, n := range pi.Nodes {
			if !Usable(n.State) {
				continue
			}
			tl.parts[pi.Name] = append(tl.parts[pi.Name], n.Name)
			nodePart[n.Name] = append(nodePart[n.Name], pi.Name)
			if baseState(n.State) == "IDLE" {
				tl.free[n.Name] = now
			}
		}
	}
	for _, j := range jobs {
		if j.State != "RUNNING" && j.State != "COMPLETING" && j.State != "SUSPENDED" {
			continue
		}
		nodes, err := topo.ExpandHostlist(j.Record["NodeList"])
		if err != nil || len(nodes) == 0 {
			for _, p := range strings.Split(j.Partition, ",") {
				tl.unknown[p] = fmt.Sprintf("running job %s's nodes %q cannot be read", j.ID, j.Record["NodeList"])
			}
			continue
		}
		h := holderOf(j, loc, progress)
		end, predicted := h.End, h.Predicted
		for _, n := range nodes {
			if end.IsZero() {
				tl.free[n] = time.Time{} // no end known: the node stays unknown
				continue
			}
			if f, ok := tl.free[n]; !ok || (!f.IsZero() && end.After(f)) {
				tl.free[n] = end
			}
			if predicted {
				for _, p := range nodePart[n] {
					tl.predicted[p] = true
				}
			}
		}
	}
	for n, f := range tl.free {
		if f.IsZero() {
			delete(tl.free, n)
		}
	}
	tl.startPending(jobs, loc)
	return tl
}

// waitingReasons are the pending reasons of jobs that will not start when
// nodes free (held, or waiting on another job or a time).
var waitingReasons = []string{"Held", "Dependency", "BeginTime"}

// startPending starts the waiting jobs in priority order (Priority, then
// submission, then id).
func (tl *Timeline) startPending(jobs []slurm.Job, loc *time.Location) {
	var pend []slurm.Job
	for _, j := range jobs {
		if j.State != "PENDING" && j.State != "REQUEUED" {
			continue
		}
		skip := false
		for _, r := range waitingReasons {
			skip = skip || strings.Contains(j.Record["Reason"], r)
		}
		if !skip {
			pend = append(pend, j)
		}
	}
	prio := func(j slurm.Job) uint64 { v, _ := strconv.ParseUint(j.Record["Priority"], 10, 64); return v }
	sort.SliceStable(pend, func(a, b int) bool {
		if pa, pb := prio(pend[a]), prio(pend[b]); pa != pb {
			return pa > pb
		}
		if sa, sb := pend[a].Record["SubmitTime"], pend[b].Record["SubmitTime"]; sa != sb {
			return sa < sb // scontrol's ISO times sort as text
		}
		ia, _ := strconv.Atoi(pend[a].ID)
		ib, _ := strconv.Atoi(pend[b].ID)
		return ia < ib
	})
	for _, j := range pend {
		tl.start(j)
	}
}

// start places one waiting job on the listed partition where it starts
// first.
func (tl *Timeline) start(j slurm.Job) {
	k := leadingInt(j.Record["NumNodes"])
	best, bestAt, bestDur := "", time.Time{}, time.Duration(0)
	for _, p := range strings.Split(j.Partition, ",") {
		if _, ok := tl.parts[p]; !ok || tl.unknown[p] != "" {
			continue
		}
		d, marked := markedTrain(j.Record["Comment"], p)
		if !marked {
			d = j.TimeLimit
		}
		if d <= 0 {
			tl.unknown[p] = fmt.Sprintf("waiting job %s has no time limit", j.ID)
			continue
		}
		at, ok := tl.StartOn(p, k)
		if ok && (best == "" || at.Before(bestAt)) {
			best, bestAt, bestDur = p, at, d
			if marked {
				tl.predicted[p] = true
			}
		}
	}
	if best == "" {
		return // it fits nowhere known: it takes no known node
	}
	nodes := tl.soonest(best, k)
	for _, n := range nodes {
		tl.free[n] = bestAt.Add(bestDur)
	}
	tl.ahead[best]++
}

// soonest are the k nodes of p free soonest (fewer when it has fewer known).
func (tl *Timeline) soonest(p string, k int) []string {
	var ns []string
	for _, n := range tl.parts[p] {
		if _, ok := tl.free[n]; ok {
			ns = append(ns, n)
		}
	}
	sort.SliceStable(ns, func(a, b int) bool { return tl.free[ns[a]].Before(tl.free[ns[b]]) })
	if len(ns) > k {
		ns = ns[:k]
	}
	return ns
}

// StartOn is when k whole nodes of partition p are free after the
// waiting jobs have started; ok is false when that cannot be said (too
// few nodes known, a job without a limit).
func (tl *Timeline) StartOn(p string, k int) (time.Time, bool) {
	if tl == nil || tl.unknown[p] != "" {
		return time.Time{}, false
	}
	ns := tl.soonest(p, k)
	if len(ns) < k || k < 1 {
		return time.Time{}, false
	}
	return maxTime(tl.free[ns[k-1]], tl.now), true
}

// leadingInt is the number a field starts with ("2-2" of NumNodes is 2);
// at least 1.
func leadingInt(s string) int {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	n, _ := strconv.Atoi(s[:i])
	return max(n, 1)
}
