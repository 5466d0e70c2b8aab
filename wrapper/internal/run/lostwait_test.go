package run

import (
	"slices"
	"testing"
	"time"
)

// The step is killed for a lost node only when the evidence is complete:
// every rank reported an exit or closed its connection, and the node's
// ranks all closed theirs before the first failure.
func TestLostBeforeFailure(t *testing.T) {
	t0 := time.Unix(1e9, 0)
	slots := []rankSlot{{Rank: 0, Node: "n1"}, {Rank: 1, Node: "n1"}, {Rank: 2, Node: "n2"}, {Rank: 3, Node: "n2"}, {Rank: 4, Node: "n3"}, {Rank: 5, Node: "n3"}}
	closed := func(m map[int]float64) func(int) (time.Time, bool) {
		return func(r int) (time.Time, bool) {
			s, ok := m[r]
			return t0.Add(time.Duration(s * float64(time.Second))), ok
		}
	}
	for _, tc := range []struct {
		name   string
		exits  map[int]int
		closed map[int]float64 // seconds after t0; the first failure is at 10
		want   []string
	}{
		{"n2 gone before the failure, n3 cleared by srun after it", map[int]int{0: 1, 1: 143}, map[int]float64{2: 9, 3: 9.5, 4: 11, 5: 11}, []string{"n2"}},
		{"a rank of n3 still connected: wait", map[int]int{0: 1, 1: 143}, map[int]float64{2: 9, 3: 9.5, 4: 11}, nil},
		{"n2 closed after the failure: srun's kill, not a lost node", map[int]int{0: 1, 1: 143}, map[int]float64{2: 11, 3: 11, 4: 11, 5: 11}, nil},
		{"one of n2's ranks reported: not lost", map[int]int{0: 1, 1: 143, 2: 137}, map[int]float64{3: 9, 4: 11, 5: 11}, nil},
		{"two nodes gone", map[int]int{0: 1, 1: 1}, map[int]float64{2: 9, 3: 9, 4: 8, 5: 9.9}, []string{"n2", "n3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := lostBeforeFailure(slots, tc.exits, closed(tc.closed), t0.Add(10*time.Second))
			if !slices.Equal(got, tc.want) {
				t.Errorf("lost %v, want %v", got, tc.want)
			}
		})
	}
}
