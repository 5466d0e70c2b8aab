package submit

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/trainrun/trainrun/internal/slurm"
)

// A larger size that waits longer than the smallest on its partition is
// dropped; one that starts as soon is kept; each partition on its own.
func TestNoWaitToGrow(t *testing.T) {
	now := time.Date(2026, 12, 4, 22, 0, 0, 0, time.UTC)
	cs := []Candidate{
		{Partition: "hopper", GPUs: 8, Fits: true, Start: now},
		{Partition: "hopper", GPUs: 16, Fits: true, Start: now.Add(5 * time.Minute)},
		{Partition: "ampere", GPUs: 8, Fits: true, Start: now.Add(time.Minute)},
		{Partition: "ampere", GPUs: 16, Fits: true, Start: now.Add(time.Minute)},
		{Partition: "v100", GPUs: 8, Fits: false},
		{Partition: "v100", GPUs: 16, Fits: true, Start: now.Add(time.Hour)},
	}
	if n := NoWaitToGrow(cs); n != 1 {
		t.Errorf("dropped %d, want 1", n)
	}
	if !strings.Contains(cs[1].Dropped, "16 GPUs start 5m") {
		t.Errorf("hopper×16: %q", cs[1].Dropped)
	}
	for _, i := range []int{0, 2, 3, 5} {
		if cs[i].Dropped != "" {
			t.Errorf("%s×%d dropped: %q", cs[i].Partition, cs[i].GPUs, cs[i].Dropped)
		}
	}
	if _, err := Choose(cs, Finish, now); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(cs[1].Why, "sizing does not wait") {
		t.Errorf("why %q", cs[1].Why)
	}
}

// A larger size that waits but takes no more GPU-seconds than the smallest
// (a model that scales better than linearly) is kept by both rules; one
// that is dearer by a hair is not; a frugal size that would start at once
// still leaves room for the next small job.
func TestFrugalGrowth(t *testing.T) {
	now := time.Date(2026, 12, 7, 23, 0, 0, 0, time.UTC)
	mk := func(t16 float64, start16 time.Duration) []Candidate {
		return []Candidate{
			{Partition: "hopper", GPUs: 8, Nodes: 1, Fits: true, Start: now.Add(20 * time.Second), TrainS: 36},
			{Partition: "hopper", GPUs: 16, Nodes: 2, Fits: true, Start: now.Add(start16), TrainS: t16},
		}
	}
	busy := Room{Idle: map[string]int{"hopper": 0}}
	cs := mk(16.4, 34*time.Second) // 262 GPU-s against 288
	if NoWaitToGrow(cs) != 0 || GrowFair(cs, busy) != 0 {
		t.Fatalf("frugal 16 dropped: %q", cs[1].Dropped)
	}
	if c, err := Choose(cs, Finish, now); err != nil || c != 1 {
		t.Fatalf("chose %d (%v), want the 16 that finishes at 50s against 56s: %+v", c, err, cs)
	}
	cs = mk(18.01, 34*time.Second) // 288.2 GPU-s: dearer
	if NoWaitToGrow(cs) != 1 || !strings.Contains(cs[1].Dropped, "does not wait to grow") {
		t.Fatalf("dearer 16 kept: %q", cs[1].Dropped)
	}
	cs = mk(16.4, 20*time.Second) // starts with the 8, no node spare: it waits in the queue either way
	if NoWaitToGrow(cs) != 0 || GrowFair(cs, busy) != 0 {
		t.Fatalf("frugal 16 waiting with the 8: %q", cs[1].Dropped)
	}
	cs = mk(16.4, 20*time.Second) // both nodes idle: growing into them leaves no room for the next small job
	if GrowFair(cs, Room{Idle: map[string]int{"hopper": 2}}) != 1 || !strings.Contains(cs[1].Dropped, "leaves room for the next small job") {
		t.Fatalf("frugal 16 into the last idle nodes: %q", cs[1].Dropped)
	}
	if Frugal(&cs[0], &cs[0]) || Frugal(&Candidate{GPUs: 16}, &Candidate{GPUs: 8, TrainS: 10}) {
		t.Error("Frugal of the same size or an unknown time")
	}
}

// GrowFair: a size larger than the smallest qualifies only into idle
// nodes no pending job wants, and only if a next small job still has room;
// the smallest sizes and partitions of unknown idleness are kept.
func TestGrowFair(t *testing.T) {
	now := time.Date(2026, 12, 4, 22, 0, 0, 0, time.UTC)
	mk := func() []Candidate {
		return []Candidate{
			{Partition: "hopper", GPUs: 8, Nodes: 1, Fits: true, Start: now},
			{Partition: "hopper", GPUs: 16, Nodes: 2, Fits: true, Start: now},
			{Partition: "ampere", GPUs: 8, Nodes: 1, Fits: true, Start: now},
			{Partition: "ampere", GPUs: 16, Nodes: 2, Fits: true, Start: now},
		}
	}
	dropped := func(cs []Candidate) (out []string) {
		for _, c := range cs {
			if c.Dropped != "" {
				out = append(out, c.Partition+"×"+strconv.Itoa(c.GPUs))
			}
		}
		return out
	}
	cases := []struct {
		name          string
		idle, pending map[string]int
		want          []string
		why           string
	}{
		{"all idle: either may grow, the other partition is the reserve", map[string]int{"hopper": 2, "ampere": 2}, nil, nil, ""},
		{"the other partition busy: growing would leave no room", map[string]int{"hopper": 2, "ampere": 0}, nil, []string{"hopper×16", "ampere×16"}, "leaves room for the next small job: 16 GPUs would leave 0 free nodes"},
		{"one node idle: 16 does not fit in it", map[string]int{"hopper": 1, "ampere": 2}, nil, []string{"hopper×16"}, "hopper has 1 idle"},
		{"a pending job wants hopper's idle node", map[string]int{"hopper": 2, "ampere": 2}, map[string]int{"hopper": 1}, []string{"hopper×16"}, "hopper has 1 idle that no pending job wants"},
		{"pending jobs want every idle node", map[string]int{"hopper": 2, "ampere": 2}, map[string]int{"hopper": 2, "ampere": 2}, []string{"hopper×16", "ampere×16"}, ""},
		{"idleness unknown: left to NoWaitToGrow", map[string]int{}, nil, nil, ""},
	}
	for _, tc := range cases {
		cs := mk()
		n := GrowFair(cs, Room{Idle: tc.idle, Pending: tc.pending})
		got := dropped(cs)
		if n != len(got) || strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("%s: dropped %v (n %d), want %v", tc.name, got, n, tc.want)
		}
		if tc.why != "" && (len(got) == 0 || !strings.Contains(cs[1].Dropped, tc.why)) {
			t.Errorf("%s: why %q, want %q", tc.name, cs[1].Dropped, tc.why)
		}
	}
	// a size already dropped (NoWaitToGrow) keeps its first reason
	cs := mk()
	cs[1].Dropped = "earlier"
	GrowFair(cs, Room{Idle: map[string]int{"hopper": 1}})
	if cs[1].Dropped != "earlier" {
		t.Errorf("reason replaced: %q", cs[1].Dropped)
	}
}

// Queues count the nodes pending jobs ask for on each partition they list.
func TestQueuesPendingNodes(t *testing.T) {
	jobs := []slurm.Job{
		{ID: "1", State: "PENDING", Partition: "hopper,ampere", Record: map[string]string{"NumNodes": "2"}},
		{ID: "2", State: "PENDING", Partition: "hopper", Record: map[string]string{"NumNodes": "1"}},
		{ID: "3", State: "RUNNING", Partition: "ampere", Record: map[string]string{"NumNodes": "1"}},
	}
	q := Queues(jobs, time.UTC)
	if q["hopper"].PendingNodes != 3 || q["ampere"].PendingNodes != 2 {
		t.Errorf("pending nodes hopper %d ampere %d, want 3 and 2", q["hopper"].PendingNodes, q["ampere"].PendingNodes)
	}
}

// ResizeRange: the whole-node sizes that fit on the listed partitions,
// none when they are one size, the job is smaller than a node, or nothing
// else fits.
func TestResizeRange(t *testing.T) {
	cs := []Candidate{
		{Partition: "hopper", GPUs: 4, Partial: true, Fits: true},
		{Partition: "hopper", GPUs: 8, Fits: true},
		{Partition: "hopper", GPUs: 16, Fits: true},
		{Partition: "hopper", GPUs: 32, Fits: false}, // does not fit: not in the range
		{Partition: "ampere", GPUs: 8, Fits: true},
		{Partition: "ampere", GPUs: 24, Fits: true},
		{Partition: "v100", GPUs: 8, Fits: true},
	}
	for _, tc := range []struct {
		name   string
		list   []int
		lo, hi int
		ok     bool
	}{
		{"one partition", []int{1}, 8, 16, true},
		{"late-bound over two", []int{1, 4}, 8, 24, true},
		{"one size", []int{6}, 8, 8, false},
		{"smaller than a node", []int{0}, 0, 0, false},
	} {
		lo, hi, ok := ResizeRange(cs, tc.list)
		if lo != tc.lo || hi != tc.hi || ok != tc.ok {
			t.Errorf("%s: ResizeRange = %d, %d, %v; want %d, %d, %v", tc.name, lo, hi, ok, tc.lo, tc.hi, tc.ok)
		}
	}
	if got := strings.Join(ResizeExports(cs, []int{1}), ","); got != "TRAINRUN_MIN_GPUS=8,TRAINRUN_MAX_GPUS=16" {
		t.Errorf("ResizeExports = %q", got)
	}
	if got := ResizeExports(cs, []int{6}); got != nil {
		t.Errorf("ResizeExports without a range = %q, want nothing", got)
	}
}
