package plan

import (
	"fmt"
	"sort"
	"strings"
)

// The GPU catalog. Peaks are dense (no 2:4 sparsity); NVIDIA datasheets print
// BF16 "with sparsity", twice the dense figure (maintainers confirm in
// stas00/ml-engineering#100 and deepseek-ai/FlashMLA#75). Facts and sources:
// ../shared/research/planner-formulas.md §2.9, §2.6.
//
// Units: FLOP/s, bytes, bytes/s. Link bandwidths are per GPU and per direction.
// Memory is the total the driver reports (nvidia-smi "Total", recalled), which
// is what the allocator can use before the CUDA context.
//
// Efficiency constants (the model's only per-GPU knobs):
//   - MatmulEff: "maximum achievable matmul FLOPS" / dense peak, measured with
//     mamf-finder (stas00/ml-engineering compute/accelerator/README.md):
//     A100 SXM 271.2/312, H100 SXM 794.5/989, B200 ~1745/2250, MI300X 781.9/1307
//     (older ROCm). GPUs without a measurement inherit their architecture's value
//     (marked "assumed").
//   - FP8MatmulEff: no measured FP8 MAMF in our sources. H100's value (0.63,
//     against 0.803 for BF16) is the one constant calibrated on the H100 rows: the
//     short-sequence NeMo FP8 rows, where attention is a small share. FP8 GEMMs
//     falling short of 2x BF16 is expected: the same power limit at twice the
//     math rate lowers the clock, and Transformer Engine promotes partial sums to
//     FP32 (split accumulator) in the backward GEMMs. Other FP8 GPUs keep H100's
//     FP8/BF16 ratio, 0.63/0.803 (assumed).
//   - AttentionEff: fused flash attention, forward+backward, as a fraction of
//     the BF16 peak at long sequence, head dim 128, with the kernels current for
//     the architecture. A100: FlashAttention-2 paper (Dao 2023): up to ~70 %
//     forward, ~60 % forward+backward. Hopper: FlashAttention-3 paper (Shah et
//     al. 2024): forward up to ~75 % (740 TFLOP/s BF16), backward 1.5-1.75x
//     FlashAttention-2's (~300 TFLOP/s), i.e. ~0.53 for the 1:2.5 forward:backward
//     FLOP mix. The 2024 NeMo stack of the calibration rows still ran
//     FlashAttention-2-class kernels on Hopper, which the same paper puts at ~35 %
//     (fa2HopperEff in time.go, used for StackNeMo). Blackwell, MI300X, L40S
//     assumed. V100 has no flash kernel (0: the unfused path is modelled).
//   - HostMemory: usual host RAM per node (DGX A100 80GB 2 TB, DGX H100 2 TB,
//     GB200 compute tray 2×480 GB LPDDR5X); a default only, --host-memory wins.

const (
	gib = 1 << 30
	mib = 1 << 20
)

var gpuCatalog = []GPU{
	{
		Name: "v100-32gb", Arch: "volta", PeakBF16: 125e12, PeakFP8: 0, MemoryBytes: 32768 * mib,
		HBMBandwidth: 900e9, NVLinkBandwidth: 150e9, PCIeBandwidth: 16e9, InterNode: 6.25e9,
		NVLinkDomain: 8, GPUsPerNode: 8,
		MatmulEff: 0.85, FP8MatmulEff: 0, AttentionEff: 0, HostMemory: 512 * gib,
		Source: "FP16 tensor 125 TFLOP/s, 900 GB/s, NVLink2 300 GB/s total (llm-analysis v100-sxm-32gb.json; NVIDIA datasheet, recalled); DGX-1: 4x EDR 100 Gb/s for 8 GPUs; MatmulEff assumed",
	},
	{
		Name: "a100-40gb", Arch: "ampere", PeakBF16: 312e12, MemoryBytes: 40536 * mib,
		HBMBandwidth: 1555e9, NVLinkBandwidth: 300e9, PCIeBandwidth: 32e9, InterNode: 25e9,
		NVLinkDomain: 8, GPUsPerNode: 8,
		MatmulEff: 0.869, AttentionEff: 0.60, HostMemory: 1024 * gib,
		Source: "312 TFLOP/s BF16, 1.555 TB/s (llm-analysis a100-sxm-40gb.json); NVLink3 600 GB/s total; HDR 200 Gb/s per GPU (DGX A100); MAMF 271.2 (ml-engineering)",
	},
	{
		Name: "a100-80gb", Arch: "ampere", PeakBF16: 312e12, MemoryBytes: 81920 * mib,
		HBMBandwidth: 2039e9, NVLinkBandwidth: 300e9, PCIeBandwidth: 32e9, InterNode: 25e9,
		NVLinkDomain: 8, GPUsPerNode: 8,
		MatmulEff: 0.869, AttentionEff: 0.60, HostMemory: 2048 * gib,
		Source: "312 TFLOP/s BF16, 2.039 TB/s (llm-analysis a100-sxm-80gb.json); NVLink3 600 GB/s total; HDR 200 Gb/s per GPU (Selene/DGX A100); MAMF 271.2 (ml-engineering)",
	},
	{
		Name: "h100-sxm", Arch: "hopper", PeakBF16: 989.4e12, PeakFP8: 1978.9e12, MemoryBytes: 81559 * mib,
		HBMBandwidth: 3.35e12, NVLinkBandwidth: 450e9, PCIeBandwidth: 64e9, InterNode: 50e9,
		NVLinkDomain: 8, GPUsPerNode: 8,
		MatmulEff: 0.803, FP8MatmulEff: 0.63, AttentionEff: 0.53, HostMemory: 2048 * gib,
		Source: "989.4 BF16 / 1978.9 FP8 dense (glennklockwood.com h100), 3.35 TB/s, NVLink4 900 GB/s total; NDR 400 Gb/s per GPU (DGX H100); MAMF 794.5 (ml-engineering)",
	},
	{
		Name: "h100-pcie", Arch: "hopper", PeakBF16: 756e12, PeakFP8: 1513e12, MemoryBytes: 81559 * mib,
		HBMBandwidth: 2.0e12, NVLinkBandwidth: 0, PCIeBandwidth: 64e9, InterNode: 25e9,
		NVLinkDomain: 1, GPUsPerNode: 8,
		MatmulEff: 0.803, FP8MatmulEff: 0.63, AttentionEff: 0.53, HostMemory: 1024 * gib,
		Source: "756 BF16 / 1513 FP8 dense (hpctech H100 page, sparse/2), 2.0 TB/s, PCIe Gen5 x16 (llm-analysis h100-pcie-80gb.json); NVLink bridges join pairs only, so the planner treats TP as PCIe-bound; 200 Gb/s per GPU assumed; efficiencies as H100 SXM (assumed)",
	},
	{
		Name: "h800", Arch: "hopper", PeakBF16: 989.4e12, PeakFP8: 1978.9e12, MemoryBytes: 81559 * mib,
		HBMBandwidth: 3.35e12, NVLinkBandwidth: 200e9, PCIeBandwidth: 64e9, InterNode: 50e9,
		NVLinkDomain: 8, GPUsPerNode: 8,
		MatmulEff: 0.803, FP8MatmulEff: 0.63, AttentionEff: 0.53, HostMemory: 2048 * gib,
		Source: "H100 die with NVLink cut to ~400 GB/s total (DeepSeek-V3 report, recalled); 400 Gb/s IB per GPU; efficiencies as H100 SXM",
	},
	{
		Name: "h200", Arch: "hopper", PeakBF16: 989.4e12, PeakFP8: 1978.9e12, MemoryBytes: 143771 * mib,
		HBMBandwidth: 4.8e12, NVLinkBandwidth: 450e9, PCIeBandwidth: 64e9, InterNode: 50e9,
		NVLinkDomain: 8, GPUsPerNode: 8,
		MatmulEff: 0.803, FP8MatmulEff: 0.63, AttentionEff: 0.53, HostMemory: 2048 * gib,
		Source: "same GH100 die as H100 (989.4 BF16 dense), 141 GB HBM3e, 4.8 TB/s; NVLink4 900 GB/s total; NDR 400 Gb/s per GPU; efficiencies as H100 SXM",
	},
	{
		Name: "b200", Arch: "blackwell", PeakBF16: 2250e12, PeakFP8: 4500e12, MemoryBytes: 183359 * mib,
		HBMBandwidth: 8e12, NVLinkBandwidth: 900e9, PCIeBandwidth: 64e9, InterNode: 50e9,
		NVLinkDomain: 8, GPUsPerNode: 8,
		MatmulEff: 0.776, FP8MatmulEff: 0.61, AttentionEff: 0.50, HostMemory: 2048 * gib,
		Source: "2250 BF16 / 4500 FP8 dense, 8 TB/s, NVLink5 1.8 TB/s total (glennklockwood.com B200); ~180 GB usable per GPU in DGX B200; 400 Gb/s per GPU; MAMF ~1745 (ml-engineering); FP8/attention assumed",
	},
	{
		Name: "gb200", Arch: "blackwell", PeakBF16: 2500e12, PeakFP8: 5000e12, MemoryBytes: 189471 * mib,
		HBMBandwidth: 8e12, NVLinkBandwidth: 900e9, PCIeBandwidth: 450e9, InterNode: 50e9,
		NVLinkDomain: 72, GPUsPerNode: 4,
		MatmulEff: 0.776, FP8MatmulEff: 0.61, AttentionEff: 0.50, HostMemory: 960 * gib,
		Source: "2500 BF16 / 5000 FP8 dense per GPU (glennklockwood.com B200, GB200 table), ~186 GB HBM3e, 8 TB/s; NVL72: 72-GPU NVLink5 domain, 4 GPUs per compute tray; host link is NVLink-C2C 900 GB/s total to Grace; 400 Gb/s per GPU scale-out; efficiencies as B200 (assumed)",
	},
	{
		Name: "mi300x", Arch: "cdna3", PeakBF16: 1307.4e12, PeakFP8: 2614.9e12, MemoryBytes: 196592 * mib,
		HBMBandwidth: 5.3e12, NVLinkBandwidth: 448e9, PCIeBandwidth: 64e9, InterNode: 50e9,
		NVLinkDomain: 8, GPUsPerNode: 8,
		MatmulEff: 0.60, FP8MatmulEff: 0.47, AttentionEff: 0.35, HostMemory: 2048 * gib,
		Source: "1307.4 BF16 / 2614.9 FP8 dense, 192 GB HBM3, 5.3 TB/s (AMD figures via aiwiki summaries); Infinity Fabric 7 links x 64 GB/s per direction, full mesh of 8; 400 Gb/s per GPU; MAMF 781.9 (ml-engineering, older ROCm); attention assumed",
	},
	{
		Name: "l40s", Arch: "ada", PeakBF16: 362.05e12, PeakFP8: 733e12, MemoryBytes: 46068 * mib,
		HBMBandwidth: 864e9, NVLinkBandwidth: 0, PCIeBandwidth: 32e9, InterNode: 12.5e9,
		NVLinkDomain: 1, GPUsPerNode: 8,
		MatmulEff: 0.75, FP8MatmulEff: 0.59, AttentionEff: 0.45, HostMemory: 1024 * gib,
		Source: "362 BF16 / 733 FP8 dense, 48 GB GDDR6, 864 GB/s, no NVLink, PCIe Gen4 x16 (L40S datasheet via mullet.se); 4x 200 Gb/s per 8-GPU node assumed; efficiencies assumed",
	},
}

// gpuAliases maps other spellings to catalog names.
var gpuAliases = map[string]string{
	"h100": "h100-sxm", "h100-sxm5": "h100-sxm", "h100-80gb": "h100-sxm", "h100-sxm-80gb": "h100-sxm",
	"a100": "a100-80gb", "a100-sxm-80gb": "a100-80gb", "a100-sxm4-80gb": "a100-80gb",
	"a100-sxm-40gb": "a100-40gb", "v100": "v100-32gb", "h200-sxm": "h200", "b200-sxm": "b200",
	"gb200-nvl72": "gb200",
}

// LookupGPU returns the catalog entry for name (case-insensitive; a few common
// spellings accepted). The error lists the known names and the nearest one.
func LookupGPU(name string) (GPU, error) {
	key := strings.ToLower(strings.TrimSpace(name))
	if a, ok := gpuAliases[key]; ok {
		key = a
	}
	for _, g := range gpuCatalog {
		if g.Name == key {
			return g, nil
		}
	}
	names := GPUNames()
	best, bestD := "", 1<<30
	for _, n := range names {
		if d := editDistance(key, n); d < bestD {
			best, bestD = n, d
		}
	}
	return GPU{}, fmt.Errorf("unknown GPU type %q; did you mean %q? known: %s", name, best, strings.Join(names, " "))
}

// GPUNames lists the catalog's GPU types, sorted.
func GPUNames() []string {
	out := make([]string, len(gpuCatalog))
	for i, g := range gpuCatalog {
		out[i] = g.Name
	}
	sort.Strings(out)
	return out
}

// editDistance is the Levenshtein distance, for "did you mean".
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// ClusterOf returns a cluster of n GPUs of type g with the type's usual node
// size, NVLink domain and fabric.
func ClusterOf(g GPU, n int) Cluster {
	return Cluster{GPU: g, GPUs: n, GPUsPerNode: g.GPUsPerNode, NVLinkDomain: g.NVLinkDomain, InterNode: g.InterNode, HostMemory: g.HostMemory}
}
