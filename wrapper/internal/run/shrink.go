package run

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/trainrun/trainrun/plan"
	"github.com/trainrun/trainrun/topo"
)

// Shrink to fit (issue 31, part B). A step that lost more nodes than there
// are spares is requeued without them, and waits in the queue for nodes it
// may not need. With --shrink yes (policy Shrink=yes), for a trainer that
// declares it can resume at another data-parallel size (the job's
// environment has TRAINRUN_RESHARD=dp), the step restarts inside the
// allocation on the healthy nodes instead: the same TP×PP×CP, a smaller DP,
// and the global batch kept by gradient accumulation (TRAINRUN_GRAD_ACCUM;
// the planner checks the memory when the run knows its model). The next
// requeue plans the whole allocation again: the run grows back.

type shrinkOptions struct {
	shrink string
}

func (o *shrinkOptions) addFlags(fs *pflag.FlagSet, getenv func(string) string) {
	fs.StringVar(&o.shrink, "shrink", cmp.Or(getenv("TRAINRUN_SHRINK"), "no"), "yes: a step that lost nodes no spare can replace restarts inside the job on the healthy ones with the same tp×pp×cp, a smaller dp and the global batch kept by gradient accumulation, for a trainer that declares TRAINRUN_RESHARD=dp in the job's environment (it loads a checkpoint saved at another dp); the next requeue grows back; no: requeue without the lost nodes (env TRAINRUN_SHRINK)")
}

func (o shrinkOptions) check() error {
	switch strings.ToLower(o.shrink) {
	case "", "yes", "no":
		return nil
	}
	return usageErrorf("--shrink %q (or TRAINRUN_SHRINK): want yes or no", o.shrink)
}

// ReshardEnv is how a trainer declares that it resumes at another
// data-parallel size: TRAINRUN_RESHARD=dp in the job's environment (the
// batch script exports it; the ranks inherit it).
const ReshardEnv = "TRAINRUN_RESHARD"

// shrinkLayout is the layout on world GPUs with the same model-parallel
// degrees and global batch as l: dp = world/(tp·pp·cp), grad_accum =
// global/(dp·micro). ok false says why not.
func shrinkLayout(l plan.Layout, world int) (plan.Layout, string, bool) {
	mp := max(l.TP, 1) * max(l.PP, 1) * max(l.CP, 1)
	if world < mp || world%mp != 0 {
		return l, fmt.Sprintf("%d GPUs left are not a multiple of tp×pp×cp = %d", world, mp), false
	}
	dp := world / mp
	mb := max(l.MicroBatch, 1)
	global := l.DP * mb * max(l.GradAccum, 1)
	if global%(dp*mb) != 0 {
		return l, fmt.Sprintf("the global batch %d (dp %d × micro batch %d × grad accum %d) is not a multiple of dp %d × micro batch %d", global, l.DP, mb, max(l.GradAccum, 1), dp, mb), false
	}
	n := l
	n.DP, n.GradAccum = dp, global/(dp*mb)
	return n, "", true
}

// shrinkTo is the layout and nodes a shrink after losing gone would run on;
// why says what refuses it.
func (r *runner) shrinkTo(gone []string) (plan.Layout, []string, string, bool) {
	l := r.choice.Layout
	switch {
	case !strings.EqualFold(r.cfg.shrink.shrink, "yes"):
		return l, nil, "--shrink no", false
	case r.env.Getenv(ReshardEnv) != "dp":
		return l, nil, fmt.Sprintf("the trainer does not declare %s=dp (it cannot load a checkpoint saved at another dp)", ReshardEnv), false
	}
	var work []string
	for _, n := range r.sess.spare.all {
		if (slices.Contains(r.alloc.Nodes, n) || slices.Contains(r.sess.spare.spare, n)) && !slices.Contains(gone, n) && !slices.Contains(r.sess.spare.lost, n) {
			work = append(work, n)
		}
	}
	if len(work) == 0 {
		return l, nil, "no healthy node left", false
	}
	n, why, ok := shrinkLayout(l, len(work)*r.alloc.TasksPerNode)
	if !ok {
		return l, nil, why, false
	}
	if why, ok := r.shrinkFits(n, len(work)*r.alloc.TasksPerNode); !ok {
		return l, nil, why, false
	}
	return n, work, "", true
}

// shrinkFits asks the planner whether the shrunk layout fits the GPUs'
// memory (a smaller dp shards ZeRO's states over fewer GPUs); without a
// model the layout was pinned and is not evaluated.
func (r *runner) shrinkFits(l plan.Layout, world int) (string, bool) {
	m, j, ok, err := r.planModel()
	if err != nil || !ok {
		return "", true
	}
	_, why := r.predictOn(m, j, l, world, planGPU(r.choice.PlanFile)) // resize.go
	return why, why == ""
}

// shrinkOutcome says, for Decide, whether a step that lost more nodes than
// there are spares may restart inside the allocation, shrunk.
func (r *runner) shrinkOutcome(o *Outcome) {
	lost := LostNodes(o.FailedNodes)
	if !o.Failed() || len(lost) == 0 || len(lost) <= o.SpareNodes {
		return
	}
	l, work, why, ok := r.shrinkTo(lost)
	o.CanShrink = ok
	if ok {
		o.ShrinkTo = fmt.Sprintf("%d node(s), dp %d (was %d), grad accum %d (was %d)", len(work), l.DP, r.choice.Layout.DP, l.GradAccum, r.choice.Layout.GradAccum)
	} else if strings.EqualFold(r.cfg.shrink.shrink, "yes") {
		r.logf("shrink: not shrinking after losing %s: %s", strings.Join(lost, ","), why)
	}
}

// shrinkToFit runs the next step on the healthy nodes with the shrunk
// layout; false when it may not (then the caller goes on as before).
func (r *runner) shrinkToFit(f runFacts, gone []string) (bool, error) {
	l, work, why, ok := r.shrinkTo(gone)
	if !ok {
		r.logf("shrink: not shrinking: %s", why)
		return false, nil
	}
	old := r.choice.Layout
	r.sess.spare.lost = append(r.sess.spare.lost, gone...)
	r.sess.spare.spare = nil // the healthy spares joined the step
	r.alloc = withNodes(r.alloc, work)
	r.choice.Layout = l
	r.choice.Eval = nil // evaluated for the old layout
	r.logf("shrink: the lost %s leave %d node(s) and no spare: the step runs on %s (%d ranks) with tp %d pp %d cp %d, dp %d (was %d), grad accum %d (was %d): the global batch %d is kept; the next requeue grows back",
		strings.Join(gone, ","), len(work), topo.CompressHostlist(work), r.alloc.World(), l.TP, l.PP, l.CP, l.DP, old.DP, l.GradAccum, old.GradAccum,
		l.DP*max(l.MicroBatch, 1)*l.GradAccum)
	p, err := r.place(f, r.choice)
	if err != nil {
		return true, err
	}
	r.placed = p
	return true, nil
}
