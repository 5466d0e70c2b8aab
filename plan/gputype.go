package plan

import (
	"fmt"
	"strconv"
	"strings"
)

// GPUTypeOf maps a GPU name as NVML or the PCI id table gives it ("NVIDIA
// H100 80GB HBM3") to the catalog's name ("h100-sxm"); "" when it is not
// recognised. trainrun run (the probe's GPU names) and the plugin (the
// node's topology) both call it.
func GPUTypeOf(name string) string {
	n := strings.ToLower(name)
	has := func(s ...string) bool {
		for _, x := range s {
			if !strings.Contains(n, x) {
				return false
			}
		}
		return true
	}
	switch {
	case has("gb200"):
		return "gb200"
	case has("b200"):
		return "b200"
	case has("h200"):
		return "h200"
	case has("h800"):
		return "h800"
	case has("h100", "pcie"):
		return "h100-pcie"
	case has("h100"):
		return "h100-sxm"
	case has("a100", "40gb"):
		return "a100-40gb"
	case has("a100"):
		return "a100-80gb"
	case has("v100"):
		return "v100-32gb"
	case has("l40s"):
		return "l40s"
	case has("mi300x"):
		return "mi300x"
	}
	return ""
}

// ClusterFor is the cluster of gpus GPUs of type g in nodes of gpusPerNode
// (0 = the type's usual node): a node-local NVLink domain shrinks with the
// node, a multi-node one (NVL72) does not. `trainrun plan --gpus-per-node`,
// `trainrun run` and the plugin build their cluster with it.
func ClusterFor(g GPU, gpus, gpusPerNode int) Cluster {
	c := ClusterOf(g, gpus)
	if gpusPerNode > 0 {
		c.GPUsPerNode = gpusPerNode
		if g.NVLinkDomain <= g.GPUsPerNode {
			c.NVLinkDomain = min(g.NVLinkDomain, c.GPUsPerNode)
		}
	}
	return c
}

// DefaultTop is how many alternatives `trainrun plan` reports without
// --top; the plugin's plan JSON has as many, so that it is what `trainrun
// plan --format json` prints for the same job.
const DefaultTop = 3

// ParseBatch reads a batch written GLOBALxSEQLEN (1024x8192: a global batch
// of 1024 sequences of 8192 tokens), the form of the plugin's --train-batch
// and its twin TRAINRUN_BATCH.
func ParseBatch(s string) (globalBatch, seqLen int, err error) {
	g, l, ok := strings.Cut(strings.TrimSpace(s), "x")
	if !ok {
		return 0, 0, fmt.Errorf("want GLOBALxSEQLEN: the global batch in sequences, 'x', the sequence length in tokens (e.g. 1024x8192)")
	}
	gb, gerr := strconv.Atoi(g)
	sl, lerr := strconv.Atoi(l)
	switch {
	case gerr != nil || gb <= 0:
		return 0, 0, fmt.Errorf("global batch %q is not a positive whole number; want GLOBALxSEQLEN, e.g. 1024x8192", g)
	case lerr != nil || sl <= 0:
		return 0, 0, fmt.Errorf("sequence length %q is not a positive whole number; want GLOBALxSEQLEN, e.g. 1024x8192", l)
	}
	return gb, sl, CheckBatchLimits(gb, sl)
}
