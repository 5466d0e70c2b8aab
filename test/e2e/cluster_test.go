//go:build e2e

package e2e

import (
	"context"
	"testing"
)

func TestClusterUp(t *testing.T) {
	ctx := context.Background()
	nodes, err := cluster.NodeInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range cluster.Nodes() {
		t.Logf("%s: %v", n, nodes[n].Fields)
	}
	out, err := cluster.Run(ctx, "srun", "--immediate=30", "-N4", "hostname")
	if err != nil {
		t.Fatal(err)
	}
	t.Log(out)
}
