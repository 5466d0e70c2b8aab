package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/trainrun/trainrun/internal/slurm"
	"github.com/trainrun/trainrun/wrapper/internal/launch"
)

// The main step starts before its plan. Slurm takes about as long to start
// a step's tasks (slurmctld creates the step, every slurmd forks its
// slurmstepd, the tasks exec) as trainrun takes to ask Slurm what it needs,
// probe the nodes and plan; done one after the other, as before, a start
// with the probe cost two steps (a probe step, then the main one) plus the
// queries: 1.9x a bare srun of the same tasks. So the controller starts the
// step first, with every shim told to wait (exec-task --wait); the node's
// first task probes its node meanwhile (--probe-node), and each shim
// connects and says wait. The controller asks Slurm, reads the probes,
// plans, places, writes the launch files and says go; only then does a shim
// read its rank's entry and start the trainer.
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
	probing bool                 // the shims probe their nodes; gather waits for their facts
	cached  map[string]nodeFacts // --probe auto: the probe cache that covers the nodes (nil: none)
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
	if r.opts.dryRun || r.env.getenv("TRAINRUN_EARLY_STEP") == "0" || r.opts.fault.spareNodes > 0 {
		return nil
	}
	a := r.alloc
	topoDir := filepath.Join(r.jobDir, "topo")
	e := &earlyStep{done: make(chan error, 1)}
	cache, cached := readProbeCache(a, topoDir) // read once: the probe decision, the binding guess, gather
	switch r.opts.probe {
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
	e.addrs, e.addrErr = r.env.slurm.NodeAddrs(ctx, a.NodeList)
	ctlHost := r.controlHost(e.addrs)
	bind, ctlHost := launch.ControlHost(ctlHost, len(a.Nodes) > 1)
	if bind == "" {
		r.logf("warning: the batch node's address %s is not one of its own non-loopback addresses; the control channel listens on all interfaces", ctlHost)
	}
	ctl, err := launch.Listen(bind, a.World())
	if err != nil {
		return err
	}
	e.ctl = ctl
	e.control = net.JoinHostPort(ctlHost, strconv.Itoa(ctl.Port()))
	launchDir := filepath.Join(r.jobDir, "launch")
	if err := launch.WriteCommon(launchDir, launchCommon{JobID: a.JobID, World: a.World(), Control: e.control, Token: ctl.Token}); err != nil {
		ctl.Close()
		return fmt.Errorf("launch files in %s: %w", launchDir, err)
	}
	spec := launch.StepSpec{Self: r.self, Shim: r.shim, LaunchDir: launchDir, Nodes: len(a.Nodes), Tasks: a.World(), PerNode: a.TasksPerNode,
		BindInShim: guessBindInShim(cache), Argv: r.argv, Wait: true}
	if e.probing {
		spec.ProbeDir = topoDir
	}
	argv, env := launch.SrunCommand(spec)
	cmd := slurm.StepCommand(argv[1:])
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = r.env.stdout, r.env.stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	e.started = time.Now()
	if err := cmd.Start(); err != nil {
		ctl.Close()
		return withCode(ExitSlurm, fmt.Errorf("starting srun: %w", err))
	}
	e.proc = cmd.Process
	go func() { e.done <- cmd.Wait() }()
	r.early = e
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
func guessBindInShim(cache map[string]nodeFacts) bool {
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

// waitProbe waits until the first task of every node has probed it, then
// reads the facts.
func (e *earlyStep) waitProbe(ctx context.Context, a *allocation, dir string) (map[string]nodeFacts, error) {
	want := map[string]bool{}
	for _, n := range a.Nodes {
		want[n] = true
	}
	timeout := time.NewTimer(earlyProbeTimeout)
	defer timeout.Stop()
	for left := len(want); left > 0; {
		select {
		case ev := <-e.ctl.Events:
			if ev.Kind != launch.Wait || !ev.Probed {
				continue
			}
			seen, ok := want[ev.Node]
			if !ok {
				return nil, withCode(ExitSlurm, fmt.Errorf("topology probe: node %q is not one of the job's nodes (%s); its slurmd may call itself another name (skip the probe with --probe=none)",
					ev.Node, strings.Join(a.Nodes, ",")))
			}
			if seen {
				want[ev.Node] = false
				left--
			}
		case err := <-e.done:
			e.done <- err
			return nil, withCode(ExitSlurm, fmt.Errorf("topology probe failed: the step ended (%v) before every node was probed; see the tasks' messages above (skip it with --probe=none)", errOr(err, "srun exited 0")))
		case <-timeout.C:
			var missing []string
			for _, n := range a.Nodes {
				if want[n] {
					missing = append(missing, n)
				}
			}
			return nil, withCode(ExitSlurm, fmt.Errorf("topology probe: no facts from %s within %s (skip it with --probe=none)", strings.Join(missing, ","), earlyProbeTimeout))
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
	defer e.ctl.Close()
	e.ctl.Abort()
	for _, sig := range []syscall.Signal{0, syscall.SIGTERM, syscall.SIGKILL} {
		if sig != 0 {
			syscall.Kill(-e.proc.Pid, sig)
		}
		select {
		case <-e.done:
			return
		case <-time.After(10 * time.Second):
		}
	}
	r.logf("warning: the step started before the plan did not end after SIGKILL")
}

// handOver gives the early step to the monitor: its srun process, when it
// started, and its end; the shims are told to go.
func (e *earlyStep) handOver(m *monitor) {
	m.proc, m.started = e.proc, e.started
	go func() { m.stepFinished <- <-e.done }()
	e.ctl.Release()
}
