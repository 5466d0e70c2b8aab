package plan

import (
	"strings"
	"testing"
)

func TestGPUTypeOf(t *testing.T) {
	for name, want := range map[string]string{
		"NVIDIA H100 80GB HBM3": "h100-sxm", "NVIDIA H100 PCIe": "h100-pcie", "NVIDIA A100-SXM4-40GB": "a100-40gb",
		"NVIDIA A100-SXM4-80GB": "a100-80gb", "NVIDIA H200": "h200", "NVIDIA GB200": "gb200", "NVIDIA B200": "b200",
		"Tesla V100-SXM2-32GB": "v100-32gb", "NVIDIA L40S": "l40s", "GH100 [H100 SXM5 80GB]": "h100-sxm", "Tesla T4": "", "": "",
	} {
		if got := GPUTypeOf(name); got != want {
			t.Errorf("GPUTypeOf(%q) = %q, want %q", name, got, want)
		}
		if want != "" {
			if _, err := LookupGPU(GPUTypeOf(name)); err != nil {
				t.Errorf("GPUTypeOf(%q) = %q is not in the catalog: %v", name, want, err)
			}
		}
	}
}

func TestClusterFor(t *testing.T) {
	h100, _ := LookupGPU("h100-sxm")
	gb200, _ := LookupGPU("gb200")
	for _, tc := range []struct {
		g                 GPU
		gpus, perNode     int
		wantNode, wantDom int
	}{
		{h100, 32, 0, h100.GPUsPerNode, h100.NVLinkDomain}, // the type's usual node
		{h100, 32, 8, 8, 8},
		{h100, 8, 4, 4, 4},    // a node-local domain shrinks with the node
		{gb200, 72, 4, 4, 72}, // NVL72 spans nodes: it does not
	} {
		c := ClusterFor(tc.g, tc.gpus, tc.perNode)
		if c.GPUs != tc.gpus || c.GPUsPerNode != tc.wantNode || c.NVLinkDomain != tc.wantDom || c.GPU.Name != tc.g.Name {
			t.Errorf("ClusterFor(%s, %d, %d) = %d GPUs, %d per node, domain %d; want %d, %d, %d",
				tc.g.Name, tc.gpus, tc.perNode, c.GPUs, c.GPUsPerNode, c.NVLinkDomain, tc.gpus, tc.wantNode, tc.wantDom)
		}
	}
}

func TestParseBatch(t *testing.T) {
	if g, s, err := ParseBatch("1024x8192"); err != nil || g != 1024 || s != 8192 {
		t.Errorf("ParseBatch(1024x8192) = %d, %d, %v", g, s, err)
	}
	for in, want := range map[string]string{
		"1024":       "want GLOBALxSEQLEN",
		"":           "want GLOBALxSEQLEN",
		"0x8192":     `global batch "0" is not a positive whole number`,
		"-4x8192":    `global batch "-4"`,
		"1024x":      `sequence length "" is not a positive whole number`,
		"1024x8k":    `sequence length "8k"`,
		"1024X8192":  "want GLOBALxSEQLEN",
		"1024x8x192": `sequence length "8x192"`,
	} {
		_, _, err := ParseBatch(in)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "1024x8192") {
			t.Errorf("ParseBatch(%q) = %v; want an error with %q and the example", in, err, want)
		}
	}
}
