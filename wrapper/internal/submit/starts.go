package submit

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/trainrun/trainrun/internal/slurm"
	"github.com/trainrun/trainrun/internal/units"
)

// Better start estimates (issue 34): sbatch --test-only assumes every
// running job uses its whole time limit. A job trainrun submitted carries
// its predicted training time in its comment (Mark), so its end is known
// better than its limit: a partition held by such jobs frees when they are
// predicted to finish, which is when the candidate can start, unless jobs
// are already waiting there (Slurm's answer, which weighs them, stands).

// markPrefix starts the comment of a job trainrun submit submitted.
const markPrefix = "trainrun-submit:train_s=" // no space: scontrol -o prints the comment unquoted

// Mark is the --comment of a job listed on partitions with these predicted
// training times: "trainrun-submit:train_s=hopper:3600,ampere:7200".
func Mark(cands []Candidate, list []int) string {
	parts := make([]string, 0, len(list))
	for _, i := range list {
		parts = append(parts, fmt.Sprintf("%s:%.0f", cands[i].Partition, cands[i].TrainS))
	}
	return markPrefix + strings.Join(parts, ",")
}

// markedTrain is the predicted training time a job's comment gives for the
// partition it runs in; ok is false for a job trainrun did not mark.
func markedTrain(comment, partition string) (time.Duration, bool) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(comment), markPrefix)
	if !ok {
		return 0, false
	}
	rest, _, _ = strings.Cut(rest, " ")
	for _, kv := range strings.Split(rest, ",") {
		p, v, ok := strings.Cut(kv, ":")
		if !ok || p != partition {
			continue
		}
		s, err := strconv.ParseFloat(v, 64)
		if err != nil || s <= 0 || s > 1e9 {
			return 0, false
		}
		return time.Duration(s * float64(time.Second)), true
	}
	return 0, false
}

// Holder is a running job's hold on a partition's nodes until End.
type Holder struct {
	ID        string
	Nodes     int
	End       time.Time
	Predicted bool // End is trainrun's prediction, not the limit
}

// Queue is what a partition's jobs say of when it frees.
type Queue struct {
	Holders []Holder // running, soonest end first
	Pending int      // jobs waiting for it
	// PendingNodes are the nodes the waiting jobs ask for (GrowFair).
	PendingNodes int
}

// Queues are the partitions' queues from Slurm's jobs: a running job's
// end is its StartTime plus its marked training time where that is sooner
// than its limit's EndTime (never later), else the EndTime. A pending job
// counts on each partition it lists.
func Queues(jobs []slurm.Job, loc *time.Location) map[string]*Queue {
	out := map[string]*Queue{}
	q := func(p string) *Queue {
		if out[p] == nil {
			out[p] = &Queue{}
		}
		return out[p]
	}
	for _, j := range jobs {
		switch j.State {
		case "PENDING", "REQUEUED", "REQUEUE_HOLD":
			n, _ := strconv.Atoi(j.Record["NumNodes"])
			for _, p := range strings.Split(j.Partition, ",") {
				q(p).Pending++
				q(p).PendingNodes += max(n, 1)
			}
		case "RUNNING", "COMPLETING", "SUSPENDED":
			n, _ := strconv.Atoi(j.Record["NumNodes"])
			h := Holder{ID: j.ID, Nodes: max(n, 1), End: j.EndTime}
			if d, ok := markedTrain(j.Record["Comment"], j.Partition); ok {
				if st, err := time.ParseInLocation("2006-01-02T15:04:05", j.Record["StartTime"], loc); err == nil {
					if end := st.Add(d); h.End.IsZero() || end.Before(h.End) {
						h.End, h.Predicted = end, true
					}
				}
			}
			q(j.Partition).Holders = append(q(j.Partition).Holders, h)
		}
	}
	for _, v := range out {
		sort.SliceStable(v.Holders, func(a, b int) bool { return v.Holders[a].End.Before(v.Holders[b].End) })
	}
	return out
}

// FreesAt is when need nodes of a partition with free nodes now are free,
// the holders ending as predicted; ok is false when it cannot say (jobs
// wait there, an end is unknown, or too few nodes ever free).
func (q *Queue) FreesAt(free, need int, now time.Time) (t time.Time, by []Holder, ok bool) {
	if free >= need {
		return now, nil, true
	}
	if q == nil || q.Pending > 0 {
		return time.Time{}, nil, false
	}
	for _, h := range q.Holders {
		if h.End.IsZero() {
			return time.Time{}, nil, false
		}
		free += h.Nodes
		by = append(by, h)
		if free >= need {
			return maxTime(h.End, now), by, true
		}
	}
	return time.Time{}, nil, false
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// BetterStarts moves a whole-node candidate's Start earlier than Slurm's
// where the partition frees sooner by trainrun's predictions (free: its
// idle nodes now), and says so in StartWhy. It returns how many moved.
func BetterStarts(cands []Candidate, queues map[string]*Queue, free map[string]int, now time.Time) int {
	moved := 0
	for i := range cands {
		c := &cands[i]
		if !c.Fits || c.Partial || c.Start.IsZero() || c.StartErr != "" {
			continue
		}
		t, by, ok := queues[c.Partition].FreesAt(free[c.Partition], c.Nodes, now)
		if !ok || !t.Before(c.Start) || !anyPredicted(by) {
			continue
		}
		c.StartWhy = fmt.Sprintf("start %s by trainrun's predictions (Slurm's --test-only: %s, the holders' limits): %s",
			rel(t, now), rel(c.Start, now), holders(by, now))
		c.SlurmStart, c.Start = c.Start, t
		moved++
	}
	return moved
}

func anyPredicted(hs []Holder) bool {
	for _, h := range hs {
		if h.Predicted {
			return true
		}
	}
	return false
}

func holders(hs []Holder, now time.Time) string {
	var s []string
	for _, h := range hs {
		kind := "its limit"
		if h.Predicted {
			kind = "predicted"
		}
		s = append(s, fmt.Sprintf("job %s ends in %s (%s)", h.ID, units.Seconds(max(0, h.End.Sub(now).Seconds())), kind))
	}
	return strings.Join(s, ", ")
}
