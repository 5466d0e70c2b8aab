package main

import (
	"errors"
	"os/exec"
	"syscall"
)

// killedByTERM reports whether err is a command that SIGTERM ended. At a
// scancel Slurm sends SIGTERM to every process of the job, an scontrol
// trainrun is running at that moment included: that is not a failure to
// warn about (issue 30: "asking Slurm for the job's state: ... signal:
// terminated" at every scancel).
func killedByTERM(err error) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGTERM
}
