//go:build cgo

package nvml

import (
	"errors"
	"fmt"
	"strings"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/trainrun/trainrun/topo"
)

// Available: this build can load NVML (it has cgo).
const Available = true

// Source is NVML seen through topo's narrow interface.
type Source struct {
	lib gonvml.Interface
}

var (
	_ topo.NVMLSource = (*Source)(nil)
	_ topo.NVMLDevice = (*device)(nil)
)

// Open loads libnvidia-ml.so.1 and initialises NVML. Close the source when done.
func Open() (*Source, error) {
	return New(gonvml.New())
}

// New initialises NVML through lib (the real library, or go-nvml's mock in
// tests).
func New(lib gonvml.Interface) (*Source, error) {
	if ret := lib.Init(); ret != gonvml.SUCCESS {
		return nil, fmt.Errorf("%w: %s", topo.ErrNVMLUnavailable, initReason(ret))
	}
	return &Source{lib: lib}, nil
}

// initReason says in words why nvmlInit failed (topo-nccl.md §9.2).
func initReason(ret gonvml.Return) string {
	switch ret {
	case gonvml.ERROR_LIBRARY_NOT_FOUND:
		return "libnvidia-ml.so.1 did not load (no NVIDIA driver on this machine; ERROR_LIBRARY_NOT_FOUND)"
	case gonvml.ERROR_DRIVER_NOT_LOADED:
		return "the NVIDIA kernel driver is not loaded (ERROR_DRIVER_NOT_LOADED)"
	case gonvml.ERROR_LIB_RM_VERSION_MISMATCH:
		return "libnvidia-ml.so.1 and the kernel driver differ in version; reboot or reload the driver after an upgrade (ERROR_LIB_RM_VERSION_MISMATCH)"
	case gonvml.ERROR_NO_PERMISSION:
		return "no permission to open the NVIDIA devices (ERROR_NO_PERMISSION)"
	}
	return "nvmlInit failed: " + ret.Error()
}

// Close shuts NVML down.
func (s *Source) Close() error {
	if ret := s.lib.Shutdown(); ret != gonvml.SUCCESS {
		return fmt.Errorf("nvmlShutdown: %s", ret.Error())
	}
	return nil
}

func (s *Source) Kind() string { return "nvml" }

func (s *Source) DriverVersion() (string, error) {
	v, ret := s.lib.SystemGetDriverVersion()
	return v, retErr("nvmlSystemGetDriverVersion", ret)
}

func (s *Source) DeviceCount() (int, error) {
	n, ret := s.lib.DeviceGetCount()
	return n, retErr("nvmlDeviceGetCount", ret)
}

func (s *Source) Device(i int) (topo.NVMLDevice, error) {
	d, ret := s.lib.DeviceGetHandleByIndex(i)
	if err := retErr(fmt.Sprintf("nvmlDeviceGetHandleByIndex(%d)", i), ret); err != nil {
		return nil, err
	}
	return &device{s: s, d: d}, nil
}

type device struct {
	s *Source
	d gonvml.Device
}

func retErr(call string, ret gonvml.Return) error {
	if ret == gonvml.SUCCESS {
		return nil
	}
	return fmt.Errorf("%s: %s", call, ret.Error())
}

func (d *device) UUID() (string, error) {
	v, ret := d.d.GetUUID()
	return v, retErr("nvmlDeviceGetUUID", ret)
}

func (d *device) Name() (string, error) {
	v, ret := d.d.GetName()
	return v, retErr("nvmlDeviceGetName", ret)
}

var archNames = map[gonvml.DeviceArchitecture]string{
	gonvml.DEVICE_ARCH_KEPLER: "Kepler", gonvml.DEVICE_ARCH_MAXWELL: "Maxwell", gonvml.DEVICE_ARCH_PASCAL: "Pascal",
	gonvml.DEVICE_ARCH_VOLTA: "Volta", gonvml.DEVICE_ARCH_TURING: "Turing", gonvml.DEVICE_ARCH_AMPERE: "Ampere",
	gonvml.DEVICE_ARCH_ADA: "Ada", gonvml.DEVICE_ARCH_HOPPER: "Hopper", gonvml.DEVICE_ARCH_BLACKWELL: "Blackwell",
}

func (d *device) Architecture() (string, error) {
	a, ret := d.d.GetArchitecture()
	if err := retErr("nvmlDeviceGetArchitecture", ret); err != nil {
		return "", err
	}
	return archNames[a], nil
}

func (d *device) ComputeCapability() (int, int, error) {
	ma, mi, ret := d.d.GetCudaComputeCapability()
	return ma, mi, retErr("nvmlDeviceGetCudaComputeCapability", ret)
}

func (d *device) MemoryBytes() (uint64, error) {
	m, ret := d.d.GetMemoryInfo()
	return m.Total, retErr("nvmlDeviceGetMemoryInfo", ret)
}

func (d *device) PCIBusID() (string, error) {
	p, ret := d.d.GetPciInfo()
	if err := retErr("nvmlDeviceGetPciInfo", ret); err != nil {
		return "", err
	}
	id := busIDString(p)
	if id == "" {
		return "", errors.New("nvmlDeviceGetPciInfo: empty bus id")
	}
	return id, nil
}

// busIDString converts PciInfo.BusId ([32]int8, NUL-terminated,
// "00000000:07:00.0") to a Go string; "" when empty or not printable.
func busIDString(p gonvml.PciInfo) string {
	var b strings.Builder
	for _, c := range p.BusId {
		if c == 0 {
			break
		}
		if c < 0x20 || c > 0x7e {
			return ""
		}
		b.WriteByte(byte(c))
	}
	return b.String()
}

// maxNVLinks is how many links NCCL probes by compute capability
// (src/graph/xml.cc ncclTopoGetXmlFromGpu), not NVML_NVLINK_MAX_LINKS.
func maxNVLinks(sm int) int {
	switch {
	case sm < 60:
		return 0
	case sm < 70:
		return 4
	case sm < 80:
		return 6
	case sm < 90:
		return 12
	}
	return 18
}

// invisibleRemote is NCCL's bus id for a link whose remote it cannot see
// (an NVSwitch hidden from a VM).
const invisibleRemote = "fffffff:ff:ff.0"

// NVLinks walks the links as NCCL does: P2P capability, then state, then the
// remote's PCI id, and bundles them per remote.
func (d *device) NVLinks() ([]topo.NVLink, error) {
	ma, mi, ret := d.d.GetCudaComputeCapability()
	if ret != gonvml.SUCCESS {
		return nil, retErr("nvmlDeviceGetCudaComputeCapability", ret)
	}
	var out []topo.NVLink
	index := map[string]int{}
	for l := 0; l < maxNVLinks(ma*10+mi); l++ {
		cap, ret := d.d.GetNvLinkCapability(l, gonvml.NVLINK_CAP_P2P_SUPPORTED)
		if ret != gonvml.SUCCESS || cap == 0 {
			continue
		}
		st, ret := d.d.GetNvLinkState(l)
		if ret != gonvml.SUCCESS || st != gonvml.FEATURE_ENABLED {
			continue
		}
		remote, typ := invisibleRemote, "unknown"
		if p, ret := d.d.GetNvLinkRemotePciInfo(l); ret == gonvml.SUCCESS {
			if id := busIDString(p); id != "" {
				if n, err := topo.NormalizeBusID(id); err == nil {
					remote = n
				}
			}
		}
		if t, ret := d.d.GetNvLinkRemoteDeviceType(l); ret == gonvml.SUCCESS {
			switch t {
			case gonvml.NVLINK_DEVICE_TYPE_GPU:
				typ = "gpu"
			case gonvml.NVLINK_DEVICE_TYPE_SWITCH:
				typ = "nvswitch"
			case gonvml.NVLINK_DEVICE_TYPE_IBMNPU:
				typ = "cpu"
			}
		}
		if i, ok := index[remote]; ok {
			out[i].Count++
			continue
		}
		index[remote] = len(out)
		out = append(out, topo.NVLink{RemoteBusID: remote, RemoteType: typ, Count: 1})
	}
	return out, nil
}

var fabricStates = map[uint8]string{
	gonvml.GPU_FABRIC_STATE_NOT_SUPPORTED: "not-supported", gonvml.GPU_FABRIC_STATE_NOT_STARTED: "not-started",
	gonvml.GPU_FABRIC_STATE_IN_PROGRESS: "in-progress", gonvml.GPU_FABRIC_STATE_COMPLETED: "completed",
}

// Fabric asks for the fabric registration only where the driver has the call
// (an absent symbol would fail at lazy binding, not return an error). It tries
// nvmlDeviceGetGpuFabricInfo, then the versioned call that NVML 13 keeps when
// it drops the first, as go-nvlib's IsFabricAttached does.
func (d *device) Fabric() (*topo.NVLinkFabric, error) {
	ext := d.s.lib.Extensions()
	var f gonvml.GpuFabricInfo
	var ret gonvml.Return
	switch {
	case ext.LookupSymbol("nvmlDeviceGetGpuFabricInfo") == nil:
		f, ret = d.d.GetGpuFabricInfo()
	case ext.LookupSymbol("nvmlDeviceGetGpuFabricInfoV") == nil:
		// Not exercised by the tests: go-nvml's mocks cannot build a handler.
		v2, r := d.d.GetGpuFabricInfoV().V2()
		f, ret = gonvml.GpuFabricInfo{ClusterUuid: v2.ClusterUuid, Status: v2.Status, CliqueId: v2.CliqueId, State: v2.State}, r
	default:
		return nil, nil
	}
	if ret == gonvml.ERROR_NOT_SUPPORTED {
		return nil, nil
	}
	if err := retErr("nvmlDeviceGetGpuFabricInfo", ret); err != nil {
		return nil, err
	}
	if f.State == gonvml.GPU_FABRIC_STATE_NOT_SUPPORTED {
		return nil, nil
	}
	u := f.ClusterUuid
	state := fabricStates[f.State]
	if st := gonvml.Return(f.Status); f.State == gonvml.GPU_FABRIC_STATE_COMPLETED && st != gonvml.SUCCESS {
		state = "failed: " + st.Error() // registration finished with an error: not usable for MNNVL
	}
	return &topo.NVLinkFabric{
		ClusterUUID: fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16]),
		CliqueID:    f.CliqueId,
		State:       state,
	}, nil
}

var levels = map[gonvml.GpuTopologyLevel]topo.PathType{
	gonvml.TOPOLOGY_INTERNAL: topo.PathSelf, gonvml.TOPOLOGY_SINGLE: topo.PathPIX, gonvml.TOPOLOGY_MULTIPLE: topo.PathPXB,
	gonvml.TOPOLOGY_HOSTBRIDGE: topo.PathPHB, gonvml.TOPOLOGY_NODE: topo.PathNODE, gonvml.TOPOLOGY_SYSTEM: topo.PathSYS,
}

func (d *device) CommonAncestor(other topo.NVMLDevice) (topo.PathType, error) {
	o, ok := other.(*device)
	if !ok {
		return topo.PathUnknown, nil
	}
	l, ret := d.d.GetTopologyCommonAncestor(o.d)
	if err := retErr("nvmlDeviceGetTopologyCommonAncestor", ret); err != nil {
		return topo.PathUnknown, err
	}
	return levels[l], nil
}
