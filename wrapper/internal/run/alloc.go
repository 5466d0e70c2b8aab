package run

import (
	"github.com/trainrun/trainrun/internal/slurm"
	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
)

// parseAllocation reads the allocation from Slurm's environment. expand turns
// a hostlist expression into host names. Errors carry exitcode.Slurm and name the
// variable, its value and the #SBATCH line that fixes it.
func parseAllocation(getenv func(string) string, expand func(string) ([]string, error)) (*slurm.Allocation, error) {
	a, err := slurm.AllocationFromEnv(getenv, expand)
	if err != nil {
		return nil, withCode(exitcode.Slurm, err)
	}
	return a, nil
}
