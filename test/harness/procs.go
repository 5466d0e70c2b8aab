package harness

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// daemon is one long-running process the cluster started.
type daemon struct {
	name       string
	cmd        *exec.Cmd
	stderrPath string
	done       chan struct{} // closed when the process has been reaped
	mu         sync.Mutex
	waitErr    error
}

func (d *daemon) exited() bool {
	select {
	case <-d.done:
		return true
	default:
		return false
	}
}

func (d *daemon) exitStatus() string {
	if !d.exited() {
		return "running"
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.waitErr == nil {
		return "exit status 0"
	}
	return d.waitErr.Error()
}

// startDaemon starts bin in its own process group with the cluster's
// environment, stdout and stderr going to log/<name>.stderr (daemons log to
// their own files once configured; this catches what comes before).
func (c *Cluster) startDaemon(name, bin string, args []string, logPath string) (*daemon, error) {
	stderrPath := filepath.Join(c.l.logDir(), name+".stderr")
	f, err := os.OpenFile(stderrPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("harness: %w", err)
	}
	defer f.Close()
	path, err := lookBin(bin)
	if err != nil {
		return nil, fmt.Errorf("harness: %s: %w", bin, err)
	}
	cmd := exec.Command(path, args...)
	cmd.Env = c.env
	cmd.Dir = c.l.runDir()
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid: true,
		// If this test process dies without Stop (SIGKILL), the daemons die
		// with it; the spawner's locked thread makes this reliable in Go.
		Pdeathsig: syscall.SIGKILL,
	}
	if err := c.spawn.start(cmd); err != nil {
		return nil, fmt.Errorf("harness: start %s: %w", strings.Join(cmd.Args, " "), err)
	}
	d := &daemon{name: name, cmd: cmd, stderrPath: stderrPath, done: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		d.mu.Lock()
		d.waitErr = err
		d.mu.Unlock()
		close(d.done)
	}()
	c.mu.Lock()
	c.daemons[name] = d
	c.mu.Unlock()
	c.opts.Logf("harness: started %s (pid %d): %s", name, cmd.Process.Pid, strings.Join(cmd.Args, " "))
	return d, nil
}

// spawner starts processes from one OS thread that stays alive until close,
// because Linux delivers Pdeathsig when the *thread* that forked the child
// exits, and Go may otherwise fork from any thread.
type spawner struct {
	req  chan spawnReq
	once sync.Once
}

type spawnReq struct {
	cmd  *exec.Cmd
	resp chan error
}

func newSpawner() *spawner {
	s := &spawner{req: make(chan spawnReq)}
	go func() {
		runtime.LockOSThread()
		// Never unlocked: when this goroutine returns the thread exits, after
		// Stop has killed every child anyway.
		for r := range s.req {
			r.resp <- r.cmd.Start()
		}
	}()
	return s
}

func (s *spawner) start(cmd *exec.Cmd) error {
	resp := make(chan error, 1)
	s.req <- spawnReq{cmd, resp}
	return <-resp
}

func (s *spawner) close() { s.once.Do(func() { close(s.req) }) }

// killAll SIGKILLs the processes of the cluster in dir until none is left,
// and waits until every process it killed has exited (a zombie has). It
// returns what survived, if anything.
func killAll(dir string) []proc {
	killed := map[int]bool{}
	var left []proc
	for i := 0; i < 50; i++ {
		left = clusterProcs(dir)
		if len(left) == 0 {
			break
		}
		for _, p := range left {
			_ = syscall.Kill(p.pid, syscall.SIGKILL)
			killed[p.pid] = true
		}
		time.Sleep(20 * time.Millisecond)
	}
	// A process stops showing its environment while it exits; wait until it
	// is gone or a zombie, so "nothing left" means it.
	deadline := time.Now().Add(5 * time.Second)
	for pid := range killed {
		for running(pid) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if running(pid) {
			left = append(left, proc{pid: pid, cmdline: procCmdline(pid)})
		}
	}
	return left
}

// running reports whether pid exists and is not a zombie.
func running(pid int) bool {
	f, err := procStat(pid)
	return err == nil && len(f) > 0 && f[0] != "Z"
}

// proc is a process found in /proc.
type proc struct {
	pid     int
	ppid    int
	cmdline string
}

// clusterProcs lists the processes that belong to the cluster in dir: those
// whose environment carries the marker (daemons, clients, job tasks), every
// slurmstepd with a file under dir open (slurmstepd overwrites its environment
// area with its process title, but keeps its slurmd's log open), and every
// descendant of those (tasks started with --export=NONE). This process and its ancestors are never listed.
func clusterProcs(dir string) []proc {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	all := map[int]proc{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		ppid, err := procPPid(pid)
		if err != nil {
			continue
		}
		all[pid] = proc{pid: pid, ppid: ppid, cmdline: procCmdline(pid)}
	}
	protected := map[int]bool{}
	for p := os.Getpid(); p > 0; {
		protected[p] = true
		pp, ok := all[p]
		if !ok || pp.ppid == p {
			break
		}
		p = pp.ppid
	}
	member := map[int]bool{}
	marker := []byte(markerVar + "=" + dir + "\x00")
	prefix := dir + string(filepath.Separator)
	for pid := range all {
		if protected[pid] {
			continue
		}
		if env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid)); err == nil && containsEnv(env, marker) {
			member[pid] = true
			continue
		}
		if !strings.HasPrefix(all[pid].cmdline, "slurmstepd") {
			continue
		}
		fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		for _, fd := range fds {
			t, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
			if err == nil && strings.HasPrefix(t, prefix) {
				member[pid] = true
				break
			}
		}
	}
	// Descendants, to a fixed point.
	for changed := true; changed; {
		changed = false
		for pid, p := range all {
			if !member[pid] && !protected[pid] && member[p.ppid] {
				member[pid] = true
				changed = true
			}
		}
	}
	var out []proc
	for pid := range member {
		out = append(out, all[pid])
	}
	return out
}

// containsEnv reports whether the NUL-separated environ block holds entry
// (which ends in NUL) as a whole entry.
func containsEnv(environ, entry []byte) bool {
	s, e := string(environ), string(entry)
	return strings.HasPrefix(s, e) || strings.Contains(s, "\x00"+e)
}

// procStat returns the fields of /proc/pid/stat after the command name.
func procStat(pid int) ([]string, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil, fmt.Errorf("/proc/%d/stat: no ')' in %q", pid, s)
	}
	return strings.Fields(s[i+1:]), nil
}

func procPPid(pid int) (int, error) {
	f, err := procStat(pid)
	if err != nil || len(f) < 2 {
		return 0, fmt.Errorf("/proc/%d/stat: %v", pid, err)
	}
	return strconv.Atoi(f[1])
}

// procStartTime is field 22 of /proc/pid/stat (clock ticks since boot).
func procStartTime(pid int) (uint64, error) {
	f, err := procStat(pid)
	if err != nil {
		return 0, err
	}
	if len(f) < 20 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	return strconv.ParseUint(f[19], 10, 64)
}

func procCmdline(pid int) string {
	data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return strings.TrimSpace(strings.ReplaceAll(string(data), "\x00", " "))
}
