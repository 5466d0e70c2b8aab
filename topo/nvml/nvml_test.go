//go:build cgo

package nvml

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/trainrun/trainrun/topo"
	"github.com/trainrun/trainrun/topo/snapshot"
)

// A machine for go-nvml's ready-made server: the GPUs' bus ids and the
// NVSwitches each GPU's links reach, with how many links.
type mockMachine struct {
	snapshot string
	busIDs   []string // NVML form, per index
	switches []string // NVSwitch bus ids, NVML form
	links    []int    // links to each switch (H100: 5,5,4,4 — fixtures/nccl-topo-xml/hgx-h200-baremetal…)
	numa     []int    // per GPU, for the common-ancestor answers
	fabric   [16]uint8
	clique   uint32
}

var hgxH100 = mockMachine{
	snapshot: "hgx-h100",
	busIDs: []string{"00000000:19:00.0", "00000000:3B:00.0", "00000000:4C:00.0", "00000000:5D:00.0",
		"00000000:9B:00.0", "00000000:BB:00.0", "00000000:CB:00.0", "00000000:DB:00.0"},
	switches: []string{"00000000:05:00.0", "00000000:06:00.0", "00000000:07:00.0", "00000000:08:00.0"},
	links:    []int{5, 5, 4, 4},
	numa:     []int{0, 0, 0, 0, 1, 1, 1, 1},
	fabric:   [16]uint8{0x5a, 0x1c, 0x7e, 0x11, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01},
	clique:   7,
}

var dgxA100 = mockMachine{
	snapshot: "dgx-a100",
	busIDs: []string{"00000000:07:00.0", "00000000:0F:00.0", "00000000:47:00.0", "00000000:4E:00.0",
		"00000000:87:00.0", "00000000:90:00.0", "00000000:B7:00.0", "00000000:BD:00.0"},
	switches: []string{"00000000:C4:00.0", "00000000:C5:00.0", "00000000:C6:00.0", "00000000:C7:00.0", "00000000:C8:00.0", "00000000:C9:00.0"},
	links:    []int{2, 2, 2, 2, 2, 2},
	numa:     []int{3, 3, 1, 1, 7, 7, 5, 5},
}

func pciInfo(busID string) gonvml.PciInfo {
	var p gonvml.PciInfo
	for i := 0; i < len(busID) && i < len(p.BusId)-1; i++ {
		p.BusId[i] = int8(busID[i])
	}
	return p
}

// fill sets the calls the ready-made servers leave nil (they panic when
// called): PCI bus id, NVLink capability/state/remote, common ancestor and
// fabric info.
func fill(t *testing.T, s *server.Server, m mockMachine) {
	t.Helper()
	if len(s.Devices) != len(m.busIDs) {
		t.Fatalf("%d mock devices, %d bus ids", len(s.Devices), len(m.busIDs))
	}
	byHandle := map[gonvml.Device]int{}
	for i, d := range s.Devices {
		byHandle[d] = i
	}
	for i, d := range s.Devices {
		dev := d.(*server.Device)
		i := i
		dev.PciBusID = m.busIDs[i]
		dev.GetPciInfoFunc = func() (gonvml.PciInfo, gonvml.Return) { return pciInfo(m.busIDs[i]), gonvml.SUCCESS }
		// Link l goes to the switch whose range holds it.
		remote := func(l int) int {
			for k, n := range m.links {
				if l < n {
					return k
				}
				l -= n
			}
			return -1
		}
		dev.GetNvLinkCapabilityFunc = func(l int, c gonvml.NvLinkCapability) (uint32, gonvml.Return) {
			if remote(l) < 0 {
				return 0, gonvml.SUCCESS
			}
			return 1, gonvml.SUCCESS
		}
		dev.GetNvLinkStateFunc = func(l int) (gonvml.EnableState, gonvml.Return) {
			if remote(l) < 0 {
				return gonvml.FEATURE_DISABLED, gonvml.SUCCESS
			}
			return gonvml.FEATURE_ENABLED, gonvml.SUCCESS
		}
		dev.GetNvLinkRemotePciInfoFunc = func(l int) (gonvml.PciInfo, gonvml.Return) {
			return pciInfo(m.switches[remote(l)]), gonvml.SUCCESS
		}
		dev.GetNvLinkRemoteDeviceTypeFunc = func(l int) (gonvml.IntNvLinkDeviceType, gonvml.Return) {
			return gonvml.NVLINK_DEVICE_TYPE_SWITCH, gonvml.SUCCESS
		}
		dev.GetTopologyCommonAncestorFunc = func(o gonvml.Device) (gonvml.GpuTopologyLevel, gonvml.Return) {
			if m.numa[byHandle[o]] == m.numa[i] {
				return gonvml.TOPOLOGY_NODE, gonvml.SUCCESS
			}
			return gonvml.TOPOLOGY_SYSTEM, gonvml.SUCCESS
		}
		dev.GetGpuFabricInfoFunc = func() (gonvml.GpuFabricInfo, gonvml.Return) {
			if m.clique == 0 {
				return gonvml.GpuFabricInfo{}, gonvml.ERROR_NOT_SUPPORTED
			}
			return gonvml.GpuFabricInfo{ClusterUuid: m.fabric, CliqueId: m.clique, State: gonvml.GPU_FABRIC_STATE_COMPLETED}, gonvml.SUCCESS
		}
	}
}

// sysfsOnlyTree unpacks a built-in machine without its recorded NVML
// answers, so NVML facts can only come from the mock.
func sysfsOnlyTree(t *testing.T, name string) string {
	dir := t.TempDir()
	if err := snapshot.Unpack(name, dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, snapshot.RecordedNVMLFile)); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestAdapterOverMockServers(t *testing.T) {
	cases := []struct {
		name    string
		srv     func() *server.Server
		m       mockMachine
		gpuName string
		link    string
		sm      int
		fabric  bool
	}{
		{"dgxh100 on hgx-h100", dgxh100.New, hgxH100, "NVIDIA H100 80GB HBM3", "NV18", 90, true},
		{"dgxa100 on dgx-a100", dgxa100.New, dgxA100, "Mock NVIDIA A100-SXM4-40GB", "NV12", 80, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := c.srv()
			fill(t, srv, c.m)
			src, err := New(srv)
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			n, err := topo.Discover(topo.Options{Root: sysfsOnlyTree(t, c.m.snapshot), NVML: src})
			if err != nil {
				t.Fatal(err)
			}
			if n.Source != "nvml+sysfs" || n.NVLinkUnavailable != "" {
				t.Fatalf("source %q, unavailable %q", n.Source, n.NVLinkUnavailable)
			}
			for i, g := range n.GPUs {
				uuid, _ := srv.Devices[i].GetUUID()
				if g.Index != i || g.UUID != uuid || g.UUID == "" {
					t.Errorf("GPU%d: index %d uuid %q, mock says %q", i, g.Index, g.UUID, uuid)
				}
				want, _ := topo.NormalizeBusID(c.m.busIDs[i])
				if g.BusID != want {
					t.Errorf("GPU%d bus %s, want %s (NVML's upper-case 8-digit form normalized)", i, g.BusID, want)
				}
				if !strings.Contains(g.Name, strings.TrimPrefix(c.gpuName, "Mock ")) || g.SM != c.sm || g.MemoryBytes == 0 {
					t.Errorf("GPU%d: %q sm %d mem %d", i, g.Name, g.SM, g.MemoryBytes)
				}
				total := 0
				for _, l := range g.NVLinks {
					total += l.Count
					if l.RemoteType != "nvswitch" {
						t.Errorf("GPU%d link to %s typed %s", i, l.RemoteBusID, l.RemoteType)
					}
				}
				if want := c.m.links; len(g.NVLinks) != len(want) {
					t.Errorf("GPU%d: %d remotes, want %d", i, len(g.NVLinks), len(want))
				}
				if (g.Fabric != nil) != c.fabric {
					t.Errorf("GPU%d fabric %+v", i, g.Fabric)
				}
				if c.fabric && (g.Fabric.CliqueID != 7 || g.Fabric.ClusterUUID != "5a1c7e11-0000-0000-0000-000000000001" || g.Fabric.State != "completed") {
					t.Errorf("GPU%d fabric %+v", i, g.Fabric)
				}
				for j := range n.GPUs {
					if i != j && n.GPULinks[i][j].String() != c.link {
						t.Errorf("GPU%d-GPU%d %s, want %s", i, j, n.GPULinks[i][j], c.link)
					}
				}
			}
			if wantDomain := map[bool]string{true: "5a1c7e11-0000-0000-0000-000000000001.7"}[c.fabric]; n.NVLinkDomain() != wantDomain {
				t.Errorf("NVLink domain %q, want %q", n.NVLinkDomain(), wantDomain)
			}
			if len(n.NCCLNICs()) != 8 {
				t.Errorf("NCCL NICs %v", n.NCCLNICs())
			}
		})
	}
}

// Without NVLinks the matrix takes NVML's common-ancestor answer.
func TestAdapterCommonAncestor(t *testing.T) {
	srv := dgxh100.New()
	m := hgxH100
	m.links = nil // no NVLink at all: a PCIe-only board
	fill(t, srv, m)
	src, err := New(srv)
	if err != nil {
		t.Fatal(err)
	}
	n, err := topo.Discover(topo.Options{Root: sysfsOnlyTree(t, "hgx-h100"), NVML: src})
	if err != nil {
		t.Fatal(err)
	}
	if got := n.GPULinks[0][1].String(); got != "NODE" {
		t.Errorf("GPU0-GPU1 %s, want NODE from NVML", got)
	}
	if got := n.GPULinks[0][4].String(); got != "SYS" {
		t.Errorf("GPU0-GPU4 %s, want SYS from NVML", got)
	}
}

// On this machine there is no driver: Open must fail with the reason, wrapped
// so callers can fall back.
func TestOpenWithoutDriver(t *testing.T) {
	if _, err := os.Stat("/dev/nvidiactl"); err == nil {
		t.Skip("an NVIDIA driver is present")
	}
	src, err := Open()
	if err == nil {
		src.Close()
		t.Fatal("Open succeeded without a driver")
	}
	if !errors.Is(err, topo.ErrNVMLUnavailable) || !strings.Contains(err.Error(), "libnvidia-ml.so.1") {
		t.Fatalf("err = %v", err)
	}
}

func TestInitFailureReasons(t *testing.T) {
	for ret, want := range map[gonvml.Return]string{
		gonvml.ERROR_LIBRARY_NOT_FOUND:       "did not load",
		gonvml.ERROR_DRIVER_NOT_LOADED:       "kernel driver is not loaded",
		gonvml.ERROR_LIB_RM_VERSION_MISMATCH: "differ in version",
		gonvml.ERROR_NO_PERMISSION:           "no permission",
	} {
		srv := dgxh100.New()
		srv.InitFunc = func() gonvml.Return { return ret }
		_, err := New(srv)
		if err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, topo.ErrNVMLUnavailable) {
			t.Errorf("%v: err = %v, want %q", ret, err, want)
		}
	}
}

// A registration that completed with an error status is not a usable domain.
func TestFabricFailedStatus(t *testing.T) {
	srv := dgxh100.New()
	fill(t, srv, hgxH100)
	for _, d := range srv.Devices {
		d.(*server.Device).GetGpuFabricInfoFunc = func() (gonvml.GpuFabricInfo, gonvml.Return) {
			return gonvml.GpuFabricInfo{ClusterUuid: hgxH100.fabric, CliqueId: 7, State: gonvml.GPU_FABRIC_STATE_COMPLETED,
				Status: uint32(gonvml.ERROR_NOT_READY)}, gonvml.SUCCESS
		}
	}
	src, err := New(srv)
	if err != nil {
		t.Fatal(err)
	}
	n, err := topo.Discover(topo.Options{Root: sysfsOnlyTree(t, "hgx-h100"), NVML: src})
	if err != nil {
		t.Fatal(err)
	}
	if f := n.GPUs[0].Fabric; f == nil || !strings.HasPrefix(f.State, "failed: ") {
		t.Fatalf("fabric %+v", f)
	}
	if d := n.NVLinkDomain(); d != "" {
		t.Fatalf("NVLinkDomain %q for a failed registration", d)
	}
}
