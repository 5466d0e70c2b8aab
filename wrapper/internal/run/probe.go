package run

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
	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
	"github.com/trainrun/trainrun/wrapper/internal/launch"
	"github.com/trainrun/trainrun/wrapper/internal/shim"
)

// probeNodes runs the probe on every node in one step (one task per node,
// --overlap so it never waits for resources) and reads the results.
func probeNodes(ctx context.Context, sc slurm.Client, a *slurm.Allocation, shimArgv []string, dir string) (map[string]launch.NodeFacts, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	n := strconv.Itoa(len(a.Nodes))
	args := []string{"--nodes=" + n, "--ntasks=" + n, "--ntasks-per-node=1", "--overlap", "--kill-on-bad-exit=1",
		"--input=none", "--job-name=trainrun-probe"}
	args = append(append(args, shimArgv...), "--probe", dir)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if out, err := sc.Srun(ctx, args...); err != nil {
		return nil, withCode(exitcode.Slurm, fmt.Errorf("topology probe failed: %v%s (skip it with --probe=none)",
			err, prefixed(": ", strings.TrimSpace(string(out)))))
	}
	return readProbeFacts(a.Nodes, dir)
}

// readProbeFacts reads what the probe wrote for each node (DIR/<node>.json).
func readProbeFacts(nodes []string, dir string) (map[string]launch.NodeFacts, error) {
	facts := map[string]launch.NodeFacts{}
	for _, node := range nodes {
		var f launch.NodeFacts
		if err := launch.ReadJSON(filepath.Join(dir, node+".json"), &f); err != nil {
			return nil, withCode(exitcode.Slurm, fmt.Errorf("topology probe: node %s wrote no facts (%v); its slurmd may call itself another name", node, err))
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
func readProbeCache(a *slurm.Allocation, dir string) (map[string]launch.NodeFacts, bool) {
	facts := map[string]launch.NodeFacts{}
	for _, node := range a.Nodes {
		var f launch.NodeFacts
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

// leanShim is the shim binary the step runs: trainrun-shim next to self
// (internal/shim/trainrun-shim: the shim without the rest of trainrun, a
// fraction of its start-up), unless TRAINRUN_SHIM says otherwise: exec-task
// (trainrun's own subcommand) or a path. "" means trainrun exec-task.
func leanShim(self, override string) string {
	switch override {
	case "exec-task":
		return ""
	case "":
		p := filepath.Join(filepath.Dir(self), shim.Binary)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p
		}
		return ""
	}
	return override
}
