package topo

// Names for PCI device ids, used when NVML is absent (sysfs-only discovery).
// Ids from pci.ids (go-nvlib's pkg/pciids/default_pci.ids) and topo-nccl.md §4.

type gpuInfo struct {
	name, arch string
	sm         int
}

var gpuTable = map[string]gpuInfo{
	"0x1db1": {"NVIDIA Tesla V100-SXM2-16GB", "Volta", 70},
	"0x1db5": {"NVIDIA Tesla V100-SXM2-32GB", "Volta", 70},
	"0x20b0": {"NVIDIA A100-SXM4-40GB", "Ampere", 80},
	"0x20b2": {"NVIDIA A100-SXM4-80GB", "Ampere", 80},
	"0x20b5": {"NVIDIA A100 80GB PCIe", "Ampere", 80},
	"0x2324": {"NVIDIA H800", "Hopper", 90},
	"0x2330": {"NVIDIA H100 80GB HBM3", "Hopper", 90},
	"0x2335": {"NVIDIA H200", "Hopper", 90},
	"0x2901": {"NVIDIA B200", "Blackwell", 100},
	"0x2941": {"NVIDIA GB200", "Blackwell", 100},
}

var nicTable = map[string]string{
	"0x15b3:0x1016": "ConnectX-4 Lx VF",
	"0x15b3:0x1017": "ConnectX-5",
	"0x15b3:0x1018": "ConnectX-5 VF",
	"0x15b3:0x1019": "ConnectX-5 Ex",
	"0x15b3:0x101a": "ConnectX-5 Ex VF",
	"0x15b3:0x101b": "ConnectX-6",
	"0x15b3:0x101c": "ConnectX-6 VF",
	"0x15b3:0x101d": "ConnectX-6 Dx",
	"0x15b3:0x101e": "ConnectX VF",
	"0x15b3:0x1021": "ConnectX-7",
	"0x15b3:0x1023": "ConnectX-8",
	"0x15b3:0xa2dc": "BlueField-3",
	"0x1d0f:0xefa0": "EFA",
	"0x1d0f:0xefa1": "EFA",
	"0x1d0f:0xefa2": "EFA",
	"0x1d0f:0xec20": "ENA",
}
