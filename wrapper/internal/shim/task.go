package shim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/trainrun/trainrun/internal/slurm"
	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
	"github.com/trainrun/trainrun/wrapper/internal/launch"
)

// forwardedSignals are the signals the shim catches.
var forwardedSignals = []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGCONT, syscall.SIGHUP, syscall.SIGQUIT}

// Run is the per-task shim (`trainrun exec-task`). srun execs it on every node as an ordinary
// process (no Go code runs in slurmstepd's fork). It sets the rank's
// environment computed by the controller, runs the training command, relays
// the controller's checkpoint request to that one process, tells the
// controller what signals reached the step, and exits as the command did.
//
// Signals: Slurm signals a step through its process tracking, which reaches
// every process of the step (the shim, the trainer and the trainer's
// data-loader workers) at once. Forwarding such a signal would deliver it to
// the trainer twice, so inside a Slurm step the shim only reports it; outside
// one (or with TRAINRUN_SHIM_FORWARD=1) it forwards TERM, INT, USR1, USR2,
// CONT, HUP and QUIT to the training process.
func Run(ctx context.Context, env Env, args []string) error {
	fs := newFlags(env.Stderr)
	launchDir := fs.String("launch", "", "launch directory written by 'trainrun run' (JOBDIR/launch)")
	probeDir := fs.String("probe", "", "probe mode: write this node's facts into DIR/<node>.json and exit")
	wait := fs.Bool("wait", false, "the step started before its plan: wait for the controller's go before reading the launch files")
	probeNode := fs.String("probe-node", "", "with --wait: when the controller asks (the node's first task to wait), probe the node into DIR/<node>.json")
	healthDir, health := healthFlags(fs)
	shimStart := time.Now()
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *probeDir != "" {
		return Probe(env, *probeDir)
	}
	if *healthDir != "" {
		return Health(env, *healthDir, health())
	}
	argv := fs.Args()
	if *launchDir == "" || len(argv) == 0 {
		return usageErrorf("exec-task needs --launch DIR and a command after --")
	}
	task, rank, node, err := whoAmI(env)
	if err != nil {
		return err
	}
	var ctl *launch.Client // connected already when the step started before its plan
	if *wait {
		c, goAhead, err := shimWait(env, *launchDir, *probeNode, task, rank, node)
		if err != nil || !goAhead {
			return err // nil: the controller called the step off
		}
		ctl = c
	}
	common, me, err := launch.Read(*launchDir, node, rank)
	if err != nil {
		return exitcode.With(exitcode.Slurm, err)
	}
	if len(common.Argv) > 0 {
		argv = common.Argv
	}

	envl, localDir, err := taskEnv(env, common, me, rank, node)
	if err != nil {
		return err
	}
	var path string
	if common.Container != nil { // --container-runtime: the runtime starts the command inside the image
		path, argv, err = containerCommand(env, common, argv, envl, rank, node)
	} else {
		path, err = resolveCommand(env, argv[0], envl, rank, node)
	}
	if err != nil {
		return err
	}

	ckptSig := launch.SignalByName(common.Signal)
	inStep := task.StepID != ""
	forward := !inStep || env.Getenv("TRAINRUN_SHIM_FORWARD") == "1"

	sigc := make(chan os.Signal, 16)
	signal.Notify(sigc, forwardedSignals...)
	defer signal.Stop(sigc)

	finishDrain := startDrain(env, common, me, *launchDir, node, localDir, shimStart)

	cmd, fw, beats, ev := trainerCmd(path, argv, envl, newEvidence(*launchDir, common.JobID, task.StepID, rank, node, me.GPU))
	if ev != nil {
		defer ev.remove()
	}
	if err := startPinned(cmd, me.CPUs); err != nil {
		err = startFailed(env, err, rank, node, path)
		finishDrain()
		return err
	}
	pid := cmd.Process.Pid

	if ctl != nil {
		ctl.Send(launch.Msg{Kind: launch.Hello, Token: common.Token, Rank: rank, PID: pid, Node: node, StepID: task.StepID})
	} else {
		ctl = dialControl(common, rank, pid, node, env)
	}
	if beats != nil {
		go func() {
			// The trainer's own state, in podman's container too (its PID
			// comes once the container runs).
			beats.run(containerPID(common, rank, pid), rank, common.World, func(m launch.Msg) {
				if ctl != nil {
					ctl.Send(m)
				}
			})
		}()
	}
	if ctl != nil {
		go ctl.Receive(requestHandler(env, cmd.Process, ckptSig, rank, node, me.GPU, ev, func(m launch.Msg) { ctl.Send(m) }))
	}
	return superviseTask(env, cmd, ctl, sigc, forward, finishDrain, me, fw, rank, node, argv[0])
}

// startFailed says the command could not start; its exit code says
// whether it was not found (or not executable) or failed otherwise.
func startFailed(env Env, err error, rank int, node, path string) error {
	code := exitcode.Failure
	if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.EACCES) || errors.Is(err, exec.ErrNotFound) {
		code = exitcode.NotFound
	}
	fmt.Fprintf(env.Stderr, "trainrun: exec-task: rank %d on %s: cannot start %q: %v\n", rank, node, path, err)
	return exitcode.With(code, exitcode.ErrSilent)
}

// trainerCmd is the training command as the shim starts it: its stderr
// passes through a bounded tail whose last lines name a failure's class
// (failure.go); the heartbeat pipe (beat.go) and the hang-evidence files
// (evidence.go, ev may be nil) are handed to it. WaitDelay: a child that
// keeps the pipe open (a data-loader worker) does not hold the exit back.
func trainerCmd(path string, argv, envl []string, ev *evidence) (*exec.Cmd, *failureWatch, *beater, *evidence) {
	cmd := exec.Command(path, argv[1:]...)
	cmd.Args[0] = argv[0]
	cmd.Env = envl
	fw := newFailureWatch()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, io.MultiWriter(os.Stderr, fw.tail)
	cmd.WaitDelay = 5 * time.Second
	beats := newBeater()
	if beats != nil {
		cmd.ExtraFiles, cmd.Env = append(cmd.ExtraFiles, beats.w), append(cmd.Env, beats.env()...)
	}
	if ev != nil {
		cmd.Env = append(cmd.Env, ev.env()...)
	}
	return cmd, fw, beats, ev
}

// whoAmI is the task as Slurm started it: its rank (SLURM_PROCID) and node.
func whoAmI(env Env) (task slurm.Task, rank int, node string, err error) {
	task = slurm.TaskFromEnv(env.Getenv)
	if rank, err = strconv.Atoi(task.ProcID); err != nil {
		return task, 0, "", exitcode.With(exitcode.Slurm, fmt.Errorf("SLURM_PROCID=%q: exec-task runs as a task of srun, started by 'trainrun run'", task.ProcID))
	}
	node = task.Node
	if node == "" {
		node, _ = os.Hostname()
	}
	return task, rank, node, nil
}

// requestHandler acts on the controller's requests: a stack dump, or the
// checkpoint signal once per request id (said delivered through send once
// it reached the training process).
func requestHandler(env Env, p *os.Process, ckptSig os.Signal, rank int, node string, gpu int, ev *evidence, send func(launch.Msg)) func(launch.Msg) {
	var once sync.Map // checkpoint request IDs already acted on
	return func(m launch.Msg) {
		if m.Kind == launch.Stack {
			if ev != nil && m.CkptID > 0 { // a hang's evidence into hangs/<ID>/ (evidence.go)
				go ev.collect(p, m.CkptID, env)
			} else {
				go dumpStack(p, rank, node, gpu, env)
			}
			return
		}
		if ckptSig == nil {
			return
		}
		if _, dup := once.LoadOrStore(m.CkptID, true); !dup {
			go func(id int) {
				if deliverCkptSignal(p, ckptSig.(syscall.Signal), rank, node, env) {
					send(launch.Msg{Kind: launch.Delivered, Rank: rank, CkptID: id})
				}
			}(m.CkptID)
		}
	}
}

// commonWait bounds the wait for the controller's address in a step
// started before its plan (the controller asks Slurm for it after srun
// starts; scontrol's own timeout is 30 s).
const commonWait = 2 * time.Minute

// shimWait is a task's start in a step started before its plan: every
// task connects, says wait, and waits for the controller's go (true) or
// abort (false); the first task of each node to say wait is asked to probe
// the node (--probe-node DIR) meanwhile.
func shimWait(env Env, launchDir, probeDir string, task slurm.Task, rank int, node string) (*launch.Client, bool, error) {
	c, err := launch.WaitCommon(launchDir, commonWait)
	if err != nil {
		return nil, false, exitcode.With(exitcode.Slurm, err)
	}
	var probe func() error
	var probeErr error
	if probeDir != "" {
		probe = func() error { probeErr = Probe(env, probeDir); return probeErr }
	}
	ctl, goAhead, err := launch.DialWait(c.Control, launch.Msg{Token: c.Token, Rank: rank, Node: node, StepID: task.StepID}, probe)
	if err != nil {
		if probeErr != nil {
			return nil, false, probeErr
		}
		return nil, false, exitcode.With(exitcode.Slurm, fmt.Errorf("rank %d on %s: waiting for the controller at %s: %w", rank, node, c.Control, err))
	}
	return ctl, goAhead, nil
}

// taskEnv is the rank's environment: inherited (Slurm's own), then the
// launch files' common part, then the rank's, with CUDA_VISIBLE_DEVICES
// reordered for the rank's GPU; localDir is the node-local checkpoint
// directory ("" without one).
func taskEnv(env Env, common *launch.Common, me *launch.Rank, rank int, node string) (envl []string, localDir string, err error) {
	envm := map[string]string{}
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok {
			envm[k] = v
		}
	}
	for k, v := range common.Env {
		envm[k] = v
	}
	for k, v := range me.Env {
		envm[k] = v
	}
	if cvd := env.Getenv("CUDA_VISIBLE_DEVICES"); cvd != "" {
		stepGPUs := slurm.TaskFromEnv(env.Getenv).StepGPUs
		v, err := launch.VisibleDevicesFor(cvd, stepGPUs, me.GPU, me.GPUSlot, me.LocalRank)
		if err != nil {
			return nil, "", exitcode.With(exitcode.Slurm, fmt.Errorf("rank %d on %s: %w", rank, node, err))
		}
		envm["CUDA_VISIBLE_DEVICES"] = v
		if me.GPU < 0 { // not probed: this rank drives the step's GPUSlot-th GPU
			if ids := launch.SplitList(stepGPUs); me.GPUSlot < len(ids) {
				envm["TRAINRUN_GPU"] = ids[me.GPUSlot]
			} else if l := launch.SplitList(cvd); me.GPUSlot < len(l) {
				envm["TRAINRUN_GPU"] = l[me.GPUSlot]
			}
		}
	}
	if common.LocalDir != "" {
		localDir = expandLocalDir(common.LocalDir, node, common.JobID, slurm.TaskFromEnv(env.Getenv).Restart)
		envm["TRAINRUN_CKPT_LOCAL_DIR"] = localDir
		if err := ensureLocalDir(localDir, node); err != nil {
			return nil, "", exitcode.With(exitcode.Usage, err)
		}
	}
	envl = make([]string, 0, len(envm))
	for k, v := range envm {
		envl = append(envl, k+"="+v)
	}
	// Sorted: every launch of a rank gets the same environment in the same
	// order (a map's order changes each time), so two ranks' or two
	// restarts' /proc/PID/environ compare line for line.
	slices.Sort(envl)
	return envl, localDir, nil
}

// resolveCommand finds the command with the rank's PATH: a missing command
// is exit 127 with a message naming it, the node and the PATH searched.
func resolveCommand(env Env, path string, envl []string, rank int, node string) (string, error) {
	pathVar := ""
	for _, kv := range envl {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			pathVar = v
		}
	}
	if !strings.Contains(path, "/") {
		p, err := lookPathIn(path, pathVar)
		if err != nil {
			fmt.Fprintf(env.Stderr, "trainrun: exec-task: rank %d on %s: command %q not found in PATH=%s; install it on every node or give its full path\n",
				rank, node, path, pathVar)
			return "", exitcode.With(exitcode.NotFound, exitcode.ErrSilent)
		}
		path = p
	} else if _, err := os.Stat(path); err != nil {
		fmt.Fprintf(env.Stderr, "trainrun: exec-task: rank %d on %s: command %q not found (%v); the path must exist on every node\n", rank, node, path, err)
		return "", exitcode.With(exitcode.NotFound, exitcode.ErrSilent)
	}
	return path, nil
}

// startDrain: local rank 0 drains the node's node-local checkpoints into
// the store, started before the trainer so that the epilog's handoff record
// exists before the first local save. The function it returns drains what
// the node saved before the shim exits; the handoff record goes once
// nothing is left for the epilog.
func startDrain(env Env, common *launch.Common, me *launch.Rank, launchDir, node, localDir string, shimStart time.Time) func() {
	var drainer *nodeDrainer
	var handoff string
	if localDir != "" && me.LocalRank == 0 {
		ranks, err := launch.NodeRanks(launchDir, node)
		if err == nil {
			drainer, err = startNodeDrainer(localDir, common.CkptDir, node, ranks, shimStart, env.Stderr)
		}
		if err != nil {
			fmt.Fprintf(env.Stderr, "trainrun: exec-task: %s: no drain of node-local checkpoints: %v\n", node, err)
		} else {
			handoff = writeDrainHandoff(env, common, node, localDir, ranks)
		}
	}
	return func() {
		if drainer == nil {
			return
		}
		left := drainer.finish(DrainFinishWait)
		if len(left) > 0 {
			fmt.Fprintf(env.Stderr, "trainrun: exec-task: %s: checkpoint(s) %s in %s not drained: not every rank of the node marked them done within %s\n",
				node, strings.Join(left, ", "), localDir, DrainFinishWait)
			if handoff != "" {
				fmt.Fprintf(env.Stderr, "trainrun: exec-task: %s: the job epilog drains what is marked done (record %s)\n", node, handoff)
			}
			return
		}
		if handoff != "" {
			os.Remove(handoff)
		}
	}
}

// superviseTask relays signals to the controller (and forwards them outside
// a step), and reports the trainer's end; the shim then dies the way the
// trainer did.
func superviseTask(env Env, cmd *exec.Cmd, ctl *launch.Client, sigc chan os.Signal, forward bool, finishDrain func(), me *launch.Rank, fw *failureWatch, rank int, node, name string) error {
	send := func(m launch.Msg) {
		if ctl != nil {
			ctl.Send(m)
		}
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for {
		select {
		case s := <-sigc:
			send(launch.Msg{Kind: launch.Signal, Rank: rank, Signal: launch.SignalName(s)})
			if forward {
				cmd.Process.Signal(s)
			}
		case err := <-done:
			code, sig := exitStatus(cmd.ProcessState, err)
			// Also after Slurm's SIGTERM: the checkpoint the trainer just
			// saved locally exists nowhere else.
			finishDrain()
			fc := fw.classify(code)
			send(launch.Msg{Kind: launch.Exit, Rank: rank, Code: code, Class: string(fc.Class), Evidence: fc.Evidence})
			if ctl != nil {
				ctl.Close()
			}
			if code != 0 {
				what := fmt.Sprintf("exited with %d", code)
				if sig != nil {
					what = "was killed by " + launch.SignalName(sig)
				}
				fmt.Fprintf(env.Stderr, "trainrun: exec-task: rank %d on %s (GPU %d): %s %s (failure class %s: %s)\n", rank, node, me.GPU, name, what, fc.Class, fc.Evidence)
			}
			if sig != nil {
				// Die of the same signal so srun and the controller see it.
				signal.Reset(sig)
				syscall.Kill(os.Getpid(), sig.(syscall.Signal))
				time.Sleep(100 * time.Millisecond)
			}
			if code == 0 {
				return nil
			}
			return exitcode.With(code, exitcode.ErrSilent)
		}
	}
}

// startPinned starts cmd, bound to cpus when given. sched_setaffinity acts on
// one thread, and a child inherits the mask of the thread that forks it, so
// the goroutine is locked to its thread while it sets the mask and forks.
func startPinned(cmd *exec.Cmd, cpus string) error {
	if cpus == "" {
		return cmd.Start()
	}
	set, err := parseCPUList(cpus)
	if err != nil {
		return cmd.Start()
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var old unix.CPUSet
	if unix.SchedGetaffinity(0, &old) == nil {
		// Bind only within what Slurm allows this task.
		var both unix.CPUSet
		for i := 0; i < len(old)*64; i++ {
			if old.IsSet(i) && set.IsSet(i) {
				both.Set(i)
			}
		}
		if both.Count() > 0 && unix.SchedSetaffinity(0, &both) == nil {
			defer unix.SchedSetaffinity(0, &old)
		}
	}
	return cmd.Start()
}

// parseCPUList reads a Linux CPU list such as "0-15,32-47".
func parseCPUList(s string) (*unix.CPUSet, error) {
	var set unix.CPUSet
	for _, part := range strings.Split(strings.TrimSpace(s), ",") {
		if part == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return nil, fmt.Errorf("CPU list %q: %q", s, part)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, fmt.Errorf("CPU list %q: %q", s, part)
			}
		}
		for i := a; i <= b; i++ {
			set.Set(i)
		}
	}
	return &set, nil
}

// dialControl connects to the controller; without it the task still runs
// (Slurm's own signals still reach the trainer) and says so once.
func dialControl(c *launch.Common, rank, pid int, node string, env Env) *launch.Client {
	if c.Control == "" {
		return nil
	}
	conn, err := launch.Dial(c.Control, launch.Msg{Token: c.Token, Rank: rank, PID: pid, Node: node, StepID: slurm.TaskFromEnv(env.Getenv).StepID})
	if err != nil {
		fmt.Fprintf(env.Stderr, "trainrun: exec-task: rank %d on %s: cannot reach the controller at %s (%v); running without checkpoint requests from trainrun\n",
			rank, node, c.Control, err)
		return nil
	}
	return conn
}

// lookPathIn is exec.LookPath with an explicit PATH (the rank's, not the shim's).
func lookPathIn(file, path string) (string, error) {
	for _, dir := range strings.Split(path, ":") {
		if dir == "" {
			dir = "."
		}
		p := dir + "/" + file
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", exec.ErrNotFound
}

// exitStatus maps a finished process to a shell-style code: n, or 128+s for signal s.
func exitStatus(ps *os.ProcessState, err error) (int, os.Signal) {
	if ps == nil {
		return exitcode.Failure, nil
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal()), ws.Signal()
	}
	return ps.ExitCode(), nil
}

// deliverCkptSignal sends the checkpoint signal to the training process once
// it catches it. A process that does not (still importing torch, or a trainer
// that does not speak the handshake) would be killed by SIGUSR2's default
// action, so the shim waits until /proc/PID/status lists the signal as caught,
// and sends nothing if the process never installs a handler. It says
// whether the signal was sent.
func deliverCkptSignal(p *os.Process, sig syscall.Signal, rank int, node string, env Env) bool {
	warned := false
	for {
		caught, err := catchesSignal(p.Pid, sig)
		if err != nil {
			return false // the process is gone
		}
		if caught {
			return p.Signal(sig) == nil
		}
		if !warned {
			warned = true
			fmt.Fprintf(env.Stderr, "trainrun: exec-task: rank %d on %s: the training process does not catch SIG%s yet; holding the checkpoint request until it does\n",
				rank, node, launch.SignalName(sig))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// catchesSignal reads the SigCgt mask of /proc/PID/status.
func catchesSignal(pid int, sig syscall.Signal) (bool, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return false, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "SigCgt:"); ok {
			mask, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				return false, fmt.Errorf("/proc/%d/status SigCgt %q", pid, v)
			}
			return mask&(1<<(uint(sig)-1)) != 0, nil
		}
		if v, ok := strings.CutPrefix(line, "State:"); ok && strings.Contains(v, "zombie") {
			return false, fmt.Errorf("process %d exited", pid)
		}
	}
	return false, fmt.Errorf("/proc/%d/status has no SigCgt", pid)
}
