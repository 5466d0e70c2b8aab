//go:build !cgo

package nvml

import (
	"fmt"

	"github.com/trainrun/trainrun/topo"
)

// Available: this build cannot load NVML (no cgo).
const Available = false

// Source is unavailable without cgo.
type Source struct{ topo.NVMLSource }

// Open fails: go-nvml needs cgo to dlopen libnvidia-ml.so.1.
func Open() (*Source, error) {
	return nil, fmt.Errorf("%w: trainrun was built with CGO_ENABLED=0, and the NVML adapter needs cgo", topo.ErrNVMLUnavailable)
}

// Close does nothing.
func (s *Source) Close() error { return nil }
