package plan

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/trainrun/trainrun/topo"
)

// RailsOf numbers a node's rails and says which GPU drives each: rail i is
// the i-th compute NIC (one NCCL should use) in PCI bus order, the order in
// which identical nodes are cabled alike whatever mlx5 numbering the driver
// chose (an H100 host can name its NICs backwards against its GPUs,
// nvidia-smi-topo/h100-nv18-9nic-reversed-order: GPU0 is PIX to NIC8). Each
// rail, in that order, takes the lowest-indexed free GPU at the smallest PCIe
// distance, so two NICs under one switch with two GPUs (DGX A100) pair up in
// order. GPU indices are PCI order (CUDA_DEVICE_ORDER=PCI_BUS_ID).
//
// Where the platform's own NCCL_TOPO_FILE pairs a GPU with NICs that sysfs
// shows only across host bridges (Azure ND H100 v5: every device in its own
// Hyper-V PCI domain; topo.GPU.NearestFrom names the file), those NICs count
// as sharing the GPU's switch, as NCCL itself reads that file.
//
// It returns nil (identity: local rank i drives GPU i) with a reason when the
// node has no usable rail per GPU, e.g. 4 NICs for 8 GPUs or a VM whose flat
// bus hides which NIC is near which GPU and ships no topology file.
func RailsOf(n *topo.Node) ([]int, string) {
	if n == nil || len(n.GPUs) == 0 {
		return nil, "no GPUs"
	}
	var nics []*topo.RDMADevice
	for i := range n.RDMA {
		d := &n.RDMA[i]
		if d.NCCL {
			nics = append(nics, d)
		}
	}
	if len(nics) != len(n.GPUs) {
		return nil, fmt.Sprintf("%d compute NICs in use for %d GPUs: local rank i drives GPU i", len(nics), len(n.GPUs))
	}
	sort.SliceStable(nics, func(a, b int) bool { return nics[a].BusID < nics[b].BusID })
	gpuAt := make([]int, len(n.GPUs)) // position in PCI order → n.GPUs index
	for i := range gpuAt {
		gpuAt[i] = i
	}
	sort.SliceStable(gpuAt, func(a, b int) bool { return n.GPUs[gpuAt[a]].BusID < n.GPUs[gpuAt[b]].BusID })
	pciIndex := make([]int, len(n.GPUs))
	for pos, gi := range gpuAt {
		pciIndex[gi] = pos
	}
	used := make([]bool, len(n.GPUs))
	rails := make([]int, len(nics))
	for r, d := range nics {
		best, bestPath := -1, topo.PathUnknown
		for _, gi := range gpuAt {
			if used[gi] || gi >= len(d.GPUPaths) {
				continue
			}
			p := railPath(n, d, gi)
			if p == topo.PathUnknown {
				continue
			}
			if best < 0 || p < bestPath {
				best, bestPath = gi, p
			}
		}
		if best < 0 || bestPath > topo.PathPXB {
			return nil, fmt.Sprintf("compute NIC %s shares no PCIe switch with a free GPU (a flat VM bus?): local rank i drives GPU i", d.Name)
		}
		used[best] = true
		rails[r] = pciIndex[best]
	}
	return rails, ""
}

// railPath is the PCIe distance RailsOf pairs by: the sysfs one, or PIX
// where the platform's topology file pairs the GPU with the NIC.
func railPath(n *topo.Node, d *topo.RDMADevice, gi int) topo.PathType {
	g := &n.GPUs[gi]
	if strings.HasPrefix(g.NearestFrom, "NCCL_TOPO_FILE ") && slices.Contains(g.NearestNICs, d.Name) {
		return topo.PathPIX
	}
	return d.GPUPaths[gi]
}

// PlaceNodes describes the job's hosts (Slurm's order) for Place: leaf switch
// and NVLink block from the cluster model (nil: one switch, no blocks), and
// the rail map every node shares (nil: identity; set PlaceNode.Rails per node
// afterwards where nodes differ). A host under no switch of a tree topology
// is an error: Slurm itself requires every node under a switch.
func PlaceNodes(hosts []string, cl *topo.Cluster, rails []int) ([]PlaceNode, error) {
	nodes := make([]PlaceNode, len(hosts))
	for i, h := range hosts {
		nodes[i] = PlaceNode{Name: h, Rails: rails}
		if cl == nil {
			continue
		}
		nodes[i].Leaf, nodes[i].Block = cl.Leaf(h), cl.Block(h)
		if cl.HasTree() && nodes[i].Leaf == "" {
			return nil, fmt.Errorf("node %s is under no switch of %s; add it to a SwitchName=... Nodes= line (Slurm requires every node under a switch)", h, cl.Source)
		}
	}
	return nodes, nil
}

// NVLinkBlocks makes each node's multi-node NVLink domain its Block where
// the cluster model gave it none: domain maps a host to its
// topo.Node.NVLinkDomain() ("<clusterUUID>.<cliqueID>", "" when not fabric
// attached). Nodes of one GB200 NVL72 clique then count as one NVLink
// domain, so placement may put TP and EP groups across trays of that
// clique; nodes of different cliques (or racks) never share a block.
func NVLinkBlocks(nodes []PlaceNode, domain map[string]string) {
	for i := range nodes {
		if d := domain[nodes[i].Name]; nodes[i].Block == "" && d != "" {
			nodes[i].Block = "nvlink:" + d
		}
	}
}

// LocalNVLinkBlocks is NVLinkBlocks for a caller that read one node only
// (trainrun env, the plugin), which takes every node of the job to be built
// like the one read: every host gets that node's NVLink domain. It does
// nothing where the cluster model gave any host a block (Slurm's
// topology/block, one BlockName per NVL72 rack, knows every host: it
// governs) or the node is not fabric attached. The note says what was
// assumed ("" when nothing was): a job spanning cliques needs the block
// model for its TP and EP groups to stay inside each.
func LocalNVLinkBlocks(nodes []PlaceNode, local *topo.Node) string {
	if local == nil || len(nodes) < 2 {
		return ""
	}
	d := local.NVLinkDomain()
	if d == "" {
		return ""
	}
	domain := make(map[string]string, len(nodes))
	for _, n := range nodes {
		if n.Block != "" {
			return ""
		}
		domain[n.Name] = d
	}
	NVLinkBlocks(nodes, domain)
	return fmt.Sprintf("NVLink clique %s of this node taken for all %d nodes (the cluster model has no topology/block); a job spanning cliques needs Slurm's topology/block, one BlockName per clique", d, len(nodes))
}
