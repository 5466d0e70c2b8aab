package submit

import (
	"strings"
	"testing"
	"time"

	"github.com/trainrun/trainrun/internal/slurm"
)

func TestMarkRoundTrip(t *testing.T) {
	cs := []Candidate{{Partition: "hopper", TrainS: 3600.4}, {Partition: "ampere", TrainS: 7200}}
	m := Mark(cs, []int{0, 1})
	if m != "trainrun-submit:train_s=hopper:3600,ampere:7200" {
		t.Fatalf("Mark = %q", m)
	}
	if d, ok := markedTrain(m, "ampere"); !ok || d != 2*time.Hour {
		t.Errorf("ampere: %v %v", d, ok)
	}
	for _, c := range []struct{ comment, part string }{{m, "v100"}, {"my own comment", "hopper"}, {"trainrun-submit:train_s=hopper:x", "hopper"}, {"trainrun-submit:train_s=hopper:-5", "hopper"}} {
		if _, ok := markedTrain(c.comment, c.part); ok {
			t.Errorf("%q on %s: marked", c.comment, c.part)
		}
	}
}

func job(id, state, part string, nodes, start string, end time.Time, comment string) slurm.Job {
	return slurm.Job{ID: id, State: state, Partition: part, EndTime: end,
		Record: slurm.Record{"NumNodes": nodes, "StartTime": start, "Comment": comment}}
}

// A partition held by a job trainrun submitted frees when that job is
// predicted to end, not at its limit; one held by another job, or with
// jobs waiting, keeps Slurm's estimate.
func TestBetterStarts(t *testing.T) {
	now := time.Date(2026, 12, 4, 22, 0, 0, 0, time.UTC)
	started := now.Add(-10 * time.Minute).Format("2006-01-02T15:04:05")
	limitEnd := now.Add(50 * time.Minute)
	jobs := []slurm.Job{
		job("1", "RUNNING", "hopper", "2", started, limitEnd, "trainrun-submit:train_s=hopper:1200,ampere:3000"), // ends in 10 min
		job("2", "RUNNING", "ampere", "2", started, limitEnd, "someone else's"),
		job("3", "RUNNING", "v100", "1", started, limitEnd, "trainrun-submit:train_s=v100:600"),
		job("4", "PENDING", "v100,ampere", "1", "Unknown", time.Time{}, ""),
	}
	qs := Queues(jobs, time.UTC)
	if h := qs["hopper"].Holders[0]; !h.Predicted || !h.End.Equal(now.Add(10*time.Minute)) {
		t.Errorf("hopper's holder %+v, want predicted to end in 10 min", h)
	}
	if qs["ampere"].Pending != 1 || qs["v100"].Pending != 1 || qs["ampere"].Holders[0].Predicted {
		t.Errorf("ampere %+v, v100 %+v", qs["ampere"], qs["v100"])
	}
	cands := []Candidate{
		{Partition: "hopper", Nodes: 2, Fits: true, Start: limitEnd},
		{Partition: "ampere", Nodes: 2, Fits: true, Start: limitEnd},
		{Partition: "v100", Nodes: 1, Fits: true, Start: limitEnd},
		{Partition: "hopper", Nodes: 1, GPUsPerNode: 4, Partial: true, Fits: true, Start: limitEnd},
	}
	if n := BetterStarts(cands, qs, map[string]int{}, nil, now); n != 1 {
		t.Errorf("%d moved, want 1 (hopper's whole-node candidate)", n)
	}
	if h := cands[0]; !h.Start.Equal(now.Add(10*time.Minute)) || !h.SlurmStart.Equal(limitEnd) || !strings.Contains(h.StartWhy, "job 1 ends in 10m") {
		t.Errorf("hopper: start %v (Slurm %v), why %q", h.Start, h.SlurmStart, h.StartWhy)
	}
	for _, c := range cands[1:] {
		if !c.Start.Equal(limitEnd) || c.StartWhy != "" {
			t.Errorf("%s (partial %v): moved to %v: %q", c.Partition, c.Partial, c.Start, c.StartWhy)
		}
	}
	// A prediction never moves an end past the limit.
	late := Queues([]slurm.Job{job("5", "RUNNING", "hopper", "2", started, now.Add(time.Minute), "trainrun-submit:train_s=hopper:99999")}, time.UTC)
	if h := late["hopper"].Holders[0]; h.Predicted || !h.End.Equal(now.Add(time.Minute)) {
		t.Errorf("prediction past the limit: %+v", h)
	}
	// Enough idle nodes: at once; too few ever: no estimate.
	if st, _, ok := qs["hopper"].FreesAt(2, 2, now); !ok || !st.Equal(now) {
		t.Errorf("idle: %v %v", st, ok)
	}
	if _, _, ok := qs["hopper"].FreesAt(0, 5, now); ok {
		t.Error("5 nodes of 2: an estimate")
	}
}

// Slowdown per user and account: a running trainrun job submitted 10 min
// before a 10-minute prediction started it is at 2; a pending one at
// least (waited + train) / train; others' jobs are counted, not judged.
func TestFairness(t *testing.T) {
	now := time.Date(2026, 12, 4, 22, 0, 0, 0, time.UTC)
	ts := func(d time.Duration) string { return now.Add(d).Format("2006-01-02T15:04:05") }
	mk := func(id, state, part, user, acct, submit, start, comment string) slurm.Job {
		return slurm.Job{ID: id, State: state, Partition: part, Record: slurm.Record{"UserId": user, "Account": acct,
			"SubmitTime": submit, "StartTime": start, "Comment": comment}}
	}
	jobs := []slurm.Job{
		mk("1", "RUNNING", "hopper", "alice(1000)", "nlp", ts(-15*time.Minute), ts(-5*time.Minute), "trainrun-submit:train_s=hopper:600"),
		mk("2", "PENDING", "hopper,ampere", "bob(1001)", "vision", ts(-30*time.Minute), "Unknown", "trainrun-submit:train_s=hopper:600,ampere:1200"),
		mk("3", "RUNNING", "ampere", "alice(1000)", "nlp", ts(-time.Hour), ts(-time.Hour), "their own"),
		mk("4", "COMPLETED", "ampere", "carol(1002)", "nlp", ts(-time.Hour), ts(-time.Hour), "trainrun-submit:train_s=ampere:60"),
	}
	gs := Fairness(jobs, time.UTC, now)
	if len(gs) != 2 {
		t.Fatalf("%d groups: %+v", len(gs), gs)
	}
	bob, alice := gs[0], gs[1]
	if bob.User != "bob" || bob.Pending != 1 || bob.Marked != 1 || bob.MaxSlow != 4 { // (30 + 10) / 10
		t.Errorf("bob %+v, want slowdown 4 (pending: waited 30 min for 10)", bob)
	}
	if alice.User != "alice" || alice.Account != "nlp" || alice.Running != 2 || alice.Marked != 1 || alice.MeanSlow != 2 {
		t.Errorf("alice %+v, want 2 running, one trainrun job at slowdown 2", alice)
	}
}

// A mark with tokens keeps the older reader's partitions, and scontrol's
// record parser keeps it whole in the comment.
func TestMarkTokens(t *testing.T) {
	m := MarkTokens(Mark([]Candidate{{Partition: "hopper", TrainS: 1200}, {Partition: "ampere", TrainS: 3000}}, []int{0, 1}), 2e9)
	if m != "trainrun-submit:train_s=hopper:1200,ampere:3000 tokens=2000000000" {
		t.Fatalf("MarkTokens = %q", m)
	}
	r := slurm.ParseRecord("JobId=7 Comment=" + m + " NumNodes=2")
	if r["Comment"] != m || r["NumNodes"] != "2" {
		t.Fatalf("parsed %q", r)
	}
	if d, ok := markedTrain(m, "ampere"); !ok || d != 50*time.Minute {
		t.Errorf("ampere: %v %v", d, ok)
	}
	if n, ok := markedTokens(m); !ok || n != 2e9 {
		t.Errorf("tokens %v %v", n, ok)
	}
	for _, c := range []string{Mark(nil, nil), "my own tokens=5", "trainrun-submit:train_s=hopper:1 tokens=x", "trainrun-submit:train_s=hopper:1 tokens=-3"} {
		if _, ok := markedTokens(c); ok {
			t.Errorf("%q: tokens", c)
		}
	}
	if MarkTokens("m", 0) != "m" {
		t.Error("no tokens: the mark alone")
	}
}

// A running job's end from its trainer's rate so far: later than predicted
// when it runs slow, earlier when fast, never past its limit; without
// progress or tokens in its mark, the prediction stands.
func TestQueuesObserved(t *testing.T) {
	now := time.Date(2026, 12, 4, 22, 0, 0, 0, time.UTC)
	st := now.Add(-10 * time.Minute)
	started := st.Format("2006-01-02T15:04:05")
	limit := now.Add(50 * time.Minute)
	mark := "trainrun-submit:train_s=hopper:1200 tokens=1000" // predicted: 20 min, ends in 10
	jobs := []slurm.Job{
		job("1", "RUNNING", "hopper", "1", started, limit, mark),                                              // a quarter done in 10 min: ends 40 min after start
		job("2", "RUNNING", "hopper", "1", started, limit, mark),                                              // 4/5 done: ends 12.5 min after start
		job("3", "RUNNING", "hopper", "1", started, limit, mark),                                              // barely started: it runs to its limit
		job("4", "RUNNING", "hopper", "1", started, limit, "trainrun-submit:train_s=hopper:1200"),             // no tokens in the mark
		job("5", "RUNNING", "hopper", "1", started, limit, mark),                                              // no progress read
		job("6", "RUNNING", "hopper", "1", started, limit, "trainrun-submit:train_s=hopper:1200 tokens=1000"), // progress from before its start
	}
	prog := map[string]Progress{"1": {250, now}, "2": {800, now}, "3": {1, now}, "4": {500, now}, "6": {500, st.Add(-time.Minute)}}
	q := QueuesObserved(jobs, time.UTC, func(j slurm.Job) (Progress, bool) { p, ok := prog[j.ID]; return p, ok })["hopper"]
	want := map[string]struct {
		end      time.Time
		observed bool
	}{
		"1": {st.Add(40 * time.Minute), true}, "2": {st.Add(12*time.Minute + 30*time.Second), true},
		"3": {limit, false}, "4": {st.Add(20 * time.Minute), false},
		"5": {st.Add(20 * time.Minute), false}, "6": {st.Add(20 * time.Minute), false},
	}
	for _, h := range q.Holders {
		w := want[h.ID]
		if !h.End.Equal(w.end) || h.Observed != w.observed || h.Predicted != (h.ID != "3") {
			t.Errorf("job %s: end %s observed %v predicted %v, want %s %v", h.ID, h.End.Sub(st), h.Observed, h.Predicted, w.end.Sub(st), w.observed)
		}
	}
	if got := holders(q.Holders[:1], now); !strings.Contains(got, "at its rate so far") {
		t.Errorf("holders: %q", got)
	}
	if _, ok := ObservedEnd(st, 1000, Progress{1000, now}); !ok {
		t.Error("done: ends at its report")
	}
}
