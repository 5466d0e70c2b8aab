package submit

import (
	"fmt"
	"time"

	"github.com/trainrun/trainrun/internal/units"
	"github.com/trainrun/trainrun/plan"
)

// searchKinds plans one candidate's cluster with each of req.Kinds in turn
// (the job's own kind when there are none) and keeps the first that fits,
// as plan.Cheapest does per GPU count: c.Result and c.Finetune are that
// kind's, or the first kind's when none fits, with NoFit's reason. It
// returns the job with the kind taken.
func searchKinds(req Request, cl plan.Cluster, c *Candidate) (plan.Job, string) {
	kinds := req.Kinds
	if len(kinds) == 0 {
		kinds = []plan.Finetune{plan.FinetuneOf(req.Job)}
	}
	var firstJob plan.Job
	var firstMsg string
	for i, f := range kinds {
		j := req.Job.WithFinetune(f)
		r := plan.Search(req.Model, j, cl, req.Search)
		msg := plan.NoFit(req.Model, j, cl, req.Search, r)
		if msg == "" && r.Plan != nil {
			c.Result, c.Finetune = r, f.String()
			return j, ""
		}
		if i == 0 {
			c.Result, c.Finetune = r, f.String()
			firstJob, firstMsg = j, msg
		}
	}
	if len(kinds) > 1 {
		firstMsg = fmt.Sprintf("%s (nor with %s)", firstMsg, kindWords(kinds[1:]))
	}
	return firstJob, firstMsg
}

func kindWords(ks []plan.Finetune) string {
	s := ""
	for i, k := range ks {
		if i > 0 {
			s += ", "
		}
		s += "--finetune " + k.String()
	}
	return s
}

// overLimit takes a fitting candidate out of the choice when its training
// runs past limit (--time-limit), saying by how much.
func overLimit(c *Candidate, limit time.Duration) {
	if limit <= 0 || !c.Fits || c.TrainS <= limit.Seconds() {
		return
	}
	c.Fits = false
	c.Why = fmt.Sprintf("too slow: trains %s with --finetune %s, over the --time-limit %s", units.Seconds(c.TrainS), c.Finetune, units.Seconds(limit.Seconds()))
}
