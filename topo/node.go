package topo

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// The node model: everything trainrun knows about one machine. Field comments
// say where each fact comes from. Optional facts are pointers or empty values;
// JSON names are stable (trainrun topo --format json prints this struct).

// Node is one machine's GPUs, NICs, NUMA layout and the paths between them.
type Node struct {
	Hostname string `json:"hostname,omitempty"` // DIR/proc/sys/kernel/hostname, or the snapshot's name
	// Source says where the facts came from: "sysfs", or "nvml+sysfs" when
	// NVML answered (GPU names, UUIDs, memory, NVLink), or
	// "recorded-nvml+sysfs" for a captured tree that carries NVML answers.
	Source string `json:"source"`
	// NVLinkUnavailable is why NVLink (and NVML) facts are missing; empty when
	// NVML answered. Stated once here rather than on every GPU.
	NVLinkUnavailable string `json:"nvlink_unavailable,omitempty"`
	// Root is the directory the tree was read from ("/" for this machine).
	Root string `json:"root"`

	CPU        CPUInfo        `json:"cpu"`
	NUMANodes  []NUMANode     `json:"numa_nodes"`
	GPUs       []GPU          `json:"gpus"`
	NVSwitches []NVSwitch     `json:"nvswitches,omitempty"`
	RDMA       []RDMADevice   `json:"rdma"`
	NetIfs     []NetInterface `json:"net_interfaces"`

	// GPULinks[i][j] is the relation between GPUs[i] and GPUs[j] as
	// `nvidia-smi topo -m` prints it (X on the diagonal).
	GPULinks [][]Link `json:"gpu_links"`
	// NICLinks[i][j] is the PCIe relation between RDMA[i] and RDMA[j].
	NICLinks [][]PathType `json:"nic_links"`
	// PCIFunctions holds, by bus id, every GPU and RDMA function and the
	// bridges above them (what an NCCL topology file describes).
	PCIFunctions map[string]PCIFunction `json:"pci_functions"`
	// Notes are facts a reader should know that are not errors (e.g. the VM has
	// no NUMA information). One line each.
	Notes []string `json:"notes,omitempty"`
	// Degraded lists, per device, what discovery could not read (a missing
	// or malformed attribute, a path it did not expect). The device is kept
	// with the rest of its facts; `trainrun topo --explain` prints these.
	Degraded []Degraded `json:"degraded,omitempty"`
	// Routes is DIR/proc/net/route: which subnet is on which interface, and
	// the default route. It matches the node's address to an interface when
	// fib_trie (the addresses) is hidden.
	Routes []Route `json:"routes,omitempty"`
	// PlatformTopoFile is the NCCL topology file the platform ships
	// (NCCL_TOPO_FILE in DIR/etc/nccl.conf, e.g. Azure's
	// /opt/microsoft/ndv5/topo.xml), when it could be read.
	PlatformTopoFile string `json:"platform_topo_file,omitempty"`

	platformTopo *platformTopo
}

// CPUInfo is what NCCL's topology XML wants to know of the CPU
// (DIR/proc/cpuinfo; empty when not captured).
type CPUInfo struct {
	Arch     string `json:"arch,omitempty"`       // x86_64, arm64, ppc64 (NCCL's names)
	Vendor   string `json:"vendor,omitempty"`     // vendor_id: GenuineIntel, AuthenticAMD
	Family   int    `json:"family,omitempty"`     // cpu family
	Model    int    `json:"model,omitempty"`      // model
	NumCPUs  int    `json:"num_cpus,omitempty"`   // highest online CPU + 1
	Sockets  int    `json:"sockets,omitempty"`    // distinct physical ids
	ModelStr string `json:"model_name,omitempty"` // model name
}

// NUMANode is one NUMA node (/sys/devices/system/node/nodeN/cpulist).
type NUMANode struct {
	ID   int     `json:"id"`
	CPUs CPUList `json:"cpus"`
}

// GPU is one NVIDIA GPU (PCI class 0x0300/0x0302, vendor 0x10de).
type GPU struct {
	Index int    `json:"index"`          // NVML index; in sysfs-only mode the order of bus ids (what CUDA_DEVICE_ORDER=PCI_BUS_ID gives)
	UUID  string `json:"uuid,omitempty"` // NVML GetUUID ("GPU-…"); empty without NVML
	Name  string `json:"name"`           // NVML GetName, else from the PCI device id table
	Arch  string `json:"arch,omitempty"` // Ampere, Hopper, Blackwell (NVML GetArchitecture, else device id table)
	// SM is the compute capability as major*10+minor (NCCL's "sm" attribute); 0 unknown.
	SM          int    `json:"sm,omitempty"`
	MemoryBytes uint64 `json:"memory_bytes,omitempty"` // NVML GetMemoryInfo total; 0 unknown
	BusID       string `json:"bus_id"`                 // sysfs form 0000:18:00.0, lower case (NVML's 00000000:18:00.0 normalized)
	PCIDevice   string `json:"pci_device"`             // 0x2330 (DIR/sys/bus/pci/devices/<bus>/device)
	PCIClass    string `json:"pci_class"`              // 0x030200
	// NUMANode is DIR/sys/bus/pci/devices/<bus>/numa_node; nil when -1 (VMs).
	NUMANode  *int    `json:"numa_node"`
	LocalCPUs CPUList `json:"local_cpus"`           // .../local_cpulist
	LinkSpeed string  `json:"link_speed,omitempty"` // max_link_speed, e.g. "32.0 GT/s PCIe"
	LinkWidth int     `json:"link_width,omitempty"` // max_link_width

	// NearestNICs are the RDMA devices (compute or not) at the smallest PCIe
	// distance from this GPU, and NearestPath that distance.
	NearestNICs []string `json:"nearest_nics"`
	NearestPath PathType `json:"nearest_path"`
	// NearestFrom says where the pairing comes from: "sysfs" (PCIe
	// distance), or "NCCL_TOPO_FILE <path>" when the platform's topology
	// file pairs GPUs and NICs a VM's flat bus does not show.
	NearestFrom string `json:"nearest_from,omitempty"`
	// NCCLNICs are the nearest of the NICs NCCL should use (Node.NCCLNICs).
	NCCLNICs []string `json:"nccl_nics"`

	NVLinks []NVLink      `json:"nvlinks,omitempty"` // per remote endpoint, from NVML
	Fabric  *NVLinkFabric `json:"fabric,omitempty"`  // NVML GetGpuFabricInfo when the GPU is fabric attached

	// PCIPath is the chain of PCI functions from the root port down to the
	// GPU itself, resolved from DIR/sys/bus/pci/devices/<bus> (the
	// pciDDDD:BB host bridge is HostBridge).
	PCIPath    []string `json:"pci_path"`
	HostBridge string   `json:"host_bridge"` // pci0000:15
}

// PCIFunction is one PCI function's identity and link
// (DIR/sys/bus/pci/devices/<bus>/{class,vendor,device,subsystem_*,max_link_*,numa_node}).
type PCIFunction struct {
	BusID           string `json:"bus_id"`
	Class           string `json:"class"` // 0x060400
	Vendor          string `json:"vendor"`
	Device          string `json:"device"`
	SubsystemVendor string `json:"subsystem_vendor,omitempty"`
	SubsystemDevice string `json:"subsystem_device,omitempty"`
	LinkSpeed       string `json:"link_speed,omitempty"`
	LinkWidth       int    `json:"link_width"`
	NUMANode        *int   `json:"numa_node"`
}

// NVLink is a bundle of NVLinks from a GPU to one remote endpoint.
type NVLink struct {
	RemoteBusID string `json:"remote_bus_id"` // sysfs form; "fffffff:ff:ff.0" when the remote is invisible (VM), as NCCL writes it
	RemoteType  string `json:"remote_type"`   // "gpu", "nvswitch", "cpu", "unknown"
	Count       int    `json:"count"`
}

// NVLinkFabric identifies the NVLink domain (NVL72 rack) and clique a GPU is
// registered in with the fabric manager.
type NVLinkFabric struct {
	ClusterUUID string `json:"cluster_uuid"` // dashed UUID; all-zero means no multi-node NVLink
	CliqueID    uint32 `json:"clique_id"`
	State       string `json:"state"` // not-supported, not-started, in-progress, completed
}

// NVSwitch is an NVSwitch PCI function (class 0x0680, vendor 0x10de); it is
// not a GPU.
type NVSwitch struct {
	BusID     string `json:"bus_id"`
	PCIDevice string `json:"pci_device"`
	NUMANode  *int   `json:"numa_node"`
}

// NICRole is what a NIC is for, as far as the node's facts tell.
type NICRole string

const (
	RoleCompute    NICRole = "compute"    // GPU-to-GPU traffic across nodes: NCCL should use it
	RoleStorage    NICRole = "storage"    // a fast NIC away from the GPUs, or of another kind than the compute rail
	RoleManagement NICRole = "management" // slow Ethernet: ssh, Slurm, bootstrap (NCCL_SOCKET_IFNAME)
	RoleUnknown    NICRole = "unknown"
)

// RDMADevice is one entry of DIR/sys/class/infiniband (mlx5_0, efa_0, …).
type RDMADevice struct {
	Name      string     `json:"name"`       // mlx5_0
	BusID     string     `json:"bus_id"`     // PCI function behind it (…/infiniband/<name>/device)
	Vendor    string     `json:"vendor"`     // 0x15b3 Mellanox/NVIDIA, 0x1d0f Amazon (EFA)
	PCIDevice string     `json:"pci_device"` // 0x1021 ConnectX-7, 0xefa0 EFA
	PCIClass  string     `json:"pci_class"`  // 0x020700 InfiniBand, 0x020000 Ethernet
	Product   string     `json:"product"`    // "ConnectX-7", "EFA" from the device id table; "" unknown
	NodeGUID  string     `json:"node_guid,omitempty"`
	NUMANode  *int       `json:"numa_node"`
	LocalCPUs CPUList    `json:"local_cpus"`
	LinkSpeed string     `json:"link_speed,omitempty"`
	LinkWidth int        `json:"link_width,omitempty"`
	Ports     []RDMAPort `json:"ports"`

	Role       NICRole `json:"role"`
	RoleReason string  `json:"role_reason"`
	// GPUPaths[i] is the PCIe relation to Node.GPUs[i] (PIX … SYS).
	GPUPaths []PathType `json:"gpu_paths"`
	// NCCL says whether NCCL should use this device (see Node.NCCLNICs).
	NCCL bool `json:"nccl"`

	PCIPath    []string `json:"pci_path"`
	HostBridge string   `json:"host_bridge"`
}

// RDMAPort is DIR/sys/class/infiniband/<dev>/ports/<n>.
type RDMAPort struct {
	Number    int     `json:"number"`
	LinkLayer string  `json:"link_layer"`       // InfiniBand | Ethernet
	State     string  `json:"state"`            // ACTIVE, DOWN, INIT, ARMED (state "4: ACTIVE")
	PhysState string  `json:"phys_state"`       // LinkUp, Disabled, Polling (phys_state "5: LinkUp")
	RateGbps  float64 `json:"rate_gbps"`        // rate "400 Gb/sec (4X NDR)"
	NetDev    string  `json:"netdev,omitempty"` // gid_attrs/ndevs or the PCI function's net/ entry
	// RoCEv2GIDIndex is the index of the RoCE v2 GID whose address is
	// IPv4-mapped (::ffff:a.b.c.d), what NCCL_IB_GID_INDEX wants on RoCE;
	// nil on InfiniBand or when none is configured.
	RoCEv2GIDIndex *int   `json:"rocev2_gid_index,omitempty"`
	RoCEv2IPv4     string `json:"rocev2_ipv4,omitempty"`
}

// Active reports whether NCCL would use the port: state ACTIVE.
func (p RDMAPort) Active() bool { return p.State == "ACTIVE" }

// NetKind classifies a network interface.
type NetKind string

const (
	NetPhysical NetKind = "physical" // has a PCI (or platform) device
	NetVirtual  NetKind = "virtual"  // veth, tun, docker0 without bridge dir, …
	NetBridge   NetKind = "bridge"
	NetBond     NetKind = "bond" // bonding/ (often carries the management address)
	NetLoopback NetKind = "loopback"
	NetIPoIB    NetKind = "ipoib" // type 32 (ARPHRD_INFINIBAND)
)

// NetInterface is one entry of DIR/sys/class/net.
type NetInterface struct {
	Name      string   `json:"name"`
	OperState string   `json:"operstate"`            // up, down, unknown
	SpeedMbps int      `json:"speed_mbps,omitempty"` // speed; 0 unknown (virtual, down)
	Kind      NetKind  `json:"kind"`
	BusID     string   `json:"bus_id,omitempty"` // PCI function (device link), "" for virtual ones
	RDMA      string   `json:"rdma,omitempty"`   // RDMA device on the same function port, if any
	IPv4      []string `json:"ipv4,omitempty"`   // from DIR/proc/net/fib_trie, or the live interface
	Role      NICRole  `json:"role"`
	// Socket says whether the interface suits NCCL_SOCKET_IFNAME
	// (bootstrap/out-of-band): up, an IPv4 address, not loopback/docker/virtual.
	Socket bool `json:"socket"`
}

// PathType is a relation between two devices as nvidia-smi topo -m names it.
// Smaller is closer.
type PathType int

const (
	PathUnknown PathType = iota
	PathSelf             // X
	PathNVLink           // NV# (Link.NVLinks says how many)
	PathPIX              // at most one PCIe bridge (same switch)
	PathPXB              // several bridges, not through the host bridge
	PathPHB              // through the PCIe host bridge (same root complex)
	PathNODE             // across host bridges within one NUMA node
	PathSYS              // across the SMP interconnect between NUMA nodes
)

var pathNames = [...]string{"?", "X", "NV", "PIX", "PXB", "PHB", "NODE", "SYS"}

func (p PathType) String() string {
	if p < 0 || int(p) >= len(pathNames) {
		return "?"
	}
	return pathNames[p]
}

// ParsePathType reads PIX, PXB, PHB, NODE, SYS, X (and NV for NVLink).
func ParsePathType(s string) (PathType, error) {
	for i, n := range pathNames {
		if i > 0 && n == s {
			return PathType(i), nil
		}
	}
	return PathUnknown, fmt.Errorf("unknown path type %q; accepted: X, NV, PIX, PXB, PHB, NODE, SYS", s)
}

func (p PathType) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

func (p *PathType) UnmarshalText(b []byte) error {
	if string(b) == "?" {
		*p = PathUnknown
		return nil
	}
	v, err := ParsePathType(string(b))
	*p = v
	return err
}

// Link is one cell of the GPU matrix: NVLink with a count, or a PCIe relation.
type Link struct {
	Type    PathType
	NVLinks int // bonded NVLinks when Type == PathNVLink
}

// String prints the cell as nvidia-smi does: X, NV18, PIX, …
func (l Link) String() string {
	if l.Type == PathNVLink {
		return "NV" + strconv.Itoa(l.NVLinks)
	}
	return l.Type.String()
}

func (l Link) MarshalText() ([]byte, error) { return []byte(l.String()), nil }

func (l *Link) UnmarshalText(b []byte) error {
	s := string(b)
	if n, ok := strings.CutPrefix(s, "NV"); ok && n != "" {
		c, err := strconv.Atoi(n)
		if err != nil {
			return fmt.Errorf("link %q: %w", s, err)
		}
		*l = Link{Type: PathNVLink, NVLinks: c}
		return nil
	}
	var p PathType
	if err := p.UnmarshalText(b); err != nil {
		return err
	}
	*l = Link{Type: p}
	return nil
}

// CPUList is a sorted set of CPU numbers; it prints and parses the kernel's
// list format ("0-47,96-143").
type CPUList []int

// maxCPU bounds a CPU number: Linux's NR_CPUS is at most 8192 on every
// architecture it builds for (CONFIG_NR_CPUS), so 65535 leaves room and a
// forged "0-9223372036854775807" in a captured tree (--root) fails instead
// of allocating without end.
const maxCPU = 1<<16 - 1

// ParseCPUList reads the kernel's cpulist format. An empty string is an empty list.
func ParseCPUList(s string) (CPUList, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return CPUList{}, nil
	}
	var out CPUList
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 || a > maxCPU {
			return nil, fmt.Errorf("cpu list %q: bad number %q (CPU numbers are 0 to %d)", clipCPUs(s), clipCPUs(lo), maxCPU)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a || b > maxCPU {
				return nil, fmt.Errorf("cpu list %q: bad range %q (CPU numbers are 0 to %d)", clipCPUs(s), clipCPUs(part), maxCPU)
			}
		}
		if len(out)+b-a >= maxCPU+1 {
			return nil, fmt.Errorf("cpu list %q names more than %d CPUs", clipCPUs(s), maxCPU+1)
		}
		for c := a; c <= b; c++ {
			out = append(out, c)
		}
	}
	sort.Ints(out)
	return out, nil
}

func clipCPUs(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

// String prints the list in the kernel's compact form.
func (l CPUList) String() string {
	var b strings.Builder
	for i := 0; i < len(l); {
		j := i
		for j+1 < len(l) && l[j+1] == l[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		if j == i {
			b.WriteString(strconv.Itoa(l[i]))
		} else {
			fmt.Fprintf(&b, "%d-%d", l[i], l[j])
		}
		i = j + 1
	}
	return b.String()
}

func (l CPUList) MarshalJSON() ([]byte, error) { return json.Marshal(l.String()) }

func (l *CPUList) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := ParseCPUList(s)
	*l = v
	return err
}

// Equal reports whether two lists hold the same CPUs.
func (l CPUList) Equal(o CPUList) bool {
	if len(l) != len(o) {
		return false
	}
	for i := range l {
		if l[i] != o[i] {
			return false
		}
	}
	return true
}

// NCCLNICs is the exact list of RDMA devices NCCL should use on this node
// (for NCCL_IB_HCA with the "=" exact-match prefix), in natural name order
// (mlx5_2 before mlx5_10). See roles.go for how a device qualifies.
func (n *Node) NCCLNICs() []string {
	out := []string{}
	for _, d := range n.RDMA {
		if d.NCCL {
			out = append(out, d.Name)
		}
	}
	sort.Slice(out, func(i, j int) bool { return naturalLess(out[i], out[j]) })
	return out
}

// RoCEGIDIndex is the GID index NCCL_IB_GID_INDEX wants on a RoCE rail: the
// index of the RoCE v2, IPv4-mapped GID of the first NCCL device that has one
// (mlx5 lays the table out the same way on every port of a node).
func (n *Node) RoCEGIDIndex() (index int, device string, ok bool) {
	for _, d := range n.RDMA {
		if !d.NCCL {
			continue
		}
		for _, p := range d.Ports {
			if p.RoCEv2GIDIndex != nil {
				return *p.RoCEv2GIDIndex, d.Name, true
			}
		}
	}
	return 0, "", false
}

// NVLinkDomain names the multi-node NVLink domain and clique the node's GPUs
// belong to as "<clusterUUID>.<cliqueID>" (the nvidia.com/gpu.clique label
// format), when every GPU is registered (state completed, UUID not all zero)
// and all agree; "" otherwise. Nodes with the same value share an NVL72-style
// NVLink partition, which is what a Slurm block should group.
func (n *Node) NVLinkDomain() string {
	var out string
	for i, g := range n.GPUs {
		f := g.Fabric
		if f == nil || f.State != "completed" || strings.Trim(f.ClusterUUID, "0-") == "" {
			return ""
		}
		v := f.ClusterUUID + "." + strconv.FormatUint(uint64(f.CliqueID), 10)
		if i > 0 && v != out {
			return ""
		}
		out = v
	}
	return out
}

// SocketIfNames is the list of interfaces suited to NCCL_SOCKET_IFNAME.
func (n *Node) SocketIfNames() []string {
	var out []string
	for _, i := range n.NetIfs {
		if i.Socket {
			out = append(out, i.Name)
		}
	}
	return out
}

// RDMAByName returns the named RDMA device, or nil.
func (n *Node) RDMAByName(name string) *RDMADevice {
	for i := range n.RDMA {
		if n.RDMA[i].Name == name {
			return &n.RDMA[i]
		}
	}
	return nil
}

// GPUByBusID returns the GPU at a bus id in any of the accepted forms, or nil.
func (n *Node) GPUByBusID(busID string) *GPU {
	id, err := NormalizeBusID(busID)
	if err != nil {
		return nil
	}
	for i := range n.GPUs {
		if n.GPUs[i].BusID == id {
			return &n.GPUs[i]
		}
	}
	return nil
}

// NormalizeBusID turns NVML's "00000000:07:00.0" (or upper case, or a bus id
// without domain) into sysfs's "0000:07:00.0" ("10000:01:00.0" for a domain
// above 0xffff).
func NormalizeBusID(s string) (string, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	parts := strings.Split(s, ":")
	var dom, bus, devfn string
	switch len(parts) {
	case 2:
		dom, bus, devfn = "0", parts[0], parts[1]
	case 3:
		dom, bus, devfn = parts[0], parts[1], parts[2]
	default:
		return "", fmt.Errorf("PCI bus id %q: want DDDD:BB:DD.F", s)
	}
	dev, fn, ok := strings.Cut(devfn, ".")
	d, err1 := strconv.ParseUint(dom, 16, 32)
	b, err2 := strconv.ParseUint(bus, 16, 8)
	v, err3 := strconv.ParseUint(dev, 16, 8)
	f, err4 := strconv.ParseUint(fn, 16, 8)
	if !ok || err1 != nil || err2 != nil || err3 != nil || err4 != nil || v > 0x1f || f > 7 {
		return "", fmt.Errorf("PCI bus id %q: want DDDD:BB:DD.F in hex", s)
	}
	// Domains above 0xffff exist (Intel VMD's 10000, some VMs); sysfs and
	// NCCL print them with as many digits as they need.
	return fmt.Sprintf("%04x:%02x:%02x.%x", d, b, v, f), nil
}
