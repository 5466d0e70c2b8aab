package submit

import (
	"fmt"
	"math"
	"time"

	"github.com/trainrun/trainrun/checkpoint"
	"github.com/trainrun/trainrun/internal/units"
	"github.com/trainrun/trainrun/plan"
)

// Honest time limits (issue 34): a job's --time is its predicted training
// time widened by the plan's own error band, plus a checkpoint lead sized
// from the job's checkpoint, not constants priced for hour-long jobs. A
// limit too long is not harmless: Slurm's backfill plans every running job
// to its limit, so each inflated limit delays every job queued behind it
// (the trace: a fixed 10-minute lead on minute-scale jobs cost 40 %
// of the mean completion time).

// Band is the plan's error band as a share of its step time: how much
// longer than predicted a step may reasonably take, the upper end of the
// planner's step_s_range (the cross-validated error of the nearest
// calibration rows; narrower once a site calibration or the run's own
// observations have measured the layout: plan/calibrate.go). 0 when the
// plan has no band.
func Band(e plan.Evaluation) float64 {
	t := e.Time
	if t.Step <= 0 || t.StepRange[1] <= t.Step {
		return 0
	}
	return t.StepRange[1]/t.Step - 1
}

// MeasuredSave is the longest of the job's last few measured checkpoints
// (request or signal to commit, as the controller records them in the
// store's history) and how many that is of; 0 when none. The same rule as
// the controller's grace budget, so that submit and the job agree.
func MeasuredSave(evs []checkpoint.Event) (time.Duration, int) {
	const recent = 5
	if len(evs) > recent {
		evs = evs[len(evs)-recent:]
	}
	var m time.Duration
	n := 0
	for _, e := range evs {
		if e.Type != "ckpt" || e.CkptSeconds <= 0 || math.IsNaN(e.CkptSeconds) || math.IsInf(e.CkptSeconds, 0) {
			continue
		}
		m = max(m, time.Duration(e.CkptSeconds*float64(time.Second)))
		n++
	}
	return m, n
}

// ReadSaves reads the measured checkpoints of the store at dir (the job's
// --ckpt-dir): none when the store has no history yet.
func ReadSaves(dir string) ([]checkpoint.Event, error) {
	s, err := checkpoint.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("--ckpt-dir %s: %w", dir, err)
	}
	evs, err := s.History().CkptTimes()
	if err != nil {
		return nil, fmt.Errorf("--ckpt-dir %s: %w", dir, err)
	}
	return evs, nil
}

// leadMargin is the slack the lead gives a save above its measured or
// predicted time: a quarter of it, at least 10 s (the controller's grace
// margin: saves vary with the file system's load, and the trainer needs a
// moment to see the request).
func leadMargin(save time.Duration) time.Duration { return max(save/4, 10*time.Second) }

// predictedSave is one checkpoint's save time on nodes nodes: the weights
// and Adam state (ckptBytesPerParam), each node writing its share at bw
// bytes/s. 0 when bw is unknown.
func predictedSave(m plan.Model, nodes int, bw float64) time.Duration {
	if bw <= 0 || nodes <= 0 {
		return 0
	}
	return time.Duration(m.Params() * ckptBytesPerParam / float64(nodes) / bw * float64(time.Second))
}

// limitTerms are the margin and lead of one candidate's time limit, and
// the words that say where they came from.
func limitTerms(req Request, p Partition, e plan.Evaluation, nodes int) (margin float64, lead time.Duration, why string) {
	margin, lead = req.Sbatch.Margin, req.Sbatch.Lead
	mwhy := fmt.Sprintf("margin %.0f %% (--time-margin)", 100*margin)
	if req.AutoMargin {
		margin = Band(e)
		mwhy = fmt.Sprintf("margin %.0f %% (the plan's error band)", 100*margin)
	}
	lwhy := fmt.Sprintf("lead %s (--ckpt-lead)", units.Seconds(lead.Seconds()))
	if req.AutoLead {
		save, src := req.MeasuredSave, fmt.Sprintf("the longest of %d measured saves", req.MeasuredSaves)
		if save <= 0 {
			save, src = predictedSave(req.Model, nodes, req.CkptBW), "a predicted save"
		}
		lead = save + leadMargin(save)
		lwhy = fmt.Sprintf("lead %s (%s, %s, + margin)", units.Seconds(lead.Seconds()), src, units.Seconds(save.Seconds()))
		if p.CkptLead > lead { // the job's controller takes the policy's lead: a shorter one would stop it before its end
			lead = p.CkptLead
			lwhy = fmt.Sprintf("lead %s (partition %s's CkptLead, above the save's %s)", units.Seconds(lead.Seconds()), p.Name, units.Seconds((save + leadMargin(save)).Seconds()))
		}
	}
	return margin, lead, mwhy + ", " + lwhy
}
