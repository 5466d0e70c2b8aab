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

	"github.com/prometheus/procfs/sysfs"
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
	bdf       string
	class     uint32 // 24-bit class code, 0x030200
	vendor    string // 0x10de
	device    string
	subVendor string
	subDevice string
	numa      *int
	localCPUs CPUList
	speed     string
	width     int
	host      string   // pci0000:15
	path      []string // functions from the root port down to this one
}

// bdfRe matches a PCI function name. Domains may be longer than four digits:
// Intel VMD puts NVMe drives in domains such as 10000.
var bdfRe = regexp.MustCompile(`^[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$`)

// Discover reads one node. Errors name the file and what to do.
func Discover(opts Options) (*Node, error) {
	root := opts.Root
	if root == "" {
		root = "/"
	}
	sysDir := filepath.Join(root, "sys")
	pciDir := filepath.Join(sysDir, "bus/pci/devices")
	if st, err := os.Stat(pciDir); err != nil || !st.IsDir() {
		why := "missing"
		if err == nil {
			why = "not a directory"
		}
		return nil, fmt.Errorf("%s: not a sysfs tree (%s); pass the root of a captured machine, the directory that holds sys/", pciDir, why)
	}
	n := &Node{Root: root, Source: "sysfs", NUMANodes: []NUMANode{}, GPUs: []GPU{}, RDMA: []RDMADevice{}, NetIfs: []NetInterface{}}
	fns, err := readPCI(sysDir)
	if err != nil {
		return nil, err
	}
	byBDF := map[string]*pciFn{}
	for _, f := range fns {
		byBDF[f.bdf] = f
	}
	if n.NUMANodes, err = readNUMA(sysDir); err != nil {
		return nil, err
	}
	n.CPU = readCPUInfo(filepath.Join(root, "proc/cpuinfo"))
	n.Hostname = readHostname(root)

	// GPUs and NVSwitches, in bus order (what CUDA_DEVICE_ORDER=PCI_BUS_ID gives).
	var gpuFns []*pciFn
	for _, f := range fns {
		cls := f.class >> 8
		switch {
		case f.vendor == "0x10de" && (cls == 0x0300 || cls == 0x0302):
			gpuFns = append(gpuFns, f)
		case f.vendor == "0x10de" && cls == 0x0680:
			n.NVSwitches = append(n.NVSwitches, NVSwitch{BusID: f.bdf, PCIDevice: f.device, NUMANode: f.numa})
		}
	}
	for i, f := range gpuFns {
		info := gpuTable[f.device]
		n.GPUs = append(n.GPUs, GPU{
			Index: i, Name: info.name, Arch: info.arch, SM: info.sm, BusID: f.bdf, PCIDevice: f.device,
			PCIClass: fmt.Sprintf("0x%06x", f.class), NUMANode: f.numa, LocalCPUs: f.localCPUs,
			LinkSpeed: f.speed, LinkWidth: f.width, PCIPath: f.path, HostBridge: f.host,
		})
	}

	src := opts.NVML
	if src == nil && root != "/" {
		rec, err := LoadRecordedNVML(root)
		if err != nil {
			return nil, err
		}
		if rec != nil {
			src = rec
		}
	}
	nvmlAncestors := map[[2]int]PathType{}
	if src != nil {
		if err := mergeNVML(n, src, byBDF, nvmlAncestors); err != nil {
			return nil, err
		}
		n.Source = src.Kind() + "+sysfs"
	} else {
		n.NVLinkUnavailable = opts.NVMLUnavailable
		if n.NVLinkUnavailable == "" {
			n.NVLinkUnavailable = "no NVML source (the tree carries no nvml.json): NVLink, UUIDs and memory come only from NVML"
		}
	}

	// The GPU matrix.
	n.GPULinks = make([][]Link, len(n.GPUs))
	for i := range n.GPUs {
		n.GPULinks[i] = make([]Link, len(n.GPUs))
		for j := range n.GPUs {
			n.GPULinks[i][j] = gpuLink(n, i, j, byBDF, nvmlAncestors)
		}
	}

	var rdmaNotes []string
	if n.RDMA, rdmaNotes, err = readRDMA(sysDir, byBDF); err != nil {
		return nil, err
	}
	n.Notes = append(n.Notes, rdmaNotes...)
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
				n.PCIFunctions[b] = PCIFunction{BusID: b, Class: fmt.Sprintf("0x%06x", f.class), Vendor: f.vendor, Device: f.device,
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
	}

	if n.NetIfs, err = readNetIfs(root, sysDir); err != nil {
		return nil, err
	}
	assignRoles(n)
	if len(n.NUMANodes) == 0 {
		n.Notes = append(n.Notes, "no NUMA nodes in "+filepath.Join(sysDir, "devices/system/node")+": affinity unknown")
	}
	return n, nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// readPCI resolves every /sys/bus/pci/devices link into its path below
// /sys/devices and reads the attributes topo needs.
//
// procfs's PciDevices is not used here: it keeps one parent level only (the
// switch hierarchy is the point), and one device with an old-style
// current_link_speed ("8 GT/s", kernels ≤5.6, common in cloud VMs) fails the
// whole call.
func readPCI(sysDir string) ([]*pciFn, error) {
	pciDir := filepath.Join(sysDir, "bus/pci/devices")
	ents, err := os.ReadDir(pciDir)
	if err != nil {
		return nil, err
	}
	devRoot, err := filepath.EvalSymlinks(filepath.Join(sysDir, "devices"))
	if err != nil {
		return nil, fmt.Errorf("%s: %w; pass the root of a captured machine, the directory that holds sys/", filepath.Join(sysDir, "devices"), err)
	}
	var out []*pciFn
	for _, e := range ents {
		p := filepath.Join(pciDir, e.Name())
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			return nil, fmt.Errorf("%s: dangling link: %w", p, err)
		}
		rel, err := filepath.Rel(devRoot, real)
		if err != nil || strings.HasPrefix(rel, "..") {
			return nil, fmt.Errorf("%s: resolves to %s, outside %s", p, real, devRoot)
		}
		parts := strings.Split(rel, string(filepath.Separator))
		f := &pciFn{bdf: strings.ToLower(e.Name())}
		if !bdfRe.MatchString(f.bdf) {
			return nil, fmt.Errorf("%s: not a PCI address (want DDDD:BB:DD.F)", p)
		}
		if len(parts) < 2 || !strings.HasPrefix(parts[0], "pci") {
			return nil, fmt.Errorf("%s: resolves to %s, which is not under a pciDDDD:BB host bridge", p, real)
		}
		f.host = parts[0]
		for _, c := range parts[1:] {
			if bdfRe.MatchString(c) {
				f.path = append(f.path, c)
			}
		}
		cls, err := readHex(real, "class")
		if err != nil {
			return nil, err
		}
		f.class = uint32(cls)
		if f.vendor, err = readHexStr(real, "vendor", 4); err != nil {
			return nil, err
		}
		if f.device, err = readHexStr(real, "device", 4); err != nil {
			return nil, err
		}
		f.subVendor, _ = readHexStr(real, "subsystem_vendor", 4)
		f.subDevice, _ = readHexStr(real, "subsystem_device", 4)
		if s, err := readTrim(filepath.Join(real, "numa_node")); err == nil {
			v, err := strconv.Atoi(s)
			if err != nil {
				return nil, fmt.Errorf("%s/numa_node: %q is not a number", real, s)
			}
			if v >= 0 {
				f.numa = &v
			}
		}
		if s, err := readTrim(filepath.Join(real, "local_cpulist")); err == nil {
			if f.localCPUs, err = ParseCPUList(s); err != nil {
				return nil, fmt.Errorf("%s/local_cpulist: %w", real, err)
			}
		}
		f.speed, _ = readTrim(filepath.Join(real, "max_link_speed"))
		if w, err := readTrim(filepath.Join(real, "max_link_width")); err == nil {
			f.width, _ = strconv.Atoi(w)
		}
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].bdf < out[j].bdf })
	return out, nil
}

func readTrim(p string) (string, error) {
	b, err := os.ReadFile(p)
	return strings.TrimSpace(string(b)), err
}

func readHex(dir, name string) (uint64, error) {
	p := filepath.Join(dir, name)
	s, err := readTrim(p)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", p, err)
	}
	v, err := strconv.ParseUint(strings.TrimPrefix(s, "0x"), 16, 32)
	if err != nil {
		return 0, fmt.Errorf("%s: %q is not a hex number", p, s)
	}
	return v, nil
}

func readHexStr(dir, name string, digits int) (string, error) {
	v, err := readHex(dir, name)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("0x%0*x", digits, v), nil
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
// orders them by NVML index.
func mergeNVML(n *Node, src NVMLSource, byBDF map[string]*pciFn, anc map[[2]int]PathType) error {
	count, err := src.DeviceCount()
	if err != nil {
		return fmt.Errorf("%s: device count: %w", src.Kind(), err)
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
			return fmt.Errorf("%s: device %d: %w", src.Kind(), i, err)
		}
		raw, err := d.PCIBusID()
		if err != nil {
			return fmt.Errorf("%s: device %d: bus id: %w", src.Kind(), i, err)
		}
		bus, err := NormalizeBusID(raw)
		if err != nil {
			return fmt.Errorf("%s: device %d: %w", src.Kind(), i, err)
		}
		g, ok := bySys[bus]
		if !ok {
			n.Notes = append(n.Notes, fmt.Sprintf("GPU %d (%s) is known to NVML but not in sysfs: its PCIe placement is unknown", i, bus))
			g = GPU{BusID: bus, PCIPath: []string{}, LocalCPUs: CPUList{}}
		}
		delete(bySys, bus)
		g.Index = i
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
		links, err := d.NVLinks()
		if err != nil {
			return fmt.Errorf("%s: device %d: NVLinks: %w", src.Kind(), i, err)
		}
		g.NVLinks = links
		if f, err := d.Fabric(); err == nil {
			g.Fabric = f
		}
		gpus = append(gpus, g)
		devs = append(devs, d)
	}
	for bus := range bySys {
		n.Notes = append(n.Notes, fmt.Sprintf("GPU %s is in sysfs but NVML does not list it (driver not bound, or hidden from this process)", bus))
	}
	n.GPUs = gpus
	for i := range devs {
		for j := range devs {
			if i != j {
				if p, err := devs[i].CommonAncestor(devs[j]); err == nil {
					anc[[2]int{i, j}] = p
				}
			}
		}
	}
	return nil
}

// readRDMA reads /sys/class/infiniband. Ports come from procfs's
// InfiniBandDevice (state, phys_state, rate, link_layer); the PCI function,
// the netdevs and the GID table are read here because procfs does not.
//
// A device that cannot be read (a software RDMA device such as rxe0 with no
// PCI function, a driver that omits a port attribute) is skipped with a note
// naming the file, so one odd device does not hide the rest of the node.
func readRDMA(sysDir string, byBDF map[string]*pciFn) ([]RDMADevice, []string, error) {
	var notes []string
	cls := filepath.Join(sysDir, "class/infiniband")
	ents, err := os.ReadDir(cls)
	if errors.Is(err, os.ErrNotExist) {
		return []RDMADevice{}, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	fs, err := sysfs.NewFS(sysDir)
	if err != nil {
		return nil, nil, err
	}
	out := []RDMADevice{}
	for _, e := range ents {
		name := e.Name()
		devLink := filepath.Join(cls, name, "device")
		real, err := filepath.EvalSymlinks(devLink)
		if err != nil {
			notes = append(notes, fmt.Sprintf("RDMA device %s skipped: %s: no PCI device (software RDMA?)", name, devLink))
			continue
		}
		bdf := pciAncestor(real)
		f := byBDF[bdf]
		if f == nil {
			notes = append(notes, fmt.Sprintf("RDMA device %s skipped: %s resolves to %s, not a PCI function", name, devLink, real))
			continue
		}
		ib, err := fs.InfiniBandDevice(name)
		if err != nil {
			notes = append(notes, fmt.Sprintf("RDMA device %s skipped: %s: %v", name, filepath.Join(cls, name), err))
			continue
		}
		info := nicTable[f.vendor+":"+f.device]
		d := RDMADevice{
			Name: name, BusID: bdf, Vendor: f.vendor, PCIDevice: f.device, PCIClass: fmt.Sprintf("0x%06x", f.class),
			Product: info, NodeGUID: ib.NodeGUID, NUMANode: f.numa, LocalCPUs: f.localCPUs,
			LinkSpeed: f.speed, LinkWidth: f.width, PCIPath: f.path, HostBridge: f.host, Role: RoleUnknown,
		}
		netdevs := listDir(filepath.Join(real, "net"))
		var nums []int
		for num := range ib.Ports {
			nums = append(nums, int(num))
		}
		sort.Ints(nums)
		for k, num := range nums {
			p := ib.Ports[uint(num)]
			port := RDMAPort{Number: num, LinkLayer: p.LinkLayer, State: p.State, PhysState: p.PhysState,
				RateGbps: float64(p.Rate) * 8 / 1e9}
			pdir := filepath.Join(cls, name, "ports", strconv.Itoa(num))
			port.NetDev = portNetDev(pdir, real, netdevs, k)
			if p.LinkLayer == "Ethernet" {
				port.RoCEv2GIDIndex, port.RoCEv2IPv4 = roceV2GID(pdir)
			}
			d.Ports = append(d.Ports, port)
		}
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return naturalLess(out[i].Name, out[j].Name) })
	return out, notes, nil
}

// pciAncestor returns the nearest path component that is a PCI address
// (an RDMA device on a sub-function or virtio device sits below one).
func pciAncestor(p string) string {
	for p != "/" && p != "." {
		if b := filepath.Base(p); bdfRe.MatchString(b) {
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

func readNUMA(sysDir string) ([]NUMANode, error) {
	dir := filepath.Join(sysDir, "devices/system/node")
	out := []NUMANode{}
	for _, name := range listDir(dir) {
		id, err := strconv.Atoi(strings.TrimPrefix(name, "node"))
		if err != nil || !strings.HasPrefix(name, "node") {
			continue
		}
		p := filepath.Join(dir, name, "cpulist")
		s, err := readTrim(p)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		cpus, err := ParseCPUList(s)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		out = append(out, NUMANode{ID: id, CPUs: cpus})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
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
//
// procfs's NetClass is not used: it reads some thirty attributes per
// interface where three are needed, and does not resolve the device link.
func readNetIfs(root, sysDir string) ([]NetInterface, error) {
	cls := filepath.Join(sysDir, "class/net")
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
		addrs = readFibAddrs(filepath.Join(root, "proc/net/fib_trie"), filepath.Join(root, "proc/net/route"))
	}
	out := []NetInterface{}
	for _, name := range listDir(cls) {
		p := filepath.Join(cls, name)
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
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
	return out, nil
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

func readFibAddrs(triePath, routePath string) map[string][]string {
	out := map[string][]string{}
	b, err := os.ReadFile(triePath)
	if err != nil {
		return out
	}
	type route struct {
		ifname string
		pfx    netip.Prefix
	}
	var routes []route
	if rb, err := os.ReadFile(routePath); err == nil {
		for _, line := range strings.Split(string(rb), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) < 8 {
				continue
			}
			dst, e1 := strconv.ParseUint(f[1], 16, 32)
			mask, e2 := strconv.ParseUint(f[7], 16, 32)
			if e1 != nil || e2 != nil {
				continue
			}
			le := func(v uint64) [4]byte { return [4]byte{byte(v), byte(v >> 8), byte(v >> 16), byte(v >> 24)} }
			m := le(mask)
			bits := 0
			for _, x := range m {
				for x&0x80 != 0 {
					bits++
					x <<= 1
				}
			}
			routes = append(routes, route{f[0], netip.PrefixFrom(netip.AddrFrom4(le(dst)), bits)})
		}
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
		best := -1
		for k, r := range routes {
			if r.pfx.Contains(ip) && (best < 0 || r.pfx.Bits() > routes[best].pfx.Bits()) && r.pfx.Bits() > 0 {
				best = k
			}
		}
		if best >= 0 {
			out[routes[best].ifname] = append(out[routes[best].ifname], netip.PrefixFrom(ip, routes[best].pfx.Bits()).String())
		}
	}
	return out
}
