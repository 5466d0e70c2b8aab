package slurm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The client commands, by name. Other packages use these constants, never
// their own spelling, so that a search for a command finds this package only.
const (
	Scontrol = "scontrol"
	Srun     = "srun"
	Scancel  = "scancel"
	Sbatch   = "sbatch"
	Sinfo    = "sinfo"
	Squeue   = "squeue"
)

// DefaultTimeout bounds each query when Client.Timeout is zero: slurmctld
// answers in milliseconds when healthy; 30 s covers a busy one, and a hung
// one must not hold the job's start for longer.
const DefaultTimeout = 30 * time.Second

// ErrNotFound is what errors.Is finds in the error of a command that is not
// installed (not in PATH).
var ErrNotFound = exec.ErrNotFound

// A Runner runs one client command and returns its standard output. A
// failure is an *Error. Exec is the real one; tests pass Canned.
type Runner func(ctx context.Context, name string, args ...string) ([]byte, error)

// Error is a client command that failed.
type Error struct {
	Args   []string // the command line, name first
	Err    error    // how it ended: exit status, ErrNotFound, the context's error
	Stderr string   // what it printed on stderr, trimmed
}

func (e *Error) Error() string {
	s := strings.Join(e.Args, " ") + ": " + e.Err.Error()
	if e.Stderr != "" {
		s += ": " + e.Stderr
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// Exec runs the real command.
func Exec(ctx context.Context, name string, args ...string) ([]byte, error) {
	out, _, err := execute(ctx, name, args)
	return out, err
}

// A StderrRunner runs one client command and returns its standard output
// and standard error; a failure is an *Error (with the stderr in it).
type StderrRunner func(ctx context.Context, name string, args ...string) (stdout, stderr []byte, err error)

// ExecStderr runs the real command, keeping its stderr on success too.
func ExecStderr(ctx context.Context, name string, args ...string) ([]byte, []byte, error) {
	return execute(ctx, name, args)
}

func execute(ctx context.Context, name string, args []string) (stdout, stderr []byte, err error) {
	var outBuf, errBuf bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = &outBuf, &errBuf
	if drop := dropOf(ctx); len(drop) > 0 {
		cmd.Env = withoutEnv(os.Environ(), drop)
	}
	if err = cmd.Start(); err == nil {
		if n := niceOf(ctx); n > 0 {
			// Best effort: the command may already have run a little at
			// the caller's priority.
			syscall.Setpriority(syscall.PRIO_PROCESS, cmd.Process.Pid, n)
		}
		err = cmd.Wait()
	}
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		return outBuf.Bytes(), errBuf.Bytes(), &Error{Args: append([]string{name}, args...), Err: err, Stderr: strings.TrimSpace(errBuf.String())}
	}
	return outBuf.Bytes(), errBuf.Bytes(), nil
}

// BackgroundNice is the niceness of the commands run under Background.
const BackgroundNice = 10

type niceKey struct{}

// Background marks the commands Exec and ExecStderr run under ctx as
// background work: they run at niceness BackgroundNice, so that on a node
// where a step's tasks are starting at the same time (the early step of
// `trainrun run`: the queries only have to be answered by the time the
// probes arrive) the tasks get the CPU first. Where the CPU is idle a
// niced command runs as fast as any.
func Background(ctx context.Context) context.Context {
	return context.WithValue(ctx, niceKey{}, BackgroundNice)
}

func niceOf(ctx context.Context) int {
	n, _ := ctx.Value(niceKey{}).(int)
	return n
}

type dropKey struct{}

// WithoutEnv runs the commands Exec and ExecStderr run under ctx without
// the variables whose names begin with one of prefixes: the topology
// probe's srun must not inherit PYXIS_CONTAINER_IMAGE, which pyxis reads
// as --container-image and would run the probe inside an image.
func WithoutEnv(ctx context.Context, prefixes ...string) context.Context {
	return context.WithValue(ctx, dropKey{}, prefixes)
}

func dropOf(ctx context.Context) []string {
	p, _ := ctx.Value(dropKey{}).([]string)
	return p
}

// withoutEnv is env less the variables whose names begin with a prefix.
func withoutEnv(env, prefixes []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		keep := true
		for _, p := range prefixes {
			keep = keep && !strings.HasPrefix(kv, p)
		}
		if keep {
			out = append(out, kv)
		}
	}
	return out
}

// HaveSrun says whether srun is in PATH (it is looked up, not run).
func HaveSrun() bool {
	_, err := exec.LookPath(Srun)
	return err == nil
}

// StepCommand is the command that starts a job step: srun with args. The
// caller sets its environment, output and process group, starts it and
// watches it (the training step lives as long as the job).
func StepCommand(args []string) *exec.Cmd {
	return exec.Command(Srun, args...)
}

// Canned is a Runner for tests: it answers a command line ("scontrol show
// job -o 42") with the output the map holds for it, and fails every other
// command as a missing job would, recording each call in Calls.
type Canned struct {
	Out   map[string]string // command line → stdout
	Fail  map[string]string // command line → stderr of a failure (exit status 1)
	Err   map[string]string // command line → stderr of a success (RunStderr only)
	Calls []string          // every command line asked, in order

	mu sync.Mutex
}

// Run is the Runner.
func (c *Canned) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	line := strings.Join(append([]string{name}, args...), " ")
	c.mu.Lock()
	c.Calls = append(c.Calls, line)
	c.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return nil, &Error{Args: append([]string{name}, args...), Err: err}
	}
	if out, ok := c.Out[line]; ok {
		return []byte(out), nil
	}
	stderr, ok := c.Fail[line]
	if !ok {
		stderr = "no canned output for this command (slurm.Canned)"
	}
	return nil, &Error{Args: append([]string{name}, args...), Err: errors.New("exit status 1"), Stderr: stderr}
}

// RunStderr is the StderrRunner: Out and Err answer a success, Fail a
// failure.
func (c *Canned) RunStderr(ctx context.Context, name string, args ...string) ([]byte, []byte, error) {
	line := strings.Join(append([]string{name}, args...), " ")
	c.mu.Lock()
	stderr, ok := c.Err[line]
	c.mu.Unlock()
	if !ok {
		out, err := c.Run(ctx, name, args...)
		var se *Error
		if errors.As(err, &se) {
			return out, []byte(se.Stderr), err
		}
		return out, nil, err
	}
	c.mu.Lock()
	c.Calls = append(c.Calls, line)
	c.mu.Unlock()
	return []byte(c.Out[line]), []byte(stderr), nil
}

// ExitCode is how a command started with StepCommand ended, from its Wait
// error: 0 for nil, its exit status, or 128+N when signal N killed it. ok is
// false when err is no exit at all (the command could not be waited for).
func ExitCode(err error) (code int, ok bool) {
	if err == nil {
		return 0, true
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return 0, false
	}
	if ws, isWS := ee.Sys().(syscall.WaitStatus); isWS && ws.Signaled() {
		return 128 + int(ws.Signal()), true
	}
	return ee.ExitCode(), true
}

// KilledByTERM reports whether err is a command that SIGTERM ended. At a
// scancel Slurm sends SIGTERM to every process of the job, a client
// command running at that moment included: its caller need not warn about
// it (issue 30: "... signal: terminated" at every scancel).
func KilledByTERM(err error) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGTERM
}
