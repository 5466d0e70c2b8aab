package spank

import (
	"strings"
	"testing"

	"github.com/trainrun/trainrun/plan"
)

// FuzzParseArgs: no plugstack.conf argument list panics; an accepted one
// has only absolute, clean paths and bounded timeouts. The fuzz input is
// split on spaces into arguments, as plugstack.conf splits them.
func FuzzParseArgs(f *testing.F) {
	f.Add("policy=/etc/slurm/trainrun.conf cache=/run/trainrun topology=/etc/slurm/topology.conf trainrun=/usr/local/bin/trainrun")
	f.Add("drain_timeout=5m resume_timeout=10s")
	f.Add("cache=../x policy=/a policy=/b drain_timeout=-1s")
	f.Fuzz(func(t *testing.T, line string) {
		c, err := ParseArgs(strings.Fields(line))
		if err != nil {
			return
		}
		for _, p := range []string{c.CacheDir, c.Trainrun} {
			if !strings.HasPrefix(p, "/") || strings.Contains(p, "/../") {
				t.Fatalf("accepted path %q", p)
			}
		}
		if c.DrainTimeout <= 0 || c.ResumeTimeout <= 0 {
			t.Fatalf("timeouts %v %v", c.DrainTimeout, c.ResumeTimeout)
		}
	})
}

// FuzzParseLayout: --train-layout as slurmstepd parses it (plan.ParsePins)
// and lays it out on a step.
func FuzzParseLayout(f *testing.F) {
	f.Add("tp=8,pp=2305843009213693953")
	f.Add("tp=2,pp=1")
	f.Fuzz(func(t *testing.T, s string) {
		p, err := plan.ParsePins(s)
		if err != nil {
			return
		}
		l := p.Apply(plan.Layout{TP: 1, PP: 1, VPP: 1, CP: 1, EP: 1, MicroBatch: 1})
		if _, err := MegatronLayout(l, 1<<20); err != nil && strings.Contains(err.Error(), "-") {
			t.Fatalf("negative task count for %q: %v", s, err)
		}
	})
}
