package run

import (
	"cmp"
	"fmt"
	"time"

	"github.com/trainrun/trainrun/checkpoint"
	"github.com/trainrun/trainrun/internal/slurm"
)

// The grace budget: how long a checkpoint of this job takes (measured from
// the request, or Slurm's signal, to the commit, and kept in the job's
// history) against the time each way of stopping leaves for it:
//
//   - the lead: trainrun's own clock asks for the checkpoint this long
//     before the job's end time;
//   - the partition's GraceTime: at preemption, Slurm's SIGTERM comes this
//     long before its SIGKILL (the policy's CkptGraceBudget replaces it);
//   - the cluster's KillWait: at a time limit Slurm enforces itself (no end
//     time known, or the own clock too late), and at the end of a grace
//     period, SIGTERM comes this long before SIGKILL.
//
// A checkpoint needs its measured time plus a margin; whatever is shorter is
// warned about at start and after each commit, and with the policy's
// CkptLeadAdapt=yes the lead is raised to fit.

// graceLimits are what Slurm (and the policy) say; a negative duration is
// unknown.
type graceLimits struct {
	GraceTime   time.Duration // the partition's GraceTime
	GraceSource string        // "partition X GraceTime" or the policy's CkptGraceBudget
	Preemptable bool          // the partition's PreemptMode is not OFF
	KillWait    time.Duration // the cluster's KillWait
}

// graceInput is what the decision reads.
type graceInput struct {
	Measured  time.Duration // the longest recent checkpoint (0: none measured yet)
	Samples   int           // how many measurements Measured is the longest of
	Lead      time.Duration // the lead in use (0: no end time, the own clock is off)
	TimeLimit time.Duration // the job's time limit (0: unlimited)
	Adapt     bool          // the policy's CkptLeadAdapt
	Limits    graceLimits
}

// graceAdvice is the decision.
type graceAdvice struct {
	Need     time.Duration // Measured plus margin (0: nothing measured)
	Lead     time.Duration // the lead to use from now on
	Raised   bool          // Lead was raised (Adapt)
	Summary  string        // one line for the job log
	Warnings []string
}

// graceMargin is the slack a checkpoint gets above its measured time: a
// quarter of it, at least 10 s (saves vary with the file system's load).
func graceMargin(measured time.Duration) time.Duration {
	return max(measured/4, 10*time.Second)
}

// graceBudget decides what to warn about and which lead to use.
func graceBudget(in graceInput) graceAdvice {
	adv := graceAdvice{Lead: in.Lead}
	lim := in.Limits
	known := func(d time.Duration) string {
		if d < 0 {
			return "unknown"
		}
		return d.String()
	}
	lead := "off (no end time)"
	if in.Lead > 0 {
		lead = in.Lead.String()
	}
	grace := known(lim.GraceTime)
	if lim.GraceTime >= 0 && !lim.Preemptable && lim.GraceSource == "" {
		grace += " (not preemptable)"
	}
	if in.Measured <= 0 {
		adv.Summary = fmt.Sprintf("grace budget: no checkpoint measured yet for this job; lead %s, GraceTime %s, KillWait %s", lead, grace, known(lim.KillWait))
		return adv
	}
	adv.Need = in.Measured + graceMargin(in.Measured)
	need := adv.Need.Round(time.Second)
	adv.Summary = fmt.Sprintf("grace budget: checkpoints take up to %.1f s (longest of %d measured), %s with margin; lead %s, GraceTime %s, KillWait %s",
		in.Measured.Seconds(), in.Samples, need, lead, grace, known(lim.KillWait))
	if in.Lead > 0 && in.Lead < adv.Need {
		if in.Adapt {
			newLead := adv.Need
			if in.TimeLimit > 0 && newLead > in.TimeLimit/2 {
				newLead = in.TimeLimit / 2
				adv.Warnings = append(adv.Warnings, fmt.Sprintf("a checkpoint needs %s but the job's time limit is %s: the lead stops at half of it; submit with a longer --time", need, in.TimeLimit))
			}
			if newLead > in.Lead {
				adv.Lead, adv.Raised = newLead, true
			}
		} else {
			adv.Warnings = append(adv.Warnings, fmt.Sprintf("the checkpoint lead %s is shorter than a checkpoint needs (%s): raise --ckpt-lead (or the policy's CkptLead), or set CkptLeadAdapt=yes to let trainrun raise it", in.Lead, need))
		}
	}
	if lim.GraceTime >= 0 && (lim.Preemptable || lim.GraceSource != "") && lim.GraceTime < adv.Need {
		src := cmp.Or(lim.GraceSource, "the partition's GraceTime")
		adv.Warnings = append(adv.Warnings, fmt.Sprintf("%s is %s, shorter than a checkpoint needs (%s): a preemption would kill the trainers before their save is done; ask the admins for a longer GraceTime, or save more often", src, lim.GraceTime, need))
	}
	if lim.KillWait >= 0 && lim.KillWait < adv.Need && !lim.Preemptable && in.Lead > 0 {
		// Only a scancel is left to end the job through Slurm's SIGTERM:
		// no preemption's grace period, and trainrun's clock checkpoints
		// before the time limit. Said once in the summary, not warned at
		// every start (issue 30).
		adv.Summary += " (KillWait is shorter than a checkpoint: to stop the job, trainrun ckpt request --then stop rather than scancel)"
	} else if lim.KillWait >= 0 && lim.KillWait < adv.Need {
		adv.Warnings = append(adv.Warnings, fmt.Sprintf("KillWait is %s, shorter than a checkpoint needs (%s): when Slurm itself ends the job (time limit without trainrun's clock, end of a grace period), SIGKILL follows SIGTERM before the save is done; rely on the lead, not on Slurm's SIGTERM", lim.KillWait, need))
	}
	return adv
}

// measuredCkpt is the longest of the last few measured checkpoints.
func measuredCkpt(evs []checkpoint.Event) (time.Duration, int) {
	const recent = 5
	if len(evs) > recent {
		evs = evs[len(evs)-recent:]
	}
	var m time.Duration
	for _, e := range evs {
		m = max(m, time.Duration(e.CkptSeconds*float64(time.Second)))
	}
	return m, len(evs)
}

// graceLimitsOf turns what Slurm says into the budget's limits.
func graceLimitsOf(l slurm.Limits) graceLimits {
	return graceLimits{GraceTime: l.GraceTime, Preemptable: l.Preemptable, KillWait: l.KillWait}
}
