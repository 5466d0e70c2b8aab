package run

import (
	"strconv"
	"time"
)

// submitLeadEnv names the checkpoint lead `trainrun submit` sized the job's
// time limit with (seconds): its limit is the predicted time plus the
// plan's band plus this lead, so the controller's own clock must ask for
// the checkpoint this long before the end, not the default 10 minutes (a
// lead longer than the one in the limit would stop every job before it
// finishes).
const submitLeadEnv = "TRAINRUN_SUBMIT_LEAD"

// submittedLead is the lead submit exported, at most half the limit (as
// the grace budget caps any lead); ok is false when none, when one that
// does not parse as a positive number of seconds, or when the lead was
// chosen: given (--ckpt-lead, the plugin) or set by the site's policy
// (submit sized the limit with that one already). A lead above half a
// short limit is capped, not dropped: dropping it left the default lead
// (10 min, or the policy's default CkptLead 5m) on a one-minute limit,
// and every run of the job checkpointed and requeued at once.
func (r *runner) submittedLead(limit time.Duration) (time.Duration, bool) {
	src := r.cfg.source("ckpt-lead")
	if src.kind != fromDefault && !(src.kind == fromPolicy && src.where == "default") {
		return 0, false
	}
	v := r.env.Getenv(submitLeadEnv)
	if v == "" {
		return 0, false
	}
	s, err := strconv.ParseFloat(v, 64)
	if err != nil || !(s > 0 && s <= 1e9) { // NaN fails both
		return 0, false
	}
	d := time.Duration(s * float64(time.Second))
	if limit > 0 && d > limit/2 {
		d = limit / 2
	}
	return d, true
}
