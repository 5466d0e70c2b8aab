package submit

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/trainrun/trainrun/internal/slurm"
	"github.com/trainrun/trainrun/plan"
	"github.com/trainrun/trainrun/plan/policy"
	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
)

// PartitionInfo is one partition as `trainrun partitions` shows it and `trainrun
// submit` plans on it: Slurm's record, its nodes, and the policy's
// GPUType and GPUHourCost.
type PartitionInfo struct {
	slurm.Partition
	Nodes       []slurm.Node
	GresType    string // the typed GRES of its nodes ("" untyped)
	GPUType     string // the catalog type; "" with TypeErr
	TypeErr     error
	GPUsPerNode int
	Idle        int // nodes by state
	Mixed       int
	Allocated   int
	Other       int // down, drained, reserved, ...
	FreeGPUs    int // on idle and mixed nodes
	TotalGPUs   int
	Cost        float64       // GPUHourCost; < 0 = none
	CkptLead    time.Duration // the policy's CkptLead (0 = none): the job's controller asks for its checkpoint this long before the end
}

// Usable says whether a node in state (sinfo/scontrol form, flags and
// suffixes included) is one a job can get: up, not drained or in maintenance.
func Usable(state string) bool {
	for _, f := range strings.Split(strings.ToUpper(state), "+") {
		f = strings.TrimRight(f, "*~#!%$@^-")
		switch f {
		case "DOWN", "DRAIN", "DRAINING", "DRAINED", "FAIL", "FAILING", "MAINT", "FUTURE", "UNKNOWN", "NOT_RESPONDING", "POWERED_DOWN", "POWERING_DOWN", "REBOOT_REQUESTED", "REBOOT_ISSUED", "RESERVED":
			return false
		}
	}
	return true
}

// baseState is the state without its flags and suffixes ("MIXED+DRAIN*"
// is MIXED).
func baseState(state string) string {
	b, _, _ := strings.Cut(strings.ToUpper(state), "+")
	return strings.TrimRight(b, "*~#!%$@^-")
}

// LoadPartitions asks Slurm for the partitions and nodes and resolves each
// partition's GPU type (typed GRES, the policy's GPUType, a memory feature,
// else fallback, the user's --gpu). only, when not empty, names the
// partitions wanted; one Slurm does not know is an error.
func LoadPartitions(ctx context.Context, c slurm.Client, pol *policy.Policy, fallback string, only []string) ([]PartitionInfo, error) {
	parts, err := c.Partitions(ctx)
	if err != nil {
		return nil, err
	}
	nodes, err := c.Nodes(ctx)
	if err != nil {
		return nil, err
	}
	byPart := map[string][]slurm.Node{}
	for _, n := range nodes {
		for _, p := range n.Partitions {
			byPart[p] = append(byPart[p], n)
		}
	}
	var names []string
	want := map[string]bool{}
	for _, p := range only {
		want[p] = true
	}
	var out []PartitionInfo
	for _, p := range parts {
		names = append(names, p.Name)
		if len(only) > 0 && !want[p.Name] {
			continue
		}
		delete(want, p.Name)
		out = append(out, describePartition(p, byPart[p.Name], pol.Effective(p.Name), fallback))
	}
	if len(want) > 0 {
		var missing []string
		for p := range want {
			missing = append(missing, p)
		}
		sort.Strings(missing)
		return nil, exitcode.With(exitcode.Usage, fmt.Errorf("--partition: Slurm has no partition %s (it has: %s)", strings.Join(missing, ", "), strings.Join(names, ", ")))
	}
	return out, nil
}

func describePartition(p slurm.Partition, nodes []slurm.Node, s policy.Settings, fallback string) PartitionInfo {
	pi := PartitionInfo{Partition: p, Nodes: nodes, Cost: s.GPUHourCost.Value}
	if s.CkptLead.Source.Kind != policy.FromDefault { // the job's controller uses the site's lead as set
		pi.CkptLead = s.CkptLead.Value
	}
	var features []string
	perNode := map[int]int{}
	for _, n := range nodes {
		g, typ := n.GPUs()
		if pi.GresType == "" {
			pi.GresType = typ
		}
		features = append(features, n.Features...)
		perNode[g]++
		pi.TotalGPUs += g
		switch st := baseState(n.State); {
		case !Usable(n.State):
			pi.Other++
			continue
		case st == "IDLE":
			pi.Idle++
		case st == "MIXED":
			pi.Mixed++
		case st == "ALLOCATED" || st == "COMPLETING":
			pi.Allocated++
		default:
			pi.Other++
			continue
		}
		pi.FreeGPUs += max(0, g-n.GPUsUsed())
	}
	for g, k := range perNode { // the most common node; the larger on a tie
		if k > perNode[pi.GPUsPerNode] || k == perNode[pi.GPUsPerNode] && g > pi.GPUsPerNode {
			pi.GPUsPerNode = g
		}
	}
	pi.GPUType, pi.TypeErr = GPUType(p.Name, pi.GresType, s.GPUType.Value, features, fallback)
	if pi.GPUsPerNode == 0 && pi.TypeErr == nil {
		pi.TypeErr = fmt.Errorf("partition %s: its nodes have no GPUs (no gpu GRES)", p.Name)
	}
	return pi
}

// ForChoice is the partition as the choice needs it; ok is false when its
// GPUs cannot be planned (TypeErr) or it is not UP.
func (pi PartitionInfo) ForChoice() (Partition, bool) {
	if pi.TypeErr != nil || pi.GPUType == "" || !strings.EqualFold(pi.State, "UP") {
		return Partition{}, false
	}
	g, err := plan.LookupGPU(pi.GPUType)
	if err != nil {
		return Partition{}, false
	}
	n := pi.TotalNodes
	if n == 0 {
		n = len(pi.Nodes)
	}
	if pi.MaxNodes > 0 {
		n = min(n, pi.MaxNodes)
	}
	return Partition{Name: pi.Name, GPU: g, GPUsPerNode: pi.GPUsPerNode, Nodes: n, MaxTime: pi.MaxTime, Cost: pi.Cost, CkptLead: pi.CkptLead}, true
}
