package snapshot

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// RecordedNVMLFile is where a captured tree keeps NVML's answers, relative to
// the tree's root (next to sys/, proc/, etc/). The format is RecordedNVML.
const RecordedNVMLFile = "nvml.json"

// RecordedNVML is NVML's answers for a machine, as a capture stores them.
type RecordedNVML struct {
	DriverVersion string        `json:"driver_version"`
	Note          string        `json:"note,omitempty"`
	GPUs          []RecordedGPU `json:"gpus"`
}

// RecordedGPU is one device's answers. BusID is in NVML's form
// ("00000000:18:00.0"), as nvmlDeviceGetPciInfo returns it.
type RecordedGPU struct {
	Index        int              `json:"index"`
	UUID         string           `json:"uuid"`
	Name         string           `json:"name"`
	Arch         string           `json:"arch"`
	SM           int              `json:"sm"`
	MemoryBytes  uint64           `json:"memory_bytes"`
	BusID        string           `json:"bus_id"`
	NVLinks      []RecordedNVLink `json:"nvlinks,omitempty"`
	FabricUUID   string           `json:"fabric_cluster_uuid,omitempty"`
	FabricClique uint32           `json:"fabric_clique_id,omitempty"`
	FabricState  string           `json:"fabric_state,omitempty"`
}

// RecordedNVLink is the links from a GPU to one remote endpoint.
type RecordedNVLink struct {
	RemoteBusID string `json:"remote_bus_id"`
	RemoteType  string `json:"remote_type"` // gpu, nvswitch, unknown
	Count       int    `json:"count"`
}

var ibStates = map[string]int{"DOWN": 1, "INIT": 2, "ARMED": 3, "ACTIVE": 4, "ACTIVE_DEFER": 5}
var physStates = map[string]int{"Sleep": 1, "Polling": 2, "Disabled": 3, "PortConfigurationTraining": 4, "LinkUp": 5, "LinkErrorRecovery": 6}

type expander struct {
	s      *Spec
	root   string
	sys    string
	cpus   []int
	numa   map[int][]int
	addrs  map[string]int // BDF -> spec line, for duplicates
	ips    []ifAddr
	gpus   []gpuRec
	driver map[string]bool
	dirs   map[string]bool // created already: spares a MkdirAll per file
}

type ifAddr struct {
	ifname string
	prefix netip.Prefix
}

type gpuRec struct {
	bdf   string
	attrs map[string]string
}

// Expand writes the machine described by s under dir: dir/sys, dir/proc,
// dir/etc and, when the spec records NVML answers, dir/nvml.json.
func Expand(s *Spec, dir string) error {
	e := &expander{s: s, root: dir, sys: filepath.Join(dir, "sys"), numa: map[int][]int{},
		addrs: map[string]int{}, driver: map[string]bool{}, dirs: map[string]bool{}}
	if err := e.cpuSets(); err != nil {
		return err
	}
	for _, dirName := range []string{"sys/bus/pci/devices", "sys/class/infiniband", "sys/class/net", "sys/devices/system/node", "proc/sys/kernel", "proc/net", "etc"} {
		if err := os.MkdirAll(filepath.Join(dir, dirName), 0o755); err != nil {
			return err
		}
	}
	for _, h := range s.Hosts {
		// parent= puts the root bus below a non-PCI device: Hyper-V hangs
		// each PCI domain under a VMBus device.
		par := h.Attrs["parent"]
		if strings.Contains(par, "..") || strings.HasPrefix(par, "/") {
			return fmt.Errorf("spec %s line %d: parent=%q: want a path below sys/devices", s.Name, h.Line, par)
		}
		hdir := filepath.Join(e.sys, "devices", par, h.Addr)
		if err := os.MkdirAll(hdir, 0o755); err != nil {
			return err
		}
		numa := -1
		if v, ok := h.Attrs["numa"]; ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				return fmt.Errorf("spec %s line %d: numa=%q", s.Name, h.Line, v)
			}
			numa = n
		}
		for _, c := range h.Children {
			if err := e.function(c, hdir, numa); err != nil {
				return err
			}
		}
	}
	for _, n := range s.NetIfs {
		if err := e.virtualNetIf(n); err != nil {
			return err
		}
	}
	if err := e.system(); err != nil {
		return err
	}
	if err := e.files(); err != nil {
		return err
	}
	return e.nvml()
}

// files copies the platform files (file DEST src=NAME) into the tree.
func (e *expander) files() error {
	for _, f := range e.s.Files {
		b, err := machines.ReadFile(path.Join("machines/files", f.Src))
		if err != nil {
			return fmt.Errorf("spec %s line %d: file %s: no machines/files/%s", e.s.Name, f.Line, f.Dest, f.Src)
		}
		if err := e.write(filepath.Join(e.root, f.Dest), string(b)); err != nil {
			return err
		}
	}
	return nil
}

func (e *expander) cpuSets() error {
	seen := map[int]bool{}
	for _, n := range e.s.NUMA {
		if n.CPUs == "" { // a memory-only node (Grace Blackwell GPU memory)
			e.numa[n.ID] = []int{}
			continue
		}
		l, err := parseList(n.CPUs)
		if err != nil {
			return fmt.Errorf("spec %s: numa %d: %w", e.s.Name, n.ID, err)
		}
		e.numa[n.ID] = l
		for _, c := range l {
			seen[c] = true
		}
	}
	if len(e.s.NUMA) == 0 {
		l, err := parseList(e.s.CPU["cpus"])
		if err != nil {
			return fmt.Errorf("spec %s: cpu cpus=: %w", e.s.Name, err)
		}
		for _, c := range l {
			seen[c] = true
		}
	}
	for c := range seen {
		e.cpus = append(e.cpus, c)
	}
	sort.Ints(e.cpus)
	return nil
}

func (e *expander) mkdir(dir string) error {
	if e.dirs[dir] {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	e.dirs[dir] = true
	return nil
}

func (e *expander) write(path, content string) error {
	if err := e.mkdir(filepath.Dir(path)); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(content), 0o444)
}

// link makes path a relative symlink to target, as sysfs does.
func (e *expander) link(path, target string) error {
	if err := e.mkdir(filepath.Dir(path)); err != nil {
		return err
	}
	rel, err := filepath.Rel(filepath.Dir(path), target)
	if err != nil {
		return err
	}
	return os.Symlink(rel, path)
}

func (e *expander) localCPUs(numa int) []int {
	if l, ok := e.numa[numa]; ok {
		return l
	}
	return e.cpus
}

// function writes one PCI function (and, for a switch, its downstream ports
// and everything below them) under parentDir.
func (e *expander) function(n *PCISpec, parentDir string, numa int) error {
	bdf, err := normBDF(n.Addr)
	if err != nil {
		return fmt.Errorf("spec %s line %d: %v", e.s.Name, n.Line, err)
	}
	if prev, dup := e.addrs[bdf]; dup {
		return fmt.Errorf("spec %s line %d: %s already used on line %d", e.s.Name, n.Line, bdf, prev)
	}
	e.addrs[bdf] = n.Line
	if v, ok := n.Attrs["numa"]; ok {
		if numa, err = strconv.Atoi(v); err != nil {
			return fmt.Errorf("spec %s line %d: numa=%q", e.s.Name, n.Line, v)
		}
	}
	dir := filepath.Join(parentDir, bdf)
	a := defaults(n)
	if err := e.attrs(dir, bdf, a, numa); err != nil {
		return err
	}
	switch n.Kind {
	case "gpu":
		e.gpus = append(e.gpus, gpuRec{bdf: bdf, attrs: n.Attrs})
	case "nic":
		if err := e.nic(n, dir, bdf); err != nil {
			return err
		}
	case "dev":
		if name := n.Attrs["net"]; name != "" {
			netDir := dir
			if p := n.Attrs["netparent"]; p != "" { // virtio-net: PCI fn/virtio0/net/eth0
				netDir = filepath.Join(dir, p)
				if err := e.write(filepath.Join(netDir, "uevent"), "DRIVER=virtio_net\n"); err != nil {
					return err
				}
			}
			if err := e.netdev(name, netDir, netAttrs(n.Attrs), 1, "up"); err != nil {
				return err
			}
		}
	}
	if n.Kind != "switch" {
		for _, c := range n.Children {
			if err := e.function(c, dir, numa); err != nil {
				return err
			}
		}
		return nil
	}
	// A switch: downstream port k (device k on the bus below the upstream port)
	// leads to the k-th distinct child bus.
	dom, rest, _ := strings.Cut(bdf, ":")
	upBus, _ := strconv.ParseUint(rest[:2], 16, 8)
	var buses []string
	group := map[string][]*PCISpec{}
	for _, c := range n.Children {
		cb, err := normBDF(c.Addr)
		if err != nil {
			return fmt.Errorf("spec %s line %d: %v", e.s.Name, c.Line, err)
		}
		bus := cb[:strings.LastIndex(cb, ":")]
		if _, ok := group[bus]; !ok {
			buses = append(buses, bus)
		}
		group[bus] = append(group[bus], c)
	}
	for k, bus := range buses {
		down := fmt.Sprintf("%s:%02x:%02x.0", dom, upBus+1, k)
		if prev, dup := e.addrs[down]; dup {
			return fmt.Errorf("spec %s line %d: downstream port %s of switch %s collides with line %d", e.s.Name, n.Line, down, bdf, prev)
		}
		e.addrs[down] = n.Line
		ddir := filepath.Join(dir, down)
		da := map[string]string{"class": "0x060400", "vendor": a["vendor"], "device": a["device"], "speed": a["speed"], "width": a["width"], "driver": "pcieport"}
		if err := e.attrs(ddir, down, da, numa); err != nil {
			return err
		}
		for _, c := range group[bus] {
			if err := e.function(c, ddir, numa); err != nil {
				return err
			}
		}
	}
	return nil
}

// netAttrs maps a PCI function's net keys (speed_mbps, ip, netstate) onto
// the interface's (speed is the PCIe link speed on a function line).
func netAttrs(a map[string]string) map[string]string {
	return map[string]string{"speed": a["speed_mbps"], "ip": a["ip"], "netstate": a["netstate"]}
}

func defaults(n *PCISpec) map[string]string {
	a := map[string]string{"speed": "32.0 GT/s PCIe", "width": "16", "vendor": "0x0000", "device": "0x0000", "subsystem_vendor": "0x0000", "subsystem_device": "0x0000", "revision": "0x00"}
	switch n.Kind {
	case "port", "switch":
		a["class"], a["driver"] = "0x060400", "pcieport"
	case "gpu":
		a["class"], a["vendor"], a["driver"], a["revision"] = "0x030200", "0x10de", "nvidia", "0xa1"
		a["subsystem_vendor"] = "0x10de"
	case "nvswitch":
		a["class"], a["vendor"], a["driver"], a["revision"] = "0x068000", "0x10de", "nvidia", "0xa1"
		a["subsystem_vendor"] = "0x10de"
	case "nic":
		a["vendor"], a["driver"] = "0x15b3", "mlx5_core"
		a["class"] = "0x020000"
		if len(n.Ports) > 0 && n.Ports[0].Attrs["layer"] == "InfiniBand" {
			a["class"] = "0x020700"
		}
	}
	for k, v := range n.Attrs {
		a[k] = v
	}
	if a["vendor"] == "0x1d0f" && n.Kind == "nic" && n.Attrs["driver"] == "" {
		a["driver"] = "efa"
	}
	if a["subsystem_vendor"] == "0x0000" && n.Kind == "nic" {
		a["subsystem_vendor"] = a["vendor"]
	}
	return a
}

// attrs writes the standard attribute files of a PCI function and links it
// into /sys/bus/pci/devices and its driver.
func (e *expander) attrs(dir, bdf string, a map[string]string, numa int) error {
	files := map[string]string{
		"class": a["class"], "vendor": a["vendor"], "device": a["device"],
		"subsystem_vendor": a["subsystem_vendor"], "subsystem_device": a["subsystem_device"],
		"revision": a["revision"], "numa_node": strconv.Itoa(numa),
		"max_link_speed": a["speed"], "current_link_speed": a["speed"],
		"max_link_width": a["width"], "current_link_width": a["width"],
		"local_cpulist": listString(e.localCPUs(numa)), "local_cpus": cpuMask(e.localCPUs(numa), len(e.cpus)),
	}
	if files["revision"] == "" {
		files["revision"] = "0x00"
	}
	if len(files["class"]) == 6 { // 0x0302 → 0x030200
		files["class"] += "00"
	}
	for name, v := range files {
		if err := e.write(filepath.Join(dir, name), v+"\n"); err != nil {
			return err
		}
	}
	if err := e.link(filepath.Join(e.sys, "bus/pci/devices", bdf), dir); err != nil {
		return err
	}
	if drv := a["driver"]; drv != "" && drv != "none" {
		ddir := filepath.Join(e.sys, "bus/pci/drivers", drv)
		if err := os.MkdirAll(ddir, 0o755); err != nil {
			return err
		}
		if err := e.link(filepath.Join(dir, "driver"), ddir); err != nil {
			return err
		}
	}
	return nil
}

func (e *expander) nic(n *PCISpec, dir, bdf string) error {
	rdma := n.Attrs["rdma"]
	if rdma == "" {
		if len(n.Ports) > 0 {
			return fmt.Errorf("spec %s line %d: nic with ibport lines needs rdma=NAME", e.s.Name, n.Line)
		}
		if name := n.Attrs["net"]; name != "" {
			return e.netdev(name, dir, netAttrs(n.Attrs), 1, "up")
		}
		return nil
	}
	ibdir := filepath.Join(dir, "infiniband", rdma)
	guid := n.Attrs["guid"]
	if guid == "" {
		guid = fakeGUID(e.s.Name + bdf)
	}
	fw := n.Attrs["fw"]
	if fw == "" {
		fw = "0.0.0"
	}
	files := map[string]string{"fw_ver": fw, "node_guid": guidColon(guid), "hca_type": n.Attrs["hca"], "board_id": n.Attrs["board"], "node_type": "1: CA"}
	for f, v := range files {
		if v == "" {
			continue
		}
		if err := e.write(filepath.Join(ibdir, f), v+"\n"); err != nil {
			return err
		}
	}
	if err := e.link(filepath.Join(ibdir, "device"), dir); err != nil {
		return err
	}
	if err := e.link(filepath.Join(e.sys, "class/infiniband", rdma), ibdir); err != nil {
		return err
	}
	if len(n.Ports) == 0 {
		return fmt.Errorf("spec %s line %d: nic %s has no ibport lines", e.s.Name, n.Line, rdma)
	}
	for _, p := range n.Ports {
		if err := e.ibport(n, p, ibdir, dir, guid); err != nil {
			return err
		}
	}
	return nil
}

func (e *expander) ibport(n *PCISpec, p IBPortSpec, ibdir, fnDir, guid string) error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("spec %s line %d: ibport %d: %s", e.s.Name, p.Line, p.Num, fmt.Sprintf(format, a...))
	}
	pa := p.Attrs
	layer := pa["layer"]
	// "Unknown" is what the kernel prints for EFA (IB_LINK_LAYER_UNSPECIFIED).
	if layer != "InfiniBand" && layer != "Ethernet" && layer != "Unknown" {
		return bad("layer=%q; accepted: InfiniBand, Ethernet, Unknown", layer)
	}
	st, ok := ibStates[pa["state"]]
	if !ok {
		return bad("state=%q; accepted: DOWN, INIT, ARMED, ACTIVE", pa["state"])
	}
	ph, ok := physStates[pa["phys"]]
	if !ok {
		return bad("phys=%q; accepted: LinkUp, Disabled, Polling, Sleep", pa["phys"])
	}
	rate, err := strconv.ParseFloat(pa["rate"], 64)
	if err != nil {
		return bad("rate=%q: want Gb/s", pa["rate"])
	}
	lanes, gen := pa["lanes"], pa["gen"]
	if lanes == "" {
		lanes = "4X"
	}
	rateStr := strconv.FormatFloat(rate, 'f', -1, 64) + " Gb/sec (" + lanes + " " + gen + ")"
	if gen == "" {
		rateStr = strconv.FormatFloat(rate, 'f', -1, 64) + " Gb/sec (" + lanes + ")"
	}
	pdir := filepath.Join(ibdir, "ports", strconv.Itoa(p.Num))
	lid := pa["lid"]
	if lid == "" {
		lid = "0x0"
	}
	files := map[string]string{
		"link_layer": layer, "state": fmt.Sprintf("%d: %s", st, pa["state"]),
		"phys_state": fmt.Sprintf("%d: %s", ph, pa["phys"]), "rate": rateStr,
		"lid": lid, "sm_lid": "0x0", "cap_mask": "0x00010000",
	}
	for f, v := range files {
		if err := e.write(filepath.Join(pdir, f), v+"\n"); err != nil {
			return err
		}
	}
	netName := pa["net"]
	if netName == "" {
		netName = n.Attrs["net"]
	}
	gids, types, err := portGIDs(layer, guid, pa["ipv4"])
	if err != nil {
		return bad("%v", err)
	}
	if err := e.writeGIDs(pdir, layer, netName, gids, types); err != nil {
		return err
	}
	if netName == "" || e.hasNet(netName) {
		return nil
	}
	typ := 1
	if layer == "InfiniBand" {
		typ = 32
	}
	state := "down"
	if pa["state"] == "ACTIVE" {
		state = "up"
	}
	na := map[string]string{"speed": strconv.Itoa(int(rate * 1000)), "ip": pa["ip"], "mac": pa["mac"]}
	if pa["ipv4"] != "" && na["ip"] == "" {
		na["ip"] = pa["ipv4"] + "/" + orDefault(pa["prefix"], "24")
	}
	return e.netdev(netName, fnDir, na, typ, state)
}

// portGIDs is a port's GID table and each entry's type: the link-local
// GID from the port GUID; on RoCE ports with an IPv4 address, mlx5 adds the
// IPv4-mapped GID as a v1 and a v2 entry.
func portGIDs(layer, guid, ipv4 string) (gids, types []string, err error) {
	ll := "fe80:0000:0000:0000:" + guidColon(guid)
	if layer != "Ethernet" {
		return []string{ll}, []string{"IB/RoCE v1"}, nil
	}
	gids, types = []string{ll, ll}, []string{"IB/RoCE v1", "RoCE v2"}
	if ipv4 != "" {
		addr, err := netip.ParseAddr(ipv4)
		if err != nil || !addr.Is4() {
			return nil, nil, fmt.Errorf("ipv4=%q", ipv4)
		}
		b := addr.As4()
		m := fmt.Sprintf("0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x", b[0], b[1], b[2], b[3])
		gids = append(gids, m, m)
		types = append(types, "IB/RoCE v1", "RoCE v2")
	}
	return gids, types, nil
}

// writeGIDs writes a port's 8 GID entries (the unused ones zero) with their
// types and, on an Ethernet port with a netdev, the netdev of each.
func (e *expander) writeGIDs(pdir, layer, netName string, gids, types []string) error {
	const zero = "0000:0000:0000:0000:0000:0000:0000:0000"
	for i := 0; i < 8; i++ {
		g := zero
		if i < len(gids) {
			g = gids[i]
			if err := e.write(filepath.Join(pdir, "gid_attrs/types", strconv.Itoa(i)), types[i]+"\n"); err != nil {
				return err
			}
			if layer == "Ethernet" && netName != "" {
				if err := e.write(filepath.Join(pdir, "gid_attrs/ndevs", strconv.Itoa(i)), netName+"\n"); err != nil {
					return err
				}
			}
		}
		if err := e.write(filepath.Join(pdir, "gids", strconv.Itoa(i)), g+"\n"); err != nil {
			return err
		}
	}
	return nil
}

func (e *expander) hasNet(name string) bool {
	_, err := os.Lstat(filepath.Join(e.sys, "class/net", name))
	return err == nil
}

// netdev writes a network interface under a device directory.
func (e *expander) netdev(name, devDir string, a map[string]string, typ int, state string) error {
	if e.hasNet(name) {
		return nil
	}
	if v := a["netstate"]; v != "" {
		state = v
	}
	ndir := filepath.Join(devDir, "net", name)
	speed := a["speed"]
	if state != "up" || speed == "" {
		speed = "-1"
	}
	files := map[string]string{"operstate": state, "speed": speed, "type": strconv.Itoa(typ), "ifindex": strconv.Itoa(len(e.ips) + 2)}
	for f, v := range files {
		if err := e.write(filepath.Join(ndir, f), v+"\n"); err != nil {
			return err
		}
	}
	if err := e.link(filepath.Join(ndir, "device"), devDir); err != nil {
		return err
	}
	if err := e.link(filepath.Join(e.sys, "class/net", name), ndir); err != nil {
		return err
	}
	return e.addIP(name, a["ip"])
}

func (e *expander) addIP(ifname, ip string) error {
	if ip == "" {
		return nil
	}
	for _, one := range strings.Split(ip, ",") {
		p, err := netip.ParsePrefix(one)
		if err != nil || !p.Addr().Is4() {
			return fmt.Errorf("spec %s: interface %s: ip=%q: want IPv4 A.B.C.D/P", e.s.Name, ifname, one)
		}
		e.ips = append(e.ips, ifAddr{ifname, p})
	}
	return nil
}

func (e *expander) virtualNetIf(n NetIfSpec) error {
	ndir := filepath.Join(e.sys, "devices/virtual/net", n.Name)
	if n.Attrs["kind"] == "platform" { // a non-PCI device, e.g. Hyper-V's VMBus netvsc
		p := n.Attrs["path"]
		if p == "" || strings.Contains(p, "..") {
			return fmt.Errorf("spec %s: netif %s: kind=platform needs path=DEVICE-PATH below sys/devices", e.s.Name, n.Name)
		}
		dev := filepath.Join(e.sys, "devices", p)
		if err := os.MkdirAll(dev, 0o755); err != nil {
			return err
		}
		return e.netdev(n.Name, dev, map[string]string{"ip": n.Attrs["ip"], "speed": n.Attrs["speed"], "netstate": n.Attrs["state"]}, 1, "up")
	}
	typ := "1"
	state := orDefault(n.Attrs["state"], "down")
	switch n.Attrs["kind"] {
	case "loopback":
		typ, state = "772", "unknown"
	case "bridge", "bond":
		sub := map[string]string{"bridge": "bridge", "bond": "bonding"}[n.Attrs["kind"]]
		if err := os.MkdirAll(filepath.Join(ndir, sub), 0o755); err != nil {
			return err
		}
	case "virtual":
	default:
		return fmt.Errorf("spec %s: netif %s: kind=%q; accepted: loopback, bridge, bond, virtual, platform", e.s.Name, n.Name, n.Attrs["kind"])
	}
	for f, v := range map[string]string{"operstate": state, "type": typ, "speed": "-1"} {
		if err := e.write(filepath.Join(ndir, f), v+"\n"); err != nil {
			return err
		}
	}
	if err := e.link(filepath.Join(e.sys, "class/net", n.Name), ndir); err != nil {
		return err
	}
	return e.addIP(n.Name, n.Attrs["ip"])
}

// system writes NUMA nodes, cpu lists, /proc/cpuinfo, the hostname and the
// address tables (/proc/net/fib_trie and /proc/net/route).
func (e *expander) system() error {
	var ids []int
	for _, n := range e.s.NUMA {
		ids = append(ids, n.ID)
		if err := e.write(filepath.Join(e.sys, "devices/system/node", "node"+strconv.Itoa(n.ID), "cpulist"), listString(e.numa[n.ID])+"\n"); err != nil {
			return err
		}
	}
	if len(ids) > 0 {
		if err := e.write(filepath.Join(e.sys, "devices/system/node/online"), listString(ids)+"\n"); err != nil {
			return err
		}
	}
	if err := e.write(filepath.Join(e.sys, "devices/system/cpu/online"), listString(e.cpus)+"\n"); err != nil {
		return err
	}
	socketOf := map[int]int{}
	for _, n := range e.s.NUMA {
		for _, c := range e.numa[n.ID] {
			socketOf[c] = n.Socket
		}
	}
	var b strings.Builder
	c := e.s.CPU
	for _, cpu := range e.cpus {
		if c["arch"] == "arm64" { // arm64 cpuinfo: no vendor_id/model name, an implementer code
			fmt.Fprintf(&b, "processor\t: %d\nBogoMIPS\t: 2000.00\nCPU implementer\t: %s\nCPU architecture: 8\nCPU part\t: %s\n\n",
				cpu, orDefault(c["implementer"], "0x41"), orDefault(c["part"], "0xd4f"))
			continue
		}
		fmt.Fprintf(&b, "processor\t: %d\nvendor_id\t: %s\ncpu family\t: %s\nmodel\t\t: %s\nmodel name\t: %s\nphysical id\t: %d\n\n",
			cpu, c["vendor"], c["family"], c["model"], c["name"], socketOf[cpu])
	}
	if err := e.write(filepath.Join(e.root, "proc/cpuinfo"), b.String()); err != nil {
		return err
	}
	host := orDefault(e.s.Hostname, e.s.Name)
	for _, p := range []string{"proc/sys/kernel/hostname", "etc/hostname"} {
		if err := e.write(filepath.Join(e.root, p), host+"\n"); err != nil {
			return err
		}
	}
	// fib_trie: the LOCAL entries are the interfaces' addresses; route maps a
	// subnet to its interface. Real files hold more; readers use these lines.
	var trie, route strings.Builder
	trie.WriteString("Main:\n  +-- 0.0.0.0/0 3 0 5\n")
	route.WriteString("Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n")
	for _, a := range e.ips {
		net := a.prefix.Masked()
		fmt.Fprintf(&trie, "     +-- %s/%d 2 0 2\n        |-- %s\n           /%d link UNICAST\n        |-- %s\n           /32 host LOCAL\n",
			net.Addr(), net.Bits(), net.Addr(), net.Bits(), a.prefix.Addr())
		if a.prefix.Addr().IsLoopback() {
			continue
		}
		fmt.Fprintf(&route, "%s\t%s\t00000000\t0001\t0\t0\t0\t%s\t0\t0\t0\n", a.ifname, hexLE(net.Addr()), hexMask(net.Bits()))
	}
	if err := e.write(filepath.Join(e.root, "proc/net/fib_trie"), trie.String()); err != nil {
		return err
	}
	return e.write(filepath.Join(e.root, "proc/net/route"), route.String())
}

func (e *expander) nvml() error {
	if e.s.NVML == nil {
		return nil
	}
	sort.Slice(e.gpus, func(i, j int) bool { return e.gpus[i].bdf < e.gpus[j].bdf })
	rec := RecordedNVML{DriverVersion: e.s.NVML["driver"], Note: e.s.NVML["note"]}
	for i, g := range e.gpus {
		a := g.attrs
		mib, _ := strconv.ParseUint(a["mem_mib"], 10, 64)
		sm, _ := strconv.Atoi(a["sm"])
		uuid := a["uuid"]
		if uuid == "" {
			uuid = fakeUUID("GPU-", e.s.Name+g.bdf)
		}
		r := RecordedGPU{Index: i, UUID: uuid, Name: a["name"], Arch: a["arch"], SM: sm,
			MemoryBytes: mib << 20, BusID: nvmlBusID(g.bdf)}
		links := e.s.NVLinks[g.bdf]
		if links == nil {
			links = e.s.NVLinks["all"]
		}
		for _, l := range links {
			typ := "nvswitch"
			id := l.Target
			if t, ok := strings.CutPrefix(id, "gpu:"); ok {
				typ, id = "gpu", t
			}
			if strings.HasPrefix(id, "fffffff") {
				typ = "unknown"
			} else {
				id = nvmlBusID(id)
			}
			r.NVLinks = append(r.NVLinks, RecordedNVLink{RemoteBusID: id, RemoteType: typ, Count: l.Count})
		}
		if f := e.s.Fabric; f != nil {
			cl, _ := strconv.ParseUint(f["clique"], 10, 32)
			r.FabricUUID, r.FabricClique, r.FabricState = f["cluster"], uint32(cl), orDefault(f["state"], "completed")
		}
		rec.GPUs = append(rec.GPUs, r)
	}
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	return e.write(filepath.Join(e.root, RecordedNVMLFile), string(b)+"\n")
}

// nvmlBusID writes a bus id as NVML does: an 8-digit upper-case domain.
func nvmlBusID(bdf string) string {
	dom, rest, _ := strings.Cut(bdf, ":")
	return fmt.Sprintf("%08s:%s", strings.ToUpper(dom), strings.ToUpper(rest))
}

func normBDF(s string) (string, error) {
	s = strings.ToLower(s)
	var d, b, v, f uint64
	parts := strings.Split(s, ":")
	if len(parts) != 3 || len(parts[0]) < 4 || len(parts[0]) > 8 || len(parts[1]) != 2 {
		return "", fmt.Errorf("PCI address %q: want DDDD:BB:DD.F", s)
	}
	dev, fn, ok := strings.Cut(parts[2], ".")
	var err error
	if d, err = strconv.ParseUint(parts[0], 16, 32); err == nil {
		if b, err = strconv.ParseUint(parts[1], 16, 8); err == nil {
			if v, err = strconv.ParseUint(dev, 16, 8); err == nil {
				f, err = strconv.ParseUint(fn, 16, 8)
			}
		}
	}
	if err != nil || !ok || v > 0x1f || f > 7 {
		return "", fmt.Errorf("PCI address %q: want DDDD:BB:DD.F in hex", s)
	}
	return fmt.Sprintf("%04x:%02x:%02x.%x", d, b, v, f), nil
}

func parseList(s string) ([]int, error) {
	var out []int
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("empty cpu list")
	}
	for _, part := range strings.Split(s, ",") {
		lo, hi, r := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return nil, fmt.Errorf("cpu list %q", s)
		}
		b := a
		if r {
			if b, err = strconv.Atoi(hi); err != nil {
				return nil, fmt.Errorf("cpu list %q", s)
			}
		}
		for c := a; c <= b; c++ {
			out = append(out, c)
		}
	}
	sort.Ints(out)
	return out, nil
}

func listString(l []int) string {
	var b strings.Builder
	for i := 0; i < len(l); {
		j := i
		for j+1 < len(l) && l[j+1] == l[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		if i == j {
			fmt.Fprintf(&b, "%d", l[i])
		} else {
			fmt.Fprintf(&b, "%d-%d", l[i], l[j])
		}
		i = j + 1
	}
	return b.String()
}

// cpuMask prints a cpumask as the kernel does: 32-bit hex words, most
// significant first, comma separated.
func cpuMask(l []int, ncpu int) string {
	words := (ncpu + 31) / 32
	if words == 0 {
		words = 1
	}
	w := make([]uint32, words)
	for _, c := range l {
		if c/32 < words {
			w[c/32] |= 1 << (c % 32)
		}
	}
	parts := make([]string, words)
	for i := range w {
		parts[words-1-i] = fmt.Sprintf("%08x", w[i])
	}
	return strings.Join(parts, ",")
}

func guidColon(g string) string {
	g = strings.TrimPrefix(strings.ReplaceAll(g, ":", ""), "0x")
	g = fmt.Sprintf("%016s", g)
	return g[0:4] + ":" + g[4:8] + ":" + g[8:12] + ":" + g[12:16]
}

func fakeGUID(seed string) string {
	h := sha256.Sum256([]byte(seed))
	return fmt.Sprintf("%016x", binary.BigEndian.Uint64(h[:8]))
}

func fakeUUID(prefix, seed string) string {
	h := sha256.Sum256([]byte(seed))
	return fmt.Sprintf("%s%x-%x-%x-%x-%x", prefix, h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

func hexLE(a netip.Addr) string {
	b := a.As4()
	return fmt.Sprintf("%02X%02X%02X%02X", b[3], b[2], b[1], b[0])
}

func hexMask(bits int) string {
	var m uint32
	if bits > 0 {
		m = ^uint32(0) << (32 - bits)
	}
	return fmt.Sprintf("%02X%02X%02X%02X", byte(m), byte(m>>8), byte(m>>16), byte(m>>24))
}

func orDefault(v, d string) string {
	if v == "" {
		return d
	}
	return v
}
