package run

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/trainrun/trainrun/internal/slurm"
	"github.com/trainrun/trainrun/wrapper/internal/container"
	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
	"github.com/trainrun/trainrun/wrapper/internal/jobdir"
	"github.com/trainrun/trainrun/wrapper/internal/launch"
)

// The main step starts before its plan. Slurm takes about as long to start
// a step's tasks (slurmctld creates the step, every slurmd forks its
// slurmstepd, the tasks exec) as trainrun takes to ask Slurm what it needs,
// probe the nodes and plan; done one after the other, as before, a start
// with the probe cost two steps (a probe step, then the main one) plus the
// queries: 1.9x a bare srun of the same tasks. So the controller starts the
// step first, with every shim told to wait (exec-task --wait): each shim
// connects and says wait, and the first to do so on each node is asked to
// probe its node meanwhile (--probe-node; Slurm starts a node's tasks in no
// fixed order, and local task 0 was often not the first). The controller
// asks Slurm, reads the probes, plans, places, writes the launch files and
// says go; only then does a shim read its rank's entry and start the
// trainer.
//
// What the step's srun line must know before the plan: the nodes and tasks
// (the allocation's), the command as given (its filled templates travel in
// common.json), no hostfile (a placement whose rank order is not Slurm's
// block order calls the early step off and starts one with the hostfile, as
// before), and --cpu-bind=none where the shims will bind ranks to their GPUs'
// NUMA CPUs (guessed from this node; a wrong guess leaves the ranks bound as
// Slurm binds them, or unbound).
//
// TRAINRUN_EARLY_STEP=0 turns it off (the probe and the plan come first).
type earlyStep struct {
	ctl     *launch.Server
	control string      // host:port the shims connect to
	proc    *os.Process // srun
	done    chan error  // srun's end (one value)
	started time.Time
	probing bool                        // the shims probe their nodes; gather waits for their facts
	cached  map[string]launch.NodeFacts // --probe auto: the probe cache that covers the nodes (nil: none)
	addrs   map[string]string
	addrErr error
}

// earlyProbeTimeout bounds the wait for every node's probe, as the probe
// step's own timeout did.
const earlyProbeTimeout = 2 * time.Minute

// startEarly starts the main step before the plan (r.early), unless this is a
// dry run, the probe mode is unknown (gather says so), it is turned off, or
// the job holds spare nodes (--spare-nodes: the step runs on some of the
// job's nodes only, and the probe must cover the spares too).
func (r *runner) startEarly(ctx context.Context) error {
	if r.cfg.dryRun || r.env.Getenv("TRAINRUN_EARLY_STEP") == "0" || r.cfg.fault.spareNodes > 0 {
		return nil
	}
	if r.cfg.container.Pyxis() {
		return nil // its tasks would probe inside the image, without trainrun and NVML: the probe runs on the host first
	}
	a := r.alloc
	topoDir := r.dirs.in(jobdir.Topo)
	e := &earlyStep{done: make(chan error, 1)}
	cache, cached := readProbeCache(a, topoDir) // read once: the probe decision, the binding guess, gather
	switch r.cfg.probe {
	case "none":
	case "all":
		e.probing = true
	case "auto":
		e.probing = !cached
		if cached {
			e.cached = cache
		}
	default:
		return nil
	}
	if e.probing {
		if err := os.MkdirAll(topoDir, 0o755); err != nil {
			return err
		}
	}
	// The shims need the controller's address, which needs the batch
	// node's NodeAddr (an scontrol query, some ms): common.json is written
	// first without it, srun started, and then the address asked, the
	// channel opened and common.json written whole. Slurm takes longer to
	// start a task than that; a shim that is first waits for the address
	// (launch.WaitCommon).
	launchDir := r.dirs.in(jobdir.Launch)
	common := launch.Common{JobID: a.JobID, World: a.World()}
	if err := launch.WriteCommon(launchDir, common); err != nil {
		return fmt.Errorf("launch files in %s: %w", launchDir, err)
	}
	spec := launch.StepSpec{Self: r.cfg.self, Shim: r.cfg.shim, LaunchDir: launchDir, Nodes: len(a.Nodes), Tasks: a.World(), PerNode: a.TasksPerNode,
		BindInShim: guessBindInShim(cache) && !container.SetsCPUBind(r.cfg.srunArgs), Argv: r.cfg.argv, Wait: true, Extra: r.stepExtra()}
	if e.probing {
		spec.ProbeDir = topoDir
	}
	argv, env := launch.SrunCommand(spec)
	e.started = time.Now()
	var err error
	if e.proc, err = r.startSrun(argv, env, e.done); err != nil {
		return err
	}
	if err := e.openChannel(ctx, r, common, launchDir); err != nil {
		e.callOff(r.logf)
		return err
	}
	r.early = e
	return nil
}

// openChannel asks Slurm for the nodes' addresses, listens on the batch
// node's, and writes common.json whole.
func (e *earlyStep) openChannel(ctx context.Context, r *runner, common launch.Common, launchDir string) error {
	a := r.alloc
	e.addrs, e.addrErr = r.env.Slurm.NodeAddrs(ctx, a.NodeList)
	ctl, control, err := r.openControl(e.addrs)
	if err != nil {
		return err
	}
	e.ctl, e.control = ctl, control
	common.Control, common.Token = e.control, ctl.Token
	if err := launch.WriteCommon(launchDir, common); err != nil {
		return fmt.Errorf("launch files in %s: %w", launchDir, err)
	}
	return nil
}

// controlHost is the batch node's address for the control channel: its
// NodeAddr, else its name, else this host's name.
func (r *runner) controlHost(addrs map[string]string) string {
	a := r.alloc
	if v := addrs[a.BatchNode]; v != "" {
		return v
	}
	if a.BatchNode != "" {
		return a.BatchNode
	}
	h, _ := os.Hostname()
	return h
}

// guessBindInShim: will the placement give ranks CPU lists (their GPUs'
// NUMA nodes)? Yes where the probe cache says so; else where this node has
// NVIDIA GPUs (the probe finds their NUMA nodes there).
func guessBindInShim(cache map[string]launch.NodeFacts) bool {
	if cache != nil {
		for _, f := range cache {
			if f.Topo != nil {
				for _, g := range f.Topo.GPUs {
					if len(g.LocalCPUs) > 0 {
						return true
					}
				}
			}
		}
		return false
	}
	_, err := os.Stat("/dev/nvidiactl")
	return err == nil
}

// waitProbe asks, on every node, the first task that says wait to probe the
// node, waits until each has, then reads the facts.
func (e *earlyStep) waitProbe(ctx context.Context, a *slurm.Allocation, dir string) (map[string]launch.NodeFacts, error) {
	asked := map[string]int{} // node → the rank asked to probe it
	nodeOf := map[int]string{}
	done := map[string]bool{}
	for _, n := range a.Nodes {
		asked[n] = -1
	}
	timeout := time.NewTimer(earlyProbeTimeout)
	defer timeout.Stop()
	for len(done) < len(a.Nodes) {
		select {
		case ev := <-e.ctl.Events:
			switch ev.Kind {
			case launch.Wait:
				r, ok := asked[ev.Node]
				if !ok {
					return nil, withCode(exitcode.Slurm, fmt.Errorf("topology probe: node %q is not one of the job's nodes (%s); its slurmd may call itself another name (skip the probe with --probe=none)",
						ev.Node, strings.Join(a.Nodes, ",")))
				}
				nodeOf[ev.Rank] = ev.Node
				if r < 0 && e.ctl.SendTo(ev.Rank, launch.Msg{Kind: launch.Probe}) {
					asked[ev.Node] = ev.Rank
				}
			case launch.Probed:
				if n := nodeOf[ev.Rank]; n != "" && asked[n] == ev.Rank {
					done[n] = true
				}
			}
		case err := <-e.done:
			e.done <- err
			return nil, withCode(exitcode.Slurm, fmt.Errorf("topology probe failed: the step ended (%v) before every node was probed; see the tasks' messages above (skip it with --probe=none)", errOr(err, "srun exited 0")))
		case <-timeout.C:
			var missing []string
			for _, n := range a.Nodes {
				if !done[n] {
					missing = append(missing, n)
				}
			}
			return nil, withCode(exitcode.Slurm, fmt.Errorf("topology probe: no facts from %s within %s (skip it with --probe=none)", strings.Join(missing, ","), earlyProbeTimeout))
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return readProbeFacts(a.Nodes, dir)
}

func errOr(err error, s string) string {
	if err != nil {
		return err.Error()
	}
	return s
}

// earlyFits says whether the early step can run the prepared plan: its
// ranks in Slurm's block order (no hostfile needed).
func (r *runner) earlyFits() bool {
	return sameOrderAsSlurm(r.alloc, r.placed.Slots)
}

// abortEarly calls an early step off (no rank has started): every shim is
// told to exit, and srun is waited for (signalled after 10 s), so that the
// allocation's resources are free for the next step. No-op without one.
func (r *runner) abortEarly() {
	e := r.early
	if e == nil {
		return
	}
	r.early = nil
	e.callOff(r.logf)
}

// callOff tells the waiting shims to exit and waits for srun, signalled
// after 10 s (at once where the channel never opened: no shim can hear),
// then closes the channel.
func (e *earlyStep) callOff(logf func(string, ...any)) {
	signals := []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL}
	if e.ctl != nil {
		defer e.ctl.Close()
		e.ctl.Abort()
		signals = append([]syscall.Signal{0}, signals...)
	}
	for _, sig := range signals {
		if sig != 0 {
			syscall.Kill(-e.proc.Pid, sig)
		}
		select {
		case <-e.done:
			return
		case <-time.After(10 * time.Second):
		}
	}
	logf("warning: the step started before the plan did not end after SIGKILL")
}

// handOver gives the early step to the monitor: its srun process, when it
// started, and its end; the shims are told to go.
func (e *earlyStep) handOver(m *monitor) {
	m.proc, m.started = e.proc, e.started
	go func() { m.stepFinished <- <-e.done }()
	e.ctl.Release()
}
