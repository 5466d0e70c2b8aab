package submit

import (
	"cmp"
	"sort"
	"strings"
	"time"

	"github.com/trainrun/trainrun/internal/slurm"
)

// Fairness (issue 34): a cluster shared by teams is judged by each team's
// slowdown, a job's completion time over its run time alone, not by the
// mean: a scheduler that speeds large jobs by delaying small ones looks
// good on the mean. For the jobs trainrun submitted (their comment holds
// their predicted training time, Mark) the slowdown so far is known: a
// running job's is (predicted end − submission) / training time, a pending
// one's at least (now − submission + training time) / training time.

// GroupSlowdown is one user and account's jobs in the queue.
type GroupSlowdown struct {
	User     string  `json:"user"`
	Account  string  `json:"account"`
	Running  int     `json:"running"`
	Pending  int     `json:"pending"`
	Marked   int     `json:"trainrun_jobs"` // of which trainrun submitted (with a predicted time)
	MeanSlow float64 `json:"mean_slowdown"` // over Marked; 0 when none
	MaxSlow  float64 `json:"max_slowdown"`
}

// Fairness groups the running and pending jobs by user and account, with
// the slowdown of trainrun's, worst first.
func Fairness(jobs []slurm.Job, loc *time.Location, now time.Time) []GroupSlowdown {
	by := map[[2]string]*GroupSlowdown{}
	var keys [][2]string
	for _, j := range jobs {
		pending := j.State == "PENDING" || j.State == "REQUEUED"
		if !pending && j.State != "RUNNING" && j.State != "COMPLETING" && j.State != "SUSPENDED" {
			continue
		}
		user, _, _ := strings.Cut(j.Record["UserId"], "(")
		k := [2]string{cmp.Or(user, "?"), cmp.Or(j.Record["Account"], "(null)")}
		g := by[k]
		if g == nil {
			g = &GroupSlowdown{User: k[0], Account: k[1]}
			by[k] = g
			keys = append(keys, k)
		}
		if pending {
			g.Pending++
		} else {
			g.Running++
		}
		if s, ok := slowdown(j, pending, loc, now); ok {
			g.MeanSlow = (g.MeanSlow*float64(g.Marked) + s) / float64(g.Marked+1)
			g.MaxSlow = max(g.MaxSlow, s)
			g.Marked++
		}
	}
	out := make([]GroupSlowdown, 0, len(keys))
	for _, k := range keys {
		out = append(out, *by[k])
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].MaxSlow > out[b].MaxSlow })
	return out
}

// slowdown is a trainrun job's slowdown so far; ok is false for another's
// job or one whose times Slurm does not give.
func slowdown(j slurm.Job, pending bool, loc *time.Location, now time.Time) (float64, bool) {
	at := func(k string) (time.Time, bool) {
		t, err := time.ParseInLocation("2006-01-02T15:04:05", j.Record[k], loc)
		return t, err == nil
	}
	sub, ok := at("SubmitTime")
	if !ok {
		return 0, false
	}
	part := j.Partition
	if pending { // the list's first: the chosen partition's prediction
		part, _, _ = strings.Cut(part, ",")
	}
	train, ok := markedTrain(j.Record["Comment"], part)
	if !ok || train <= 0 {
		return 0, false
	}
	end := now.Add(train)
	if !pending {
		st, ok := at("StartTime")
		if !ok {
			return 0, false
		}
		end = st.Add(train)
		if e := j.EndTime; !e.IsZero() && e.Before(end) {
			end = e
		}
	}
	return max(1, end.Sub(sub).Seconds()/train.Seconds()), true
}
