package submit

import (
	"fmt"
	"math"
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
	Observed  bool // of which from the trainer's progress so far (QueuesObserved)
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
	return QueuesObserved(jobs, loc, nil)
}

// QueuesObserved is Queues where a marked running job whose mark carries
// its tokens (MarkTokens) and whose trainer has reported (progress; nil =
// none read) ends at its rate so far (ObservedEnd) instead of as
// predicted; one whose rate reaches past its limit ends at the limit.
func QueuesObserved(jobs []slurm.Job, loc *time.Location, progress func(slurm.Job) (Progress, bool)) map[string]*Queue {
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
			n := leadingInt(j.Record["NumNodes"]) // "2-2" while pending
			for _, p := range strings.Split(j.Partition, ",") {
				q(p).Pending++
				q(p).PendingNodes += n
			}
		case "RUNNING", "COMPLETING", "SUSPENDED":
			h := holderOf(j, loc, progress)
			q(j.Partition).Holders = append(q(j.Partition).Holders, h)
		}
	}
	for _, v := range out {
		sort.SliceStable(v.Holders, func(a, b int) bool { return v.Holders[a].End.Before(v.Holders[b].End) })
	}
	return out
}

// holderOf is a running job's hold: its end is its StartTime plus its
// marked training time where that is sooner than its limit's EndTime, or
// its trainer's rate so far (never past the limit), else the EndTime.
func holderOf(j slurm.Job, loc *time.Location, progress func(slurm.Job) (Progress, bool)) Holder {
	n, _ := strconv.Atoi(j.Record["NumNodes"])
	h := Holder{ID: j.ID, Nodes: max(n, 1), End: j.EndTime}
	d, ok := markedTrain(j.Record["Comment"], j.Partition)
	if !ok {
		return h
	}
	st, err := time.ParseInLocation("2006-01-02T15:04:05", j.Record["StartTime"], loc)
	if err != nil {
		return h
	}
	limit := h.End
	if end := st.Add(d); h.End.IsZero() || end.Before(h.End) {
		h.End, h.Predicted = end, true
	}
	if end, ok := observed(j, st, progress); ok {
		if limit.IsZero() || end.Before(limit) {
			h.End, h.Predicted, h.Observed = end, true, true
		} else { // too slow to end before its limit: the limit it is
			h.End, h.Predicted = limit, false
		}
	}
	return h
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

// observed is a marked job's end from its trainer's progress; ok is false
// without progress or without its tokens in the mark.
func observed(j slurm.Job, start time.Time, progress func(slurm.Job) (Progress, bool)) (time.Time, bool) {
	if progress == nil {
		return time.Time{}, false
	}
	total, ok := markedTokens(j.Record["Comment"])
	if !ok {
		return time.Time{}, false
	}
	p, ok := progress(j)
	if !ok {
		return time.Time{}, false
	}
	return ObservedEnd(start, total, p)
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// BetterStarts moves a whole-node candidate's Start earlier than Slurm's
// where the partition frees sooner by trainrun's predictions (free: its
// idle nodes now), and says so in StartWhy. Where jobs wait there, the
// queue simulation tl says it (nil = none), when trainrun's figures moved
// it. It returns how many moved.
func BetterStarts(cands []Candidate, queues map[string]*Queue, free map[string]int, tl *Timeline, now time.Time) int {
	moved := 0
	for i := range cands {
		c := &cands[i]
		if !c.Fits || c.Partial || c.Start.IsZero() || c.StartErr != "" {
			continue
		}
		var t time.Time
		var ok bool
		why := ""
		if q := queues[c.Partition]; q != nil && q.Pending > 0 {
			if tl != nil && tl.predicted[c.Partition] { // jobs wait there: the replay says it
				t, ok = tl.StartOn(c.Partition, c.Nodes)
				why = fmt.Sprintf("the queue replayed with trainrun's predicted runs, %d waiting job(s) first", tl.ahead[c.Partition])
			}
		} else {
			var by []Holder
			t, by, ok = q.FreesAt(free[c.Partition], c.Nodes, now)
			ok = ok && anyPredicted(by)
			why = holders(by, now)
		}
		if !ok || !t.Before(c.Start) {
			continue
		}
		c.StartWhy = fmt.Sprintf("start %s by trainrun's predictions (Slurm's --test-only: %s, the jobs' limits): %s",
			rel(t, now), rel(c.Start, now), why)
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
		switch {
		case h.Observed:
			kind = "at its rate so far"
		case h.Predicted:
			kind = "predicted"
		}
		s = append(s, fmt.Sprintf("job %s ends in %s (%s)", h.ID, units.Seconds(max(0, h.End.Sub(now).Seconds())), kind))
	}
	return strings.Join(s, ", ")
}

// Observed progress (issue 34): a running job's trainer reports the tokens
// it has trained (its job directory's launch/progress), and its mark
// carries the job's total tokens (" tokens=N", MarkTokens); its rate so far
// then says its end better than the prediction, slower or faster.

// tokensKey follows the partitions in a mark after a space: scontrol keeps
// it in the comment (a lower-case word is not a new field), and readers of
// the older mark stop at the space.
const tokensKey = " tokens="

// MarkTokens is a mark (Mark) with the job's total tokens; the mark alone
// without them (tokens <= 0).
func MarkTokens(mark string, tokens float64) string {
	if tokens <= 0 {
		return mark
	}
	return fmt.Sprintf("%s%s%.0f", mark, tokensKey, tokens)
}

// markedTokens is a mark's total tokens; ok is false without them.
func markedTokens(comment string) (float64, bool) {
	if !strings.HasPrefix(strings.TrimSpace(comment), markPrefix) {
		return 0, false
	}
	_, v, ok := strings.Cut(comment, tokensKey)
	if !ok {
		return 0, false
	}
	v, _, _ = strings.Cut(v, " ")
	n, err := strconv.ParseFloat(v, 64)
	return n, err == nil && n > 0 && !math.IsInf(n, 0)
}

// Progress is what a running job's trainer last reported: Tokens trained
// by At.
type Progress struct {
	Tokens float64
	At     time.Time
}

// ObservedEnd is when a job started at start, of total tokens, ends at its
// rate so far: start + (At − start) × total / Tokens. The rate includes
// its setup, so it errs late, not early. ok is false without progress to
// go by (no tokens yet, a report from before the start).
func ObservedEnd(start time.Time, total float64, p Progress) (time.Time, bool) {
	el := p.At.Sub(start)
	if p.Tokens <= 0 || total <= 0 || el <= 0 {
		return time.Time{}, false
	}
	if p.Tokens >= total {
		return p.At, true
	}
	return start.Add(time.Duration(float64(el) * total / p.Tokens)), true
}
