package submit

import (
	"fmt"

	"github.com/trainrun/trainrun/internal/units"
)

// NoWaitToGrow keeps sizing from growing into queued GPUs (issue 34): a
// candidate larger than the smallest that fits on its partition qualifies
// only if Slurm would start it as soon as that smallest one. A larger size
// that must wait for GPUs finishes its own job sooner by holding more of
// the partition, which is what delays the small jobs behind it (the bench's
// 8-GPU tail). It marks those it drops (Dropped) and returns how many.
func NoWaitToGrow(cands []Candidate) int {
	smallest := map[string]*Candidate{}
	for i := range cands {
		c := &cands[i]
		if !c.Fits || c.Start.IsZero() || c.StartErr != "" {
			continue
		}
		if s := smallest[c.Partition]; s == nil || c.GPUs < s.GPUs {
			smallest[c.Partition] = c
		}
	}
	n := 0
	for i := range cands {
		c := &cands[i]
		s := smallest[c.Partition]
		if s == nil || c == s || !c.Fits || c.Start.IsZero() || c.StartErr != "" || c.Dropped != "" || !c.Start.After(s.Start) {
			continue
		}
		c.Dropped = fmt.Sprintf("sizing does not wait to grow: %d GPUs start %s later than %d (--min-gpus and --max-gpus bound it)",
			c.GPUs, units.Seconds(c.Start.Sub(s.Start).Seconds()), s.GPUs)
		n++
	}
	return n
}
