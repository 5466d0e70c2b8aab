package topo

import (
	"fmt"
	"sort"
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
	type key struct {
		layer string
		rate  float64
	}
	keyOf := func(d *RDMADevice) (key, bool) {
		if len(d.Ports) == 0 {
			return key{}, false
		}
		return key{d.Ports[0].LinkLayer, d.Ports[0].RateGbps}, true
	}
	near := func(d *RDMADevice) PathType {
		best := PathUnknown
		for _, p := range d.GPUPaths {
			if p != PathUnknown && (best == PathUnknown || p < best) {
				best = p
			}
		}
		return best
	}
	layerRank := map[string]int{"InfiniBand": 0, "Ethernet": 1}
	var rail key
	haveRail := false
	if len(n.GPUs) > 0 {
		for _, limit := range []PathType{PathPXB, PathPHB, PathSYS} {
			count := map[key]int{}
			for i := range n.RDMA {
				d := &n.RDMA[i]
				k, ok := keyOf(d)
				if p := near(d); ok && p != PathUnknown && p <= limit {
					count[k]++
				}
			}
			if len(count) == 0 {
				continue
			}
			var keys []key
			for k := range count {
				keys = append(keys, k)
			}
			sort.Slice(keys, func(i, j int) bool {
				a, b := keys[i], keys[j]
				if count[a] != count[b] {
					return count[a] > count[b]
				}
				ra, oka := layerRank[a.layer]
				rb, okb := layerRank[b.layer]
				if !oka {
					ra = 2
				}
				if !okb {
					rb = 2
				}
				if ra != rb {
					return ra < rb
				}
				return a.rate > b.rate
			})
			rail, haveRail = keys[0], true
			break
		}
	}
	railNear := false
	for i := range n.RDMA {
		d := &n.RDMA[i]
		if k, ok := keyOf(d); ok && haveRail && k == rail && near(d) <= PathPHB && near(d) != PathUnknown {
			railNear = true
		}
	}
	railCount := 0
	for i := range n.RDMA {
		d := &n.RDMA[i]
		k, ok := keyOf(d)
		switch {
		case !ok:
			d.Role, d.RoleReason = RoleUnknown, "no ports"
		case !haveRail:
			if k.layer == "Ethernet" && k.rate < 50 {
				d.Role, d.RoleReason = RoleManagement, fmt.Sprintf("Ethernet %s, no GPUs on this node", gbps(k.rate))
			} else {
				d.Role, d.RoleReason = RoleUnknown, "no GPUs on this node: no compute rail to compare with"
			}
		case k.layer != rail.layer:
			d.Role = storageOrMgmt(k.rate, 100)
			d.RoleReason = fmt.Sprintf("%s beside the %s %s compute rail", k.layer, rail.layer, gbps(rail.rate))
			if k.layer == "Ethernet" && rail.layer == "InfiniBand" {
				d.RoleReason = fmt.Sprintf("Ethernet %s on an InfiniBand fabric (compute rail: InfiniBand %s)", gbps(k.rate), gbps(rail.rate))
			}
		case k.rate != rail.rate:
			d.Role = storageOrMgmt(k.rate, 50)
			d.RoleReason = fmt.Sprintf("rate %s differs from the compute rail's %s", gbps(k.rate), gbps(rail.rate))
		case railNear && near(d) >= PathNODE:
			d.Role = RoleStorage
			d.RoleReason = fmt.Sprintf("not near any GPU (nearest is %s) while the compute NICs sit next to their GPUs", near(d))
		default:
			d.Role = RoleCompute
			railCount++
			d.RoleReason = fmt.Sprintf("%s %s, %s to %s", k.layer, gbps(k.rate), near(d), strings.Join(nearGPUs(n, d, near(d)), ","))
		}
		if d.Role == RoleCompute {
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
	// Per GPU: the nearest NCCL devices.
	for i := range n.GPUs {
		best := PathUnknown
		names := []string{}
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
	if haveRail && railCount > 0 && len(n.NCCLNICs()) == 0 {
		n.Notes = append(n.Notes, fmt.Sprintf("no compute NIC has an ACTIVE port: NCCL would fall back to whatever is up (e.g. the Ethernet front-end) or to sockets; check the %s links", rail.layer))
	}
	flat := len(n.GPUs) > 0
	for _, g := range n.GPUs {
		if g.NearestPath != PathUnknown && g.NearestPath <= PathPXB {
			flat = false
		}
	}
	if flat && len(n.RDMA) > 0 {
		n.Notes = append(n.Notes, "no GPU shares a PCIe switch with a NIC (a VM's flat bus?): GPU-NIC pairing is not visible here; NCCL needs the platform's topology file (NCCL_TOPO_FILE)")
	}

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
		case ni.Kind == NetPhysical:
			ni.Role = RoleManagement
		}
		ni.Socket = ni.OperState == "up" && len(ni.IPv4) > 0 && ni.Role != RoleCompute &&
			(ni.Kind == NetPhysical || ni.Kind == NetBridge) && !containerBridge(ni.Name)
	}
}

func containerBridge(name string) bool {
	for _, p := range []string{"docker", "virbr", "cni", "flannel", "cali", "veth", "br-"} {
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
