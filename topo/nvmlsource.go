package topo

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/trainrun/trainrun/topo/snapshot"
)

// NVMLSource is the narrow door to NVML: the calls topo needs and nothing
// more. topo/nvml implements it over go-nvml (the only package that imports
// go-nvml, because it needs cgo); RecordedNVML implements it from the
// nvml.json a captured tree carries.
type NVMLSource interface {
	// Kind names the source for Node.Source: "nvml" or "recorded-nvml".
	Kind() string
	DriverVersion() (string, error)
	DeviceCount() (int, error)
	Device(index int) (NVMLDevice, error)
}

// NVMLDevice is one GPU's answers.
type NVMLDevice interface {
	UUID() (string, error)
	Name() (string, error)
	Architecture() (string, error)                    // "Hopper"; "" if unknown
	ComputeCapability() (major, minor int, err error) //
	MemoryBytes() (uint64, error)                     // total framebuffer
	PCIBusID() (string, error)                        // any form; topo normalizes it
	// NVLinks returns the active links bundled per remote endpoint.
	NVLinks() ([]NVLink, error)
	// Fabric returns the fabric registration, or nil when the GPU is not
	// fabric attached or the driver lacks the call.
	Fabric() (*NVLinkFabric, error)
	// CommonAncestor is NVML's PCIe relation to another device of the same
	// source (PathPIX … PathSYS); PathUnknown when the source cannot say.
	CommonAncestor(other NVMLDevice) (PathType, error)
}

// ErrNVMLUnavailable wraps every reason NVML could not be used.
var ErrNVMLUnavailable = errors.New("NVML unavailable")

// RecordedNVML replays NVML answers recorded in a captured tree.
type RecordedNVML struct {
	rec  snapshot.RecordedNVML
	path string
}

var _ NVMLSource = (*RecordedNVML)(nil)

// LoadRecordedNVML reads root/nvml.json. It returns (nil, nil) when the tree
// carries no recording.
func LoadRecordedNVML(root string) (*RecordedNVML, error) {
	p := filepath.Join(root, snapshot.RecordedNVMLFile)
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	r := &RecordedNVML{path: p}
	if err := json.Unmarshal(b, &r.rec); err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	return r, nil
}

func (r *RecordedNVML) Kind() string                   { return "recorded-nvml" }
func (r *RecordedNVML) DriverVersion() (string, error) { return r.rec.DriverVersion, nil }
func (r *RecordedNVML) DeviceCount() (int, error)      { return len(r.rec.GPUs), nil }
func (r *RecordedNVML) Device(i int) (NVMLDevice, error) {
	if i < 0 || i >= len(r.rec.GPUs) {
		return nil, fmt.Errorf("%s: no GPU %d", r.path, i)
	}
	return recordedGPU{r.rec.GPUs[i]}, nil
}

type recordedGPU struct{ r snapshot.RecordedGPU }

func (g recordedGPU) UUID() (string, error)         { return g.r.UUID, nil }
func (g recordedGPU) Name() (string, error)         { return g.r.Name, nil }
func (g recordedGPU) Architecture() (string, error) { return g.r.Arch, nil }
func (g recordedGPU) ComputeCapability() (int, int, error) {
	return g.r.SM / 10, g.r.SM % 10, nil
}
func (g recordedGPU) MemoryBytes() (uint64, error) { return g.r.MemoryBytes, nil }
func (g recordedGPU) PCIBusID() (string, error)    { return g.r.BusID, nil }
func (g recordedGPU) NVLinks() ([]NVLink, error) {
	var out []NVLink
	for _, l := range g.r.NVLinks {
		id := l.RemoteBusID
		if n, err := NormalizeBusID(id); err == nil {
			id = n
		}
		out = append(out, NVLink{RemoteBusID: id, RemoteType: l.RemoteType, Count: l.Count})
	}
	return out, nil
}
func (g recordedGPU) Fabric() (*NVLinkFabric, error) {
	if g.r.FabricUUID == "" {
		return nil, nil
	}
	return &NVLinkFabric{ClusterUUID: g.r.FabricUUID, CliqueID: g.r.FabricClique, State: g.r.FabricState}, nil
}
func (g recordedGPU) CommonAncestor(NVMLDevice) (PathType, error) { return PathUnknown, nil }
