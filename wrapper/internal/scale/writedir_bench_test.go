package scale

import (
	"path/filepath"
	"testing"

	"github.com/trainrun/trainrun/wrapper/internal/launch"
)

// BenchmarkWriteDir16k: the launch files of 16,384 ranks on 2,048 nodes
// alone (the step's WriteDir without the shims' load beside it).
func BenchmarkWriteDir16k(b *testing.B) {
	const world = 16384
	ranks := make([]launch.Rank, world)
	for r := range ranks {
		lr := r % RanksPerNode
		ranks[r] = launch.Rank{Rank: r, Node: nodeOf(r), LocalRank: lr, GPU: lr, GPUSlot: lr, Env: rankEnv(r, lr)}
	}
	common := launch.Common{JobID: "4242", World: world, Control: "127.0.0.1:1", Token: "t", Signal: "USR2", Env: commonEnv()}
	dir := filepath.Join(b.TempDir(), "launch")
	for b.Loop() {
		if err := launch.WriteDir(dir, common, ranks); err != nil {
			b.Fatal(err)
		}
	}
}
