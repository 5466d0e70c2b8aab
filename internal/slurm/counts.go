package slurm

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseCounts expands Slurm's compressed per-node counts
// (SLURM_TASKS_PER_NODE, SLURM_JOB_CPUS_PER_NODE): "8(x4)" is four nodes of
// 8; "2(x3),1" is 2,2,2,1. maxNodes caps the expansion: the counts describe
// the allocation's nodes, so a list longer than maxNodes is an error, found
// before it is built (a forged "8(x20000000)" would otherwise allocate
// hundreds of MiB).
func ParseCounts(s string, maxNodes int) ([]int, error) {
	var out []int
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		count, rep := part, "1"
		if i := strings.IndexByte(part, '('); i >= 0 {
			if !strings.HasPrefix(part[i:], "(x") || !strings.HasSuffix(part, ")") {
				return nil, fmt.Errorf("%q is not N or N(xM)", part)
			}
			count, rep = part[:i], part[i+2:len(part)-1]
		}
		n, err := strconv.Atoi(count)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%q is not N or N(xM)", part)
		}
		r, err := strconv.Atoi(rep)
		if err != nil || r <= 0 {
			return nil, fmt.Errorf("%q is not N or N(xM)", part)
		}
		if r > maxNodes-len(out) {
			return nil, fmt.Errorf("%q counts more than the allocation's %d node(s)", s, maxNodes)
		}
		for ; r > 0; r-- {
			out = append(out, n)
		}
	}
	return out, nil
}
