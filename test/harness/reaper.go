package harness

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// The reaper is this same executable, started by Start with reaperVar naming
// the cluster directory and a pipe from the owner on stdin. It blocks until
// the pipe closes, which happens when Stop has finished or when the owner
// died in any way (a panicking test, go test -timeout, SIGKILL), and then
// kills whatever of the cluster is left and removes the directory, unless
// Stop already did (no owner file any more). Deferred calls and signal
// handlers cannot cover those deaths; a separate process can.
const reaperVar = "TRAINRUN_HARNESS_REAPER"

func init() {
	dir := os.Getenv(reaperVar)
	if dir == "" {
		return
	}
	_, _ = io.Copy(io.Discard, os.Stdin) // returns at EOF: the owner is done or dead
	os.Exit(reap(dir))
}

func reap(dir string) int {
	for {
		if _, err := os.Stat(filepath.Join(dir, ownerFile)); err != nil {
			return 0 // stopped cleanly (directory gone, or kept without owner)
		}
		if !ownerAlive(dir) {
			break
		}
		// The owner closed the pipe but lives: Stop is finishing, or failed
		// and the owner will exit soon; look again.
		time.Sleep(50 * time.Millisecond)
	}
	if left := killAll(dir); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "harness reaper: %d processes of %s survived SIGKILL\n", len(left), dir)
		return 1
	}
	if err := os.RemoveAll(dir); err != nil {
		fmt.Fprintf(os.Stderr, "harness reaper: %v\n", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "harness reaper: the owner of %s died without Stop; killed what was left and removed it\n", dir)
	return 0
}

// startReaper starts the reaper for c and keeps the write end of its pipe.
func (c *Cluster) startReaper() error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("harness: find own executable for the reaper: %w", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("harness: reaper pipe: %w", err)
	}
	defer r.Close()
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), reaperVar+"="+c.l.dir)
	cmd.Stdin = r
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	// Its own process group: a Ctrl-C reaches the owner, which stops the
	// cluster, and not the reaper.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		w.Close()
		return fmt.Errorf("harness: start reaper %s: %w", exe, err)
	}
	c.reaperPipe = w
	go func() { _ = cmd.Wait() }()
	return nil
}
