package topo

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// Degraded says what could not be read of one device (or one part of the
// node). Discovery never fails on a device it does not expect: it keeps the
// device with what it could read and records here what it could not, so
// `trainrun topo` and `--explain` can say it and the NCCL decisions that need
// the missing fact can fall back to NCCL's own detection with the reason.
type Degraded struct {
	// Device is a PCI bus id (0000:18:00.0), an RDMA device or interface
	// name, or one of "nvml", "numa", "net", "nccl-topo-file".
	Device string `json:"device"`
	What   string `json:"what"` // what was not read, where, and what it means
}

func (n *Node) degrade(dev, format string, a ...any) {
	n.Degraded = append(n.Degraded, Degraded{Device: dev, What: fmt.Sprintf(format, a...)})
}

// DegradedFor lists what could not be read of one device.
func (n *Node) DegradedFor(dev string) []string {
	var out []string
	for _, d := range n.Degraded {
		if d.Device == dev {
			out = append(out, d.What)
		}
	}
	return out
}

// hostRe matches a PCI host bridge (root bus) directory: pci0000:15, or
// pci10000:00 for a domain above 0xffff (Intel VMD, some VMs).
var hostRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^pci[0-9a-f]{4,8}:[0-9a-f]{2}$`) })

// pciPlacement finds the host bridge and the chain of PCI functions from
// the root port down to the function itself in its resolved sysfs path.
//
// The root bus need not sit directly under /sys/devices: on Hyper-V each
// passed-through device has its own PCI domain whose root bus hangs under a
// VMBus device (LNXSYSTM:00/LNXSYBUS:00/ACPI0004:00/VMBUS:00/<guid>/pci0005:00),
// and virtio or ACPI roots add levels of their own. Components that are
// neither host bridges nor PCI functions (pci_bus, virtio, platform devices)
// are stepped over. When no pciDDDD:BB component precedes the function, the
// host bridge is named from the first function's own domain and bus, and
// the returned note says so.
func pciPlacement(devRoot, real, bdf string) (host string, path []string, note string) {
	rel, err := filepath.Rel(devRoot, real)
	if err != nil || strings.HasPrefix(rel, "..") {
		rel = strings.TrimPrefix(real, string(filepath.Separator))
		note = fmt.Sprintf("resolves to %s, outside %s: its PCIe placement is read from that path", real, devRoot)
	}
	parts := strings.Split(rel, string(filepath.Separator))
	first := -1
	for i, c := range parts {
		if bdfRe().MatchString(c) {
			if first < 0 {
				first = i
			}
			path = append(path, c)
		}
	}
	if len(path) == 0 || path[len(path)-1] != bdf {
		// The function's own directory has another name than its bus id.
		path = append(path, bdf)
	}
	for i := first - 1; i >= 0 && first > 0; i-- {
		if hostRe().MatchString(parts[i]) {
			return parts[i], path, note
		}
	}
	dom, bus := domBus(path[0])
	host = "pci" + dom + ":" + bus
	n := fmt.Sprintf("resolves to %s, which is not under a pciDDDD:BB host bridge: host bridge taken as %s from its address", real, host)
	if note != "" {
		n = note + "; " + n
	}
	return host, path, n
}

func domBus(bdf string) (dom, bus string) {
	d, rest, _ := strings.Cut(bdf, ":")
	b, _, _ := strings.Cut(rest, ":")
	return d, b
}

// readAttr reads one sysfs attribute. It returns "" and a reason when the
// file is missing, unreadable or empty.
func readAttr(dir, name string) (string, string) {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		if os.IsNotExist(err) {
			return "", "missing"
		}
		return "", "unreadable"
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "", "empty"
	}
	return s, ""
}

// readHexAttr reads a 0x-prefixed hex attribute the kernel prints with a
// fixed number of digits (class 6, vendor and device 4): a shorter or
// longer value is a truncated or foreign file, not a number to trust.
func readHexAttr(dir, name string, digits int) (uint64, string) {
	s, why := readAttr(dir, name)
	if why != "" {
		return 0, why
	}
	h, ok := strings.CutPrefix(s, "0x")
	if !ok || len(h) != digits {
		return 0, fmt.Sprintf("%q is not a %d-digit 0x hex number", s, digits)
	}
	v, err := strconv.ParseUint(h, 16, 32)
	if err != nil {
		return 0, fmt.Sprintf("%q is not a hex number", s)
	}
	return v, ""
}

// readFnAttrs fills a function's identity, NUMA node, CPU list and link
// from its directory, degrading per attribute.
func readFnAttrs(n *Node, f *pciFn, real string) {
	bad := func(attr, why, means string) {
		n.degrade(f.bdf, "%s: %s (%s)", filepath.Join(real, attr), why, means)
	}
	if v, why := readHexAttr(real, "class", 6); why == "" {
		f.class, f.classKnown = uint32(v), true
	} else {
		bad("class", why, "device kind unknown; vendor, device id and driver decide")
	}
	if v, why := readHexAttr(real, "vendor", 4); why == "" {
		f.vendor = fmt.Sprintf("0x%04x", v)
	} else {
		bad("vendor", why, "vendor unknown")
	}
	if v, why := readHexAttr(real, "device", 4); why == "" {
		f.device = fmt.Sprintf("0x%04x", v)
	} else {
		bad("device", why, "model unknown")
	}
	if v, why := readHexAttr(real, "subsystem_vendor", 4); why == "" {
		f.subVendor = fmt.Sprintf("0x%04x", v)
	}
	if v, why := readHexAttr(real, "subsystem_device", 4); why == "" {
		f.subDevice = fmt.Sprintf("0x%04x", v)
	}
	if s, why := readAttr(real, "numa_node"); why == "" {
		if v, err := strconv.Atoi(s); err != nil {
			bad("numa_node", fmt.Sprintf("%q is not a number", s), "NUMA node unknown")
		} else if v >= 0 {
			f.numa = &v
		}
	}
	bridge := f.classKnown && f.class>>8 == 0x0604
	// A bridge's CPU list is never used (only GPUs' and NICs' are): one
	// read fewer per bridge keeps discovery of an 8-GPU node well under
	// 100 ms.
	if !bridge {
		if s, why := readAttr(real, "local_cpulist"); why == "" {
			l, err := ParseCPUList(s)
			if err != nil {
				bad("local_cpulist", err.Error(), "CPU affinity unknown")
			} else {
				f.localCPUs = l
			}
		}
	}
	f.speed, _ = readAttr(real, "max_link_speed")
	if w, why := readAttr(real, "max_link_width"); why == "" {
		f.width, _ = strconv.Atoi(w)
	}
	if !bridge && (f.vendor == "0x10de" || f.vendor == "" || !f.classKnown) { // only kind() asks, for NVIDIA or unknown functions
		if l, err := os.Readlink(filepath.Join(real, "driver")); err == nil {
			f.driver = filepath.Base(l)
		}
	}
}

// kind classifies a function as a GPU or an NVSwitch. The class code
// decides when it was read with the vendor; else the NVIDIA device id
// table, the driver (nvidia) and, last, NVML's list of bus ids stand in,
// with a note saying which.
func (f *pciFn) kind(nvmlBus map[string]bool) (k string, via string) {
	cls := f.class >> 8
	nv := f.vendor == "0x10de"
	_, inTable := gpuTable[f.device]
	switch {
	case f.classKnown && nv && (cls == 0x0300 || cls == 0x0302):
		return "gpu", ""
	case f.classKnown && nv && cls == 0x0680:
		return "nvswitch", ""
	case f.classKnown && f.vendor != "" && !nv:
		return "", ""
	case inTable && (nv || f.vendor == ""):
		return "gpu", "its NVIDIA GPU device id " + f.device
	case f.classKnown && (cls == 0x0300 || cls == 0x0302) && f.driver == "nvidia":
		return "gpu", "its display class and the nvidia driver"
	case !f.classKnown && nv && f.driver == "nvidia":
		return "gpu", "its NVIDIA vendor id and the nvidia driver"
	case nvmlBus[f.bdf] && (nv || f.vendor == ""):
		return "gpu", "NVML listing its bus id"
	}
	return "", ""
}
