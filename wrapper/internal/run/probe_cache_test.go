package run

import (
	"path/filepath"
	"testing"

	"github.com/trainrun/trainrun/internal/slurm"
	"github.com/trainrun/trainrun/wrapper/internal/launch"
)

// The probe's cache serves a restart of the step inside the allocation,
// never a requeued incarnation: that may hold other GPUs on the same nodes.
func TestProbeCacheOnlyForTheSameIncarnation(t *testing.T) {
	write := func(dir, restart string, gpus map[string][]int) {
		for node, g := range gpus {
			if err := launch.WriteJSONAtomic(filepath.Join(dir, node+".json"), launch.NodeFacts{Node: node, GPUs: g, Restart: restart}, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	both := map[string][]int{"n1": {0, 1}, "n2": {0, 1}}
	for _, tc := range []struct {
		name      string
		restart   string           // the cached probe's SLURM_RESTART_COUNT
		cached    map[string][]int // the nodes' cached GPUs
		allocRest int
		jobGPUs   []int // SLURM_JOB_GPUS on the batch node n1
		ok        bool
	}{
		{"same first start", "", both, 0, []int{0, 1}, true},
		{"restart inside the allocation of a requeued run", "2", both, 2, []int{0, 1}, true},
		{"requeued: another incarnation", "", both, 1, []int{0, 1}, false},
		{"requeued on other GPUs of the same nodes", "1", both, 1, []int{4, 5}, false},
		{"a node not probed", "", map[string][]int{"n1": {0, 1}}, 0, []int{0, 1}, false},
		{"SLURM_JOB_GPUS unknown", "", both, 0, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			write(dir, tc.restart, tc.cached)
			a := &slurm.Allocation{Nodes: []string{"n1", "n2"}, BatchNode: "n1", RestartCount: tc.allocRest, GPUIDs: tc.jobGPUs}
			if _, ok := readProbeCache(a, dir); ok != tc.ok {
				t.Errorf("cache used: %v, want %v", ok, tc.ok)
			}
		})
	}
}
