package shim

import (
	"fmt"
	"os"
	"os/exec"
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
// before its plan, in the task the controller asks (--probe-node).
//
// The lean trainrun-shim is built without cgo, so it cannot load NVML. On a
// node with an NVIDIA driver it has trainrun (next to it, built with cgo)
// probe instead, and probes without NVML only if that fails.
func Probe(env Env, dir string) error {
	return probeWith(env, dir, nvmlProber(nvml.Available))
}

// probeWith probes with bin (`BIN exec-task --probe DIR`), else here.
func probeWith(env Env, dir, bin string) error {
	if bin != "" {
		cmd := exec.Command(bin, "exec-task", "--probe", dir)
		cmd.Stdout, cmd.Stderr = env.Stdout, env.Stderr
		err := cmd.Run()
		if err == nil {
			return nil
		}
		fmt.Fprintf(env.Stderr, "trainrun: exec-task: probing with %s (for NVML) failed (%v); probing without NVML\n", bin, err)
	}
	return probeHere(env, dir)
}

// nvidiaDriver is the device node whose presence says NVML has facts to
// add; executable is this binary's path (both replaced in tests).
var (
	nvidiaDriver = "/dev/nvidiactl"
	executable   = os.Executable
)

// nvmlProber is the binary to probe with when this one cannot load NVML
// (available false) and the node has an NVIDIA driver: trainrun next to
// this executable. "" where this binary probes itself.
func nvmlProber(available bool) string {
	if available {
		return ""
	}
	if _, err := os.Stat(nvidiaDriver); err != nil {
		return ""
	}
	self, err := executable()
	if err != nil {
		return ""
	}
	bin := filepath.Join(filepath.Dir(self), "trainrun")
	if st, err := os.Stat(bin); err != nil || st.IsDir() || st.Mode()&0o111 == 0 || bin == self {
		return ""
	}
	return bin
}

func probeHere(env Env, dir string) error {
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
