package submit

import (
	"fmt"

	"github.com/trainrun/trainrun/internal/units"
	"github.com/trainrun/trainrun/wrapper/internal/planjson"
)

// NoWaitToGrow keeps sizing from growing into queued GPUs (issue 34): a
// candidate larger than the smallest that fits on its partition qualifies
// only if Slurm would start it as soon as that smallest one. A larger size
// that must wait for GPUs finishes its own job sooner by holding more of
// the partition, which is what delays the small jobs behind it (the bench's
// 8-GPU tail). A size that is no dearer (Frugal: no more GPU-seconds than
// the smallest, a model that scales better than linearly, as one that
// must recompute or offload on fewer GPUs) is kept: it holds the partition
// for less than the smallest would. It marks those it drops (Dropped) and
// returns how many.
func NoWaitToGrow(cands []Candidate) int {
	smallest := map[string]*Candidate{}
	for i := range cands {
		c := &cands[i]
		if !c.Fits || c.Start.IsZero() || c.StartErr != "" {
			continue
		}
		if s := smallest[c.Partition]; s == nil || c.GPUs < s.GPUs {
			smallest[c.Partition] = c
		}
	}
	n := 0
	for i := range cands {
		c := &cands[i]
		s := smallest[c.Partition]
		if s == nil || c == s || !c.Fits || c.Start.IsZero() || c.StartErr != "" || c.Dropped != "" || !c.Start.After(s.Start) || Frugal(c, s) {
			continue
		}
		c.Dropped = fmt.Sprintf("sizing does not wait to grow: %d GPUs start %s later than %d (--min-gpus and --max-gpus bound it)",
			c.GPUs, units.Seconds(c.Start.Sub(s.Start).Seconds()), s.GPUs)
		n++
	}
	return n
}

// Frugal says a larger size c takes no more GPU-seconds to train than the
// smallest size s on its partition (both predicted, saves included).
func Frugal(c, s *Candidate) bool {
	return c.GPUs > s.GPUs && c.TrainS > 0 && s.TrainS > 0 && float64(c.GPUs)*c.TrainS <= float64(s.GPUs)*s.TrainS
}

// Room is what sizing may grow into (GrowFair): each partition's idle
// nodes now and the nodes the jobs pending on it ask for (a job pending on
// several partitions counts on each: any of them may start it).
type Room struct {
	Idle    map[string]int
	Pending map[string]int
}

// GrowFair keeps sizing from taking the nodes small jobs would start on
// (issue 34, the bench's 8-GPU p90 slowdown): NoWaitToGrow still lets a job
// grow into an idle partition whole, and the small jobs that arrive a
// moment later then wait behind it. A candidate larger than the smallest
// that fits on its partition qualifies only if
//
//   - the nodes it takes are idle now and wanted by no pending job there
//     (idle − the pending jobs' nodes), and
//   - after it, the partitions the job may use keep idle nodes that no
//     pending job wants for one more job of the smallest size (reserve:
//     the next small arrival starts at once instead of queueing behind the
//     growth).
//
// A Frugal size that does not start on idle nodes now (it starts later
// than the smallest, or needs more nodes than are spare) is exempt: it
// waits behind the pending jobs (Slurm's order) rather than taking idle
// nodes, and once started it holds them for less GPU-time than the
// smallest.
//
// A partition whose idle nodes are not known is left to NoWaitToGrow. It
// marks those it drops (Dropped) and returns how many.
func GrowFair(cands []Candidate, room Room) int {
	smallest := map[string]*Candidate{}
	reserve := 0
	for i := range cands {
		c := &cands[i]
		if !c.Fits || c.Start.IsZero() || c.StartErr != "" {
			continue
		}
		if s := smallest[c.Partition]; s == nil || c.GPUs < s.GPUs {
			smallest[c.Partition] = c
		}
	}
	spare := map[string]int{}
	total := 0
	for p, s := range smallest {
		if reserve == 0 || s.Nodes < reserve {
			reserve = s.Nodes
		}
		if idle, ok := room.Idle[p]; ok {
			spare[p] = max(0, idle-room.Pending[p])
			total += spare[p]
		}
	}
	n := 0
	for i := range cands {
		c := &cands[i]
		s := smallest[c.Partition]
		sp, known := spare[c.Partition]
		if s == nil || c == s || !known || c.Dropped != "" || !c.Fits || c.StartErr != "" || c.Nodes <= s.Nodes {
			continue
		}
		if Frugal(c, s) && (c.Start.After(s.Start) || c.Nodes > sp) {
			continue // it waits in the queue, and holds the nodes for less once it starts
		}
		switch {
		case c.Nodes > sp:
			c.Dropped = fmt.Sprintf("sizing grows only into free nodes: %d GPUs need %d nodes, %s has %d idle that no pending job wants (--min-gpus and --max-gpus bound it)",
				c.GPUs, c.Nodes, c.Partition, sp)
		case total-c.Nodes < reserve:
			c.Dropped = fmt.Sprintf("sizing leaves room for the next small job: %d GPUs would leave %d free nodes, the smallest size needs %d (--min-gpus and --max-gpus bound it)",
				c.GPUs, max(0, total-c.Nodes), reserve)
		default:
			continue
		}
		n++
	}
	return n
}

// The job's size range, exported when it is a range (issue 34: the job's
// controller grows or shrinks data parallelism within it at a requeue);
// the names live in planjson, which submit and the controller share.
const (
	MinGPUsEnv = planjson.MinGPUsEnv
	MaxGPUsEnv = planjson.MaxGPUsEnv
)

// ResizeRange is the job's size range for its controller: the fewest and
// most GPUs of the whole-node sizes that fit on the partitions listed
// (list indexes cands), that is --min-gpus and --max-gpus clamped to what
// was planned. ok is false when there is no range (min == max, --gpus, a
// job smaller than a node): then nothing is exported and the job keeps its
// size at every requeue.
func ResizeRange(cands []Candidate, list []int) (lo, hi int, ok bool) {
	parts := map[string]bool{}
	for _, i := range list {
		if cands[i].Partial {
			return 0, 0, false
		}
		parts[cands[i].Partition] = true
	}
	for _, c := range cands {
		if !parts[c.Partition] || !c.Fits || c.Partial || c.GPUs <= 0 {
			continue
		}
		if lo == 0 || c.GPUs < lo {
			lo = c.GPUs
		}
		hi = max(hi, c.GPUs)
	}
	return lo, hi, lo > 0 && lo < hi
}

// ResizeExports are ResizeRange as the job's environment (nil: no range).
func ResizeExports(cands []Candidate, list []int) []string {
	lo, hi, ok := ResizeRange(cands, list)
	if !ok {
		return nil
	}
	return []string{fmt.Sprintf("%s=%d", MinGPUsEnv, lo), fmt.Sprintf("%s=%d", MaxGPUsEnv, hi)}
}
