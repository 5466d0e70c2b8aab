package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/trainrun/trainrun/internal/slurm"
)

// DefaultCommandTimeout bounds a command run through Run or Exec whose
// context has no deadline, so a test can never wait forever on Slurm (a
// pending srun without --immediate, a hung step).
const DefaultCommandTimeout = 2 * time.Minute

// CmdError is a failed client command: which command, how it ended, what it
// printed, and what the daemons logged last.
type CmdError struct {
	Args   []string // the command line
	Err    error    // exit status, or the context's error on timeout
	Stdout string
	Stderr string
	Logs   string // Cluster.LogTail at the time of failure
}

func (e *CmdError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "command failed: %s: %v", quoteArgs(e.Args), e.Err)
	if s := strings.TrimRight(e.Stdout, "\n"); s != "" {
		fmt.Fprintf(&b, "\n--- stdout:\n%s", clip(s, 4000))
	}
	if s := strings.TrimRight(e.Stderr, "\n"); s != "" {
		fmt.Fprintf(&b, "\n--- stderr:\n%s", clip(s, 4000))
	}
	b.WriteString(e.Logs)
	return b.String()
}

func (e *CmdError) Unwrap() error { return e.Err }

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "[... " + strconv.Itoa(len(s)-n) + " bytes cut ...]\n" + s[len(s)-n:]
}

// quoteArgs writes a command line as a shell would need it, each argument
// clipped to 300 bytes so a huge one does not drown the message.
func quoteArgs(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		if len(a) > 300 {
			a = fmt.Sprintf("%s...[%d bytes]", a[:300], len(a))
		}
		if a == "" || strings.ContainsAny(a, " \t\n'\"\\$`*?[]{}();&|<>!#~") {
			q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		} else {
			q[i] = a
		}
	}
	return strings.Join(q, " ")
}

// Command returns an exec.Cmd for name with the cluster's environment (Env)
// and JobsDir as working directory; change them before running it if needed.
// Run it with Exec so failures carry the whole story.
func (c *Cluster) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = c.Env()
	cmd.Dir = c.l.jobsDir()
	// If the context ends, kill the command and do not wait for its children
	// to close their copies of the output pipes.
	cmd.WaitDelay = 2 * time.Second
	return cmd
}

// Run runs a client command (srun, sbatch, scontrol, squeue, ...) against the
// cluster and returns its standard output. A failure is a *CmdError with the
// command line, exit status, stdout, stderr and the daemons' log tails. When
// ctx has no deadline, DefaultCommandTimeout applies; give srun --immediate
// (or a deadline) so a step that cannot start fails instead of waiting.
func (c *Cluster) Run(ctx context.Context, name string, args ...string) (string, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultCommandTimeout)
		defer cancel()
	}
	return c.run(ctx, c.Command(ctx, name, args...))
}

// Exec runs cmd (usually from Command), returning its stdout; stdout and
// stderr must not be set. The command should have a deadline through the
// context it was made with.
func (c *Cluster) Exec(cmd *exec.Cmd) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), &CmdError{Args: cmd.Args, Err: err, Stdout: stdout.String(), Stderr: stderr.String(), Logs: c.LogTail(15)}
	}
	return stdout.String(), nil
}

// run is Exec that says "timed out" when ctx ended the command.
func (c *Cluster) run(ctx context.Context, cmd *exec.Cmd) (string, error) {
	out, err := c.Exec(cmd)
	var ce *CmdError
	if errors.As(err, &ce) && ctx.Err() != nil {
		ce.Err = fmt.Errorf("%w (%v)", ctx.Err(), ce.Err)
	}
	return out, err
}

// output runs a command with its own timeout, for the harness's internal
// polling; it returns stdout and a *CmdError.
func (c *Cluster) output(ctx context.Context, timeout time.Duration, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return c.run(ctx, c.Command(ctx, name, args...))
}

// SubmitBatch writes script to a file under JobsDir and submits it with
// `sbatch --parsable`, returning the job id. The job runs in JobsDir and
// writes its output to OutputPath(id) unless args (sbatch options, placed
// after the harness's own so they win) say otherwise. The script needs its own
// "#!/bin/bash" line.
func (c *Cluster) SubmitBatch(ctx context.Context, script string, args ...string) (int, error) {
	c.mu.Lock()
	c.jobSeq++
	seq := c.jobSeq
	c.mu.Unlock()
	path := filepath.Join(c.l.jobsDir(), fmt.Sprintf("script-%d.sh", seq))
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		return 0, fmt.Errorf("harness: %w", err)
	}
	full := append([]string{"--parsable", "--chdir=" + c.l.jobsDir(), "--output=" + filepath.Join(c.l.jobsDir(), "slurm-%j.out")}, args...)
	full = append(full, path)
	out, err := c.Run(ctx, "sbatch", full...)
	if err != nil {
		return 0, err
	}
	idStr, _, _ := strings.Cut(strings.TrimSpace(out), ";")
	id, err := strconv.Atoi(idStr)
	if err != nil {
		return 0, fmt.Errorf("harness: sbatch %s printed %q, not a job id: %w", quoteArgs(full), out, err)
	}
	return id, nil
}

// OutputPath is where SubmitBatch sends a job's stdout and stderr by default.
func (c *Cluster) OutputPath(jobID int) string {
	return filepath.Join(c.l.jobsDir(), fmt.Sprintf("slurm-%d.out", jobID))
}

// JobOutput reads OutputPath(jobID) ("" if the job has written nothing yet).
func (c *Cluster) JobOutput(jobID int) string {
	data, _ := os.ReadFile(c.OutputPath(jobID))
	return string(data)
}

// JobInfo returns the fields of `scontrol show job -o ID` (JobState,
// Restarts, ExitCode, NodeList, Reason, ...). Values that contain spaces
// (Command=, WorkDir=) are kept whole as long as no word in them looks like
// "Key=" itself.
func (c *Cluster) JobInfo(ctx context.Context, jobID int) (map[string]string, error) {
	out, err := c.output(ctx, 30*time.Second, "scontrol", "show", "job", "-o", strconv.Itoa(jobID))
	if err != nil {
		return nil, err
	}
	line, _, _ := strings.Cut(strings.TrimSpace(out), "\n")
	return slurm.ParseRecord(line), nil
}

// FinalStates are the job states a job does not leave by itself. PREEMPTED is
// not among them: under PreemptMode=REQUEUE the job is queued again.
var FinalStates = []string{"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE"}

// WaitJob polls the job until its state is one of want, and returns it. It
// fails fast, with the job's fields and output, when the job reaches a final
// state that is not wanted, and fails after timeout.
func (c *Cluster) WaitJob(ctx context.Context, jobID int, timeout time.Duration, want ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var state string
	var info map[string]string
	failures := 0
	err := poll(ctx, 100*time.Millisecond, func() (bool, error) {
		i, err := c.JobInfo(ctx, jobID)
		if err != nil {
			// A busy slurmctld may time out once; three times in a row is
			// an answer.
			if failures++; failures < 3 || ctx.Err() != nil {
				return false, nil
			}
			return false, err
		}
		failures = 0
		info, state = i, i["JobState"]
		if slices.Contains(want, state) {
			return true, nil
		}
		if slices.Contains(FinalStates, state) {
			return false, errors.New("ended")
		}
		return false, nil
	}, fmt.Sprintf("job %d to be %s", jobID, strings.Join(want, "|")))
	if err != nil {
		logs := ""
		var ce *CmdError
		if !errors.As(err, &ce) { // a CmdError carries the log tails already
			logs = c.LogTail(15)
		}
		return state, fmt.Errorf("harness: job %d is %s, waited for %s (%v)\n--- job: %s\n--- output (%s):\n%s%s",
			jobID, state, strings.Join(want, "|"), err, fmtKV(info, "JobState", "Reason", "ExitCode", "Restarts", "NodeList", "Partition", "RunTime"),
			c.OutputPath(jobID), clip(c.JobOutput(jobID), 4000), logs)
	}
	return state, nil
}

func fmtKV(m map[string]string, keys ...string) string {
	var parts []string
	for _, k := range keys {
		if v, ok := m[k]; ok {
			parts = append(parts, k+"="+v)
		}
	}
	return strings.Join(parts, " ")
}

// NodeInfo is a node as `scontrol show node` sees it.
type NodeInfo struct {
	State  string // e.g. IDLE, MIXED, ALLOCATED, DOWN+NOT_RESPONDING, IDLE+DRAIN
	Reason string
	Fields map[string]string // every field
}

// NodeInfo returns every node's fields from `scontrol show node -o`.
func (c *Cluster) NodeInfo(ctx context.Context) (map[string]NodeInfo, error) {
	return c.nodeInfo(ctx)
}

func (c *Cluster) nodeInfo(ctx context.Context) (map[string]NodeInfo, error) {
	out, err := c.output(ctx, 10*time.Second, "scontrol", "show", "node", "-o")
	if err != nil {
		return nil, err
	}
	nodes := map[string]NodeInfo{}
	for _, line := range strings.Split(out, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		kv := slurm.ParseRecord(line)
		nodes[kv["NodeName"]] = NodeInfo{State: kv["State"], Reason: kv["Reason"], Fields: kv}
	}
	return nodes, nil
}

// TB is the part of testing.TB that LogOnFailure needs.
type TB interface {
	Helper()
	Cleanup(func())
	Failed() bool
	Logf(format string, args ...any)
}

// LogOnFailure makes t log the last lines of every daemon log when the test
// fails, at the end of the test: call it first thing in a test.
func (c *Cluster) LogOnFailure(t TB) {
	t.Helper()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("daemon logs at the end of the failed test:%s", c.LogTail(40))
		}
	})
}
