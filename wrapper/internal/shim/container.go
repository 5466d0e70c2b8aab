package shim

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/trainrun/trainrun/wrapper/internal/container"
	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
	"github.com/trainrun/trainrun/wrapper/internal/launch"
)

// cdiSpecs are where an NVIDIA CDI specification lives when the node has
// one (nvidia-ctk cdi generate writes /etc/cdi/nvidia.yaml; the
// nvidia-container-toolkit's service /var/run/cdi).
var cdiSpecs = []string{"/etc/cdi/nvidia.yaml", "/etc/cdi/nvidia.json", "/var/run/cdi/nvidia.yaml", "/var/run/cdi/nvidia.json"}

// containerCommand is the runtime prefix's command for the training
// command argv (--container-runtime): the runtime found in the rank's PATH,
// and the whole command line. The training command itself is looked up
// inside the image, by the runtime.
func containerCommand(env Env, c *launch.Common, argv, envl []string, rank int, node string) (path string, full []string, err error) {
	run := c.Container
	h := container.Host{Name: container.ContainerName(c.JobID, rank), Extra: 1}
	if run.Runtime == "podman" {
		h.PIDFile = pidFilePath(h.Name)
		os.Remove(h.PIDFile) // a stale one would name a process long gone
	}
	for _, kv := range envl {
		h.GPU = h.GPU || strings.HasPrefix(kv, "CUDA_VISIBLE_DEVICES=") && kv != "CUDA_VISIBLE_DEVICES="
	}
	for _, p := range cdiSpecs {
		if _, err := os.Stat(p); err == nil {
			h.CDI = true
		}
	}
	// The heartbeat's variables are added to the trainer's environment
	// after this (task.go): they must cross into the container too.
	full = run.Argv(argv, append(slices.Clone(envl), (*beater)(nil).env()...), h)
	if path, err = resolveCommand(env, full[0], envl, rank, node); err != nil {
		fmt.Fprintf(env.Stderr, "trainrun: exec-task: rank %d on %s: --container-runtime %s: %s is not installed on this node\n", rank, node, run.Runtime, full[0])
		return "", nil, exitcode.With(exitcode.NotFound, exitcode.ErrSilent)
	}
	return path, full, nil
}

// pidFilePath is where podman writes the trainer's PID for the shim.
func pidFilePath(name string) string {
	return filepath.Join(os.TempDir(), name+".pid")
}

// containerPID is the trainer's own PID inside podman's container (host
// PID: --pid=host), read from --pidfile once podman wrote it; runtime the
// PID of the runtime's process, returned when the file does not come
// (another runtime, or podman ended first). Waits at most a minute.
func containerPID(c *launch.Common, rank, runtime int) int {
	if c.Container == nil || c.Container.Runtime != "podman" {
		return runtime
	}
	path := pidFilePath(container.ContainerName(c.JobID, rank))
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline) && procState(runtime) != "-"; time.Sleep(100 * time.Millisecond) {
		b, err := os.ReadFile(path)
		if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && perr == nil && pid > 0 {
			return pid
		}
	}
	return runtime
}
