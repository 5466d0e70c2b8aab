// The gather phase of trainrun run: what Slurm and the probe say beyond the
// environment.

package main

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"time"

	"github.com/trainrun/trainrun/internal/slurm"
	"github.com/trainrun/trainrun/plan"
	"github.com/trainrun/trainrun/topo"
	"github.com/trainrun/trainrun/wrapper/internal/launch"
)

// runFacts is what the gather phase learns beyond the environment.
type runFacts struct {
	addrs   map[string]string    // NodeAddr by node name (scontrol show node)
	nodes   map[string]nodeFacts // the probe's node facts (nil: no probe)
	cluster *topo.Cluster        // the switch topology (flat when unknown)
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
	sc := r.env.slurm
	qctx := ctx
	if r.early != nil {
		// The step's tasks start on this node too; the answers are
		// needed only once the probes are in.
		qctx = slurm.Background(ctx)
	}
	go func() {
		defer wg.Done()
		lim, err := sc.Limits(qctx, a.Partition)
		r.grace, graceErr = graceLimitsOf(lim), err
	}()
	go func() { defer wg.Done(); f.cluster = liveTopology(qctx, sc, a.Nodes, r.logf) }()
	go func() { defer wg.Done(); r.job, jobErr = sc.Job(qctx, a.JobID) }()
	if e := r.early; e != nil {
		f.addrs, addrErr = e.addrs, e.addrErr
		wg.Done()
	} else {
		go func() { defer wg.Done(); f.addrs, addrErr = sc.NodeAddrs(ctx, a.NodeList) }()
	}
	topoDir := filepath.Join(r.jobDir, "topo")
	switch r.opts.probe {
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
		if c, ok := readProbeCache(a, topoDir); ok && r.opts.probe == "auto" {
			f.nodes = c
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			f.nodes, probeErr = probeNodes(ctx, sc, a, launch.ShimArgv(r.self, r.shim), topoDir)
		}()
	default:
		return f, usageErrorf("--probe %q: want auto, all or none", r.opts.probe)
	}
	wg.Wait()
	r.tQuery = time.Since(r.t0)
	if ctx.Err() != nil {
		return f, withCode(ExitInterrupted, errors.New("interrupted before the step started"))
	}
	if jobErr != nil {
		r.logf("warning: %v; no end time known: checkpoints before the time limit depend on a B:USR1 signal", jobErr)
		r.job = slurm.Job{}
	}
	if addrErr != nil {
		r.logf("warning: %v; using node names as addresses", addrErr)
	}
	if graceErr != nil {
		r.logf("warning: %v; the grace budget checks what it can", graceErr)
	}
	if r.graceBudg > 0 {
		r.grace.GraceTime, r.grace.GraceSource = r.graceBudg, "the policy's CkptGraceBudget"
	}
	if probeErr != nil {
		return f, probeErr
	}
	a.TimeLimit, a.EndTime, a.Requeue = r.job.TimeLimit, r.job.EndTime, r.job.Requeue && r.job.IsBatch() // salloc: Slurm requeues batch jobs only
	if w := outputTruncationWarning(ctx, sc, r.job, r.env.getenv); w != "" {
		r.logf("warning: %s", w)
	}
	r.facts = f.nodes
	r.lead = r.opts.plan.CkptLead
	if !r.fs.Changed("ckpt-lead") && !r.leadFixed && a.TimeLimit > 0 {
		r.lead = min(defaultCkptLead, a.TimeLimit/4)
	}
	return f, nil
}

// probedGPUName is the GPU name the probe found on the nodes ("" if none or
// if the nodes disagree).
func (r *runner) probedGPUName() string {
	name := ""
	for _, f := range r.facts {
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
