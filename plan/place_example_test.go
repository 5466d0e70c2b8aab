package plan_test

import (
	"fmt"

	"github.com/trainrun/trainrun/plan"
)

// Four 4-GPU nodes whose hostnames alternate between two leaf switches;
// TP=4 fills a node, and with data-parallel traffic above pipeline traffic
// the two DP ranks of each stage share a leaf. Slurm's order would put every
// DP pair across the spine: a 2-rank ring has 2 edges, × 4 TP ranks × 2
// stages × 10 GB = 160 GB; here only the PP boundaries cross: 4 × 2 × 1 GB.
func ExamplePlace() {
	nodes := []plan.PlaceNode{
		{Name: "a1", Leaf: "s1"}, {Name: "b1", Leaf: "s2"},
		{Name: "a2", Leaf: "s1"}, {Name: "b2", Leaf: "s2"},
	}
	p, err := plan.Place(plan.PlaceInput{
		Layout:      plan.Layout{TP: 4, DP: 2, PP: 2},
		GPUsPerNode: 4,
		Nodes:       nodes,
		Traffic:     plan.Traffic{TP: 100e9, DP: 10e9, PP: 1e9},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range p.Ranks {
		if r.TP == 0 {
			fmt.Printf("ranks %d-%d on %s (dp=%d pp=%d)\n", r.Rank, r.Rank+3, r.Node, r.DP, r.PP)
		}
	}
	fmt.Printf("spine bytes: %.0f GB (Slurm's order: %.0f GB)\n", p.Traffic.Spine/1e9, p.Baseline.Spine/1e9)
	// Output:
	// ranks 0-3 on a1 (dp=0 pp=0)
	// ranks 4-7 on a2 (dp=1 pp=0)
	// ranks 8-11 on b1 (dp=0 pp=1)
	// ranks 12-15 on b2 (dp=1 pp=1)
	// spine bytes: 8 GB (Slurm's order: 160 GB)
}
