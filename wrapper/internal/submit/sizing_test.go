package submit

import (
	"strings"
	"testing"
	"time"
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
