package topo

import (
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
)

// WriteMatrix prints the node the way `nvidia-smi topo -m` does (GPUs and
// NICs against each other, CPU and NUMA affinity, the legend), followed by the
// NIC legend with rates, link layers and roles, and what NCCL should use.
// Columns are aligned with spaces, not tabs, so the output pastes cleanly.
func WriteMatrix(w io.Writer, n *Node) error {
	ew := &errWriter{w: w}
	title := n.Hostname
	if title == "" {
		title = n.Root
	}
	ew.printf("Node %s (source: %s)\n\n", title, n.Source)
	if len(n.GPUs) == 0 && len(n.RDMA) == 0 {
		ew.printf("No NVIDIA GPU and no RDMA device in %s.\n", filepath.Join(n.Root, "sys/bus/pci/devices"))
	} else if err := writeGrid(ew, n); err != nil {
		return err
	}
	writeLegend(ew)
	if len(n.GPUs) > 0 {
		ew.printf("\nGPU Legend:\n\n")
		tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
		for _, g := range n.GPUs {
			mem := ""
			if g.MemoryBytes > 0 {
				mem = fmt.Sprintf("%d MiB", g.MemoryBytes>>20)
			}
			near := g.NearestPath.String()
			if f, ok := strings.CutPrefix(g.NearestFrom, "NCCL_TOPO_FILE "); ok {
				near += " per " + f
			}
			fmt.Fprintf(tw, "  GPU%d:\t%s\t%s\t%s\tnearest NIC %s (%s)\tNCCL NIC %s\n", g.Index, orNA(g.Name), g.BusID, orNA(mem),
				orNA(strings.Join(g.NearestNICs, ",")), near, orNA(strings.Join(g.NCCLNICs, ",")))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return writeTail(ew, n)
}

func writeGrid(ew *errWriter, n *Node) error {

	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
	hdr := []string{""}
	for _, g := range n.GPUs {
		hdr = append(hdr, "GPU"+strconv.Itoa(g.Index))
	}
	for i := range n.RDMA {
		hdr = append(hdr, "NIC"+strconv.Itoa(i))
	}
	hdr = append(hdr, "CPU Affinity", "NUMA Affinity")
	fmt.Fprintln(tw, strings.Join(hdr, "\t"))
	for i, g := range n.GPUs {
		row := []string{"GPU" + strconv.Itoa(g.Index)}
		for j := range n.GPUs {
			row = append(row, n.GPULinks[i][j].String())
		}
		for _, d := range n.RDMA {
			row = append(row, d.GPUPaths[i].String())
		}
		row = append(row, orNA(g.LocalCPUs.String()), numaString(g.NUMANode))
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	for i, d := range n.RDMA {
		row := []string{"NIC" + strconv.Itoa(i)}
		for j := range n.GPUs {
			row = append(row, d.GPUPaths[j].String())
		}
		for j := range n.RDMA {
			row = append(row, n.NICLinks[i][j].String())
		}
		row = append(row, orNA(d.LocalCPUs.String()), numaString(d.NUMANode))
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	return tw.Flush()
}

func writeLegend(ew *errWriter) {
	ew.printf("\nLegend:\n\n")
	ew.printf("  X    = Self\n")
	ew.printf("  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)\n")
	ew.printf("  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node\n")
	ew.printf("  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)\n")
	ew.printf("  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)\n")
	ew.printf("  PIX  = Connection traversing at most a single PCIe bridge\n")
	ew.printf("  NV#  = Connection traversing a bonded set of # NVLinks\n")
}

func writeTail(ew *errWriter, n *Node) error {
	if len(n.RDMA) > 0 {
		ew.printf("\nNIC Legend:\n\n")
		tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
		for i, d := range n.RDMA {
			for k, p := range d.Ports {
				name := fmt.Sprintf("  NIC%d:\t%s", i, d.Name)
				ident := fmt.Sprintf("%s\t%s", orNA(d.Product), d.BusID)
				role := fmt.Sprintf("%s\t%s", d.Role, d.RoleReason)
				if k > 0 {
					name, ident, role = "\t", "\t", "\t"
				}
				gid := ""
				if p.RoCEv2GIDIndex != nil {
					gid = fmt.Sprintf("RoCEv2 GID %d (%s)", *p.RoCEv2GIDIndex, p.RoCEv2IPv4)
				}
				fmt.Fprintf(tw, "%s\t%s\tport %d\t%s\t%s\t%s\t%s\t%s\t%s\n", name, ident, p.Number, p.LinkLayer,
					gbps(p.RateGbps), p.State, orNA(p.NetDev), orNA(gid), role)
			}
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}

	if len(n.NUMANodes) > 0 {
		ew.printf("\nNUMA nodes:\n\n")
		tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
		var memOnly []int
		for _, nn := range n.NUMANodes {
			if len(nn.CPUs) == 0 && !numaUsed(n, nn.ID) {
				memOnly = append(memOnly, nn.ID)
				continue
			}
			var gpus, nics []string
			for _, g := range n.GPUs {
				if g.NUMANode != nil && *g.NUMANode == nn.ID {
					gpus = append(gpus, "GPU"+strconv.Itoa(g.Index))
				}
			}
			for _, d := range n.RDMA {
				if d.NUMANode != nil && *d.NUMANode == nn.ID {
					nics = append(nics, d.Name)
				}
			}
			fmt.Fprintf(tw, "  node%d:\tCPUs %s\tGPUs %s\tNICs %s\n", nn.ID, nn.CPUs, orNA(strings.Join(gpus, ",")), orNA(strings.Join(nics, ",")))
		}
		if len(memOnly) > 0 { // Grace Blackwell: each GPU's memory as CPU-less nodes
			fmt.Fprintf(tw, "  %d memory-only node(s), no CPUs, no devices: %s\n", len(memOnly), CPUList(memOnly))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}

	ew.printf("\nNCCL:\n\n")
	if nics := n.NCCLNICs(); len(nics) > 0 {
		ew.printf("  NICs to use:        =%s\n", strings.Join(nics, ","))
	} else {
		ew.printf("  NICs to use:        none\n")
	}
	if idx, dev, ok := n.RoCEGIDIndex(); ok {
		ew.printf("  RoCE v2 GID index:  %d (from %s: the RoCE v2 GID with an IPv4-mapped address)\n", idx, dev)
	}
	ew.printf("  Socket interfaces:  %s\n", orNA(strings.Join(n.SocketIfNames(), ",")))
	if n.NVLinkUnavailable != "" {
		ew.printf("  NVLink:             unavailable: %s\n", n.NVLinkUnavailable)
	}
	for _, note := range n.Notes {
		ew.printf("\nNote: %s\n", note)
	}
	return ew.err
}

func numaUsed(n *Node, id int) bool {
	for _, g := range n.GPUs {
		if g.NUMANode != nil && *g.NUMANode == id {
			return true
		}
	}
	for _, d := range n.RDMA {
		if d.NUMANode != nil && *d.NUMANode == id {
			return true
		}
	}
	return false
}

func orNA(s string) string {
	if s == "" {
		return "N/A"
	}
	return s
}

func numaString(p *int) string {
	if p == nil {
		return "N/A"
	}
	return strconv.Itoa(*p)
}

type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(b []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(b)
	e.err = err
	return n, err
}

func (e *errWriter) printf(format string, a ...any) { fmt.Fprintf(e, format, a...) }

// WriteExplain says how discovery read the node: which devices degraded
// (facts it could not read, grouped per device, and what that means), where
// each GPU's NIC pairing comes from, and the node's notes. It is what
// `trainrun topo --explain` prints after the node.
func WriteExplain(w io.Writer, n *Node) error {
	ew := &errWriter{w: w}
	ew.printf("\nExplain (%s, source %s):\n\n", orNA(n.Root), n.Source)
	if len(n.Degraded) == 0 {
		ew.printf("  Every device was read in full: nothing degraded.\n")
	} else {
		var order []string
		by := map[string][]string{}
		for _, d := range n.Degraded {
			if _, ok := by[d.Device]; !ok {
				order = append(order, d.Device)
			}
			by[d.Device] = append(by[d.Device], d.What)
		}
		ew.printf("  %d device(s) degraded: kept with what could be read, the rest of the node unaffected.\n", len(order))
		for _, dev := range order {
			ew.printf("  %s%s:\n", dev, deviceKind(n, dev))
			for _, what := range by[dev] {
				ew.printf("    - %s\n", what)
			}
		}
	}
	if why := n.RDMAUndecided(); why != "" {
		ew.printf("\n  NCCL_IB_HCA is left to NCCL: %s\n", why)
	}
	if n.AddressesUnknown() {
		ew.printf("\n  Interface addresses unknown: NCCL_SOCKET_IFNAME comes from the route table (Node.InterfaceFor)\n")
	}
	if len(n.GPUs) > 0 {
		ew.printf("\n  GPU-NIC pairing:\n")
		for _, g := range n.GPUs {
			ew.printf("    GPU%d %s: %s (%s) from %s\n", g.Index, g.BusID, orNA(strings.Join(g.NearestNICs, ",")), g.NearestPath, orNA(g.NearestFrom))
		}
	}
	if d := n.NVLinkDomain(); d != "" {
		ew.printf("\n  Multi-node NVLink clique %s: nodes reporting it share NVLink (placement may put TP/EP across them)\n", d)
	}
	return ew.err
}

func deviceKind(n *Node, dev string) string {
	if g := n.GPUByBusID(dev); g != nil {
		return fmt.Sprintf(" (GPU%d)", g.Index)
	}
	for _, d := range n.RDMA {
		if d.BusID == dev {
			return " (" + d.Name + ")"
		}
	}
	return ""
}
