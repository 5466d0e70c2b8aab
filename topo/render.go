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
