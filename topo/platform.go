package topo

import (
	"bufio"
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// platformTopo is what the platform's own NCCL topology file says about
// which NICs sit with which GPU: Azure's ND images ship one
// (/opt/microsoft/ndvN/topo.xml, named by NCCL_TOPO_FILE in /etc/nccl.conf)
// that groups each GPU with its NIC under a fake PCIe switch, because the
// VM's flat bus does not show the pairing.
type platformTopo struct {
	Path string
	// near maps a GPU bus id to the NIC bus ids under the nearest PCI
	// element (switch) of the file that holds both.
	near map[string][]string
}

// nicsFor names the RDMA devices the file pairs with a GPU, in the node's
// RDMA order.
func (pt *platformTopo) nicsFor(n *Node, gpuBus string) []string {
	want := map[string]bool{}
	for _, b := range pt.near[gpuBus] {
		want[b] = true
	}
	var out []string
	for _, d := range n.RDMA {
		if want[d.BusID] {
			out = append(out, d.Name)
		}
	}
	return out
}

// readPlatformTopo reads NCCL_TOPO_FILE from root/etc/nccl.conf and the
// file it names (inside root). No nccl.conf or no NCCL_TOPO_FILE is not a
// note; a named file that cannot be read or parsed is.
func readPlatformTopo(n *Node, root string) *platformTopo {
	conf := filepath.Join(root, "etc/nccl.conf")
	p := ncclConfValue(conf, "NCCL_TOPO_FILE")
	if p == "" {
		return nil
	}
	full := filepath.Join(root, p)
	b, err := os.ReadFile(full)
	if err != nil {
		n.degrade("nccl-topo-file", "%s names NCCL_TOPO_FILE=%s, but %s: %s: GPU-NIC pairing from PCIe distance only", conf, p, full, errShort(err))
		return nil
	}
	near, err := topoFilePairs(b)
	if err != nil {
		n.degrade("nccl-topo-file", "%s (NCCL_TOPO_FILE in %s): %v: GPU-NIC pairing from PCIe distance only", full, conf, err)
		return nil
	}
	n.PlatformTopoFile = p
	return &platformTopo{Path: p, near: near}
}

// ncclConfValue reads KEY=VALUE from an nccl.conf ('#' comments).
func ncclConfValue(path, key string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	val := ""
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		if k, v, ok := strings.Cut(l, "="); ok && strings.TrimSpace(k) == key {
			val = strings.Trim(strings.TrimSpace(v), `"'`)
		}
	}
	return val
}

type xmlElem struct {
	name     string
	busid    string
	class    string
	parent   *xmlElem
	children []*xmlElem
}

// topoFilePairs parses an NCCL topology file and, for every GPU <pci>,
// lists the NIC <pci> bus ids under its nearest PCI ancestor that has any
// (a <cpu> does not count: that is the host bridge, not a switch).
func topoFilePairs(b []byte) (map[string][]string, error) {
	dec := xml.NewDecoder(bytes.NewReader(b))
	dec.Strict = false
	root := &xmlElem{name: "#root"}
	cur := root
	var gpus []*xmlElem
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("not an NCCL topology file: %v", err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			e := &xmlElem{name: t.Name.Local, parent: cur}
			for _, a := range t.Attr {
				switch a.Name.Local {
				case "busid":
					e.busid, _ = NormalizeBusID(a.Value)
				case "class":
					e.class = a.Value
				}
			}
			cur.children = append(cur.children, e)
			cur = e
			if e.name == "pci" && strings.HasPrefix(e.class, "0x03") && e.busid != "" {
				gpus = append(gpus, e)
			}
		case xml.EndElement:
			if cur.parent != nil {
				cur = cur.parent
			}
		}
	}
	if len(root.children) == 0 || root.children[0].name != "system" {
		return nil, errors.New("no <system> element")
	}
	out := map[string][]string{}
	for _, g := range gpus {
		for a := g.parent; a != nil && a.name == "pci"; a = a.parent {
			if nics := nicsBelow(a); len(nics) > 0 {
				out[g.busid] = nics
				break
			}
		}
	}
	return out, nil
}

func nicsBelow(e *xmlElem) []string {
	var out []string
	for _, c := range e.children {
		if c.name == "pci" && strings.HasPrefix(c.class, "0x02") && c.busid != "" {
			out = append(out, c.busid)
		}
		out = append(out, nicsBelow(c)...)
	}
	return out
}
