package plan

import (
	"strings"
	"testing"
)

func TestGPUCatalog(t *testing.T) {
	want := []string{"v100-32gb", "a100-40gb", "a100-80gb", "h100-sxm", "h100-pcie", "h800", "h200", "b200", "gb200", "mi300x", "l40s"}
	for _, n := range want {
		g, err := LookupGPU(n)
		if err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		if g.PeakBF16 <= 0 || g.MemoryBytes <= 0 || g.HBMBandwidth <= 0 || g.PCIeBandwidth <= 0 || g.InterNode <= 0 ||
			g.GPUsPerNode <= 0 || g.NVLinkDomain <= 0 || g.MatmulEff <= 0 || g.MatmulEff > 1 || g.Source == "" {
			t.Errorf("%s: incomplete entry %+v", n, g)
		}
		if (g.PeakFP8 > 0) != (g.FP8MatmulEff > 0) {
			t.Errorf("%s: FP8 peak and efficiency disagree", n)
		}
	}
	if got := len(GPUNames()); got != len(want) {
		t.Errorf("GPUNames has %d entries, want %d", got, len(want))
	}
	// Dense peaks from planner-formulas.md §2.9 (not the sparse datasheet figure).
	h, _ := LookupGPU("H100-SXM")
	if h.PeakBF16 != 989.4e12 || h.PeakFP8 != 1978.9e12 {
		t.Errorf("H100 dense peaks %.4g/%.4g", h.PeakBF16, h.PeakFP8)
	}
	gb, _ := LookupGPU("gb200")
	if gb.NVLinkDomain != 72 || gb.GPUsPerNode != 4 {
		t.Errorf("GB200 NVL72: domain %d, %d per node", gb.NVLinkDomain, gb.GPUsPerNode)
	}
	if h.MemoryBytes/gib < 79.6 || h.MemoryBytes/gib > 79.7 {
		t.Errorf("H100 capacity %.2f GiB, want nvidia-smi's 81559 MiB", h.MemoryBytes/gib)
	}
}

func TestLookupGPUUnknown(t *testing.T) {
	_, err := LookupGPU("h100-sx")
	if err == nil {
		t.Fatal("want an error")
	}
	msg := err.Error()
	for _, s := range []string{`"h100-sx"`, `did you mean "h100-sxm"`, "a100-80gb", "gb200", "l40s"} {
		if !strings.Contains(msg, s) {
			t.Errorf("error %q lacks %q", msg, s)
		}
	}
}
