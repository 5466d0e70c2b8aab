package shim

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/trainrun/trainrun/internal/slurm"
	"github.com/trainrun/trainrun/topo"
	"github.com/trainrun/trainrun/topo/nvml"
	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
	"github.com/trainrun/trainrun/wrapper/internal/launch"
)

// Probe learns this node's facts and writes DIR/<node>.json: in a probe
// step (one task per node, exec-task --probe DIR) or, in a step started
// before its plan, in the node's first task before it waits (--probe-node).
func Probe(env Env, dir string) error {
	task := slurm.TaskFromEnv(env.Getenv)
	f := launch.NodeFacts{Node: task.Node}
	f.Hostname, _ = os.Hostname()
	if f.Node == "" {
		f.Node = f.Hostname
	}
	ids := task.StepGPUs
	for _, s := range launch.SplitList(ids) {
		if n, err := strconv.Atoi(s); err == nil {
			f.GPUs = append(f.GPUs, n)
		}
	}
	f.CVD = env.Getenv("CUDA_VISIBLE_DEVICES")
	f.Restart = task.Restart
	// NVML where the driver loads: the GPUs' NVLink fabric (GB200 NVL72
	// clique) places TP/EP across trays of one clique; sysfs always.
	opts := topo.Options{}
	if src, err := nvml.Open(); err != nil {
		opts.NVMLUnavailable = strings.TrimPrefix(err.Error(), topo.ErrNVMLUnavailable.Error()+": ")
	} else {
		defer src.Close()
		opts.NVML = src
	}
	if n, err := topo.Discover(opts); err != nil {
		f.TopoError = err.Error()
	} else {
		f.Topo = n
		if len(n.GPUs) > 0 {
			f.GPUName = n.GPUs[0].Name
		}
	}
	if b, err := os.ReadFile("/etc/nccl.conf"); err == nil {
		f.NCCLConf = string(b)
	}
	if strings.ContainsAny(f.Node, "/\x00") {
		return exitcode.With(exitcode.Slurm, fmt.Errorf("node name %q", f.Node))
	}
	return launch.WriteJSONAtomic(filepath.Join(dir, f.Node+".json"), f, 0o644)
}
