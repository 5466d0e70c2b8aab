package shim

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/trainrun/trainrun/wrapper/internal/collrec"
	"github.com/trainrun/trainrun/wrapper/internal/jobdir"
)

// A hang's evidence, the shim's part (issue 31). When the controller finds
// a hang it asks every stalled rank's shim (launch.Stack, ID n) for
// evidence; the shim writes, into the run's hangs/<n>/ (jobdir.Hang):
//
//	rank-R.collectives.txt  the trainer's last collectives (collrec), read
//	                        from the node-local record the client keeps
//	                        mapped: readable even when the process is stopped
//	rank-R.proc.txt         the process's state, wchan, kernel stack, syscall
//	rank-R.stack.txt        its Python stacks: the client's faulthandler writes
//	                        them to a node-local file on SIGURG; the shim copies
//	                        them here and into the log; "no answer" when the
//	                        process cannot answer (stopped, in the kernel)
//	rank-R.py-spy.txt       `py-spy dump` when py-spy is installed
//	node-NODE.nvidia-smi.txt `nvidia-smi -q` of the node, once per node, when present
//
// All within evidenceWait: the controller kills the step stackWait after
// asking.
const (
	evidenceWait = 2 * time.Second         // for the stack dump to arrive
	toolWait     = 2500 * time.Millisecond // py-spy, nvidia-smi
)

// evidence is one task's files for its trainer.
type evidence struct {
	runDir string // the run's directory: the launch directory's parent
	ring   string // TRAINRUN_COLLECTIVE_LOG (the client creates it)
	stack  string // TRAINRUN_STACK_FILE
	rank   int
	node   string
	gpu    int
}

// newEvidence names the node-local files of rank's trainer (in TMPDIR, one
// per task: job, step, rank and the shim's pid); nil when the stack file
// cannot be made (the task runs, without the files).
func newEvidence(launchDir, jobID, stepID string, rank int, node string, gpu int) *evidence {
	removeStale(jobID)
	base := filepath.Join(os.TempDir(), fmt.Sprintf("trainrun-%s.%s-rank%d-%d", jobID, stepID, rank, os.Getpid()))
	e := &evidence{runDir: filepath.Dir(filepath.Clean(launchDir)), ring: base + ".collectives", stack: base + ".stack", rank: rank, node: node, gpu: gpu}
	f, err := os.OpenFile(e.stack, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return nil
	}
	f.Close()
	return e
}

// env is what the trainer client reads.
func (e *evidence) env() []string {
	return []string{"TRAINRUN_COLLECTIVE_LOG=" + e.ring, "TRAINRUN_STACK_FILE=" + e.stack}
}

// removeStale deletes the files of this job's earlier tasks on the node
// whose shim is gone: a step killed for a hang kills its shims before they
// can remove their own.
func removeStale(jobID string) {
	paths, _ := filepath.Glob(filepath.Join(os.TempDir(), "trainrun-"+jobID+".*-rank*-*"))
	for _, p := range paths {
		name := strings.TrimSuffix(strings.TrimSuffix(filepath.Base(p), ".collectives"), ".stack")
		i := strings.LastIndexByte(name, '-')
		pid, err := strconv.Atoi(name[i+1:])
		if err != nil || pid <= 0 {
			continue
		}
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); os.IsNotExist(err) {
			os.Remove(p)
		}
	}
}

// remove deletes the node-local files when the task ends.
func (e *evidence) remove() {
	os.Remove(e.ring)
	os.Remove(e.stack)
}

// collect writes hang n's evidence of the process p.
func (e *evidence) collect(p *os.Process, n int, env Env) {
	dir := jobdir.Hang(e.runDir, n)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintf(env.Stderr, "trainrun: exec-task: rank %d on %s: hang evidence: %v\n", e.rank, e.node, err)
		dumpStack(p, e.rank, e.node, e.gpu, env)
		return
	}
	name := func(what string) string { return filepath.Join(dir, fmt.Sprintf("rank-%d.%s.txt", e.rank, what)) }
	from := fileSize(e.stack)
	st := procState(p.Pid)
	dumpStack(p, e.rank, e.node, e.gpu, env) // the signal first: the dump is written meanwhile
	e.writeCollectives(name("collectives"), p.Pid)
	os.WriteFile(name("proc"), procEvidence(p.Pid, st), 0o644)
	var wg sync.WaitGroup
	if st != "T" && st != "t" { // py-spy would wait on a stopped process
		wg.Add(1)
		go func() { defer wg.Done(); runTool(name("py-spy"), "py-spy", "dump", "--pid", strconv.Itoa(p.Pid)) }()
	}
	if f, err := os.OpenFile(filepath.Join(dir, "node-"+e.node+".nvidia-smi.txt"), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644); err == nil {
		f.Close() // this rank's shim takes the node's turn
		wg.Add(1)
		go func() { defer wg.Done(); runTool(f.Name(), "nvidia-smi", "-q") }()
	}
	stack := waitGrown(e.stack, from, evidenceWait)
	if len(stack) == 0 {
		stack = []byte(fmt.Sprintf("# rank %d on %s (pid %d, state %s): no answer within %s: a stopped process, or one inside the kernel, cannot run faulthandler; see rank-%d.proc.txt\n", e.rank, e.node, p.Pid, st, evidenceWait, e.rank))
	} else {
		env.Stderr.Write(stack) // the log keeps the dump, as before
	}
	os.WriteFile(name("stack"), stack, 0o644)
	wg.Wait()
}

// writeCollectives copies the client's record as text.
func (e *evidence) writeCollectives(path string, pid int) {
	var b bytes.Buffer
	raw, err := os.ReadFile(e.ring)
	if err != nil {
		fmt.Fprintf(&b, "# rank %d on %s: no record of its collectives (%v): the trainer does not call trainrun_client.record_collectives\n", e.rank, e.node, err)
		os.WriteFile(path, b.Bytes(), 0o644)
		return
	}
	collrec.Format(&b, fmt.Sprintf("rank %d on %s (pid %d): its last collectives, oldest first", e.rank, e.node, pid), collrec.Parse(raw))
	os.WriteFile(path, b.Bytes(), 0o644)
}

// procEvidence is what the kernel says of pid: state, wchan, the kernel
// stack and the syscall (the last two need privileges; their error is
// written instead).
func procEvidence(pid int, st string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "pid %d\nstate %s\n", pid, st)
	for _, f := range []string{"wchan", "syscall", "stack"} {
		v, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, f))
		if err != nil {
			fmt.Fprintf(&b, "%s: unreadable (%v)\n", f, err)
			continue
		}
		fmt.Fprintf(&b, "%s:\n%s\n", f, strings.TrimRight(string(v), "\n\x00"))
	}
	return b.Bytes()
}

// runTool runs a diagnostic tool when it is installed, its output into path.
func runTool(path, tool string, args ...string) {
	bin, err := exec.LookPath(tool)
	if err != nil {
		os.Remove(path) // the node's claim for a tool that is not there
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), toolWait)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	if err != nil {
		out = append(out, fmt.Sprintf("\n# %s %s: %v\n", tool, strings.Join(args, " "), err)...)
	}
	os.WriteFile(path, out, 0o644)
}

func fileSize(path string) int64 {
	if fi, err := os.Stat(path); err == nil {
		return fi.Size()
	}
	return 0
}

// waitGrown waits up to d for path to grow past from, then until it stops
// growing (faulthandler writes thread by thread); it returns the new bytes.
func waitGrown(path string, from int64, d time.Duration) []byte {
	deadline := time.Now().Add(d)
	last := from
	for time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		sz := fileSize(path)
		if sz > from && sz == last {
			break // grew, and stood still for one poll
		}
		last = sz
	}
	b, err := os.ReadFile(path)
	if err != nil || int64(len(b)) <= from {
		return nil
	}
	return b[from:]
}
