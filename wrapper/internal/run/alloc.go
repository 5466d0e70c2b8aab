package run

import (
	"github.com/trainrun/trainrun/internal/slurm"
	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
)

// allocation is what trainrun knows of the Slurm allocation it runs in
// (internal/slurm reads it; every field names its source there).
type allocation = slurm.Allocation

// parseAllocation reads the allocation from Slurm's environment. expand turns
// a hostlist expression into host names. Errors carry exitcode.Slurm and name the
// variable, its value and the #SBATCH line that fixes it.
func parseAllocation(getenv func(string) string, expand func(string) ([]string, error)) (*allocation, error) {
	a, err := slurm.AllocationFromEnv(getenv, expand)
	if err != nil {
		return nil, withCode(exitcode.Slurm, err)
	}
	return a, nil
}
