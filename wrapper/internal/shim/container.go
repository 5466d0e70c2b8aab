package shim

import (
	"fmt"
	"os"
	"slices"
	"strings"

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
