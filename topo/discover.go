package topo

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// Options says where to read a node from.
type Options struct {
	// Root is the directory holding sys/ (and proc/, etc/ where present);
	// "" or "/" is this machine.
	Root string
	// NVML is the NVML source to merge (topo/nvml.Open on a live machine).
	// When nil, Discover uses ROOT/nvml.json if the tree carries one, else
	// reports sysfs facts only.
	NVML NVMLSource
	// NVMLUnavailable is why the caller has no NVML (e.g. "libnvidia-ml.so.1
	// not found"); it becomes Node.NVLinkUnavailable when NVML is nil.
	NVMLUnavailable string
}

// pciFn is one PCI function as sysfs shows it.
type pciFn struct {
	bdf        string
	class      uint32 // 24-bit class code, 0x030200
	classKnown bool   // class was read
	vendor     string // 0x10de
	device     string
	subVendor  string
	subDevice  string
	numa       *int
	localCPUs  CPUList
	speed      string
	width      int
	host       string   // pci0000:15
	driver     string   // basename of the driver link ("nvidia"); "" unbound
	path       []string // functions from the root port down to this one
}

// bdfRe matches a PCI function name. Domains may be longer than four digits:
// Intel VMD puts NVMe drives in domains such as 10000. Compiled on first
// use, as this package's other patterns are: the lean shim links topo for
// its probe and starts once per GPU, and most of its starts never probe.
var bdfRe = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$`)
})

// Discover reads one node. Only a root that is not a sysfs tree (no
// sys/bus/pci/devices directory) is an error: a device whose path or attributes are not what
// discovery expects is kept with what could be read, and Node.Degraded says
// what was not.
func Discover(opts Options) (*Node, error) {
	root := opts.Root
	if root == "" {
		root = "/"
	}
	sysDir := filepath.Join(root, "sys")
	busDir := filepath.Join(sysDir, "bus/pci/devices")
	if st, err := os.Stat(busDir); err != nil || !st.IsDir() {
		why := "missing"
		if err == nil {
			why = "not a directory"
		} else if !errors.Is(err, os.ErrNotExist) {
			why = "unreadable: " + err.Error()
		}
		return nil, fmt.Errorf("%s: not a sysfs tree (%s); pass the root of a captured machine, the directory that holds sys/", busDir, why)
	}
	n := &Node{Root: root, Source: "sysfs", NUMANodes: []NUMANode{}, GPUs: []GPU{}, RDMA: []RDMADevice{}, NetIfs: []NetInterface{}}
	src := opts.NVML
	if src == nil && root != "/" {
		if rec, err := LoadRecordedNVML(root); err != nil {
			n.degrade("nvml", "%v: NVML facts (names, UUIDs, memory, NVLink) unknown", err)
		} else if rec != nil {
			src = rec
		}
	}
	fns := readPCI(n, sysDir)
	byBDF := make(map[string]*pciFn, len(fns))
	for _, f := range fns {
		byBDF[f.bdf] = f
	}
	n.NUMANodes = readNUMA(n, sysDir)
	n.CPU = readCPUInfo(filepath.Join(root, "proc/cpuinfo"))
	n.Hostname = readHostname(root)
	sysfsGPUs(n, fns, nvmlBusIDs(src))

	nvmlAncestors := map[[2]int]PathType{}
	if src != nil {
		mergeNVML(n, src, byBDF, nvmlAncestors)
		n.Source = src.Kind() + "+sysfs"
	} else {
		n.NVLinkUnavailable = opts.NVMLUnavailable
		if n.NVLinkUnavailable == "" {
			n.NVLinkUnavailable = "no NVML source (the tree carries no nvml.json): NVLink, UUIDs and memory come only from NVML"
		}
	}
	n.GPULinks = make([][]Link, len(n.GPUs))
	for i := range n.GPUs {
		n.GPULinks[i] = make([]Link, len(n.GPUs))
		for j := range n.GPUs {
			n.GPULinks[i][j] = gpuLink(n, i, j, byBDF, nvmlAncestors)
		}
	}
	n.RDMA = readRDMA(n, sysDir, byBDF)
	pcieRelations(n, byBDF)
	n.NetIfs = readNetIfs(n, root, sysDir)
	n.platformTopo = readPlatformTopo(n, root)
	nearestNICs(n)
	assignRoles(n)
	if len(n.NUMANodes) == 0 {
		n.Notes = append(n.Notes, "no NUMA nodes in "+filepath.Join(sysDir, "devices/system/node")+": affinity unknown")
	}
	if len(n.Degraded) > 0 {
		n.Notes = append(n.Notes, fmt.Sprintf("%d fact(s) could not be read and were left out (trainrun topo --explain lists them); the rest of the node is unaffected", len(n.Degraded)))
	}
	return n, nil
}

// nvmlBusIDs is the set of GPU bus ids an NVML source lists (sysfs form),
// used to recognise a GPU whose own identity files are unreadable.
func nvmlBusIDs(src NVMLSource) map[string]bool {
	out := map[string]bool{}
	if src == nil {
		return out
	}
	c, err := src.DeviceCount()
	if err != nil {
		return out
	}
	for i := 0; i < c; i++ {
		d, err := src.Device(i)
		if err != nil {
			continue
		}
		if raw, err := d.PCIBusID(); err == nil {
			if b, err := NormalizeBusID(raw); err == nil {
				out[b] = true
			}
		}
	}
	return out
}

// sysfsGPUs lists the GPUs and NVSwitches in bus order (what
// CUDA_DEVICE_ORDER=PCI_BUS_ID gives).
func sysfsGPUs(n *Node, fns []*pciFn, nvmlBus map[string]bool) {
	var gpuFns []*pciFn
	for _, f := range fns {
		k, via := f.kind(nvmlBus)
		if via != "" {
			n.degrade(f.bdf, "taken for a %s from %s", k, via)
		}
		switch k {
		case "gpu":
			gpuFns = append(gpuFns, f)
		case "nvswitch":
			n.NVSwitches = append(n.NVSwitches, NVSwitch{BusID: f.bdf, PCIDevice: f.device, NUMANode: f.numa})
		}
	}
	for i, f := range gpuFns {
		info := gpuTable[f.device]
		cls := ""
		if f.classKnown {
			cls = fmt.Sprintf("0x%06x", f.class)
		}
		n.GPUs = append(n.GPUs, GPU{
			Index: i, Name: info.name, Arch: info.arch, SM: info.sm, BusID: f.bdf, PCIDevice: f.device,
			PCIClass: cls, NUMANode: f.numa, LocalCPUs: nonNilCPUs(f.localCPUs),
			LinkSpeed: f.speed, LinkWidth: f.width, PCIPath: f.path, HostBridge: f.host,
		})
	}
}

func nonNilCPUs(l CPUList) CPUList {
	if l == nil {
		return CPUList{}
	}
	return l
}

// pcieRelations fills the GPU-NIC and NIC-NIC PCIe relations and the PCI
// functions an NCCL topology file describes.
func pcieRelations(n *Node, byBDF map[string]*pciFn) {
	for d := range n.RDMA {
		rd := &n.RDMA[d]
		f := byBDF[rd.BusID]
		rd.GPUPaths = make([]PathType, len(n.GPUs))
		for i, g := range n.GPUs {
			rd.GPUPaths[i] = pciPath(f, byBDF[g.BusID])
		}
	}
	n.NICLinks = make([][]PathType, len(n.RDMA))
	for i := range n.RDMA {
		n.NICLinks[i] = make([]PathType, len(n.RDMA))
		for j := range n.RDMA {
			n.NICLinks[i][j] = pciPath(byBDF[n.RDMA[i].BusID], byBDF[n.RDMA[j].BusID])
		}
	}
	n.PCIFunctions = map[string]PCIFunction{}
	addFn := func(path []string) {
		for _, b := range path {
			if f := byBDF[b]; f != nil {
				cls := ""
				if f.classKnown {
					cls = fmt.Sprintf("0x%06x", f.class)
				}
				n.PCIFunctions[b] = PCIFunction{BusID: b, Class: cls, Vendor: f.vendor, Device: f.device,
					SubsystemVendor: f.subVendor, SubsystemDevice: f.subDevice, LinkSpeed: f.speed, LinkWidth: f.width, NUMANode: f.numa}
			}
		}
	}
	for _, g := range n.GPUs {
		addFn(g.PCIPath)
	}
	for _, d := range n.RDMA {
		addFn(d.PCIPath)
	}
}

// nearestNICs sets each GPU's nearest RDMA devices: by PCIe distance, or by
// the platform's own NCCL topology file where it pairs GPUs and NICs that
// sysfs shows only across host bridges (a VM's flat bus).
func nearestNICs(n *Node) {
	for i := range n.GPUs {
		best := PathUnknown
		var names []string
		for _, d := range n.RDMA {
			p := d.GPUPaths[i]
			if p == PathUnknown {
				continue
			}
			if best == PathUnknown || p < best {
				best, names = p, []string{d.Name}
			} else if p == best {
				names = append(names, d.Name)
			}
		}
		n.GPUs[i].NearestPath = best
		n.GPUs[i].NearestNICs = nonNil(names)
		n.GPUs[i].NearestFrom = "sysfs"
		if len(names) == 0 {
			n.GPUs[i].NearestFrom = ""
		}
		if pt := n.platformTopo; pt != nil && best > PathPXB {
			if nics := pt.nicsFor(n, n.GPUs[i].BusID); len(nics) > 0 {
				n.GPUs[i].NearestNICs, n.GPUs[i].NearestPath = nics, PathPIX
				n.GPUs[i].NearestFrom = "NCCL_TOPO_FILE " + pt.Path
			}
		}
	}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// readPCI resolves every /sys/bus/pci/devices link into its path below
// /sys/devices and reads the attributes topo needs. An entry that is not a
// PCI address or whose link dangles is left out with a note; every other
// function is kept with what could be read.
//
// procfs's PciDevices is not used here: it keeps one parent level only (the
// switch hierarchy is the point), and one device with an old-style
// current_link_speed ("8 GT/s", kernels ≤5.6, common in cloud VMs) fails the
// whole call.
func readPCI(n *Node, sysDir string) []*pciFn {
	pciDir := filepath.Join(sysDir, "bus/pci/devices")
	ents, err := os.ReadDir(pciDir)
	if err != nil {
		n.degrade("pci", "%s: %v: no PCI function is known", pciDir, err)
		return nil
	}
	devRoot, err := filepath.EvalSymlinks(filepath.Join(sysDir, "devices"))
	if err != nil {
		devRoot = filepath.Join(sysDir, "devices")
	}
	out := make([]*pciFn, 0, len(ents))
	for _, e := range ents {
		p := filepath.Join(pciDir, e.Name())
		bdf := strings.ToLower(e.Name())
		if !bdfRe().MatchString(bdf) {
			n.degrade(e.Name(), "%s: not a PCI address (want DDDD:BB:DD.F): left out", p)
			continue
		}
		real, err := filepath.EvalSymlinks(p)
		if err != nil || !isDir(real) {
			n.degrade(bdf, "%s: dangling link or not a directory: left out", p)
			continue
		}
		f := &pciFn{bdf: bdf}
		var note string
		if f.host, f.path, note = pciPlacement(devRoot, real, bdf); note != "" {
			n.degrade(bdf, "%s", note)
		}
		readFnAttrs(n, f, real)
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].bdf < out[j].bdf })
	return out
}

func readTrim(p string) (string, error) {
	b, err := os.ReadFile(p)
	return strings.TrimSpace(string(b)), err
}

// pciPath classifies the PCIe relation of two functions as nvidia-smi does.
// Two functions that share a root port are below a common bridge: PIX when
// each hangs at most one bridge (a switch's downstream port) below the
// deepest shared function, PXB otherwise. Sharing only the host bridge is PHB;
// different host bridges are NODE within one NUMA node and SYS across (or
// when a NUMA node is unknown, as in VMs).
func pciPath(a, b *pciFn) PathType {
	if a == nil || b == nil {
		return PathUnknown
	}
	if a.bdf == b.bdf {
		return PathSelf
	}
	if a.host != b.host {
		if a.numa != nil && b.numa != nil && *a.numa == *b.numa {
			return PathNODE
		}
		return PathSYS
	}
	c := 0
	for c < len(a.path)-1 && c < len(b.path)-1 && a.path[c] == b.path[c] {
		c++
	}
	if c == 0 {
		return PathPHB
	}
	// Below the deepest shared bridge, count the bridges on each side.
	ra, rb := len(a.path)-1-c, len(b.path)-1-c
	if ra <= 1 && rb <= 1 {
		return PathPIX
	}
	return PathPXB
}

func gpuLink(n *Node, i, j int, byBDF map[string]*pciFn, anc map[[2]int]PathType) Link {
	if i == j {
		return Link{Type: PathSelf}
	}
	gi, gj := n.GPUs[i], n.GPUs[j]
	direct, viaI, viaJ := 0, 0, 0
	for _, l := range gi.NVLinks {
		// A link whose remote is the other GPU is direct whatever type NVML
		// gave it (older drivers lack nvmlDeviceGetNvLinkRemoteDeviceType).
		if l.RemoteBusID == gj.BusID {
			direct += l.Count
		} else if l.RemoteType != "gpu" {
			viaI += l.Count
		}
	}
	for _, l := range gj.NVLinks {
		if l.RemoteType != "gpu" {
			viaJ += l.Count
		}
	}
	if c := direct + min(viaI, viaJ); c > 0 {
		return Link{Type: PathNVLink, NVLinks: c}
	}
	if p, ok := anc[[2]int{i, j}]; ok && p != PathUnknown {
		return Link{Type: p}
	}
	return Link{Type: pciPath(byBDF[gi.BusID], byBDF[gj.BusID])}
}

// mergeNVML fills the GPUs' NVML facts, matched to sysfs by bus id, and
// orders them by NVML index. A device NVML cannot describe keeps its sysfs
// facts; what NVML did not answer is recorded in Node.Degraded.
func mergeNVML(n *Node, src NVMLSource, byBDF map[string]*pciFn, anc map[[2]int]PathType) {
	count, err := src.DeviceCount()
	if err != nil {
		n.degrade("nvml", "%s: device count: %v: GPUs from sysfs only", src.Kind(), err)
		return
	}
	bySys := map[string]GPU{}
	for _, g := range n.GPUs {
		bySys[g.BusID] = g
	}
	var gpus []GPU
	var devs []NVMLDevice
	for i := 0; i < count; i++ {
		d, err := src.Device(i)
		if err != nil {
			n.degrade("nvml", "%s: device %d: %v: left out", src.Kind(), i, err)
			continue
		}
		raw, err := d.PCIBusID()
		if err != nil {
			n.degrade("nvml", "%s: device %d: bus id: %v: not matched to sysfs, left out", src.Kind(), i, err)
			continue
		}
		bus, err := NormalizeBusID(raw)
		if err != nil {
			n.degrade("nvml", "%s: device %d: %v: not matched to sysfs, left out", src.Kind(), i, err)
			continue
		}
		g, ok := bySys[bus]
		if !ok {
			if _, dup := byBusID(gpus, bus); dup {
				n.degrade(bus, "%s lists bus id %s twice (device %d): the second is left out", src.Kind(), bus, i)
				continue
			}
			n.Notes = append(n.Notes, fmt.Sprintf("GPU %d (%s) is known to NVML but not in sysfs: its PCIe placement is unknown", i, bus))
			g = GPU{BusID: bus, PCIPath: []string{}, LocalCPUs: CPUList{}, NearestNICs: []string{}}
		}
		delete(bySys, bus)
		g.Index = len(gpus)
		nvmlFacts(n, &g, d, src.Kind(), i)
		gpus = append(gpus, g)
		devs = append(devs, d)
	}
	var left []string
	for bus := range bySys {
		left = append(left, bus)
	}
	sort.Strings(left)
	for _, bus := range left {
		n.Notes = append(n.Notes, fmt.Sprintf("GPU %s is in sysfs but NVML does not list it (driver not bound, or hidden from this process)", bus))
	}
	n.GPUs = nonNilGPUs(gpus)
	for i := range devs {
		for j := range devs {
			if i != j {
				if p, err := devs[i].CommonAncestor(devs[j]); err == nil {
					anc[[2]int{i, j}] = p
				}
			}
		}
	}
}

func nonNilGPUs(g []GPU) []GPU {
	if g == nil {
		return []GPU{}
	}
	return g
}

func byBusID(gpus []GPU, bus string) (int, bool) {
	for i, g := range gpus {
		if g.BusID == bus {
			return i, true
		}
	}
	return -1, false
}

// nvmlFacts copies one device's NVML answers onto g.
func nvmlFacts(n *Node, g *GPU, d NVMLDevice, kind string, i int) {
	if v, err := d.UUID(); err == nil {
		g.UUID = v
	}
	if v, err := d.Name(); err == nil && v != "" {
		g.Name = v
	}
	if v, err := d.Architecture(); err == nil && v != "" {
		g.Arch = v
	}
	if ma, mi, err := d.ComputeCapability(); err == nil && ma > 0 {
		g.SM = ma*10 + mi
	}
	if v, err := d.MemoryBytes(); err == nil {
		g.MemoryBytes = v
	}
	if links, err := d.NVLinks(); err != nil {
		n.degrade(g.BusID, "%s: device %d: NVLinks: %v: NVLink peers unknown", kind, i, err)
	} else {
		g.NVLinks = links
	}
	if f, err := d.Fabric(); err == nil {
		g.Fabric = f
	}
}

// readRDMA reads /sys/class/infiniband: each device's PCI function, its
// ports (state, phys_state, rate, link_layer), netdevs and GID table.
//
// A device that cannot be tied to a PCI function (a software RDMA device
// such as rxe0) is skipped with a note; a device with unreadable port
// attributes is kept with what could be read (procfs's InfiniBandDevice, used
// before, failed the whole device on one missing attribute).
func readRDMA(n *Node, sysDir string, byBDF map[string]*pciFn) []RDMADevice {
	cls := filepath.Join(sysDir, "class/infiniband")
	ents, err := os.ReadDir(cls)
	if errors.Is(err, os.ErrNotExist) {
		return []RDMADevice{}
	}
	if err != nil {
		n.degrade("rdma", "%s: %v: no RDMA device is known", cls, err)
		return []RDMADevice{}
	}
	out := []RDMADevice{}
	for _, e := range ents {
		name := e.Name()
		devLink := filepath.Join(cls, name, "device")
		real, err := filepath.EvalSymlinks(devLink)
		if err != nil {
			n.Notes = append(n.Notes, fmt.Sprintf("RDMA device %s skipped: %s: no PCI device (software RDMA?)", name, devLink))
			continue
		}
		bdf := pciAncestor(real)
		f := byBDF[bdf]
		if f == nil {
			n.Notes = append(n.Notes, fmt.Sprintf("RDMA device %s skipped: %s resolves to %s, not a PCI function", name, devLink, real))
			continue
		}
		info := nicTable[f.vendor+":"+f.device]
		cl := ""
		if f.classKnown {
			cl = fmt.Sprintf("0x%06x", f.class)
		}
		d := RDMADevice{
			Name: name, BusID: bdf, Vendor: f.vendor, PCIDevice: f.device, PCIClass: cl,
			Product: info, NUMANode: f.numa, LocalCPUs: nonNilCPUs(f.localCPUs),
			LinkSpeed: f.speed, LinkWidth: f.width, PCIPath: f.path, HostBridge: f.host, Role: RoleUnknown,
		}
		if g, why := readAttr(filepath.Join(cls, name), "node_guid"); why == "" {
			d.NodeGUID = g
		}
		d.Ports = readPorts(n, filepath.Join(cls, name), real, name)
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return naturalLess(out[i].Name, out[j].Name) })
	return out
}

// pciAncestor returns the nearest path component that is a PCI address
// (an RDMA device on a sub-function or virtio device sits below one).
func pciAncestor(p string) string {
	for p != "/" && p != "." {
		if b := filepath.Base(p); bdfRe().MatchString(b) {
			return b
		}
		p = filepath.Dir(p)
	}
	return ""
}

func listDir(p string) []string {
	ents, err := os.ReadDir(p)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// portNetDev finds the netdev of a port: gid_attrs/ndevs/0 on RoCE, else the
// PCI function's net/ entry whose dev_port matches, else the k-th one.
func portNetDev(pdir, fnDir string, netdevs []string, k int) string {
	if s, err := readTrim(filepath.Join(pdir, "gid_attrs/ndevs/0")); err == nil && s != "" {
		return s
	}
	if len(netdevs) == 1 {
		return netdevs[0]
	}
	for _, nd := range netdevs {
		if s, err := readTrim(filepath.Join(fnDir, "net", nd, "dev_port")); err == nil && s == strconv.Itoa(k) {
			return nd
		}
	}
	if k < len(netdevs) {
		return netdevs[k]
	}
	return ""
}

// roceV2GID returns the lowest GID index whose type is "RoCE v2" and whose
// GID is IPv4-mapped (::ffff:a.b.c.d), as NCCL's auto-selection (2.21+) and
// the usual scripts pick it. Unset entries (zero GIDs, unreadable types) are
// skipped.
func roceV2GID(pdir string) (*int, string) {
	ids := listDir(filepath.Join(pdir, "gids"))
	var idx []int
	for _, s := range ids {
		if v, err := strconv.Atoi(s); err == nil {
			idx = append(idx, v)
		}
	}
	sort.Ints(idx)
	for _, i := range idx {
		gid, err := readTrim(filepath.Join(pdir, "gids", strconv.Itoa(i)))
		if err != nil || !strings.HasPrefix(gid, "0000:0000:0000:0000:0000:ffff:") {
			continue
		}
		typ, err := readTrim(filepath.Join(pdir, "gid_attrs/types", strconv.Itoa(i)))
		if err != nil || !strings.EqualFold(typ, "RoCE v2") {
			continue
		}
		h := strings.ReplaceAll(strings.TrimPrefix(gid, "0000:0000:0000:0000:0000:ffff:"), ":", "")
		v, err := strconv.ParseUint(h, 16, 32)
		if err != nil {
			continue
		}
		ip := netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
		i := i
		return &i, ip.String()
	}
	return nil, ""
}

// naturalLess orders names with digit runs compared as numbers: mlx5_2
// before mlx5_10, rdmap16s27 before rdmap144s27.
func naturalLess(a, b string) bool {
	for a != "" && b != "" {
		da, db := digitRun(a), digitRun(b)
		if da > 0 && db > 0 {
			x, _ := strconv.ParseUint(a[:da], 10, 64)
			y, _ := strconv.ParseUint(b[:db], 10, 64)
			if x != y {
				return x < y
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return a[0] < b[0]
		}
		a, b = a[1:], b[1:]
	}
	return len(a) < len(b)
}

func digitRun(s string) int {
	i := 0
	for i < len(s) && i < 18 && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}

// readNUMA reads the NUMA nodes' CPU lists. A memory-only node (Grace
// Blackwell exposes each GPU's memory as CPU-less nodes) has an empty list;
// a node whose cpulist cannot be read is kept with an empty list and a note.
func readNUMA(n *Node, sysDir string) []NUMANode {
	dir := filepath.Join(sysDir, "devices/system/node")
	out := []NUMANode{}
	for _, name := range listDir(dir) {
		id, err := strconv.Atoi(strings.TrimPrefix(name, "node"))
		if err != nil || !strings.HasPrefix(name, "node") {
			continue
		}
		p := filepath.Join(dir, name, "cpulist")
		cpus := CPUList{}
		if b, err := os.ReadFile(p); err != nil {
			n.degrade("numa", "%s: %v: node %d's CPUs unknown", p, err, id)
		} else if l, err := ParseCPUList(string(b)); err != nil {
			n.degrade("numa", "%s: %v: node %d's CPUs unknown", p, err, id)
		} else {
			cpus = l
		}
		out = append(out, NUMANode{ID: id, CPUs: cpus})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func readCPUInfo(p string) CPUInfo {
	var c CPUInfo
	f, err := os.Open(p)
	if err != nil {
		return c
	}
	defer f.Close()
	sockets := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch k {
		case "processor":
			if i, err := strconv.Atoi(v); err == nil && i+1 > c.NumCPUs {
				c.NumCPUs = i + 1
			}
		case "vendor_id":
			c.Vendor = v
		case "cpu family":
			c.Family, _ = strconv.Atoi(v)
		case "model":
			c.Model, _ = strconv.Atoi(v)
		case "model name":
			c.ModelStr = v
		case "physical id":
			sockets[v] = true
		case "CPU implementer":
			c.Arch = "arm64"
		}
	}
	c.Sockets = len(sockets)
	if c.Arch == "" && (c.Vendor == "GenuineIntel" || c.Vendor == "AuthenticAMD") {
		c.Arch = "x86_64"
	}
	return c
}

func readHostname(root string) string {
	for _, p := range []string{"proc/sys/kernel/hostname", "etc/hostname"} {
		if s, err := readTrim(filepath.Join(root, p)); err == nil && s != "" {
			return s
		}
	}
	return ""
}

// readNetIfs reads /sys/class/net and the IPv4 addresses: from the live
// interfaces when root is "/", else from root/proc/net/fib_trie (the LOCAL
// entries) and root/proc/net/route (which subnet is on which interface).
// Without fib_trie (containers and some captures hide it) the addresses are
// unknown and Node.Routes still says which subnet is on which interface.
//
// procfs's NetClass is not used: it reads some thirty attributes per
// interface where three are needed, and does not resolve the device link.
func readNetIfs(n *Node, root, sysDir string) []NetInterface {
	cls := filepath.Join(sysDir, "class/net")
	routePath := filepath.Join(root, "proc/net/route")
	n.Routes = readRoutes(routePath)
	addrs := map[string][]string{}
	if root == "/" {
		ifs, _ := net.Interfaces()
		for _, i := range ifs {
			as, _ := i.Addrs()
			for _, a := range as {
				if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil {
					addrs[i.Name] = append(addrs[i.Name], ipn.String())
				}
			}
		}
	} else {
		triePath := filepath.Join(root, "proc/net/fib_trie")
		b, err := os.ReadFile(triePath)
		if err != nil {
			n.degrade("net", "%s: %v: interface addresses unknown; the node's address is matched to an interface by the subnets in %s instead", triePath, errShort(err), routePath)
		}
		addrs = fibAddrs(b, n.Routes)
	}
	out := []NetInterface{}
	for _, name := range listDir(cls) {
		p := filepath.Join(cls, name)
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			n.degrade(name, "%s: dangling link: interface left out", p)
			continue
		}
		if !isDir(real) { // bonding_masters is a file in /sys/class/net
			continue
		}
		ni := NetInterface{Name: name, Role: RoleUnknown, IPv4: addrs[name]}
		ni.OperState, _ = readTrim(filepath.Join(real, "operstate"))
		if s, err := readTrim(filepath.Join(real, "speed")); err == nil {
			if v, err := strconv.Atoi(s); err == nil && v > 0 {
				ni.SpeedMbps = v
			}
		}
		typ, _ := readTrim(filepath.Join(real, "type"))
		switch {
		case typ == "772":
			ni.Kind = NetLoopback
		case isDir(filepath.Join(real, "bridge")):
			ni.Kind = NetBridge
		case isDir(filepath.Join(real, "bonding")):
			ni.Kind = NetBond
		case strings.Contains(real, string(filepath.Separator)+"virtual"+string(filepath.Separator)):
			ni.Kind = NetVirtual
		case typ == "32":
			ni.Kind = NetIPoIB
		default:
			ni.Kind = NetPhysical
		}
		if dev, err := filepath.EvalSymlinks(filepath.Join(real, "device")); err == nil {
			ni.BusID = pciAncestor(dev)
		}
		out = append(out, ni)
	}
	return out
}

func errShort(err error) string {
	if errors.Is(err, os.ErrNotExist) {
		return "missing"
	}
	return err.Error()
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

// fibAddrs reads the LOCAL entries of /proc/net/fib_trie and puts each
// address on the interface whose route holds it (longest prefix).
func fibAddrs(b []byte, routes []Route) map[string][]string {
	out := map[string][]string{}
	if len(b) == 0 {
		return out
	}
	lines := strings.Split(string(b), "\n")
	seen := map[string]bool{}
	for i := 0; i+1 < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		a, ok := strings.CutPrefix(l, "|-- ")
		if !ok || !strings.Contains(lines[i+1], "/32 host LOCAL") {
			continue
		}
		ip, err := netip.ParseAddr(a)
		if err != nil || seen[a] {
			continue
		}
		seen[a] = true
		if ip.IsLoopback() {
			out["lo"] = append(out["lo"], a+"/8")
			continue
		}
		if r := routeFor(routes, ip); r != nil {
			out[r.Iface] = append(out[r.Iface], netip.PrefixFrom(ip, r.Prefix.Bits()).String())
		}
	}
	return out
}
