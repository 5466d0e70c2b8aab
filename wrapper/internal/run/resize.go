package run

// Resize at a requeue (issue 34, sizing's second half). `trainrun submit
// --min-gpus A --max-gpus B` exports the job's size range
// (TRAINRUN_MIN_GPUS, TRAINRUN_MAX_GPUS) when A < B. At every requeue the
// controller decides (time limit, preemption, a stop request, a failure),
// for a trainer that declares TRAINRUN_RESHARD=dp, it weighs the whole-node
// sizes in the range that keep tp×pp×cp and the global batch (shrinkLayout)
// and fit (the planner's memory check): predicted finish = the wait to
// start at that size + steps left × the step time observed here scaled by
// the planner's predicted ratio between the sizes. A size needing more
// nodes than can start it at once (the job's own, less failed ones, and the
// partition's idle nodes when no other job waits for it) is not taken. It
// resizes when that finishes at least resizeMargin sooner than staying:
// the pending job gets the size (scontrol update NumNodes NumTasks
// NumCPUs), the end event in the history records it (resize_nodes,
// resize_why), and the observer counts it (trainrun_resizes_total
// {direction}, the report's resizes). The next incarnation derives its
// layout for the allocation it got from the plan of the old size
// (resizedPlan): same tp×pp×cp, dp = world/mp, grad accum = global/(dp·micro).

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/trainrun/trainrun/checkpoint"
	"github.com/trainrun/trainrun/plan"
	"github.com/trainrun/trainrun/wrapper/internal/planjson"
	"github.com/trainrun/trainrun/wrapper/obs"
)

// resizeMargin: a resize must finish at least this share sooner than
// staying at the size the job has (as migrateMargin).
const resizeMargin = 0.10

// ResizeInput is what DecideResize weighs.
type ResizeInput struct {
	Nodes            int         // this incarnation's
	GPUsPerNode      int         // ranks per node
	MinGPUs, MaxGPUs int         // the job's range (TRAINRUN_MIN_GPUS, TRAINRUN_MAX_GPUS)
	Layout           plan.Layout // this incarnation's
	StepsLeft        int64
	StepTime         time.Duration // observed at Nodes
	// Free is how many nodes the requeued job can start on at once: its
	// own (less failed ones) and, when FreeWhy is "", the partition's idle
	// nodes.
	Free        int
	FreeWhy     string
	RequeueWait time.Duration // requeue to start where the nodes are free (measured, else defaultRequeueWait)
	StayWait    time.Duration // when Nodes > Free: the wait to start at Nodes (0: not known)
	// Predict is the planner's step time (seconds) at each node count
	// (Nodes included), NoFit why a size does not fit the GPUs' memory.
	Predict map[int]float64
	NoFit   map[int]string
	Margin  float64
}

// ResizeVerdict is DecideResize's answer. Stay and Resized are the
// predicted times from the requeue to the finish.
type ResizeVerdict struct {
	Resize        bool
	Nodes         int
	Layout        plan.Layout
	StepTime      time.Duration // predicted at Nodes
	Stay, Resized time.Duration
	Why           string
}

// DecideResize says whether the next incarnation runs on another number of
// nodes, and on how many: the size in range with the earliest predicted
// finish, when that is at least Margin sooner than staying.
func DecideResize(in ResizeInput) ResizeVerdict {
	v := ResizeVerdict{Nodes: in.Nodes, Layout: in.Layout}
	gpn := max(in.GPUsPerNode, 1)
	lo, hi := (in.MinGPUs+gpn-1)/gpn, in.MaxGPUs/gpn
	switch {
	case in.StepsLeft <= 0 || in.StepTime <= 0:
		v.Why = "no steps left or no step time observed"
		return v
	case lo > hi || lo < 1:
		v.Why = fmt.Sprintf("no whole-node size in %d-%d GPUs at %d GPUs per node", in.MinGPUs, in.MaxGPUs, gpn)
		return v
	}
	stayWait := in.RequeueWait
	if in.Nodes > in.Free {
		if stayWait = in.StayWait; stayWait <= 0 {
			v.Why = fmt.Sprintf("the wait to start again at %d node(s) is not known", in.Nodes)
			return v
		}
	}
	v.Stay = stayWait + time.Duration(in.StepsLeft)*in.StepTime
	here := in.Predict[in.Nodes]
	var whys []string
	for n := lo; n <= hi; n++ {
		if n == in.Nodes {
			continue
		}
		l, why, ok := shrinkLayout(in.Layout, n*gpn)
		switch {
		case !ok:
			whys = append(whys, fmt.Sprintf("%d node(s): %s", n, why))
		case in.NoFit[n] != "":
			whys = append(whys, fmt.Sprintf("%d node(s): %s", n, in.NoFit[n]))
		case n > in.Free:
			whys = append(whys, fmt.Sprintf("%d node(s): %d can start it at once (%s), a size that must wait is not taken", n, in.Free, cmp.Or(in.FreeWhy, "its own and the idle ones")))
		case here <= 0 || in.Predict[n] <= 0:
			whys = append(whys, fmt.Sprintf("%d node(s): no predicted step time to scale the observed one by", n))
		default:
			st := time.Duration(float64(in.StepTime) * in.Predict[n] / here)
			fin := in.RequeueWait + time.Duration(in.StepsLeft)*st
			if float64(fin) > float64(v.Stay)*(1-in.Margin) {
				whys = append(whys, fmt.Sprintf("%d node(s): finishes in %s vs %s staying, not %.0f%% sooner", n, rnd(fin), rnd(v.Stay), in.Margin*100))
			} else if !v.Resize || fin < v.Resized {
				v.Resize, v.Nodes, v.Layout, v.StepTime, v.Resized = true, n, l, st, fin
			}
		}
	}
	if !v.Resize {
		v.Why = fmt.Sprintf("staying at %d node(s): %s", in.Nodes, cmp.Or(strings.Join(whys, "; "), "no other size in range"))
		return v
	}
	dir := map[bool]string{true: "growing", false: "shrinking"}[v.Nodes > in.Nodes]
	v.Why = fmt.Sprintf("%s from %d to %d node(s) (%d-%d GPUs allowed): %d steps left finish in %s there (dp %d, grad accum %d, %s/step: %s observed × the planner's %.3gs/%.3gs) vs %s staying (%s/step observed, dp %d, grad accum %d)",
		dir, in.Nodes, v.Nodes, in.MinGPUs, in.MaxGPUs, in.StepsLeft, rnd(v.Resized), v.Layout.DP, v.Layout.GradAccum, rnd(v.StepTime), rnd(in.StepTime),
		in.Predict[v.Nodes], here, rnd(v.Stay), rnd(in.StepTime), in.Layout.DP, in.Layout.GradAccum)
	return v
}

// resizeState is the decision taken at this incarnation's requeue.
type resizeState struct {
	from int
	v    ResizeVerdict
}

// sizeRange is the job's size range from its environment; why says why
// there is none ("": there is one).
func (r *runner) sizeRange() (lo, hi int, why string) {
	a, b := r.env.Getenv(planjson.MinGPUsEnv), r.env.Getenv(planjson.MaxGPUsEnv)
	if a == "" || b == "" {
		return 0, 0, "no size range (" + planjson.MinGPUsEnv + ", " + planjson.MaxGPUsEnv + ": trainrun submit --min-gpus < --max-gpus exports them)"
	}
	lo, e1 := strconv.Atoi(a)
	hi, e2 := strconv.Atoi(b)
	if e1 != nil || e2 != nil || lo < 1 || hi <= lo {
		return 0, 0, fmt.Sprintf("%s=%q %s=%q: want whole numbers 1 <= min < max (trainrun submit exports them; unset them to keep the size)", planjson.MinGPUsEnv, a, planjson.MaxGPUsEnv, b)
	}
	return lo, hi, ""
}

// resizeOff says why this requeue does not weigh a resize ("": it does).
func (r *runner) resizeOff() string {
	if _, _, why := r.sizeRange(); why != "" {
		return why
	}
	switch {
	case r.env.Getenv(ReshardEnv) != "dp":
		return fmt.Sprintf("the trainer does not declare %s=dp (it cannot load a checkpoint saved at another dp)", ReshardEnv)
	case r.sess.mig.to != "":
		return "the job moves to partition " + r.sess.mig.to + " (--migrate): its size is that partition's plan's"
	case len(r.sess.spare.all) > len(r.alloc.Nodes): // its observed step and layout are not the job's size's
		return fmt.Sprintf("the step ran on %d of the job's %d nodes (spare nodes, nodes the health pass kept out, or a shrink after a lost node)", len(r.alloc.Nodes), len(r.sess.spare.all))
	case r.cfg.obs.trainSteps == "":
		return "the steps left are not known: give --train-steps (TRAINRUN_TRAIN_STEPS)"
	case r.cfg.dryRun:
		return "a dry run"
	}
	return ""
}

// planResize weighs a resize for the requeue d asks for, logs the verdict
// and keeps it for the history's end event and resizeRequeued.
func (r *runner) planResize(d Decision) {
	r.sess.resize = resizeState{}
	if why := r.resizeOff(); why != "" {
		if r.env.Getenv(planjson.MinGPUsEnv) != "" {
			r.logf("resize: not weighed at this requeue: %s", why)
		}
		return
	}
	in, why := r.resizeInput(d)
	if why != "" {
		r.logf("resize: not weighed at this requeue: %s", why)
		return
	}
	v := DecideResize(in)
	r.logf("resize: %s", v.Why)
	if v.Resize {
		r.sess.resize = resizeState{from: in.Nodes, v: v}
	}
}

// resizeInput gathers DecideResize's inputs; why says what is missing.
func (r *runner) resizeInput(d Decision) (ResizeInput, string) {
	lo, hi, _ := r.sizeRange()
	in := ResizeInput{Nodes: len(r.alloc.Nodes), GPUsPerNode: r.alloc.TasksPerNode, MinGPUs: lo, MaxGPUs: hi, Layout: r.choice.Layout,
		StepTime: r.sess.mig.observedStep(), Margin: resizeMargin}
	total, err := strconv.ParseInt(r.cfg.obs.trainSteps, 10, 64)
	if err != nil {
		return in, fmt.Sprintf("--train-steps %q is not a step count", r.cfg.obs.trainSteps)
	}
	done := r.sess.mig.lastStep
	if d.Tag != "" { // the next incarnation resumes from it
		done = checkpoint.StepOf(d.Tag)
	}
	in.StepsLeft = total - done
	if in.StepTime <= 0 {
		return in, "no step time observed in this incarnation (the trainer reports progress with trainrun's client)"
	}
	if r.ckpt.store != nil {
		incs, _ := r.ckpt.store.History().Load()
		in.RequeueWait = requeueWait(incs)
	}
	in.RequeueWait = cmp.Or(in.RequeueWait, defaultRequeueWait)
	in.Predict, in.NoFit = map[int]float64{}, map[int]string{}
	gpn := max(r.alloc.TasksPerNode, 1)
	for n := (lo + gpn - 1) / gpn; n <= hi/gpn; n++ {
		if l, _, ok := shrinkLayout(r.choice.Layout, n*gpn); ok {
			in.Predict[n], in.NoFit[n] = r.resizePredict(l, n*gpn)
		}
	}
	r.resizeFree(&in)
	return in, ""
}

// resizeFree counts the nodes the requeued job can start on at once: its
// own, less the ones this run's failure points to, and the partition's
// idle nodes when no other job waits for it (a resize never goes ahead of
// the queue). One `scontrol show node` and one `scontrol show job`; the
// wait at the current size when fewer nodes are free (sbatch --test-only).
func (r *runner) resizeFree(in *ResizeInput) {
	failed := map[string]bool{}
	for _, f := range r.failedNodes() {
		failed[f.Node] = true
	}
	own := 0
	for _, n := range r.alloc.Nodes {
		if !failed[n] {
			own++
		}
	}
	in.Free = own
	part := r.partition()
	if strings.Contains(part, ",") {
		part = r.facts.job.Partition
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	nodes, nerr := r.env.Slurm.Nodes(ctx)
	jobs, jerr := r.env.Slurm.Jobs(ctx)
	switch {
	case nerr != nil:
		in.FreeWhy = fmt.Sprintf("its own only: the partition's nodes are not known: %v", nerr)
	case jerr != nil:
		in.FreeWhy = fmt.Sprintf("its own only: the queue is not known: %v", jerr)
	case len(waitingFor(jobs, part, r.alloc.JobID, 0)) > 0: // with no nodes left over, every pending job there
		in.FreeWhy = fmt.Sprintf("its own only: %d other job(s) wait for partition %s", len(waitingFor(jobs, part, r.alloc.JobID, 0)), part)
	default:
		for _, nd := range nodes {
			if !slices.Contains(r.alloc.Nodes, nd.Name) && slices.Contains(nd.Partitions, part) && nd.State == "IDLE" && nd.GPUsUsed() == 0 {
				in.Free++
			}
		}
	}
	if in.Nodes > in.Free && nerr == nil {
		in.StayWait, _ = r.migrateStart(ctx, part, in.Nodes, in.Free)
	}
}

// resizePredict is the planner's step time (seconds) for l on world GPUs,
// or why it does not fit; 0 and "" when the run knows no model (a pinned
// layout): then no size is predicted and the job keeps its size.
func (r *runner) resizePredict(l plan.Layout, world int) (float64, string) {
	m, j, ok, err := r.planModel()
	if err != nil || !ok {
		return 0, ""
	}
	return r.predictOn(m, j, l, world, planGPU(r.choice.PlanFile))
}

// planGPU is the GPU type the plan file at path was made for ("": none).
func planGPU(path string) string {
	if path == "" {
		return ""
	}
	if in, err := readPlanInputs(path); err == nil && in != nil {
		return in.GPU
	}
	return ""
}

// predictOn is the planner's step time for l on world GPUs of the
// allocation's type (--gpu, the probe's, the plan's, the policy's), or why
// l does not fit their memory.
func (r *runner) predictOn(m plan.Model, j plan.Job, l plan.Layout, world int, planGPU string) (float64, string) {
	g, err := plan.LookupGPU(cmp.Or(r.cfg.plan.GPU, r.probedGPUName(), planGPU, r.cfg.policyGPU.Value, "h100-sxm"))
	if err != nil {
		return 0, ""
	}
	cl := plan.ClusterOf(g, world)
	cl.GPUsPerNode = r.alloc.TasksPerNode
	e := plan.Evaluate(m, j, cl, l)
	if !e.Memory.Fits {
		return 0, fmt.Sprintf("dp %d needs %.1f GiB per GPU, more than the %.1f GiB there", l.DP, e.Memory.PerGPU/(1<<30), e.Memory.Capacity/(1<<30))
	}
	return e.Time.Step, ""
}

// resizeRequeued: the job was requeued with a resize decided; give the
// pending job its new size and tell the observer.
func (r *runner) resizeRequeued() {
	s := r.sess.resize
	if !s.v.Resize {
		return
	}
	tpn := max(r.alloc.TasksPerNode, 1)
	cpt := max(r.alloc.CPUsPerTask, 1)
	var err error
	for try := 0; try < 10; try++ {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err = r.env.Slurm.SetNodes(ctx, r.alloc.JobID, s.v.Nodes, s.v.Nodes*tpn, s.v.Nodes*tpn*cpt)
		cancel()
		if err == nil {
			break
		}
		time.Sleep(300 * time.Millisecond)
	}
	if err != nil {
		r.logf("warning: resize: setting the requeued job's size to %d node(s): %v (it starts again at %d; set it with scontrol update jobid=%s NumNodes=%d-%d NumTasks=%d NumCPUs=%d)",
			s.v.Nodes, err, s.from, r.alloc.JobID, s.v.Nodes, s.v.Nodes, s.v.Nodes*tpn, s.v.Nodes*tpn*cpt)
		return
	}
	r.logf("resize: the requeued job %s runs on %d node(s) next (was %d)", r.alloc.JobID, s.v.Nodes, s.from)
	r.observe(obs.Event{Kind: obs.KindResize, ResizeFrom: s.from, ResizeTo: s.v.Nodes, Message: s.v.Why})
}

// resizedPlan derives the layout for world GPUs from the plan at path,
// made for another number (a requeue resized the job), for a trainer that
// declares TRAINRUN_RESHARD=dp: the plan's tp×pp×cp and global batch, dp =
// world/(tp·pp·cp), grad accum = global/(dp·micro) (shrinkLayout), when the
// planner finds it fits (the plan's model, its "inputs"). nil, logged, when
// not.
func (r *runner) resizedPlan(path string, world int) *plan.Layout {
	if r.env.Getenv(ReshardEnv) != "dp" {
		return nil
	}
	b, err := planjson.ReadSubmitted(path)
	if err != nil {
		return nil
	}
	pf, err := planjson.Decode(b)
	if err != nil || pf.Plan == nil {
		return nil
	}
	was := plan.LayoutGPUs(pf.Plan.Layout)
	ev, err := ReadRunPlan(path, was) // the plan's own checks, at its own size
	if err != nil || was == world {
		return nil
	}
	l, why, ok := shrinkLayout(ev.Layout, world)
	if ok {
		if in, err := readPlanInputs(path); err == nil && in != nil {
			if m, j, known, err := in.resolve(path); err == nil && known {
				_, why = r.predictOn(m, j, l, world, in.GPU)
				ok = why == ""
			}
		}
	}
	if !ok {
		r.logf("resize: the plan %s is for %d GPUs, the allocation has %d, and its layout cannot be kept: %s", path, was, world, why)
		return nil
	}
	r.logf("resize: the plan %s is for %d GPUs, the allocation has %d: tp %d pp %d cp %d kept, dp %d (was %d), grad accum %d (was %d): the global batch %d is kept",
		path, was, world, l.TP, l.PP, l.CP, l.DP, ev.Layout.DP, l.GradAccum, ev.Layout.GradAccum, l.DP*max(l.MicroBatch, 1)*l.GradAccum)
	return &l
}

// why is the decision's reason for the history ("": no resize).
func (s resizeState) why() string {
	if !s.v.Resize {
		return ""
	}
	return s.v.Why
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
