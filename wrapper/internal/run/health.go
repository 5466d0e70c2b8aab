package run

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/trainrun/trainrun/checkpoint"
	"github.com/trainrun/trainrun/internal/slurm"
	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
	"github.com/trainrun/trainrun/wrapper/internal/launch"
	"github.com/trainrun/trainrun/wrapper/obs"
)

// Node health, job-scoped (issue 31): before the first step and before
// every restart inside the allocation, one srun runs the shim's health mode
// on each node the step may use (exec-task --health: GPUs against the GRES,
// InfiniBand ports, free space on the store and /dev/shm, the site's
// HealthCheck= script), bounded by the script's timeout. A node that fails
// is named with its check in the log, the events (report, metric
// trainrun_node_health_failures_total) and the history (a failed node of
// cause node-fault), and kept out: a spare takes its place; without one the
// job is requeued without it.
//
// The pass runs when the job holds spare nodes (a failing node can be
// replaced) or the site gives a script (HealthCheck=, TRAINRUN_HEALTH_CHECK);
// TRAINRUN_HEALTH=on runs it always, off never.

// healthDir is the pass's directory in the job directory: one report per node.
const healthDir = "health"

// healthMinFree is the free space each node must see on the checkpoint
// store and in /dev/shm.
const healthMinFree = 1 << 30

// healthSpec is what the pass checks, and whether it runs.
func (r *runner) healthSpec() (launch.HealthSpec, bool) {
	script := cmp.Or(r.env.Getenv("TRAINRUN_HEALTH_CHECK"), r.cfg.healthScript)
	on := r.cfg.fault.spareNodes > 0 || script != ""
	switch strings.ToLower(r.env.Getenv("TRAINRUN_HEALTH")) {
	case "on", "1", "yes":
		on = true
	case "off", "0", "no":
		on = false
	}
	timeout := r.cfg.healthTimeout
	if d, err := time.ParseDuration(r.env.Getenv("TRAINRUN_HEALTH_CHECK_TIMEOUT")); err == nil && d > 0 {
		timeout = d
	}
	if timeout <= 0 {
		timeout = time.Minute
	}
	return launch.HealthSpec{GPUs: r.alloc.GPUsPerNode, Space: []string{r.dirs.ckptDir, "/dev/shm"}, MinFree: healthMinFree,
		Script: script, Timeout: timeout.String(), Sysfs: r.env.Getenv("TRAINRUN_HEALTH_SYSFS")}, on
}

// runHealth runs the pass on nodes and returns the failed checks of each
// node that failed. A pass that could not run at all (srun failed, no
// node reported) is a warning: the step starts without it.
func (r *runner) runHealth(ctx context.Context, nodes []string, when string) map[string][]launch.HealthCheck {
	spec, on := r.healthSpec()
	if !on || len(nodes) == 0 {
		return nil
	}
	dir := r.dirs.in(healthDir)
	os.RemoveAll(dir) // an earlier pass's reports say nothing now
	if err := os.MkdirAll(dir, 0o755); err != nil {
		r.logf("warning: health pass %s: %v; the step starts without it", when, err)
		return nil
	}
	n := fmt.Sprint(len(nodes))
	args := []string{"--nodelist=" + strings.Join(nodes, ","), "--nodes=" + n, "--ntasks=" + n, "--ntasks-per-node=1", "--overlap",
		"--kill-on-bad-exit=0", "--input=none", "--job-name=trainrun-health"}
	args = append(append(append(args, launch.ShimArgv(r.cfg.self, r.cfg.shim)...), "--health", dir), spec.Args()...)
	timeout, _ := time.ParseDuration(spec.Timeout)
	ctx, cancel := context.WithTimeout(ctx, timeout+30*time.Second)
	defer cancel()
	t0 := time.Now()
	out, err := r.env.Slurm.Srun(ctx, args...)
	took := time.Since(t0)
	r.sess.healthTime += took
	failed, reported := map[string][]launch.HealthCheck{}, 0
	for _, node := range nodes {
		var rep launch.HealthReport
		if e := launch.ReadJSON(filepath.Join(dir, node+".json"), &rep); e != nil {
			failed[node] = []launch.HealthCheck{{Name: "report", Detail: fmt.Sprintf("no health report within %s (the node's task did not run or did not finish)", units0(timeout+30*time.Second))}}
			continue
		}
		reported++
		if f := rep.Failed(); len(f) > 0 {
			failed[node] = f
		}
	}
	if reported == 0 {
		r.logf("warning: health pass %s: no node reported (%v%s); the step starts without it", when, err, prefixed(": ", strings.TrimSpace(string(out))))
		return nil
	}
	r.logf("health pass %s: %d node(s) checked in %.2f s, %d failed", when, len(nodes), took.Seconds(), len(failed))
	for _, node := range nodes {
		for _, c := range failed[node] {
			r.logf("node %s failed the health check %s %s: %s; it is kept out of the step", node, c.Name, when, c.Detail)
			r.observeHealth(obs.Event{Kind: obs.KindHealth, Why: when, FailedNodes: []obs.FailedNode{{Node: node, Cause: c.Name, Detail: c.Detail}}})
		}
	}
	return failed
}

func units0(d time.Duration) string { return d.Round(time.Second).String() }

// observeHealth tells the observer, or keeps the event until it starts
// (the first pass runs before it).
func (r *runner) observeHealth(e obs.Event) {
	if r.sess.obs == nil {
		r.sess.healthPending = append(r.sess.healthPending, e)
		return
	}
	r.observe(e)
}

// flushHealth hands the observer the events of a pass that ran before it.
func (r *runner) flushHealth() {
	for _, e := range r.sess.healthPending {
		r.observe(e)
	}
	r.sess.healthPending = nil
}

// healthNote is a failed node's record of its failed checks.
func healthNote(node string, checks []launch.HealthCheck, when string) checkpoint.FailedNode {
	var parts []string
	for _, c := range checks {
		parts = append(parts, c.Name+": "+c.Detail)
	}
	return checkpoint.FailedNode{Node: node, Cause: checkpoint.CauseNodeFault, Detail: "health check " + when + ": " + strings.Join(parts, "; ")}
}

// healthBeforeStart runs the pass on every node of the allocation before
// the first step: the nodes that fail leave the allocation the step is
// planned on (each uses up a spare: setupSpares sets aside fewer); more
// than the spares requeues the job without them.
func (r *runner) healthBeforeStart(ctx context.Context) error {
	a := r.alloc
	failed := r.runHealth(ctx, a.Nodes, "before the first step")
	if len(failed) == 0 {
		return nil
	}
	var bad, good []string
	for _, n := range a.Nodes {
		if checks, ok := failed[n]; ok {
			bad = append(bad, n)
			r.NoteFailedNode(healthNote(n, checks, "before the first step"))
		} else {
			good = append(good, n)
		}
	}
	if len(bad) > r.cfg.fault.spareNodes || len(good) == 0 {
		return r.requeueWithout(ctx, bad)
	}
	r.alloc = withNodes(a, good)
	r.sess.spare.lost = append(r.sess.spare.lost, bad...)
	r.sess.spare.unhealthy = len(bad)
	r.logf("node(s) %s kept out after the health pass: the step uses the other %d node(s), %d of %s left as spares",
		strings.Join(bad, ","), len(good), r.cfg.fault.spareNodes-len(bad), r.spareSource())
	return nil
}

// requeueWithout requeues the job without the nodes that failed the health
// pass before the first step (more than the spares), or stops when it may
// not be requeued.
func (r *runner) requeueWithout(ctx context.Context, bad []string) error {
	a := r.alloc
	what := fmt.Sprintf("node(s) %s failed the health pass before the first step and %s holds only %d spare node(s)", strings.Join(bad, ","), r.spareSource(), r.cfg.fault.spareNodes)
	hint := slurm.DrainHint(bad, "trainrun: failed health check in job "+a.JobID)
	qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	// The job's record (the gather phase has not asked yet): may it be
	// requeued, and what does it exclude already.
	j, err := r.env.Slurm.Job(qctx, a.JobID)
	if err != nil || !j.Requeue || !j.IsBatch() || a.RestartCount >= r.cfg.maxRequeue {
		why := "Requeue=0, an interactive allocation, or the requeue limit"
		if err != nil {
			why = err.Error()
		}
		return withCode(exitcode.Slurm, fmt.Errorf("%s; the job cannot be requeued (%s): resubmit with --exclude=%s, or have an admin drain them: %s",
			what, why, strings.Join(bad, ","), hint))
	}
	list := strings.Join(bad, ",")
	if l, err := slurm.MergeHostlists(j.Record["ExcNodeList"], bad); err == nil {
		list = l
	}
	if err := r.env.Slurm.Requeue(qctx, a.JobID); err != nil {
		return withCode(exitcode.Stopped, fmt.Errorf("%s, but requeueing failed: %v", what, err))
	}
	r.logf("%s: requeued without them (restart %d of at most %d)", what, a.RestartCount+1, r.cfg.maxRequeue)
	r.excludeBadNodes(list, bad)
	return withCode(exitcode.Requeued, exitcode.ErrSilent)
}

// healthBeforeRestart runs the pass on the nodes the restarted step may
// use (its own and the spares, less those lost): a spare that fails is
// spare no more, a step node that fails is replaced like a lost one
// (replaceLostNodes).
func (r *runner) healthBeforeRestart(ctx context.Context) {
	gone := LostNodes(r.failedNodes())
	var nodes []string
	for _, n := range slices.Concat(r.alloc.Nodes, r.sess.spare.spare) {
		if !slices.Contains(gone, n) && !slices.Contains(nodes, n) {
			nodes = append(nodes, n)
		}
	}
	when := fmt.Sprintf("before restart %d", r.sess.restarts)
	failed := r.runHealth(ctx, nodes, when)
	for _, n := range nodes {
		checks, ok := failed[n]
		if !ok {
			continue
		}
		if i := slices.Index(r.sess.spare.spare, n); i >= 0 {
			r.sess.spare.spare = slices.Delete(r.sess.spare.spare, i, i+1)
			r.sess.spare.lost = append(r.sess.spare.lost, n)
			r.logf("spare node %s failed the health pass: not used by this job", n)
		}
		r.NoteFailedNode(healthNote(n, checks, when))
	}
}
