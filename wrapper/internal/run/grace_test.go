package run

import (
	"strings"
	"testing"
	"time"

	"github.com/trainrun/trainrun/checkpoint"
)

func TestGraceBudget(t *testing.T) {
	s := time.Second
	slurm := graceLimits{GraceTime: 120 * s, Preemptable: true, KillWait: 30 * s}
	for _, c := range []struct {
		name      string
		in        graceInput
		wantLead  time.Duration
		raised    bool
		warnings  []string // substrings, one per warning, in order
		inSummary string
	}{
		{name: "nothing measured", in: graceInput{Lead: 300 * s, Limits: slurm}, wantLead: 300 * s,
			inSummary: "no checkpoint measured yet"},
		{name: "fits everything", in: graceInput{Measured: 8 * s, Samples: 2, Lead: 300 * s, Limits: slurm}, wantLead: 300 * s,
			inSummary: "up to 8.0 s (longest of 2 measured), 18s with margin"},
		{name: "KillWait short", in: graceInput{Measured: 40 * s, Samples: 1, Lead: 300 * s, Limits: slurm}, wantLead: 300 * s,
			warnings: []string{"KillWait is 30s, shorter than a checkpoint needs (50s)"}},
		{name: "all short, no adapt", in: graceInput{Measured: 200 * s, Samples: 3, Lead: 120 * s, Limits: slurm}, wantLead: 120 * s,
			warnings: []string{"lead 2m0s is shorter than a checkpoint needs (4m10s): raise --ckpt-lead", "the partition's GraceTime is 2m0s", "KillWait is 30s"}},
		{name: "adapt raises the lead", in: graceInput{Measured: 200 * s, Samples: 3, Lead: 120 * s, Adapt: true, TimeLimit: time.Hour,
			Limits: graceLimits{GraceTime: -1, KillWait: -1}}, wantLead: 250 * s, raised: true},
		{name: "adapt capped at half the limit", in: graceInput{Measured: 200 * s, Samples: 1, Lead: 60 * s, Adapt: true, TimeLimit: 6 * time.Minute,
			Limits: graceLimits{GraceTime: -1, KillWait: -1}}, wantLead: 3 * time.Minute, raised: true,
			warnings: []string{"the lead stops at half of it"}},
		{name: "no end time: no lead to judge", in: graceInput{Measured: 200 * s, Samples: 1, Adapt: true, Limits: graceLimits{GraceTime: -1, KillWait: -1}},
			inSummary: "lead off (no end time)"},
		{name: "GraceTime of a partition that is not preempted", in: graceInput{Measured: 60 * s, Samples: 1, Lead: 300 * s,
			Limits: graceLimits{GraceTime: 0, KillWait: 120 * s}}, wantLead: 300 * s, inSummary: "GraceTime 0s (not preemptable)"},
		// Issue 30: a partition that never preempts, with trainrun's clock on:
		// KillWait only matters to a scancel, said in the summary, not warned.
		{name: "KillWait short, not preemptable, lead on", in: graceInput{Measured: 40 * s, Samples: 1, Lead: 300 * s,
			Limits: graceLimits{GraceTime: 0, KillWait: 30 * s}}, wantLead: 300 * s, inSummary: "ckpt request --then stop rather than scancel"},
		{name: "KillWait short, not preemptable, no end time", in: graceInput{Measured: 40 * s, Samples: 1,
			Limits: graceLimits{GraceTime: 0, KillWait: 30 * s}}, warnings: []string{"KillWait is 30s"}},
		{name: "policy budget", in: graceInput{Measured: 60 * s, Samples: 1, Lead: 300 * s,
			Limits: graceLimits{GraceTime: 45 * s, GraceSource: "the policy's CkptGraceBudget", KillWait: 120 * s}}, wantLead: 300 * s,
			warnings: []string{"the policy's CkptGraceBudget is 45s, shorter than a checkpoint needs (1m15s)"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			adv := graceBudget(c.in)
			if adv.Lead != c.wantLead || adv.Raised != c.raised {
				t.Errorf("lead %s raised %t, want %s %t", adv.Lead, adv.Raised, c.wantLead, c.raised)
			}
			if len(adv.Warnings) != len(c.warnings) {
				t.Fatalf("warnings %q, want %d like %q", adv.Warnings, len(c.warnings), c.warnings)
			}
			for i, w := range c.warnings {
				if !strings.Contains(adv.Warnings[i], w) {
					t.Errorf("warning %d %q lacks %q", i, adv.Warnings[i], w)
				}
			}
			if !strings.Contains(adv.Summary, c.inSummary) {
				t.Errorf("summary %q lacks %q", adv.Summary, c.inSummary)
			}
		})
	}
}

func TestMeasuredCkptTakesLongestRecent(t *testing.T) {
	var evs []checkpoint.Event
	for _, v := range []float64{90, 1, 2, 3, 4, 5} { // the 90 s one is older than the last five
		evs = append(evs, checkpoint.Event{Type: "ckpt", CkptSeconds: v})
	}
	if m, n := measuredCkpt(evs); m != 5*time.Second || n != 5 {
		t.Errorf("measuredCkpt = %s of %d, want 5s of 5", m, n)
	}
	if m, n := measuredCkpt(nil); m != 0 || n != 0 {
		t.Errorf("measuredCkpt(nil) = %s, %d", m, n)
	}
}

// Lines as Slurm 22.05 prints them (the harness's cluster).
