package submit

import (
	"strings"
	"testing"
	"time"
)

func lateCands(now time.Time) []Candidate {
	c := func(part string, nodes, perNode int, start, train time.Duration, limit time.Duration) Candidate {
		return Candidate{Partition: part, Nodes: nodes, GPUs: nodes * perNode, GPUsPerNode: perNode, Fits: true,
			Start: now.Add(start), Finish: now.Add(start + train), TimeLimit: limit}
	}
	return []Candidate{
		c("h100", 2, 8, 10*time.Minute, 50*time.Minute, 60*time.Minute), // 60 min: the best
		c("a100", 2, 8, 0, 65*time.Minute, 80*time.Minute),              // 65: within 15 %
		c("a100", 1, 8, 0, 64*time.Minute, 80*time.Minute),              // another size: not one request with the best
		c("v100", 2, 8, 0, 90*time.Minute, 100*time.Minute),             // 90: too slow
		c("l40s", 2, 8, 0, 62*time.Minute, 70*time.Minute),              // 62: within, finishes before a100
	}
}

func TestLateBind(t *testing.T) {
	now := time.Date(2026, 12, 4, 22, 0, 0, 0, time.UTC)
	cs := lateCands(now)
	list := LateBind(cs, 0, 0.15, now)
	if len(list) != 3 || list[0] != 0 || list[1] != 4 || list[2] != 1 {
		t.Fatalf("list %v, want [0 4 1]: the best, then l40s and a100 by finish", list)
	}
	if !strings.Contains(cs[1].Why, "late-bound") || strings.Contains(cs[3].Why, "late-bound") {
		t.Errorf("whys: a100 %q, v100 %q", cs[1].Why, cs[3].Why)
	}
	if lim := Limit(cs, list); lim != 80*time.Minute {
		t.Errorf("limit %v: want the slowest's 80m", lim)
	}
	if l := LateBind(lateCands(now), 0, 0, now); len(l) != 1 {
		t.Errorf("margin 0: %v, want the chosen alone", l)
	}
	cs = lateCands(now)
	cs[1].StartErr, cs[4].Capped = "refused", true
	if l := LateBind(cs, 0, 0.15, now); len(l) != 1 {
		t.Errorf("refused and capped: %v, want the chosen alone", l)
	}
	if lim := Limit(cs, []int{0}); lim != 60*time.Minute {
		t.Errorf("one: %v", lim)
	}
}

// A partition is listed at the chosen's size only when that size is about
// as good there as the partition's best: 8 a100s that take twice as long
// as 16 a100s are not listed with 8 h100s; a dropped size is not the best.
func TestLateBindAtItsBestSize(t *testing.T) {
	now := time.Date(2026, 12, 7, 23, 34, 18, 0, time.UTC)
	c := func(part string, nodes int, start, train time.Duration) Candidate {
		return Candidate{Partition: part, Nodes: nodes, GPUs: 8 * nodes, GPUsPerNode: 8, Fits: true,
			Start: now.Add(start), Finish: now.Add(start + train), TimeLimit: time.Hour}
	}
	mk := func() []Candidate {
		return []Candidate{
			c("hopper", 1, 31*time.Second, 22*time.Second), // chosen: 53 s
			c("ampere", 1, 12*time.Second, 93*time.Second), // 105 s: within 100 % of the chosen, 1.84× ampere's best
			c("ampere", 2, 12*time.Second, 45*time.Second), // 57 s: ampere's best
		}
	}
	cs := mk()
	if l := LateBind(cs, 0, 1, now); len(l) != 1 || !strings.Contains(cs[1].Why, "after the best size on ampere") {
		t.Fatalf("list %v, ampere×8 why %q: want the chosen alone", l, cs[1].Why)
	}
	cs = mk()
	cs[2].Dropped, cs[2].Finish = "sizing grows only into free nodes", time.Time{}
	if l := LateBind(cs, 0, 1, now); len(l) != 2 || l[1] != 1 {
		t.Fatalf("ampere×16 dropped: list %v, want ampere×8 listed", l)
	}
	cs = mk()
	cs[1].Finish = now.Add(65 * time.Second) // within 15 % of ampere's best
	if l := LateBind(cs, 0, 1, now); len(l) != 2 || l[1] != 1 {
		t.Fatalf("ampere×8 near its best: list %v", l)
	}
}

// A size dominated on its partition (another finishes no later with fewer
// GPU-seconds) is not listed, even within 15 % of the best.
func TestLateBindNotDominated(t *testing.T) {
	now := time.Date(2026, 12, 7, 23, 59, 45, 0, time.UTC)
	c := func(part string, nodes int, start, train time.Duration) Candidate {
		return Candidate{Partition: part, Nodes: nodes, GPUs: 8 * nodes, GPUsPerNode: 8, Fits: true, TrainS: train.Seconds(),
			Start: now.Add(start), Finish: now.Add(start + train), TimeLimit: time.Hour}
	}
	cs := []Candidate{
		c("hopper", 1, 35*time.Second, 18*time.Second), // chosen: 53 s
		c("ampere", 1, 25*time.Second, 67*time.Second), // 92 s, 536 GPU-s
		c("ampere", 2, 56*time.Second, 28*time.Second), // 84 s, 448 GPU-s: sooner and cheaper
	}
	if l := LateBind(cs, 0, 1, now); len(l) != 1 || !strings.Contains(cs[1].Why, "take fewer GPU-seconds") {
		t.Fatalf("list %v, ampere×8 why %q: want the chosen alone", l, cs[1].Why)
	}
	cs[2].TrainS = 40 // dearer at 16: ampere×8 is not dominated
	if l := LateBind(cs, 0, 1, now); len(l) != 2 {
		t.Fatalf("list %v, ampere×8 why %q: want it listed", l, cs[1].Why)
	}
}
