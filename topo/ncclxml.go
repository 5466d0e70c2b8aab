package topo

import (
	"bytes"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// NCCL topology XML (NCCL_TOPO_FILE), written the way NCCL's own dump
// (ncclTopoDumpXmlRec) writes it, because NCCL's parser (src/graph/xml.cc) is
// strict in ways encoding/xml does not respect:
//
//   - no XML declaration (NCCL reads "<?xml" as an element and fails on '?');
//   - indentation with spaces only (a tab before '<' is a parse error);
//   - each element's attributes on one line, single spaces, key="value";
//   - at most 16 attributes per element and 256 elements per file;
//   - bus ids lower case and equal to NVML's (sysfs form), because NCCL matches
//     the GPU it is running on to a <pci busid=...> of the file.
//
// The file describes the PCIe hierarchy NCCL would build itself from sysfs
// (CPU root complex, then every second bridge level upward from a device, the
// way xml.cc "rewinds two '/'"), for the GPUs and the NICs NCCL should use.
// It carries no <gpu> or <nic> elements: NCCL adds those from NVML and its net
// plugins and attaches them by bus id, as the Azure and AWS files do.

// NCCLXMLMaxElements and NCCLXMLMaxAttrs are NCCL's limits (xml.h, topo.h).
const (
	NCCLXMLMaxElements = 256
	NCCLXMLMaxAttrs    = 16
)

type xmlNode struct {
	name     string
	attrs    [][2]string
	children []*xmlNode
}

// NCCLTopoXML renders the node as an NCCL topology file.
func (n *Node) NCCLTopoXML() ([]byte, error) {
	sys := &xmlNode{name: "system", attrs: [][2]string{{"version", "1"}}}
	cpus := map[string]*xmlNode{} // by numaid
	var cpuOrder []string
	pcis := map[string]*xmlNode{}

	var endpoints [][]string
	for _, g := range n.GPUs {
		if len(g.PCIPath) > 0 {
			endpoints = append(endpoints, g.PCIPath)
		}
	}
	for _, d := range n.RDMA {
		if d.NCCL && len(d.PCIPath) > 0 {
			endpoints = append(endpoints, d.PCIPath)
		}
	}
	for _, path := range endpoints {
		// NCCL's chain: the device, then every second function above it,
		// stopping below the root complex.
		var chain []string
		for i := len(path) - 1; i >= 0; i -= 2 {
			chain = append([]string{path[i]}, chain...)
		}
		top := n.PCIFunctions[chain[0]]
		numa := "-1"
		if top.NUMANode != nil {
			numa = strconv.Itoa(*top.NUMANode)
		}
		cpu, ok := cpus[numa]
		if !ok {
			var err error
			if cpu, err = n.cpuXML(numa); err != nil {
				return nil, err
			}
			cpus[numa] = cpu
			cpuOrder = append(cpuOrder, numa)
		}
		parent := cpu
		for _, b := range chain {
			x, ok := pcis[b]
			if !ok {
				f, known := n.PCIFunctions[b]
				if !known {
					return nil, fmt.Errorf("NCCL XML: no PCI facts for %s", b)
				}
				x = pciXML(f)
				pcis[b] = x
				parent.children = append(parent.children, x)
			}
			parent = x
		}
	}
	sort.SliceStable(cpuOrder, func(i, j int) bool {
		a, _ := strconv.Atoi(cpuOrder[i])
		b, _ := strconv.Atoi(cpuOrder[j])
		return a < b
	})
	for _, id := range cpuOrder {
		sys.children = append(sys.children, cpus[id])
	}
	var buf bytes.Buffer
	count := 0
	if err := writeXML(&buf, sys, 0, &count); err != nil {
		return nil, err
	}
	if count > NCCLXMLMaxElements {
		return nil, fmt.Errorf("NCCL XML: %d elements, NCCL accepts at most %d", count, NCCLXMLMaxElements)
	}
	return buf.Bytes(), nil
}

func (n *Node) cpuXML(numa string) (*xmlNode, error) {
	x := &xmlNode{name: "cpu", attrs: [][2]string{{"numaid", numa}}}
	if id, err := strconv.Atoi(numa); err == nil && id >= 0 {
		for _, nn := range n.NUMANodes {
			if nn.ID == id {
				x.attrs = append(x.attrs, [2]string{"affinity", cpuMaskString(nn.CPUs, n.maxCPU())})
			}
		}
	}
	if n.CPU.Arch != "" {
		x.attrs = append(x.attrs, [2]string{"arch", n.CPU.Arch})
	}
	if n.CPU.Vendor != "" {
		x.attrs = append(x.attrs, [2]string{"vendor", n.CPU.Vendor})
	}
	if n.CPU.Vendor == "GenuineIntel" || n.CPU.Vendor == "AuthenticAMD" {
		x.attrs = append(x.attrs, [2]string{"familyid", strconv.Itoa(n.CPU.Family)}, [2]string{"modelid", strconv.Itoa(n.CPU.Model)})
	}
	return x, nil
}

func pciXML(f PCIFunction) *xmlNode {
	a := [][2]string{{"busid", f.BusID}, {"class", f.Class}}
	if f.Vendor != "" {
		a = append(a, [2]string{"vendor", f.Vendor}, [2]string{"device", f.Device})
	}
	if f.SubsystemVendor != "" {
		a = append(a, [2]string{"subsystem_vendor", f.SubsystemVendor}, [2]string{"subsystem_device", f.SubsystemDevice})
	}
	a = append(a, [2]string{"link_speed", ncclLinkSpeed(f.LinkSpeed)}, [2]string{"link_width", strconv.Itoa(f.LinkWidth)})
	return &xmlNode{name: "pci", attrs: a}
}

// NCCLLinkSpeeds are the link_speed strings NCCL recognises (topo.cc
// kvDictPciGen); anything else silently becomes PCIe Gen3.
var NCCLLinkSpeeds = []string{
	"2.5 GT/s", "5 GT/s", "8 GT/s", "16 GT/s", "32 GT/s",
	"2.5 GT/s PCIe", "5.0 GT/s PCIe", "8.0 GT/s PCIe", "16.0 GT/s PCIe", "32.0 GT/s PCIe", "64.0 GT/s PCIe",
}

// ncclLinkSpeed passes a sysfs speed through when NCCL knows it. An unknown
// one ("Unknown" in VMs) is written as "" — NCCL's own dump does the same
// and then assumes Gen3 — rather than invented.
func ncclLinkSpeed(s string) string {
	for _, k := range NCCLLinkSpeeds {
		if s == k {
			return s
		}
	}
	return ""
}

// maxCPU is the highest CPU number of the node.
func (n *Node) maxCPU() int {
	max := n.CPU.NumCPUs - 1
	for _, nn := range n.NUMANodes {
		for _, c := range nn.CPUs {
			if c > max {
				max = c
			}
		}
	}
	return max
}

// cpuMaskString prints a CPU set as a Linux cpumask ("ffffffff,00000000"),
// 32-bit words, most significant first, one word per 32 CPUs of the machine
// (as /sys/.../local_cpus and NCCL's affinity attribute print it).
func cpuMaskString(l CPUList, maxCPU int) string {
	for _, c := range l {
		if c > maxCPU {
			maxCPU = c
		}
	}
	words := maxCPU/32 + 1
	w := make([]uint32, words)
	for _, c := range l {
		w[c/32] |= 1 << (c % 32)
	}
	parts := make([]string, words)
	for i := range w {
		parts[words-1-i] = fmt.Sprintf("%08x", w[i])
	}
	return strings.Join(parts, ",")
}

func writeXML(b *bytes.Buffer, x *xmlNode, depth int, count *int) error {
	*count++
	if len(x.attrs) > NCCLXMLMaxAttrs {
		return fmt.Errorf("NCCL XML: <%s> has %d attributes, NCCL keeps %d", x.name, len(x.attrs), NCCLXMLMaxAttrs)
	}
	b.WriteString(strings.Repeat("  ", depth))
	b.WriteString("<" + x.name)
	for _, a := range x.attrs {
		if strings.ContainsAny(a[1], "\"<>&\n\r\t") || len(a[1]) > 255 {
			return fmt.Errorf("NCCL XML: <%s %s=%q>: NCCL cannot read this value (no escaping, 255 characters at most)", x.name, a[0], a[1])
		}
		fmt.Fprintf(b, " %s=\"%s\"", a[0], a[1])
	}
	if len(x.children) == 0 {
		b.WriteString("/>\n")
		return nil
	}
	b.WriteString(">\n")
	sort.SliceStable(x.children, func(i, j int) bool { return busOf(x.children[i]) < busOf(x.children[j]) })
	for _, c := range x.children {
		if err := writeXML(b, c, depth+1, count); err != nil {
			return err
		}
	}
	b.WriteString(strings.Repeat("  ", depth) + "</" + x.name + ">\n")
	return nil
}

func busOf(x *xmlNode) string {
	for _, a := range x.attrs {
		if a[0] == "busid" {
			return a[1]
		}
	}
	return ""
}
