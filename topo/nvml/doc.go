// Package nvml is the only package of trainrun that imports go-nvml. It
// adapts NVML (libnvidia-ml.so.1, loaded at run time through cgo) to the
// narrow topo.NVMLSource interface: device identity, memory, NVLink bundles,
// fabric registration and PCIe common ancestors. Without cgo, or where the
// library does not load, Open returns an error wrapping
// topo.ErrNVMLUnavailable that says why, and callers fall back to sysfs.
package nvml
