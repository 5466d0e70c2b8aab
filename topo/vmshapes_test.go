package topo

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trainrun/trainrun/topo/snapshot"
)

// The corrected azure-ndv5 capture has each PCI domain's root bus under a
// VMBus device, as Hyper-V lays it out; discovery reads it without a
// degrade note and finds the host bridge below the VMBus instance.
func TestHyperVRootBusUnderVMBus(t *testing.T) {
	n := discoverMachine(t, "azure-ndv5")
	if len(n.Degraded) != 0 {
		t.Errorf("degraded on the real Hyper-V shape: %+v", n.Degraded)
	}
	g := n.GPUs[3]
	if g.BusID != "0008:00:00.0" || g.HostBridge != "pci0008:00" || strings.Join(g.PCIPath, ",") != "0008:00:00.0" {
		t.Errorf("GPU3 %s host %s path %v", g.BusID, g.HostBridge, g.PCIPath)
	}
	real, err := filepath.EvalSymlinks(filepath.Join(machineTree(t, "azure-ndv5"), "sys/bus/pci/devices/0008:00:00.0"))
	if err != nil || !strings.Contains(real, "/VMBUS:00/") {
		t.Fatalf("capture not in the Hyper-V shape: %s %v", real, err)
	}
	if n.PlatformTopoFile != "/opt/microsoft/ndv5/topo.xml" || g.NearestFrom != "NCCL_TOPO_FILE /opt/microsoft/ndv5/topo.xml" {
		t.Errorf("platform file %q, GPU3 pairing from %q", n.PlatformTopoFile, g.NearestFrom)
	}
	// sysfs alone still says NODE (the flat bus); the file pairs 0008 with 0104.
	if d := n.RDMAByName("mlx5_ib3"); d.BusID != "0104:00:00.0" || d.GPUPaths[3] != PathNODE || g.NCCLNICs[0] != "mlx5_ib3" {
		t.Errorf("mlx5_ib3 %s path %s, GPU3 NCCL NICs %v", d.BusID, d.GPUPaths[3], g.NCCLNICs)
	}
}

const oddShapes = `name odd
cpu arch=x86_64 vendor=GenuineIntel family=6 model=143 name="x"
numa 0 cpus=0-7
host pci10000:00
  gpu 10000:01:00.0 device=0x2330
host pci0000:20
  gpu 0000:21:00.0 device=0x2330
host pci0000:30
  gpu 0000:31:00.0 device=0x2330
  nic 0000:32:00.1 device=0x101e rdma=mlx5_0 net=ib0
    ibport 1 layer=InfiniBand state=ACTIVE phys=LinkUp rate=400 gen=NDR
`

// Shapes from other clouds and kernels: a PCI domain above 0xffff, a GPU
// whose directory hangs under a non-PCI device with no host bridge node, an
// unknown NUMA node (-1), an SR-IOV VF without physfn. All are kept.
func TestOddPCIShapes(t *testing.T) {
	s, err := snapshot.Parse("odd.spec", []byte(oddShapes))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := snapshot.Expand(s, dir); err != nil {
		t.Fatal(err)
	}
	// Move 0000:21:00.0 under a platform device with no pciDDDD:BB above it.
	sys := filepath.Join(dir, "sys")
	odd := filepath.Join(sys, "devices/platform/ACPI0016:00/pci_bus_glue")
	if err := os.MkdirAll(odd, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(sys, "devices/pci0000:20/0000:21:00.0"), filepath.Join(odd, "0000:21:00.0")); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(sys, "bus/pci/devices/0000:21:00.0")
	os.Remove(link)
	if err := os.Symlink("../../../devices/platform/ACPI0016:00/pci_bus_glue/0000:21:00.0", link); err != nil {
		t.Fatal(err)
	}
	n, err := Discover(Options{Root: dir})
	if err != nil {
		t.Fatal(err)
	}
	if len(n.GPUs) != 3 {
		t.Fatalf("%d GPUs, want 3: %+v", len(n.GPUs), n.Degraded)
	}
	big := n.GPUByBusID("10000:01:00.0")
	if big == nil || big.HostBridge != "pci10000:00" {
		t.Fatalf("domain above ffff: %+v", big)
	}
	moved := n.GPUByBusID("0000:21:00.0")
	if moved == nil || moved.HostBridge != "pci0000:21" || !strings.Contains(strings.Join(n.DegradedFor("0000:21:00.0"), ""), "not under a pciDDDD:BB host bridge") {
		t.Fatalf("GPU without a host bridge node: %+v %q", moved, n.DegradedFor("0000:21:00.0"))
	}
	if g := n.GPUByBusID("0000:31:00.0"); g.NUMANode != nil {
		t.Errorf("numa_node -1 should be unknown, got %d", *g.NUMANode)
	}
	i, _ := byBusID(n.GPUs, "0000:31:00.0")
	if d := n.RDMAByName("mlx5_0"); d == nil || !d.NCCL || d.GPUPaths[i] != PathPHB {
		t.Errorf("VF without physfn: %+v", d)
	}
}
