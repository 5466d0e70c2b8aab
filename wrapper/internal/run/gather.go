// The gather phase of trainrun run: what Slurm and the probe say beyond the
// environment.

package run

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/trainrun/trainrun/internal/slurm"
	"github.com/trainrun/trainrun/plan"
	"github.com/trainrun/trainrun/topo"
	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
	"github.com/trainrun/trainrun/wrapper/internal/jobdir"
	"github.com/trainrun/trainrun/wrapper/internal/launch"
)

// runFacts is what the gather phase learns beyond the environment.
type runFacts struct {
	addrs   map[string]string           // NodeAddr by node name (scontrol show node)
	nodes   map[string]launch.NodeFacts // the probe's node facts (nil: no probe)
	cluster *topo.Cluster               // the switch topology (flat when unknown)
	job     slurm.Job                   // scontrol show job: the end time, limits, name (zero when it failed)
	grace   graceLimits                 // the partition's GraceTime and KillWait (or the policy's CkptGraceBudget)
	lead    time.Duration               // the checkpoint lead in use
	tQuery  time.Duration               // from start to the end of the scontrol queries and the probe
}

// gather asks what the environment does not say: end time (scontrol show
// job), node addresses (scontrol show node), limits, topology, node facts
// (probe): in parallel. Only an interrupt or a failed probe is fatal.
func (r *runner) gather(ctx context.Context) (runFacts, error) {
	a := r.alloc
	var f runFacts
	var wg sync.WaitGroup
	var jobErr, addrErr, probeErr, graceErr error
	wg.Add(4)
	sc := r.env.Slurm
	qctx := ctx
	if r.early != nil {
		// The step's tasks start on this node too; the answers are
		// needed only once the probes are in.
		qctx = slurm.Background(ctx)
	}
	go func() {
		defer wg.Done()
		lim, err := sc.Limits(qctx, a.Partition)
		f.grace, graceErr = graceLimitsOf(lim), err
	}()
	go func() { defer wg.Done(); f.cluster = liveTopology(qctx, sc, a.Nodes, r.logf) }()
	go func() { defer wg.Done(); f.job, jobErr = sc.Job(qctx, a.JobID) }()
	if e := r.early; e != nil {
		f.addrs, addrErr = e.addrs, e.addrErr
		wg.Done()
	} else {
		go func() { defer wg.Done(); f.addrs, addrErr = sc.NodeAddrs(ctx, a.NodeList) }()
	}
	topoDir := r.dirs.in(jobdir.Topo)
	switch r.cfg.probe {
	case "none":
	case "auto", "all":
		if e := r.early; e != nil {
			if e.probing {
				wg.Add(1)
				go func() { defer wg.Done(); f.nodes, probeErr = e.waitProbe(ctx, a, topoDir) }()
			} else {
				f.nodes = e.cached // --probe auto, and the cache startEarly read covers the nodes
			}
			break
		}
		if c, ok := readProbeCache(a, topoDir); ok && r.cfg.probe == "auto" {
			f.nodes = c
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			// On the host, always: PYXIS_CONTAINER_* would put pyxis's image around it.
			f.nodes, probeErr = probeNodes(slurm.WithoutEnv(ctx, "PYXIS_CONTAINER_"), sc, a, launch.ShimArgv(r.cfg.self, r.cfg.shim), topoDir)
		}()
	default:
		return f, usageErrorf("--probe %q: want auto, all or none", r.cfg.probe)
	}
	wg.Wait()
	f.tQuery = time.Since(r.t0)
	if ctx.Err() != nil {
		return f, withCode(exitcode.Interrupted, errors.New("interrupted before the step started"))
	}
	if jobErr != nil {
		r.logf("warning: %v; no end time known: checkpoints before the time limit depend on a B:USR1 signal", jobErr)
		f.job = slurm.Job{}
	}
	if addrErr != nil {
		r.logf("warning: %v; using node names as addresses", addrErr)
	}
	if graceErr != nil {
		r.logf("warning: %v; the grace budget checks what it can", graceErr)
	}
	if r.cfg.graceBudg > 0 {
		f.grace.GraceTime, f.grace.GraceSource = r.cfg.graceBudg, "the policy's CkptGraceBudget"
	}
	if probeErr != nil {
		return f, probeErr
	}
	// The allocation is never changed in place (goroutines may hold it): the
	// job's limits give a new one. Slurm requeues batch jobs only (salloc).
	next := *a
	next.TimeLimit, next.EndTime, next.Requeue = f.job.TimeLimit, f.job.EndTime, f.job.Requeue && f.job.IsBatch()
	r.alloc, a = &next, &next
	if w := outputTruncationWarning(ctx, sc, f.job, r.env.Getenv); w != "" {
		r.logf("warning: %s", w)
	}
	f.lead = r.cfg.plan.CkptLead
	if r.cfg.source("ckpt-lead").kind == fromDefault && a.TimeLimit > 0 { // a lead given or from the policy is used as given
		f.lead = min(defaultCkptLead, a.TimeLimit/4)
	}
	if d, ok := r.submittedLead(a.TimeLimit); ok { // trainrun submit sized the limit with it
		f.lead = d
	}
	return f, nil
}

// probedGPUName is the GPU name the probe found on the nodes ("" if none or
// if the nodes disagree).
func (r *runner) probedGPUName() string {
	name := ""
	for _, f := range r.facts.nodes {
		t := plan.GPUTypeOf(f.GPUName)
		if t == "" || name != "" && t != name {
			return ""
		}
		name = t
	}
	return name
}

// liveTopology is the cluster model from Slurm's topology (flat when Slurm
// has no topology plugin, or when it cannot be read).
func liveTopology(ctx context.Context, sc slurm.Client, nodes []string, logf func(string, ...any)) *topo.Cluster {
	c, err := sc.Topology(ctx)
	if err != nil {
		logf("warning: %v; treating the nodes as one switch", err)
		return topo.FlatCluster(nodes)
	}
	return c
}
