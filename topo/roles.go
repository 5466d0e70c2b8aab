package topo

import (
	"fmt"
	"strconv"
	"strings"
)

// assignRoles decides what each RDMA device and network interface is for, and
// which RDMA devices NCCL should use. The rules, in order:
//
//  1. The compute rail is the most common (link layer, rate) among the RDMA
//     devices that share a PCIe switch with a GPU (PIX/PXB); if none does
//     (a VM with a flat bus), among those under a GPU's host bridge (PHB);
//     else among all. Ties prefer InfiniBand, then the higher rate.
//  2. A device of another link layer than the rail is not compute: Ethernet
//     beside an InfiniBand rail is the front-end (storage when ≥100 Gb/s,
//     management below).
//  3. A device of the rail's link layer but another rate is storage (≥50 Gb/s)
//     or management.
//  4. A rail device whose nearest GPU is across host bridges (NODE/SYS) while
//     other rail devices sit next to their GPUs is storage: it is "not near any
//     GPU" (DGX A100's storage HCAs on NUMA 0).
//  5. Everything else on the rail is compute. NCCL should use the compute
//     devices that have an ACTIVE port; a DOWN port is reported, not used.
//
// On a node without GPUs no rail exists: slow Ethernet is management, the rest
// unknown.
func assignRoles(n *Node) {
	rl := computeRail(n)
	railNear := false
	for i := range n.RDMA {
		d := &n.RDMA[i]
		if rl.ok && len(d.Ports) > 0 && d.Ports[0].LinkLayer == rl.layer && nearestGPU(d) != PathUnknown && nearestGPU(d) <= PathPHB {
			railNear = true
		}
	}
	railCount := 0
	for i := range n.RDMA {
		d := &n.RDMA[i]
		d.Role, d.RoleReason = rl.role(n, d, railNear)
		if d.Role == RoleCompute {
			railCount++
			for _, p := range d.Ports {
				if p.Active() {
					d.NCCL = true
				}
			}
			if !d.NCCL {
				d.RoleReason += "; no ACTIVE port, so NCCL cannot use it"
			}
		}
	}
	gpuNCCLNICs(n)
	if rl.ok && railCount > 0 && len(n.NCCLNICs()) == 0 {
		n.Notes = append(n.Notes, fmt.Sprintf("no compute NIC has an ACTIVE port: NCCL would fall back to whatever is up (e.g. the Ethernet front-end) or to sockets; check the %s links", rl.layer))
	}
	flatPCIeNotes(n)
	netRoles(n)
}

// nearestGPU is the closest path from an RDMA device to any GPU.
func nearestGPU(d *RDMADevice) PathType {
	best := PathUnknown
	for _, p := range d.GPUPaths {
		if p != PathUnknown && (best == PathUnknown || p < best) {
			best = p
		}
	}
	return best
}

// activeRate is the rate of the device's first ACTIVE port (0: none). A port
// that is not ACTIVE reports a minimum rate (a down NDR port reads "10
// Gb/sec (4X SDR)"), so only active ports say what rate a device runs at.
func activeRate(d *RDMADevice) float64 {
	for _, p := range d.Ports {
		if p.Active() {
			return p.RateGbps
		}
	}
	return 0
}

// layerRank orders link layers for a tie: InfiniBand first, then Ethernet.
func layerRank(l string) int {
	switch l {
	case "InfiniBand":
		return 0
	case "Ethernet":
		return 1
	}
	return 2
}

// rail is a node's compute rail: the link layer and rate of the RDMA devices
// next to the GPUs (rule 1); ok is false on a node without GPUs or without
// such devices.
type rail struct {
	layer string
	rate  float64
	ok    bool
}

// computeRail finds the compute rail (rule 1): the most common link layer,
// then rate, among the devices nearest the GPUs.
func computeRail(n *Node) rail {
	var rl rail
	if len(n.GPUs) == 0 {
		return rl
	}
	for _, limit := range []PathType{PathPXB, PathPHB, PathSYS} {
		layers := map[string]int{}
		for i := range n.RDMA {
			d := &n.RDMA[i]
			if p := nearestGPU(d); len(d.Ports) > 0 && p != PathUnknown && p <= limit && !strings.HasPrefix(d.Name, "smi") {
				layers[d.Ports[0].LinkLayer]++
			}
		}
		if len(layers) == 0 {
			continue
		}
		rl.ok = true
		best := -1
		for l, c := range layers {
			if c > best || (c == best && layerRank(l) < layerRank(rl.layer)) {
				rl.layer, best = l, c
			}
		}
		rates := map[float64]int{}
		for i := range n.RDMA {
			d := &n.RDMA[i]
			if p := nearestGPU(d); len(d.Ports) > 0 && d.Ports[0].LinkLayer == rl.layer && p <= limit && activeRate(d) > 0 {
				rates[activeRate(d)]++
			}
		}
		best = -1
		for r, c := range rates {
			if c > best || (c == best && r > rl.rate) {
				rl.rate, best = r, c
			}
		}
		break
	}
	return rl
}

// role is what RDMA device d is for (rules 2 to 5) and why; railNear says
// that some rail device sits next to its GPU.
func (rl rail) role(n *Node, d *RDMADevice, railNear bool) (NICRole, string) {
	railDesc := rl.layer
	if rl.rate > 0 {
		railDesc += " " + gbps(rl.rate)
	}
	var layer string
	if len(d.Ports) > 0 {
		layer = d.Ports[0].LinkLayer
	}
	rate := activeRate(d)
	if rate == 0 && len(d.Ports) > 0 {
		rate = d.Ports[0].RateGbps
	}
	near := nearestGPU(d)
	switch {
	case len(d.Ports) == 0:
		return RoleUnknown, "no ports"
	case strings.HasPrefix(d.Name, "smi"):
		// XDR (ConnectX-8) systems expose switch-management devices on the
		// same PCI function as the HCA (fixtures/ib/xdr-smi-devices-*.txt).
		return RoleManagement, "switch-management (SMI) device on the function of " + sameFunction(n, d) + ", not a data path"
	case !rl.ok:
		if layer == "Ethernet" && rate < 50 {
			return RoleManagement, fmt.Sprintf("Ethernet %s, no GPUs on this node", gbps(rate))
		}
		return RoleUnknown, "no GPUs on this node: no compute rail to compare with"
	case layer != rl.layer:
		if layer == "Ethernet" && rl.layer == "InfiniBand" {
			return storageOrMgmt(rate, 100), fmt.Sprintf("Ethernet %s on an InfiniBand fabric (compute rail: %s)", gbps(rate), railDesc)
		}
		return storageOrMgmt(rate, 100), fmt.Sprintf("%s %s beside the %s compute rail", layer, gbps(rate), railDesc)
	case activeRate(d) > 0 && rl.rate > 0 && activeRate(d) != rl.rate:
		return storageOrMgmt(rate, 50), fmt.Sprintf("rate %s differs from the compute rail's %s", gbps(rate), gbps(rl.rate))
	case railNear && near >= PathNODE:
		return RoleStorage, fmt.Sprintf("not near any GPU (nearest is %s) while the compute NICs sit next to their GPUs", near)
	}
	return RoleCompute, fmt.Sprintf("%s, %s to %s", railDesc, near, strings.Join(nearGPUs(n, d, near), ","))
}

// flatPCIeNotes says, on a node where no GPU shares a PCIe switch with a
// NIC, where the GPU-NIC pairing comes from instead.
func flatPCIeNotes(n *Node) {
	if !n.FlatPCIe() {
		return
	}
	if n.CPU.Arch == "arm64" && minGPUSM(n) >= 90 {
		n.Notes = append(n.Notes, "the GPUs attach to the Grace CPUs over NVLink-C2C, not to a PCIe switch shared with a NIC: the nearest NICs are those of the GPU's NUMA node (NODE)")
	} else if n.PlatformTopoFile != "" {
		n.Notes = append(n.Notes, "no GPU shares a PCIe switch with a NIC (a VM's flat bus): the nearest NICs come from the platform's topology file "+n.PlatformTopoFile+" (NCCL_TOPO_FILE in /etc/nccl.conf), which NCCL reads too")
	} else {
		n.Notes = append(n.Notes, "no GPU shares a PCIe switch with a NIC (a VM's flat bus?): GPU-NIC pairing is not visible here; NCCL needs the platform's topology file (NCCL_TOPO_FILE)")
	}
}

// gpuNCCLNICs sets each GPU's nearest NICs among those NCCL should use.
func gpuNCCLNICs(n *Node) {
	// Per GPU: the nearest NCCL devices (the platform file's pairing first).
	for i := range n.GPUs {
		best := PathUnknown
		names := []string{}
		if g := &n.GPUs[i]; g.NearestFrom != "" && g.NearestFrom != "sysfs" {
			for _, name := range g.NearestNICs {
				if d := n.RDMAByName(name); d != nil && d.NCCL {
					names = append(names, name)
				}
			}
			if len(names) > 0 {
				g.NCCLNICs = names
				continue
			}
		}
		for _, d := range n.RDMA {
			if !d.NCCL {
				continue
			}
			p := d.GPUPaths[i]
			if best == PathUnknown || p < best {
				best, names = p, []string{d.Name}
			} else if p == best {
				names = append(names, d.Name)
			}
		}
		n.GPUs[i].NCCLNICs = names
	}
}

// netRoles gives network interfaces the role of their RDMA port, and picks
// the bootstrap (socket) interfaces.
func netRoles(n *Node) {
	// Network interfaces inherit the role of their RDMA port.
	byNet := map[string]*RDMADevice{}
	byBus := map[string]*RDMADevice{}
	for i := range n.RDMA {
		d := &n.RDMA[i]
		byBus[d.BusID] = d
		for _, p := range d.Ports {
			if p.NetDev != "" {
				byNet[p.NetDev] = d
			}
		}
	}
	for i := range n.NetIfs {
		ni := &n.NetIfs[i]
		d := byNet[ni.Name]
		if d == nil && ni.BusID != "" {
			d = byBus[ni.BusID]
		}
		switch {
		case d != nil:
			ni.RDMA, ni.Role = d.Name, d.Role
		case ni.Kind == NetPhysical || ni.Kind == NetBond:
			ni.Role = RoleManagement
		case (ni.Kind == NetBridge || ni.Kind == NetVirtual) && len(ni.IPv4) > 0 && !containerBridge(ni.Name):
			ni.Role = RoleManagement // a VLAN or a bridge over the management port
		}
		ni.Socket = ni.OperState == "up" && len(ni.IPv4) > 0 && ni.Role != RoleCompute &&
			ni.Kind != NetLoopback && !containerBridge(ni.Name)
	}
	// Bootstrap traffic belongs on the management network when there is one.
	mgmt := false
	for _, ni := range n.NetIfs {
		mgmt = mgmt || (ni.Socket && ni.Role == RoleManagement)
	}
	if mgmt {
		for i := range n.NetIfs {
			if n.NetIfs[i].Role != RoleManagement {
				n.NetIfs[i].Socket = false
			}
		}
	}
}

func sameFunction(n *Node, d *RDMADevice) string {
	for _, o := range n.RDMA {
		if o.BusID == d.BusID && o.Name != d.Name {
			return o.Name
		}
	}
	return d.BusID
}

func containerBridge(name string) bool {
	for _, p := range []string{"docker", "virbr", "cni", "flannel", "cali", "veth", "br-", "tun", "tap", "kube", "cilium", "vxlan", "tailscale", "wg", "zt"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

func storageOrMgmt(rate, threshold float64) NICRole {
	if rate >= threshold {
		return RoleStorage
	}
	return RoleManagement
}

func gbps(r float64) string { return strconv.FormatFloat(r, 'f', -1, 64) + " Gb/s" }

func nearGPUs(n *Node, d *RDMADevice, p PathType) []string {
	var out []string
	for i, q := range d.GPUPaths {
		if q == p {
			out = append(out, "GPU"+strconv.Itoa(n.GPUs[i].Index))
		}
	}
	return out
}

// FlatPCIe reports whether the node has GPUs and NICs but no GPU shares a
// PCIe switch with any NIC in sysfs: the VM case, where the pairing NCCL
// needs is not visible (a platform topology file may still supply it).
func (n *Node) FlatPCIe() bool {
	if len(n.GPUs) == 0 || len(n.RDMA) == 0 {
		return false
	}
	for _, d := range n.RDMA {
		for _, p := range d.GPUPaths {
			if p != PathUnknown && p <= PathPXB {
				return false
			}
		}
	}
	return true
}

func minGPUSM(n *Node) int {
	m := 0
	for _, g := range n.GPUs {
		if g.SM > 0 && (m == 0 || g.SM < m) {
			m = g.SM
		}
	}
	return m
}
