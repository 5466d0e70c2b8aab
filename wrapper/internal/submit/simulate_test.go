package submit

import (
	"strings"
	"testing"
	"time"

	"github.com/trainrun/trainrun/internal/slurm"
)

// simParts are hopper n1-n2, ampere n3-n5 and volta n6, in the states given.
func simParts(states map[string]string) []PartitionInfo {
	part := func(name string, nodes ...string) PartitionInfo {
		pi := PartitionInfo{Partition: slurm.Partition{Name: name}}
		for _, n := range nodes {
			st := states[n]
			if st == "" {
				st = "IDLE"
			}
			pi.Nodes = append(pi.Nodes, slurm.Node{Name: n, State: st})
		}
		return pi
	}
	return []PartitionInfo{part("hopper", "n1", "n2"), part("ampere", "n3", "n4", "n5"), part("volta", "n6")}
}

func simJob(id, state, part, nodes, nodeList, start string, end time.Time, limit time.Duration, comment, prio, reason string) slurm.Job {
	return slurm.Job{ID: id, State: state, Partition: part, EndTime: end, TimeLimit: limit,
		Record: slurm.Record{"NumNodes": nodes, "NodeList": nodeList, "StartTime": start, "Comment": comment, "Priority": prio, "Reason": reason,
			"SubmitTime": "2026-12-04T21:59:00"}}
}

// The bench's case (trace 2, job 13): ampere's three nodes are two held by
// a trainrun job predicted to end in 30 s (its limit: 100 s) and one idle,
// which a waiting 2-node job of higher priority will take. Slurm's
// --test-only, by the limits, starts a 1-node job there in minutes; the
// replay says when the running job ends as predicted: 30 s. A waiting
// job listed on two partitions takes the one it starts in first, a held
// one takes none, and one with no limit leaves its partition unknown.
func TestSimulatedStarts(t *testing.T) {
	now := time.Date(2026, 12, 4, 22, 0, 0, 0, time.UTC)
	started := now.Add(-20 * time.Second).Format("2006-01-02T15:04:05")
	infos := simParts(map[string]string{"n3": "ALLOCATED", "n4": "ALLOCATED"})
	jobs := []slurm.Job{
		simJob("5", "RUNNING", "ampere", "2", "n[3-4]", started, now.Add(100*time.Second), 2*time.Minute, "trainrun-submit:train_s=ampere:50", "10", "None"),
		simJob("10", "PENDING", "ampere", "2-2", "", "Unknown", time.Time{}, 2*time.Minute, "trainrun-submit:train_s=ampere:30,hopper:10", "20", "Resources"),
		simJob("11", "PENDING", "hopper,ampere", "1-1", "", "Unknown", time.Time{}, 2*time.Minute, "trainrun-submit:train_s=hopper:40,ampere:80", "5", "Priority"),
		simJob("12", "PENDING", "ampere", "3-3", "", "Unknown", time.Time{}, time.Hour, "", "30", "JobHeldUser"),
	}
	tl := Simulate(infos, jobs, time.UTC, now, nil)
	// Job 10 first (priority 20): two of ampere's nodes, in 30 s (n5 and n3
	// or n4, freed by job 5), until 60 s. Job 11 then (priority 5): hopper's
	// idle n1 at once (until 40 s) against ampere's last node in 30 s:
	// hopper. Job 12 is held.
	if at, ok := tl.StartOn("hopper", 2); !ok || !at.Equal(now.Add(40*time.Second)) {
		t.Errorf("hopper × 2 after the waiting jobs: %v %v, want in 40 s (job 11 on one node until then)", at, ok)
	}
	if at, ok := tl.StartOn("ampere", 1); !ok || !at.Equal(now.Add(30*time.Second)) {
		t.Errorf("ampere × 1: %v %v, want in 30 s (job 5 ends as predicted; job 10 takes the other two)", at, ok)
	}
	if at, ok := tl.StartOn("ampere", 3); !ok || !at.Equal(now.Add(60*time.Second)) {
		t.Errorf("ampere × 3: %v %v, want in 60 s (job 10 ends)", at, ok)
	}
	if tl.ahead["hopper"] != 1 || tl.ahead["ampere"] != 1 {
		t.Errorf("waiting jobs placed: %v, want one each (job 12 is held)", tl.ahead)
	}
	if at, ok := tl.StartOn("volta", 1); !ok || !at.Equal(now) {
		t.Errorf("volta: %v %v, want at once", at, ok)
	}
	if _, ok := tl.StartOn("volta", 2); ok {
		t.Error("volta × 2 of 1 node: an estimate")
	}
	cands := []Candidate{
		{Partition: "ampere", Nodes: 1, Fits: true, Start: now.Add(160 * time.Second)},
		{Partition: "volta", Nodes: 1, Fits: true, Start: now},
	}
	if n := BetterStarts(cands, Queues(jobs, time.UTC), map[string]int{"ampere": 1, "volta": 1, "hopper": 2}, tl, now); n != 1 {
		t.Errorf("%d moved, want 1 (ampere)", n)
	}
	if c := cands[0]; !c.Start.Equal(now.Add(30*time.Second)) || !strings.Contains(c.StartWhy, "replayed") {
		t.Errorf("ampere: start %v, why %q", c.Start, c.StartWhy)
	}

	// A waiting job with no limit and no mark: ampere's start is unknown,
	// and Slurm's stands.
	nolimit := append(append([]slurm.Job{}, jobs...), simJob("13", "PENDING", "ampere", "1", "", "Unknown", time.Time{}, 0, "", "40", "Priority"))
	if _, ok := Simulate(infos, nolimit, time.UTC, now, nil).StartOn("ampere", 1); ok {
		t.Error("a waiting job without a limit: ampere still estimated")
	}
	// A node allocated to a job trainrun cannot see is unknown: ampere has
	// two known nodes then, and a 3-node start is not estimated.
	hidden := simParts(map[string]string{"n3": "ALLOCATED"})
	if _, ok := Simulate(hidden, nil, time.UTC, now, nil).StartOn("ampere", 3); ok {
		t.Error("a node held by an unseen job: estimated")
	}
	if at, ok := Simulate(hidden, nil, time.UTC, now, nil).StartOn("ampere", 2); !ok || !at.Equal(now) {
		t.Errorf("ampere × 2 on its two idle nodes: %v %v", at, ok)
	}
}
