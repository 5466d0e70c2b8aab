// Command trainrun-shim is `trainrun exec-task` without the rest of
// trainrun: srun starts it once per task of a `trainrun run` step, where
// its start-up is paid once per GPU of every job. trainrun's own binary
// initialises about 130 packages (the planner, the metrics client,
// net/http, TLS) before main runs, about 10 ms of CPU per process on a
// small VM; this one about 4 ms (make bench measures both). `trainrun run`
// uses it when it lies next to the trainrun binary (make install puts it
// there), else `trainrun exec-task`; TRAINRUN_SHIM=exec-task forces the
// latter. It takes exec-task's flags.
//
// make build builds it without cgo: a static binary starts without the
// dynamic loader and libc's thread set-up (about 0.8 ms less CPU per
// process here, perf stat, 3.0 against 3.8 ms). NVML needs cgo, so on a
// node with NVIDIA GPUs the probe runs trainrun instead (shim/probe.go).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/trainrun/trainrun/wrapper/internal/shim"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := shim.Main(ctx, shim.Env{Getenv: os.Getenv, Stdout: os.Stdout, Stderr: os.Stderr}, os.Args[1:])
	stop()
	os.Exit(code)
}
