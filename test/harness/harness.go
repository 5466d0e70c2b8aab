package harness

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Options configure a cluster. The zero value gives 4 nodes with 8 GPUs each.
type Options struct {
	// Nodes is the number of emulated nodes, n1..nN (default 4).
	Nodes int
	// GPUsPerNode is the number of fake GPUs per node (default 8).
	GPUsPerNode int
	// ExtraSlurmConf lines are added to slurm.conf. A line whose key is one of
	// the generated single-valued keys (e.g. KillWait, SchedulerParameters)
	// replaces that line; NodeName/PartitionName lines and other keys are added.
	ExtraSlurmConf []string
	// Partitions, when non-nil, replace the default partition lines (see
	// LowPartition, HighPartition). Use Cluster.NodeList() style "n[1-4]".
	Partitions []string
	// Heterogeneous gives typed GRES and two partitions instead of low and
	// high: "hopper" (the first half of the nodes, gpu:h100:G, the default)
	// and "ampere" (the rest, gpu:a100:G), with gres.conf Type= lines.
	// Partitions, when set, still replaces the partition lines.
	Heterogeneous bool
	// GresTypes, when set, is each node's GPU type (n1 first: "h100",
	// "a100", "v100", ...), written as typed GRES and gres.conf Type=;
	// with Partitions it builds clusters of more GPU types than
	// Heterogeneous's two. An empty entry leaves that node as the mode
	// makes it.
	GresTypes []string
	// Plugstack lines form plugstack.conf (empty by default), e.g.
	// "required /path/spank_trainrun.so policy=/path/trainrun.conf".
	Plugstack []string
	// TopologyConf, when set, is written as topology.conf next to slurm.conf
	// and TopologyPlugin=topology/tree is set (Slurm 22.05 has no block plugin).
	TopologyConf string
	// Env entries (KEY=VALUE) are added to Env(), so every client command and
	// every batch job (sbatch exports the submitting environment) sees them.
	Env []string
	// BaseDir is where the cluster's temporary directory is made (default
	// os.TempDir()). It must allow device nodes (not mounted nodev).
	BaseDir string
	// StartTimeout bounds Start (default 60 s).
	StartTimeout time.Duration
	// Logf receives progress lines (e.g. log.Printf); nil discards them.
	Logf func(format string, args ...any)
	// KeepDir leaves the directory (configs, logs, job output) after Stop.
	KeepDir bool
}

// Timings are what bringing the cluster up and down took.
type Timings struct {
	Munged    time.Duration // start until the socket answers
	Slurmctld time.Duration // start until `scontrol ping` says UP
	Nodes     time.Duration // slurmd start until every node is idle
	Start     time.Duration // whole Start, including writing the configuration
	Stop      time.Duration // whole Stop (zero until Stop has run)
}

// Cluster is a running test cluster. Its methods are safe for concurrent use.
type Cluster struct {
	l    layout
	opts Options
	env  []string

	spawn *spawner

	mu      sync.Mutex
	daemons map[string]*daemon // "munged", "slurmctld", "slurmd-n1", ...
	timings Timings
	jobSeq  int

	reaperPipe *os.File // closing it (or dying) wakes the reaper

	stopOnce sync.Once
	stopErr  error
}

// markerVar is set in the environment of every process the cluster starts
// (daemons, and through Env() every client and job), so Stop can find them.
const markerVar = "TRAINRUN_HARNESS_DIR"

// ownerFile in the cluster directory names the process that owns it, so a
// later Start can reap clusters whose owner died without Stop (SIGKILL,
// go test -timeout).
const ownerFile = "owner"

// dirPrefix names cluster directories under BaseDir.
const dirPrefix = "trainrun-slurm-"

// Start brings up munged, slurmctld and Nodes slurmd, and returns when every
// node is idle. On failure it stops whatever it started and returns an error
// naming the step, the command and the daemons' log tails.
func Start(opts Options) (*Cluster, error) {
	// A port found free can be taken before the daemon binds it; that shows
	// as "Address already in use" in a log, and a second try with other
	// ports is the cure.
	for try := 1; ; try++ {
		c, err := start(opts)
		if err == nil || try == 3 || !strings.Contains(err.Error(), "Address already in use") {
			return c, err
		}
		if opts.Logf != nil {
			opts.Logf("harness: a port was taken before its daemon bound it; starting again with other ports")
		}
	}
}

func start(opts Options) (c *Cluster, err error) {
	t0 := time.Now()
	opts = opts.withDefaults()
	if err := checkHost(); err != nil {
		return nil, err
	}
	reapStale(opts.BaseDir, opts.Logf)

	ctx, cancel := context.WithTimeout(context.Background(), opts.StartTimeout)
	defer cancel()

	if c, err = newCluster(opts); err != nil {
		return nil, err
	}
	c.env = c.buildEnv()
	defer func() {
		if err != nil {
			err = fmt.Errorf("%w%s", err, c.LogTail(25))
			if serr := c.Stop(); serr != nil {
				err = fmt.Errorf("%w\nand stopping the half-started cluster: %v", err, serr)
			}
			c = nil
		}
	}()
	if err := c.writeFiles(); err != nil {
		return c, err
	}
	if err := c.startReaper(); err != nil {
		return c, err
	}
	opts.Logf("harness: cluster %s in %s: slurmctld 127.0.0.1:%d, slurmd ports %v", c.l.clusterName, c.l.dir, c.l.ctldPort, c.l.nodePorts)
	if err := c.startDaemons(ctx); err != nil {
		return c, err
	}
	c.timings.Start = time.Since(t0)
	opts.Logf("harness: %d nodes idle; start took %v (munged %v, slurmctld %v, nodes %v)",
		opts.Nodes, c.timings.Start.Round(time.Millisecond), c.timings.Munged.Round(time.Millisecond),
		c.timings.Slurmctld.Round(time.Millisecond), c.timings.Nodes.Round(time.Millisecond))
	return c, nil
}

// withDefaults fills the options left zero: 4 nodes of 8 GPUs, a minute to
// start, the system's temporary directory, no log.
func (opts Options) withDefaults() Options {
	if opts.Nodes == 0 {
		opts.Nodes = 4
	}
	if opts.GPUsPerNode == 0 {
		opts.GPUsPerNode = 8
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 60 * time.Second
	}
	if opts.BaseDir == "" {
		opts.BaseDir = os.TempDir()
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	return opts
}

// checkHost refuses a machine that cannot run the cluster: not root, or
// without Slurm's and munge's programs.
func checkHost() error {
	if os.Geteuid() != 0 {
		return errors.New("harness: Start needs root (munged, slurmctld and slurmd run as root, and mknod makes the fake GPUs)")
	}
	for _, bin := range []string{"munged", "slurmctld", "slurmd", "srun", "sbatch", "scontrol", "squeue", "scancel"} {
		if _, err := lookBin(bin); err != nil {
			return fmt.Errorf("harness: %s not found in PATH or /usr/sbin (%w): install Debian's slurm-wlm and munge (make deps)", bin, err)
		}
	}
	return nil
}

// newCluster makes the cluster's directory and picks its ports; nothing
// runs yet.
func newCluster(opts Options) (*Cluster, error) {
	dir, err := os.MkdirTemp(opts.BaseDir, dirPrefix)
	if err != nil {
		return nil, fmt.Errorf("harness: make cluster directory: %w", err)
	}
	early := func(err error) (*Cluster, error) {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	// munged insists that everyone may traverse the path to its socket.
	if err := os.Chmod(dir, 0o755); err != nil {
		return early(fmt.Errorf("harness: %w", err))
	}
	host, err := shortHostname()
	if err != nil {
		return early(err)
	}
	ports, err := freePorts(1 + opts.Nodes)
	if err != nil {
		return early(err)
	}
	return &Cluster{
		opts: opts,
		l: layout{
			dir:         dir,
			clusterName: "trtest" + strings.ToLower(strings.TrimPrefix(filepath.Base(dir), dirPrefix)),
			host:        host,
			ctldPort:    ports[0],
			nodePorts:   ports[1:],
			gpus:        opts.GPUsPerNode,
			extra:       opts.ExtraSlurmConf,
			partitions:  opts.Partitions,
			topology:    opts.TopologyConf != "",
			hetero:      opts.Heterogeneous,
			gresTypes:   opts.GresTypes,
		},
		daemons: map[string]*daemon{},
		spawn:   newSpawner(),
	}, nil
}

// startDaemons starts munged, slurmctld and the slurmds, and waits until
// every node is idle, timing each.
func (c *Cluster) startDaemons(ctx context.Context) error {
	t := time.Now()
	if err := c.startMunged(ctx); err != nil {
		return err
	}
	c.timings.Munged = time.Since(t)

	t = time.Now()
	if err := c.startSlurmctld(ctx); err != nil {
		return err
	}
	c.timings.Slurmctld = time.Since(t)

	t = time.Now()
	for i := range c.l.nodePorts {
		if err := c.startSlurmd(c.l.nodeName(i)); err != nil {
			return err
		}
	}
	if err := c.waitNodesIdle(ctx, c.Nodes()); err != nil {
		return err
	}
	c.timings.Nodes = time.Since(t)
	return nil
}

// Dir is the cluster's directory (configs, logs, spool, job files).
func (c *Cluster) Dir() string { return c.l.dir }

// ConfPath is the path of slurm.conf (what SLURM_CONF names).
func (c *Cluster) ConfPath() string { return c.l.confPath() }

// JobsDir is the working directory SubmitBatch gives batch jobs.
func (c *Cluster) JobsDir() string { return c.l.jobsDir() }

// Hostname is this machine's short hostname, the NodeHostname of every node.
func (c *Cluster) Hostname() string { return c.l.host }

// Nodes are the node names, n1..nN.
func (c *Cluster) Nodes() []string {
	n := make([]string, len(c.l.nodePorts))
	for i := range n {
		n[i] = c.l.nodeName(i)
	}
	return n
}

// NodeList is the hostlist expression of all nodes, e.g. "n[1-4]".
func (c *Cluster) NodeList() string { return c.l.nodeList() }

// GPUsPerNode is the number of fake GPUs on every node.
func (c *Cluster) GPUsPerNode() int { return c.l.gpus }

// GPUDevice is the path of fake GPU i of node (a character device, major 195
// minor i): what gres.conf names and what SLURM_STEP_GPUS index i refers to.
func (c *Cluster) GPUDevice(node string, i int) string { return c.l.gpuDevice(node, i) }

// Timings says how long Start (and Stop, once run) took.
func (c *Cluster) Timings() Timings {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.timings
}

// Env is the complete environment for a client command of this cluster: this
// process's environment without any SLURM_* variable (so running the tests
// inside a real Slurm job cannot leak into this cluster), plus SLURM_CONF, a
// marker that lets Stop find every process of the cluster, and Options.Env.
func (c *Cluster) Env() []string { return append([]string(nil), c.env...) }

func (c *Cluster) buildEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "SLURM_") || strings.HasPrefix(kv, markerVar+"=") {
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "SLURM_CONF="+c.l.confPath(), markerVar+"="+c.l.dir)
	// Daemons and tools live in /usr/sbin too; keep them findable for clients.
	for i, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok && !slices.Contains(filepath.SplitList(v), "/usr/sbin") {
			env[i] = kv + ":/usr/sbin:/sbin"
		}
	}
	return append(env, c.opts.Env...)
}

func (c *Cluster) writeFiles() error {
	l := &c.l
	for _, d := range []string{l.etc(), l.logDir(), l.runDir(), l.stateDir(), l.jobsDir(), l.mungeDir(), l.mungeKeyDir()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("harness: %w", err)
		}
	}
	if err := os.Chmod(l.mungeKeyDir(), 0o700); err != nil {
		return fmt.Errorf("harness: %w", err)
	}
	owner, err := selfOwner()
	if err != nil {
		return err
	}
	// Written whole, then renamed: another test process's reapStale that
	// read it between WriteFile's create and its write saw an empty owner,
	// took the cluster for a dead one's and removed it while it was set up.
	tmp := filepath.Join(l.dir, ownerFile+".tmp")
	if err := os.WriteFile(tmp, []byte(owner), 0o644); err != nil {
		return fmt.Errorf("harness: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(l.dir, ownerFile)); err != nil {
		return fmt.Errorf("harness: %w", err)
	}
	files := []struct {
		path string
		data string
		mode os.FileMode
	}{
		{l.confPath(), l.slurmConf(), 0o644},
		{l.gresPath(), l.gresConf(), 0o644},
		{l.plugstackPath(), strings.Join(c.opts.Plugstack, "\n") + "\n", 0o644},
	}
	if l.topology {
		files = append(files, struct {
			path string
			data string
			mode os.FileMode
		}{l.topologyPath(), c.opts.TopologyConf, 0o644})
	}
	for _, f := range files {
		if err := os.WriteFile(f.path, []byte(f.data), f.mode); err != nil {
			return fmt.Errorf("harness: %w", err)
		}
	}
	key := make([]byte, 1024)
	if _, err := rand.Read(key); err != nil {
		return fmt.Errorf("harness: munge key: %w", err)
	}
	if err := os.WriteFile(l.mungeKey(), key, 0o400); err != nil {
		return fmt.Errorf("harness: munge key: %w", err)
	}
	for i := range l.nodePorts {
		n := l.nodeName(i)
		for _, d := range []string{filepath.Join(l.spoolDir(), n), l.devDir(n)} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				return fmt.Errorf("harness: %w", err)
			}
		}
		for g := 0; g < l.gpus; g++ {
			p := l.gpuDevice(n, g)
			if err := unix.Mknod(p, unix.S_IFCHR|0o666, int(unix.Mkdev(195, uint32(g)))); err != nil {
				return fmt.Errorf("harness: mknod %s c 195 %d (the fake GPU; %s must allow device nodes, i.e. not be mounted nodev): %w", p, g, l.dir, err)
			}
		}
	}
	return nil
}

func (c *Cluster) startMunged(ctx context.Context) error {
	l := &c.l
	args := []string{"-F", "--socket=" + l.mungeSocket(), "--key-file=" + l.mungeKey(),
		"--pid-file=" + filepath.Join(l.runDir(), "munged.pid"), "--log-file=" + l.mungeLog(),
		"--seed-file=" + filepath.Join(l.mungeKeyDir(), "munged.seed"), "--num-threads=4"}
	d, err := c.startDaemon("munged", "munged", args, l.mungeLog())
	if err != nil {
		return err
	}
	return poll(ctx, 20*time.Millisecond, func() (bool, error) {
		if d.exited() {
			return false, fmt.Errorf("harness: munged exited during start: %s", d.exitStatus())
		}
		conn, err := net.Dial("unix", l.mungeSocket())
		if err != nil {
			return false, nil
		}
		conn.Close()
		return true, nil
	}, "munged to answer on "+l.mungeSocket())
}

func (c *Cluster) startSlurmctld(ctx context.Context) error {
	// -i: ignore (absent) saved state; the state directory is fresh anyway.
	d, err := c.startDaemon("slurmctld", "slurmctld", []string{"-D", "-i", "-f", c.l.confPath()}, c.l.ctldLog())
	if err != nil {
		return err
	}
	var last error
	err = poll(ctx, 50*time.Millisecond, func() (bool, error) {
		if d.exited() {
			return false, fmt.Errorf("harness: slurmctld exited during start: %s", d.exitStatus())
		}
		out, err := c.output(ctx, 5*time.Second, "scontrol", "ping")
		if err == nil && strings.Contains(out, "is UP") {
			return true, nil
		}
		last = err
		return false, nil
	}, "slurmctld to answer `scontrol ping`")
	if err != nil && last != nil {
		err = fmt.Errorf("%w; last try: %v", err, last)
	}
	return err
}

func (c *Cluster) startSlurmd(node string) error {
	_, err := c.startDaemon("slurmd-"+node, "slurmd", []string{"-D", "-N", node, "-f", c.l.confPath()}, c.l.slurmdLog(node))
	return err
}

// StopSlurmd stops node's slurmd with SIGTERM (as an administrator would) and
// waits for it to exit; running steps keep running, as with a real slurmd.
// It returns an error if slurmd does not exit within 15 s or exits non-zero.
func (c *Cluster) StopSlurmd(node string) error {
	c.mu.Lock()
	d := c.daemons["slurmd-"+node]
	c.mu.Unlock()
	if d == nil {
		return fmt.Errorf("harness: no slurmd for node %q", node)
	}
	if d.exited() {
		return fmt.Errorf("harness: slurmd of %s had already exited: %s%s", node, d.exitStatus(), c.LogTail(25))
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(15 * time.Second):
		return fmt.Errorf("harness: slurmd of %s did not exit within 15 s of SIGTERM%s", node, c.LogTail(25))
	}
	if st := d.exitStatus(); st != "exit status 0" {
		return fmt.Errorf("harness: slurmd of %s ended with %s after SIGTERM%s", node, st, c.LogTail(25))
	}
	return nil
}

// StartSlurmd starts node's slurmd again after StopSlurmd (a node that
// comes back after a failure) and waits until the node is up. A node that
// slurmctld marked DOWN while its slurmd was away is resumed as an admin
// would (scontrol update state=resume) if registering did not return it.
func (c *Cluster) StartSlurmd(ctx context.Context, node string) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := c.startSlurmd(node); err != nil {
		return err
	}
	t0, resumed := time.Now(), false
	return poll(ctx, 200*time.Millisecond, func() (bool, error) {
		info, err := c.nodeInfo(ctx)
		if err != nil {
			return false, nil
		}
		st := info[node].State
		if strings.HasPrefix(st, "DOWN") {
			if !resumed && time.Since(t0) > 3*time.Second {
				resumed = true
				c.Run(ctx, "scontrol", "update", "nodename="+node, "state=resume")
			}
			return false, nil
		}
		return strings.HasPrefix(st, "IDLE") || strings.HasPrefix(st, "MIXED") || strings.HasPrefix(st, "ALLOCATED"), nil
	}, "node "+node+" up again")
}

// RestartSlurmd stops node's slurmd (StopSlurmd), starts it again and waits
// until slurmctld has its new registration (SlurmdStartTime changed) and the
// node is up (idle, or mixed/allocated if jobs run there). Use it after
// changing plugstack.conf: slurmd loads SPANK plugins when it starts.
func (c *Cluster) RestartSlurmd(ctx context.Context, node string) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	before, err := c.nodeInfo(ctx)
	if err != nil {
		return err
	}
	old := before[node].Fields["SlurmdStartTime"]
	if err := c.StopSlurmd(node); err != nil {
		return err
	}
	// SlurmdStartTime (slurmd's own clock, local time, whole seconds) must
	// be able to differ from the old one: start the new slurmd in a later
	// second.
	if t, err := time.ParseInLocation("2006-01-02T15:04:05", old, time.Local); err == nil {
		if d := time.Until(t.Add(time.Second)); d > 0 {
			time.Sleep(d)
		}
	}
	if err := c.startSlurmd(node); err != nil {
		return err
	}
	err = poll(ctx, 50*time.Millisecond, func() (bool, error) {
		info, err := c.nodeInfo(ctx)
		if err != nil {
			return false, nil
		}
		return info[node].Fields["SlurmdStartTime"] != old, nil
	}, "slurmd of "+node+" to register again")
	if err != nil {
		return fmt.Errorf("%w%s", err, c.LogTail(20))
	}
	return c.waitNodesUp(ctx, []string{node}, false)
}

// SetPlugstack rewrites plugstack.conf and restarts every slurmd so the
// daemons load it; srun, sbatch and salloc read it at each invocation.
func (c *Cluster) SetPlugstack(ctx context.Context, lines []string) error {
	if err := os.WriteFile(c.l.plugstackPath(), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		return fmt.Errorf("harness: %w", err)
	}
	for _, n := range c.Nodes() {
		if err := c.RestartSlurmd(ctx, n); err != nil {
			return err
		}
	}
	return nil
}

// PlugstackPath is the path of plugstack.conf (PlugStackConfig=).
func (c *Cluster) PlugstackPath() string { return c.l.plugstackPath() }

// waitNodesIdle waits until every node in nodes is IDLE, failing fast when a
// node is drained or down with a reason, or its slurmd exited.
func (c *Cluster) waitNodesIdle(ctx context.Context, nodes []string) error {
	return c.waitNodesUp(ctx, nodes, true)
}

func (c *Cluster) waitNodesUp(ctx context.Context, nodes []string, idleOnly bool) error {
	var last map[string]NodeInfo
	err := poll(ctx, 100*time.Millisecond, func() (bool, error) {
		for _, n := range nodes {
			c.mu.Lock()
			d := c.daemons["slurmd-"+n]
			c.mu.Unlock()
			if d != nil && d.exited() {
				return false, fmt.Errorf("harness: slurmd of node %s exited during start: %s", n, d.exitStatus())
			}
		}
		info, err := c.nodeInfo(ctx)
		if err != nil {
			return false, nil // slurmctld busy; try again
		}
		last = info
		ready := 0
		for _, n := range nodes {
			ni, ok := info[n]
			if !ok {
				return false, fmt.Errorf("harness: node %s missing from `scontrol show node`", n)
			}
			if strings.Contains(ni.State, "DRAIN") || strings.Contains(ni.State, "FAIL") ||
				(strings.HasPrefix(ni.State, "DOWN") && ni.Reason != "") {
				return false, fmt.Errorf("harness: node %s is %s, reason: %q", n, ni.State, ni.Reason)
			}
			base := ni.State
			if idleOnly && base == "IDLE" {
				ready++
			} else if !idleOnly && (base == "IDLE" || base == "MIXED" || base == "ALLOCATED") {
				ready++
			}
		}
		return ready == len(nodes), nil
	}, fmt.Sprintf("nodes %v to be idle", nodes))
	if err != nil && last != nil {
		var b strings.Builder
		for _, n := range nodes {
			fmt.Fprintf(&b, "\n  %s: State=%s Reason=%q", n, last[n].State, last[n].Reason)
		}
		err = fmt.Errorf("%w; last node states:%s", err, b.String())
	}
	return err
}

// poll calls f every interval until it returns true or an error, or ctx ends.
func poll(ctx context.Context, interval time.Duration, f func() (bool, error), what string) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		ok, err := f()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("harness: timed out waiting for %s: %w", what, ctx.Err())
		case <-t.C:
		}
	}
}

// Stop kills every process of the cluster (daemons, slurmstepd, job tasks),
// verifies that none remains and removes the directory (unless KeepDir). It
// is idempotent; later calls return the first call's result.
func (c *Cluster) Stop() error {
	c.stopOnce.Do(func() {
		t := time.Now()
		c.stopErr = c.stop()
		if c.reaperPipe != nil {
			c.reaperPipe.Close()
		}
		c.mu.Lock()
		c.timings.Stop = time.Since(t)
		c.mu.Unlock()
		c.opts.Logf("harness: cluster %s stopped in %v", c.l.clusterName, c.timings.Stop.Round(time.Millisecond))
	})
	return c.stopErr
}

func (c *Cluster) stop() error {
	c.mu.Lock()
	ds := make([]*daemon, 0, len(c.daemons))
	for _, d := range c.daemons {
		ds = append(ds, d)
	}
	c.mu.Unlock()
	// slurmd and slurmctld first with SIGTERM (they exit cleanly within
	// milliseconds; steps and munged stay for the sweep below).
	for _, d := range ds {
		if d.name != "munged" && !d.exited() {
			_ = d.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	// A closed channel, not time.After: its one value let only the first
	// slow daemon go, and Stop hung on the second (seen with a slurmctld and
	// a slurmd both slow after a node failure).
	deadline := make(chan struct{})
	stopT := time.AfterFunc(3*time.Second, func() { close(deadline) })
	defer stopT.Stop()
	for _, d := range ds {
		if d.name == "munged" {
			continue
		}
		select {
		case <-d.done:
		case <-deadline:
			c.opts.Logf("harness: %s (pid %d) still runs 3 s after SIGTERM; killing it", d.name, d.cmd.Process.Pid)
		}
	}
	// Then SIGKILL everything that belongs to the cluster, until nothing does.
	left := killAll(c.l.dir)
	for _, d := range ds {
		select {
		case <-d.done:
		case <-time.After(2 * time.Second):
			left = append(left, proc{pid: d.cmd.Process.Pid, cmdline: d.name + " (started by the harness, not reaped)"})
		}
	}
	c.spawn.close()
	if len(left) > 0 {
		var b strings.Builder
		for _, p := range left {
			fmt.Fprintf(&b, "\n  pid %d: %s", p.pid, p.cmdline)
		}
		return fmt.Errorf("harness: processes of cluster %s survived SIGKILL:%s", c.l.dir, b.String())
	}
	if c.opts.KeepDir {
		// Without an owner file the directory is not taken for a stale cluster.
		_ = os.Remove(filepath.Join(c.l.dir, ownerFile))
		c.opts.Logf("harness: kept %s", c.l.dir)
		return nil
	}
	if err := os.RemoveAll(c.l.dir); err != nil {
		return fmt.Errorf("harness: remove %s: %w", c.l.dir, err)
	}
	return nil
}

// LogTail returns the last n lines of every daemon log (and of the stderr of
// any daemon that exited), each under a header, for error messages.
func (c *Cluster) LogTail(n int) string {
	var b strings.Builder
	logs := []string{c.l.mungeLog(), c.l.ctldLog()}
	for _, node := range c.Nodes() {
		logs = append(logs, c.l.slurmdLog(node))
	}
	c.mu.Lock()
	for _, d := range c.daemons {
		if d.exited() {
			logs = append(logs, d.stderrPath)
		}
	}
	c.mu.Unlock()
	for _, p := range logs {
		if strings.HasSuffix(p, ".stderr") && len(tailLines(strings.TrimSuffix(p, ".stderr")+".log", 1)) > 0 {
			continue // a foreground daemon's stderr repeats its log file
		}
		lines := tailLines(p, n)
		if len(lines) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n--- last %d lines of %s:\n%s", len(lines), p, strings.Join(lines, "\n"))
	}
	return b.String()
}

// DumpLogs writes every daemon log in full to w (for a failed test run).
func (c *Cluster) DumpLogs(w io.Writer) {
	entries, _ := filepath.Glob(filepath.Join(c.l.logDir(), "*"))
	for _, p := range entries {
		if strings.HasSuffix(p, ".stderr") && len(tailLines(strings.TrimSuffix(p, ".stderr")+".log", 1)) > 0 {
			continue // a foreground daemon's stderr repeats its log file
		}
		data, err := os.ReadFile(p)
		if err != nil || len(data) == 0 {
			continue
		}
		fmt.Fprintf(w, "===== %s\n%s\n", p, data)
	}
}

func tailLines(path string, n int) []string {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) == 1 && lines[0] == "" {
		return nil
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return lines
}

// lookBin finds a program in PATH or, for daemons when PATH lacks the sbin
// directories (su without -, some CI shells), in /usr/sbin and /sbin.
func lookBin(name string) (string, error) {
	p, err := exec.LookPath(name)
	if err == nil {
		return p, nil
	}
	for _, dir := range []string{"/usr/sbin", "/sbin"} {
		if fi, serr := os.Stat(filepath.Join(dir, name)); serr == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return filepath.Join(dir, name), nil
		}
	}
	return "", err
}

func shortHostname() (string, error) {
	h, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("harness: hostname: %w", err)
	}
	h, _, _ = strings.Cut(h, ".")
	return h, nil
}

// freePorts returns n distinct TCP ports that are free on 127.0.0.1 now,
// drawn below the kernel's ephemeral range (32768 and up by default) so that
// outgoing connections do not take them before the daemons bind them. They
// are released before the daemons start; a collision in that window shows as
// "Address already in use" in a log, and Start tries again.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for tries := 0; len(ports) < n; tries++ {
		if tries > 1000 {
			return nil, fmt.Errorf("harness: no free loopback port in %d-%d after 1000 tries", portLo, portHi-1)
		}
		p := portLo + mrand.IntN(portHi-portLo)
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			continue
		}
		ls = append(ls, l)
		ports = append(ports, p)
	}
	return ports, nil
}

// The port range freePorts draws from: below Linux's default ephemeral
// range, and above trainrun's MASTER_PORT range (plan.MasterPort: 20000 to
// 29999), which the test jobs' trainers bind on this same machine. CI once
// saw a trainer's rendezvous fail with "Address already in use" on 20725
// while the range was 20000-32767.
const portLo, portHi = 30000, 32768

// selfOwner identifies this process for ownerFile: pid and start time (so a
// reused pid is not taken for the owner).
func selfOwner() (string, error) {
	st, err := procStartTime(os.Getpid())
	if err != nil {
		return "", fmt.Errorf("harness: %w", err)
	}
	return fmt.Sprintf("%d %d\n", os.Getpid(), st), nil
}

// ownerAlive reports whether the process recorded in dir/owner still runs.
func ownerAlive(dir string) bool {
	data, err := os.ReadFile(filepath.Join(dir, ownerFile))
	if err != nil {
		return false
	}
	f := strings.Fields(string(data))
	if len(f) != 2 {
		return false
	}
	pid, err1 := strconv.Atoi(f[0])
	start, err2 := strconv.ParseUint(f[1], 10, 64)
	if err1 != nil || err2 != nil {
		return false
	}
	f, err = procStat(pid)
	if err != nil || len(f) < 20 || f[0] == "Z" {
		return false // gone, or a zombie: dead but not yet reaped by its parent
	}
	return f[19] == strconv.FormatUint(start, 10)
}

// reapStale kills the processes of clusters under base whose owner died
// without stopping them, and removes their directories. Live clusters (of
// another test package running beside this one) are left alone.
func reapStale(base string, logf func(string, ...any)) {
	dirs, _ := filepath.Glob(filepath.Join(base, dirPrefix+"*"))
	for _, d := range dirs {
		// No owner file: being set up this instant, or kept (KeepDir) after a
		// clean Stop. Either way, not stale.
		if _, err := os.Stat(filepath.Join(d, ownerFile)); err != nil || ownerAlive(d) {
			continue
		}
		if left := killAll(d); len(left) > 0 {
			logf("harness: stale cluster %s: %d processes survived SIGKILL; left it", d, len(left))
			continue
		}
		_ = os.RemoveAll(d)
		logf("harness: reaped stale cluster %s (its owner is gone)", d)
	}
}
