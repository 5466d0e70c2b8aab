package snapshot

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// A spec describes one machine, one fact per line. Indentation (two spaces a
// level) nests PCI functions under their host bridge, bridge or switch, and
// RDMA ports under their NIC. Grammar (see machines/README.md for the full list
// of keys):
//
//	name NAME                     title TEXT          source TEXT (repeatable)
//	hostname NAME                 cpu KEY=VAL...      numa ID cpus=LIST [socket=S]
//	nvml driver=VERSION           nvlinks all|BDF TARGET*COUNT...
//	fabric cluster=UUID clique=N  netif NAME kind=loopback|bridge|virtual [ip=A/P] [state=up]
//	host pciDDDD:BB [numa=N]
//	  port BDF [KEY=VAL...]       a single bridge function (root port, virtual bridge)
//	  switch BDF [KEY=VAL...]     a PCIe switch: upstream port BDF, one downstream port per child bus
//	  gpu|nvswitch|nic|dev BDF [KEY=VAL...]
//	    ibport N layer=InfiniBand|Ethernet|Unspecified state=S phys=P rate=GBPS [lanes=4X] [gen=NDR] [ipv4=A]
type Spec struct {
	Name     string
	Title    string
	Sources  []string
	Hostname string
	CPU      map[string]string
	NUMA     []NUMASpec
	Hosts    []*PCISpec // host bridges, in file order
	NetIfs   []NetIfSpec
	NVML     map[string]string // nil: no recorded NVML answers
	NVLinks  map[string][]NVLinkSpec
	Fabric   map[string]string
	Files    []FileSpec
}

// FileSpec is a platform file the machine carries (file DEST src=NAME):
// DEST inside the tree gets machines/files/NAME, e.g. Azure's
// /etc/nccl.conf and the NCCL_TOPO_FILE it names.
type FileSpec struct {
	Dest, Src string
	Line      int
}

// NUMASpec is one NUMA node.
type NUMASpec struct {
	ID     int
	CPUs   string
	Socket int
}

// PCISpec is a host bridge or a PCI function.
type PCISpec struct {
	Kind     string // host, port, switch, gpu, nvswitch, nic, dev
	Addr     string // pciDDDD:BB for host, else DDDD:BB:DD.F
	Attrs    map[string]string
	Ports    []IBPortSpec
	Children []*PCISpec
	Line     int
}

// IBPortSpec is one RDMA port of a nic.
type IBPortSpec struct {
	Num   int
	Attrs map[string]string
	Line  int
}

// NetIfSpec is a virtual network interface (no PCI device).
type NetIfSpec struct {
	Name  string
	Attrs map[string]string
}

// NVLinkSpec is a bundle of NVLinks from a GPU to one remote bus id.
type NVLinkSpec struct {
	Target string
	Count  int
}

// Parse reads a spec. Errors name the line.
func Parse(name string, data []byte) (*Spec, error) {
	p := &specParser{s: &Spec{NVLinks: map[string][]NVLinkSpec{}}}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	ln := 0
	for sc.Scan() {
		ln++
		raw := stripComment(sc.Text())
		if strings.TrimSpace(raw) == "" {
			continue
		}
		if strings.Contains(raw, "\t") {
			return nil, fmt.Errorf("%s line %d: tab in indentation; indent with two spaces", name, ln)
		}
		indent := len(raw) - len(strings.TrimLeft(raw, " "))
		toks, err := tokenize(strings.TrimSpace(raw))
		if err != nil {
			return nil, fmt.Errorf("%s line %d: %w", name, ln, err)
		}
		if indent == 0 {
			p.stack = p.stack[:0]
		}
		if err := p.line(toks[0], toks[1:], indent, ln); err != nil {
			return nil, fmt.Errorf("%s line %d: %s: %w", name, ln, toks[0], err)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if p.s.Name == "" {
		return nil, fmt.Errorf("%s: no 'name' line", name)
	}
	return p.s, nil
}

// specParser is Parse's state: the spec so far and the PCI functions open
// above the current line (by indent).
type specParser struct {
	s     *Spec
	stack []specFrame
}

type specFrame struct {
	indent int
	node   *PCISpec
}

// line takes one line's keyword kw and its words rest; its error is the
// line's complaint, without the line number.
func (p *specParser) line(kw string, rest []string, indent, ln int) error {
	switch kw {
	case "host", "port", "switch", "gpu", "nvswitch", "nic", "dev":
		return p.pciFunction(kw, rest, indent, ln)
	case "ibport":
		return p.ibport(rest, indent, ln)
	}
	return p.node(kw, rest, ln)
}

// node takes the keywords that describe the node as a whole: its name, CPUs,
// NUMA domains, NVML and fabric facts, NVLinks, files and network interfaces.
func (p *specParser) node(kw string, rest []string, ln int) error {
	s := p.s
	var err error
	switch kw {
	case "name":
		if len(rest) != 1 {
			return errors.New("want one word")
		}
		s.Name = rest[0]
	case "title":
		s.Title = strings.Join(rest, " ")
	case "source":
		s.Sources = append(s.Sources, strings.Join(rest, " "))
	case "hostname":
		if len(rest) != 1 {
			return errors.New("want one word")
		}
		s.Hostname = rest[0]
	case "cpu":
		s.CPU, err = kv(rest)
	case "numa":
		return p.numa(rest)
	case "nvml":
		s.NVML, err = kv(rest)
	case "fabric":
		s.Fabric, err = kv(rest)
	case "nvlinks":
		err = parseNVLinks(s, rest)
	case "file":
		err = parseFile(s, rest, ln)
	case "netif":
		if len(rest) < 1 {
			//lint:ignore ST1005 the "..." is grammar (more attributes), not punctuation
			return errors.New("want: netif NAME kind=...")
		}
		a, err := kv(rest[1:])
		if err != nil {
			return err
		}
		s.NetIfs = append(s.NetIfs, NetIfSpec{Name: rest[0], Attrs: a})
	default:
		return errors.New("unknown keyword; accepted: name title source hostname cpu numa nvml nvlinks fabric file netif host port switch gpu nvswitch nic dev ibport")
	}
	return err
}

func (p *specParser) numa(rest []string) error {
	if len(rest) < 2 {
		return errors.New("want: numa ID cpus=LIST [socket=S]")
	}
	id, err := strconv.Atoi(rest[0])
	if err != nil {
		return fmt.Errorf("bad id %q", rest[0])
	}
	a, err := kv(rest[1:])
	if err != nil {
		return err
	}
	sock, _ := strconv.Atoi(a["socket"])
	p.s.NUMA = append(p.s.NUMA, NUMASpec{ID: id, CPUs: a["cpus"], Socket: sock})
	return nil
}

// pciFunction takes a host bridge (top level) or a PCI function, which goes
// under the nearest less indented one.
func (p *specParser) pciFunction(kw string, rest []string, indent, ln int) error {
	if len(rest) < 1 {
		return errors.New("want an address")
	}
	a, err := kv(rest[1:])
	if err != nil {
		return err
	}
	n := &PCISpec{Kind: kw, Addr: rest[0], Attrs: a, Line: ln}
	if kw == "host" {
		if indent != 0 || !strings.HasPrefix(n.Addr, "pci") {
			return errors.New("a host bridge is top level and named pciDDDD:BB")
		}
		p.s.Hosts = append(p.s.Hosts, n)
		p.stack = []specFrame{{0, n}}
		return nil
	}
	p.popTo(indent)
	if len(p.stack) == 0 {
		return errors.New("a PCI function must be indented under a host bridge")
	}
	parent := p.stack[len(p.stack)-1].node
	parent.Children = append(parent.Children, n)
	p.stack = append(p.stack, specFrame{indent, n})
	return nil
}

// ibport takes an RDMA port, indented under its nic.
func (p *specParser) ibport(rest []string, indent, ln int) error {
	p.popTo(indent)
	if len(p.stack) == 0 || p.stack[len(p.stack)-1].node.Kind != "nic" {
		return errors.New("an ibport is indented under its nic")
	}
	if len(rest) < 1 {
		return errors.New("want a port number")
	}
	num, err := strconv.Atoi(rest[0])
	if err != nil || num < 1 {
		return fmt.Errorf("bad port number %q", rest[0])
	}
	a, err := kv(rest[1:])
	if err != nil {
		return err
	}
	nic := p.stack[len(p.stack)-1].node
	nic.Ports = append(nic.Ports, IBPortSpec{Num: num, Attrs: a, Line: ln})
	return nil
}

// popTo closes the PCI functions indented as deep as indent or deeper.
func (p *specParser) popTo(indent int) {
	for len(p.stack) > 0 && p.stack[len(p.stack)-1].indent >= indent {
		p.stack = p.stack[:len(p.stack)-1]
	}
}

func parseNVLinks(s *Spec, rest []string) error {
	if len(rest) < 2 {
		//lint:ignore ST1005 the "..." is grammar (repeat the last item), not punctuation
		return fmt.Errorf("want: nvlinks all|GPU-BDF TARGET*COUNT...")
	}
	for _, t := range rest[1:] {
		tgt, cnt, ok := strings.Cut(t, "*")
		n, err := strconv.Atoi(cnt)
		if !ok || err != nil || n <= 0 {
			return fmt.Errorf("bad link %q, want BUSID*COUNT", t)
		}
		s.NVLinks[rest[0]] = append(s.NVLinks[rest[0]], NVLinkSpec{Target: tgt, Count: n})
	}
	return nil
}

func parseFile(s *Spec, rest []string, ln int) error {
	if len(rest) != 2 || !strings.HasPrefix(rest[1], "src=") {
		return fmt.Errorf("want: file /DEST/PATH src=NAME")
	}
	dest, src := rest[0], strings.TrimPrefix(rest[1], "src=")
	if !strings.HasPrefix(dest, "/") || strings.Contains(dest, "..") || src == "" || strings.ContainsAny(src, "/\\") {
		return fmt.Errorf("dest %q must be absolute without '..', src %q a file name in machines/files", dest, src)
	}
	s.Files = append(s.Files, FileSpec{Dest: dest, Src: src, Line: ln})
	return nil
}

// stripComment cuts a '#' that starts the line or follows a space, outside
// double quotes ("nccl#1453" in a value stays).
func stripComment(s string) string {
	inQ := false
	for i, r := range s {
		switch {
		case r == '"':
			inQ = !inQ
		case r == '#' && !inQ && (i == 0 || s[i-1] == ' '):
			return s[:i]
		}
	}
	return s
}

// tokenize splits on spaces; a value may be double-quoted (key="a b").
func tokenize(s string) ([]string, error) {
	var out []string
	var cur strings.Builder
	inQ := false
	for _, r := range s {
		switch {
		case r == '"':
			inQ = !inQ
		case r == ' ' && !inQ:
			if cur.Len() > 0 {
				out = append(out, cur.String())
				cur.Reset()
			}
		default:
			cur.WriteRune(r)
		}
	}
	if inQ {
		return nil, fmt.Errorf("unterminated quote")
	}
	if cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out, nil
}

func kv(toks []string) (map[string]string, error) {
	m := map[string]string{}
	for _, t := range toks {
		k, v, ok := strings.Cut(t, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%q is not key=value", t)
		}
		if _, dup := m[k]; dup {
			return nil, fmt.Errorf("key %q given twice", k)
		}
		m[k] = v
	}
	return m, nil
}
