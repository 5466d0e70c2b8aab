package topo

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/trainrun/trainrun/topo/snapshot"
)

// Capture copies the part of a machine's /sys, /proc and /etc that Discover
// reads (CaptureContents says exactly what) into dst (which must not exist or be empty), keeping sysfs's symlinks,
// and records NVML's answers into dst/nvml.json when src is not nil. The result
// is a captured tree: `trainrun topo --root dst` on any machine shows what
// Discover saw here. It copies attribute files only (no config space, no
// resources, no counters), a few hundred kilobytes for an 8-GPU node, and
// lists every copied path in dst/CAPTURE.txt.
func Capture(root, dst string, src NVMLSource) error {
	if root == "" {
		root = "/"
	}
	if ents, err := os.ReadDir(dst); err == nil && len(ents) > 0 {
		return fmt.Errorf("capture into %s: directory not empty", dst)
	}
	c := &capturer{root: root, dst: dst, done: map[string]bool{}}
	pciDir := filepath.Join(root, "sys/bus/pci/devices")
	if _, err := os.Stat(pciDir); err != nil {
		return fmt.Errorf("%s: not a sysfs tree (missing); pass the root of a machine, the directory that holds sys/", pciDir)
	}
	for _, name := range listDir(pciDir) {
		if err := c.classEntry("sys/bus/pci/devices", name, c.pciFunction); err != nil {
			return err
		}
	}
	for _, name := range listDir(filepath.Join(root, "sys/class/infiniband")) {
		if err := c.classEntry("sys/class/infiniband", name, c.rdmaDevice); err != nil {
			return err
		}
	}
	for _, name := range listDir(filepath.Join(root, "sys/class/net")) {
		if err := c.classEntry("sys/class/net", name, c.netDevice); err != nil {
			return err
		}
	}
	for _, name := range listDir(filepath.Join(root, "sys/devices/system/node")) {
		if strings.HasPrefix(name, "node") {
			c.copyFile(filepath.Join("sys/devices/system/node", name, "cpulist"))
		}
	}
	for _, p := range []string{"sys/devices/system/node/online", "sys/devices/system/cpu/online", "proc/cpuinfo",
		"proc/net/fib_trie", "proc/net/route", "proc/sys/kernel/hostname", "etc/hostname", "etc/nccl.conf"} {
		c.copyFile(p)
	}
	// The platform's NCCL topology file, where /etc/nccl.conf names one.
	if p := ncclConfValue(filepath.Join(root, "etc/nccl.conf"), "NCCL_TOPO_FILE"); p != "" && !strings.Contains(p, "..") {
		c.copyFile(strings.TrimPrefix(filepath.Clean(p), "/"))
	}
	if c.err != nil {
		return c.err
	}
	if src != nil {
		if err := recordNVML(src, filepath.Join(dst, snapshot.RecordedNVMLFile)); err != nil {
			return err
		}
		c.copied = append(c.copied, snapshot.RecordedNVMLFile+" (NVML's answers, recorded)")
	}
	return c.writeManifest()
}

// CaptureManifest is the file in a capture that lists exactly what was
// copied, one path a line, for an admin to review before sending it.
const CaptureManifest = "CAPTURE.txt"

// CaptureContents says what Capture copies (trainrun topo --help and the
// manifest's header print it).
const CaptureContents = `trainrun topo --capture copies, keeping sysfs's symlinks as links:
  - for every /sys/bus/pci/devices entry, the function and every PCI function above it:
    class vendor device subsystem_vendor subsystem_device revision numa_node local_cpulist
    local_cpus max_link_speed max_link_width current_link_speed current_link_width, the driver link
  - for every /sys/class/infiniband device: fw_ver node_guid hca_type board_id node_type, the
    device link, and per port link_layer state phys_state rate lid sm_lid cap_mask and the set
    (non-zero) GID table entries with their gid_attrs/types and gid_attrs/ndevs
  - for every /sys/class/net interface: operstate speed type ifindex address dev_port, the
    device link, and whether it is a bridge or a bond (an empty bridge/ or bonding/ directory)
  - /sys/devices/system/node/node*/cpulist, /sys/devices/system/{node,cpu}/online
  - /proc/cpuinfo, /proc/net/fib_trie (interface addresses), /proc/net/route,
    /proc/sys/kernel/hostname, /etc/hostname, /etc/nccl.conf and the NCCL_TOPO_FILE it names
  - nvml.json: NVML's answers per GPU (name, UUID, memory, bus id, NVLink peers, fabric clique),
    when NVML loads
Nothing else: no PCI config space, resources or counters, no other files of /proc or /etc.
It holds host names, interface addresses (fib_trie, route), MAC addresses (net/*/address), GPU
UUIDs and NIC GUIDs: review or redact before sending.`

func (c *capturer) writeManifest() error {
	sort.Strings(c.copied)
	var b strings.Builder
	b.WriteString("# " + strings.ReplaceAll(CaptureContents, "\n", "\n# ") + "\n#\n")
	fmt.Fprintf(&b, "# Copied from %s: %d entries. Read it with: trainrun topo --root DIR --explain\n", c.root, len(c.copied))
	for _, p := range c.copied {
		b.WriteString(p + "\n")
	}
	return os.WriteFile(filepath.Join(c.dst, CaptureManifest), []byte(b.String()), 0o444)
}

type capturer struct {
	root, dst string
	done      map[string]bool
	err       error
	copied    []string // what was copied, for the manifest
}

// rel turns an absolute path below root into a path relative to it.
func (c *capturer) rel(p string) string {
	r, err := filepath.Rel(c.root, p)
	if err != nil {
		return p
	}
	return r
}

// copyFile copies root/rel to dst/rel if it is readable (sysfs files such as
// the speed of a down link fail to read; they are left out, as Discover
// treats a missing file as unknown).
func (c *capturer) copyFile(rel string) {
	if c.err != nil {
		return
	}
	b, err := os.ReadFile(filepath.Join(c.root, rel))
	if err != nil {
		return
	}
	out := filepath.Join(c.dst, rel)
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		c.err = err
		return
	}
	if err := os.WriteFile(out, b, 0o444); err != nil {
		c.err = err
		return
	}
	c.copied = append(c.copied, rel)
}

// copyLink recreates the symlink root/rel in dst with the same target text.
func (c *capturer) copyLink(rel string) {
	if c.err != nil {
		return
	}
	target, err := os.Readlink(filepath.Join(c.root, rel))
	if err != nil {
		return
	}
	out := filepath.Join(c.dst, rel)
	if _, err := os.Lstat(out); err == nil {
		return
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		c.err = err
		return
	}
	if err := os.Symlink(target, out); err != nil {
		c.err = err
		return
	}
	c.copied = append(c.copied, rel+" -> "+target)
	// Make sure the link resolves in the copy.
	dir := filepath.Join(filepath.Dir(out), target)
	if !strings.HasPrefix(filepath.Clean(dir), filepath.Clean(c.dst)) {
		return
	}
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		if real, err := filepath.EvalSymlinks(filepath.Join(c.root, rel)); err == nil {
			if st, err := os.Stat(real); err == nil && st.IsDir() {
				c.err = os.MkdirAll(dir, 0o755)
			}
		}
	}
}

// classEntry copies a class (or bus) directory's link and lets fn copy what
// it points to.
func (c *capturer) classEntry(class, name string, fn func(real string)) error {
	rel := filepath.Join(class, name)
	c.copyLink(rel)
	real, err := filepath.EvalSymlinks(filepath.Join(c.root, rel))
	if err != nil {
		return nil // dangling on the source: nothing to copy
	}
	fn(real)
	return c.err
}

var pciAttrs = []string{"class", "vendor", "device", "subsystem_vendor", "subsystem_device", "revision", "numa_node",
	"local_cpulist", "local_cpus", "max_link_speed", "max_link_width", "current_link_speed", "current_link_width"}

// pciFunction copies a function and every function above it.
func (c *capturer) pciFunction(real string) {
	for p := real; bdfRe().MatchString(filepath.Base(p)); p = filepath.Dir(p) {
		rel := c.rel(p)
		if c.done[rel] {
			return
		}
		c.done[rel] = true
		for _, a := range pciAttrs {
			c.copyFile(filepath.Join(rel, a))
		}
		c.copyLink(filepath.Join(rel, "driver"))
	}
}

func (c *capturer) rdmaDevice(real string) {
	rel := c.rel(real)
	for _, a := range []string{"fw_ver", "node_guid", "hca_type", "board_id", "node_type"} {
		c.copyFile(filepath.Join(rel, a))
	}
	c.copyLink(filepath.Join(rel, "device"))
	for _, port := range listDir(filepath.Join(real, "ports")) {
		prel := filepath.Join(rel, "ports", port)
		for _, a := range []string{"link_layer", "state", "phys_state", "rate", "lid", "sm_lid", "cap_mask"} {
			c.copyFile(filepath.Join(prel, a))
		}
		// The GID table has up to 255 entries; copy the set ones.
		for _, g := range listDir(filepath.Join(real, "ports", port, "gids")) {
			b, err := os.ReadFile(filepath.Join(real, "ports", port, "gids", g))
			if err != nil || strings.Trim(strings.TrimSpace(string(b)), "0:") == "" {
				continue
			}
			if _, err := strconv.Atoi(g); err != nil {
				continue
			}
			c.copyFile(filepath.Join(prel, "gids", g))
			c.copyFile(filepath.Join(prel, "gid_attrs/types", g))
			c.copyFile(filepath.Join(prel, "gid_attrs/ndevs", g))
		}
	}
}

func (c *capturer) netDevice(real string) {
	st, err := os.Stat(real)
	if err != nil || !st.IsDir() {
		return
	}
	rel := c.rel(real)
	for _, a := range []string{"operstate", "speed", "type", "ifindex", "address", "dev_port"} {
		c.copyFile(filepath.Join(rel, a))
	}
	for _, sub := range []string{"bridge", "bonding"} {
		if isDir(filepath.Join(real, sub)) && c.err == nil {
			c.err = os.MkdirAll(filepath.Join(c.dst, rel, sub), 0o755)
		}
	}
	c.copyLink(filepath.Join(rel, "device"))
}

// recordNVML writes NVML's answers in the captured-tree format.
func recordNVML(src NVMLSource, path string) error {
	rec := snapshot.RecordedNVML{Note: "recorded by trainrun topo --capture"}
	rec.DriverVersion, _ = src.DriverVersion()
	count, err := src.DeviceCount()
	if err != nil {
		return err
	}
	for i := 0; i < count; i++ {
		d, err := src.Device(i)
		if err != nil {
			return err
		}
		g := snapshot.RecordedGPU{Index: i}
		g.UUID, _ = d.UUID()
		g.Name, _ = d.Name()
		g.Arch, _ = d.Architecture()
		if ma, mi, err := d.ComputeCapability(); err == nil {
			g.SM = ma*10 + mi
		}
		g.MemoryBytes, _ = d.MemoryBytes()
		if g.BusID, err = d.PCIBusID(); err != nil {
			return err
		}
		links, err := d.NVLinks()
		if err != nil {
			return err
		}
		for _, l := range links {
			g.NVLinks = append(g.NVLinks, snapshot.RecordedNVLink{RemoteBusID: l.RemoteBusID, RemoteType: l.RemoteType, Count: l.Count})
		}
		if f, err := d.Fabric(); err == nil && f != nil {
			g.FabricUUID, g.FabricClique, g.FabricState = f.ClusterUUID, f.CliqueID, f.State
		}
		rec.GPUs = append(rec.GPUs, g)
	}
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o444)
}
