package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/trainrun/trainrun/internal/slurm"
	"github.com/trainrun/trainrun/topo"
	"github.com/trainrun/trainrun/topo/nvml"
	"github.com/trainrun/trainrun/wrapper/internal/launch"
)

// nodeFacts is what the probe learns on one node of the allocation.
type nodeFacts struct {
	Node     string `json:"node"`                // SLURMD_NODENAME
	Hostname string `json:"hostname"`            // os.Hostname
	GPUs     []int  `json:"gpus"`                // SLURM_STEP_GPUS (else SLURM_JOB_GPUS): the node's GPU indices the job holds
	CVD      string `json:"cuda_visible"`        // CUDA_VISIBLE_DEVICES as Slurm set it for the probe step
	GPUName  string `json:"gpu_name,omitempty"`  // the first GPU's name in the node topology
	NCCLConf string `json:"nccl_conf,omitempty"` // /etc/nccl.conf, when present
	Restart  string `json:"restart"`             // SLURM_RESTART_COUNT of the probe ("" on a first start): the incarnation whose GPUs these are
	// Topo is the node's topology (topo.Discover on the node); nil when
	// discovery failed (TopoError says why).
	Topo      *topo.Node `json:"topo,omitempty"`
	TopoError string     `json:"topo_error,omitempty"`
}

// runProbeNode runs on each node (one task per node) and writes DIR/<node>.json.
func runProbeNode(env *runEnv, dir string) error {
	task := slurm.TaskFromEnv(env.getenv)
	f := nodeFacts{Node: task.Node}
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
	f.CVD = env.getenv("CUDA_VISIBLE_DEVICES")
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
		return withCode(ExitSlurm, fmt.Errorf("node name %q", f.Node))
	}
	return launch.WriteJSONAtomic(filepath.Join(dir, f.Node+".json"), f, 0o644)
}

// probeNodes runs the probe on every node in one step (one task per node,
// --overlap so it never waits for resources) and reads the results.
func probeNodes(ctx context.Context, sc slurm.Client, a *allocation, self, dir string) (map[string]nodeFacts, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	n := strconv.Itoa(len(a.Nodes))
	args := []string{"--nodes=" + n, "--ntasks=" + n, "--ntasks-per-node=1", "--overlap", "--kill-on-bad-exit=1",
		"--input=none", "--job-name=trainrun-probe", self, "exec-task", "--probe", dir}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if out, err := sc.Srun(ctx, args...); err != nil {
		return nil, withCode(ExitSlurm, fmt.Errorf("topology probe failed: %v%s (skip it with --probe=none)",
			err, prefixed(": ", strings.TrimSpace(string(out)))))
	}
	facts := map[string]nodeFacts{}
	for _, node := range a.Nodes {
		var f nodeFacts
		if err := launch.ReadJSON(filepath.Join(dir, node+".json"), &f); err != nil {
			return nil, withCode(ExitSlurm, fmt.Errorf("topology probe: node %s wrote no facts (%v); its slurmd may call itself another name", node, err))
		}
		facts[node] = f
	}
	return facts, nil
}

// readProbeCache reads a previous probe of the same incarnation (a restart
// of the step inside the allocation, which holds the same GPUs). A requeued
// job reruns on possibly other nodes, and on the same nodes possibly on
// other GPUs (the 21-A hang test saw GPU 4 planned while the step held GPU
// 0): a probe of another restart count, a missing node, or a batch node
// whose GPUs differ from SLURM_JOB_GPUS is no cache.
func readProbeCache(a *allocation, dir string) (map[string]nodeFacts, bool) {
	facts := map[string]nodeFacts{}
	for _, node := range a.Nodes {
		var f nodeFacts
		if launch.ReadJSON(filepath.Join(dir, node+".json"), &f) != nil || f.Restart != strconv.Itoa(a.RestartCount) && !(f.Restart == "" && a.RestartCount == 0) {
			return nil, false
		}
		if node == a.BatchNode && a.GPUIDs != nil && !slices.Equal(f.GPUs, a.GPUIDs) {
			return nil, false
		}
		facts[node] = f
	}
	return facts, true
}

// prefixed is p+s, or "" when s is empty.
func prefixed(p, s string) string {
	if s == "" {
		return ""
	}
	return p + s
}
