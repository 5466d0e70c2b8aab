package run

import (
	"github.com/trainrun/trainrun/wrapper/internal/launch"
)

// writeLaunchDir writes the launch files for the placed ranks.
func writeLaunchDir(dir string, common launch.Common, slots []rankSlot, env rankEnv) error {
	common.Env = env.Common
	ranks := make([]launch.Rank, len(slots))
	for i, s := range slots {
		ranks[i] = launch.Rank{Rank: s.Rank, Node: s.Node, LocalRank: s.LocalRank, GPU: s.GPU, GPUSlot: s.GPUSlot, CPUs: s.CPUs, Env: env.Ranks[i]}
	}
	return launch.WriteDir(dir, common, ranks)
}
