package topo

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// topology.conf as Slurm reads it (topology.conf(5); tree, block and ring
// plugins) and `scontrol show topology` as Slurm 22.05 prints it.
//
//	SwitchName=s0 Nodes=dev[0-5] LinkSpeed=900     a leaf switch
//	SwitchName=s3 Switches=s[0-2]                  an upper switch
//	BlockName=block1 Nodes=node[1-32]              an NVLink block
//	BlockSizes=30,120                              base block size, then larger ones
//	RingName=ring0 Nodes=node[01-08]               a ring (at most 16 nodes)
//
// Every line begins with SwitchName, BlockName, BlockSizes or RingName; keys
// are case-insensitive; Nodes and Switches take hostlist expressions.

// topologyConfKeys is every key topology.conf accepts, for error messages.
var topologyConfKeys = []string{"SwitchName", "Switches", "Nodes", "LinkSpeed", "BlockName", "BlockSizes", "RingName"}

// keys allowed after each leading key
var topologyConfLineKeys = map[string][]string{
	"switchname": {"Switches", "Nodes", "LinkSpeed"},
	"blockname":  {"Nodes"},
	"blocksizes": {},
	"ringname":   {"Nodes"},
}

// maxSwitchName is topology.conf(5)'s limit on a switch name.
const maxSwitchName = 64

// LoadTopologyConf reads a topology.conf file; errors name path and line.
func LoadTopologyConf(path string) (*Cluster, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("topology: %w", err)
	}
	defer f.Close()
	return ParseTopologyConf(f, path)
}

// ParseTopologyConf parses Slurm's topology.conf. filename names the input in
// errors ("topology.conf:7: Switchs: unknown key ..."). An input without any
// line gives a flat cluster.
func ParseTopologyConf(r io.Reader, filename string) (*Cluster, error) {
	lines, err := ReadConfLines(r, filename)
	if err != nil {
		return nil, err
	}
	spec := &clusterSpec{file: filename}
	for _, l := range lines {
		lead := l.Pairs[0]
		leadKey := strings.ToLower(lead.Key)
		allowed, ok := topologyConfLineKeys[leadKey]
		if !ok {
			if canon := canonicalKey(lead.Key, topologyConfKeys); canon != "" {
				return nil, &ConfError{File: filename, Line: lead.Line, Key: lead.Key,
					Msg: fmt.Sprintf("a line must begin with SwitchName=, BlockName=, BlockSizes= or RingName=, not %s=", canon)}
			}
			return nil, &ConfError{File: filename, Line: lead.Line, Key: lead.Key, Msg: UnknownKeyMessage(lead.Key, topologyConfKeys)}
		}
		if lead.Value == "" {
			return nil, &ConfError{File: filename, Line: lead.Line, Key: lead.Key, Msg: "empty value"}
		}
		seen := map[string]int{leadKey: lead.Line}
		vals := map[string]ConfPair{}
		for _, p := range l.Pairs[1:] {
			lk := strings.ToLower(p.Key)
			canon := canonicalKey(p.Key, allowed)
			if canon == "" {
				if other := canonicalKey(p.Key, topologyConfKeys); other != "" {
					acc := "no other keys"
					if len(allowed) > 0 {
						acc = "only " + strings.Join(allowed, ", ")
					}
					return nil, &ConfError{File: filename, Line: p.Line, Key: p.Key,
						Msg: fmt.Sprintf("not valid on a %s= line; it takes %s", canonicalKey(lead.Key, topologyConfKeys), acc)}
				}
				return nil, &ConfError{File: filename, Line: p.Line, Key: p.Key, Msg: UnknownKeyMessage(p.Key, topologyConfKeys)}
			}
			if first, dup := seen[lk]; dup {
				return nil, &ConfError{File: filename, Line: p.Line, Key: p.Key, Msg: fmt.Sprintf("given twice on one line (first on line %d)", first)}
			}
			seen[lk] = p.Line
			if p.Value == "" {
				return nil, &ConfError{File: filename, Line: p.Line, Key: p.Key, Msg: "empty value"}
			}
			vals[lk] = p
		}
		if err := spec.addConfLine(leadKey, lead, vals); err != nil {
			return nil, err
		}
	}
	return spec.build(filepath.Base(filename))
}

// canonicalKey returns the entry of keys equal to key ignoring case, or "".
func canonicalKey(key string, keys []string) string {
	for _, k := range keys {
		if strings.EqualFold(k, key) {
			return k
		}
	}
	return ""
}

// expandAt expands a hostlist value, reporting errors at the pair's line.
func (s *clusterSpec) expandAt(p ConfPair) ([]string, error) {
	names, err := ExpandHostlist(p.Value)
	if err != nil {
		return nil, &ConfError{File: s.file, Line: p.Line, Key: p.Key, Value: p.Value, Msg: err.Error()}
	}
	return names, nil
}

func (s *clusterSpec) addConfLine(leadKey string, lead ConfPair, vals map[string]ConfPair) error {
	switch leadKey {
	case "switchname":
		if len(lead.Value) > maxSwitchName {
			return s.errorf(lead.Line, lead.Key, "switch name %q is %d characters; topology.conf(5) allows at most %d", lead.Value, len(lead.Value), maxSwitchName)
		}
		if strings.ContainsAny(lead.Value, "[],") {
			return s.errorf(lead.Line, lead.Key, "%q: SwitchName takes one name, not a hostlist; write one line per switch", lead.Value)
		}
		sw := switchSpec{name: lead.Value, line: lead.Line, level: -1}
		if p, ok := vals["nodes"]; ok {
			nodes, err := s.expandAt(p)
			if err != nil {
				return err
			}
			sw.nodes, sw.nodesLine, sw.hasNodes = nodes, p.Line, true
		}
		if p, ok := vals["switches"]; ok {
			ch, err := s.expandAt(p)
			if err != nil {
				return err
			}
			sw.children, sw.childLine, sw.hasSwitch = ch, p.Line, true
		}
		if p, ok := vals["linkspeed"]; ok {
			v, err := strconv.ParseUint(p.Value, 10, 32)
			if err != nil {
				return &ConfError{File: s.file, Line: p.Line, Key: p.Key, Value: p.Value, Msg: fmt.Sprintf("%q is not a whole number; LinkSpeed is an unsigned 32-bit integer (Slurm does not use it)", p.Value)}
			}
			sw.linkSpeed = int(v)
		}
		s.switches = append(s.switches, sw)
	case "blockname", "ringname":
		g := groupSpec{name: lead.Value, line: lead.Line}
		p, ok := vals["nodes"]
		if !ok {
			return s.errorf(lead.Line, lead.Key, "%s=%s has no Nodes=; list the nodes of the %s", lead.Key, lead.Value, strings.TrimSuffix(leadKey, "name"))
		}
		nodes, err := s.expandAt(p)
		if err != nil {
			return err
		}
		g.nodes = nodes
		if leadKey == "blockname" {
			s.blocks = append(s.blocks, g)
		} else {
			s.rings = append(s.rings, g)
		}
	case "blocksizes":
		if s.blockSizes != nil {
			return s.errorf(lead.Line, lead.Key, "given again (first on line %d); write one BlockSizes= line", s.sizesLine)
		}
		sizes, err := parseBlockSizes(lead.Value)
		if err != nil {
			return &ConfError{File: s.file, Line: lead.Line, Key: lead.Key, Value: lead.Value, Msg: err.Error()}
		}
		s.blockSizes, s.sizesLine = sizes, lead.Line
	}
	return nil
}

// parseBlockSizes checks topology.conf(5)'s rule: positive sizes, each one a
// power-of-two multiple of the one before and larger (BlockSizes=30,120).
func parseBlockSizes(v string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%q is not a positive whole number; write BlockSizes=BASE[,LARGER...] such as 18,36,72", f)
		}
		if k := len(out); k > 0 {
			prev := out[k-1]
			if n <= prev || n%prev != 0 || (n/prev)&(n/prev-1) != 0 {
				return nil, fmt.Errorf("%d after %d: each size must be the previous one times a power of two (%d, %d, %d, ...)", n, prev, prev*2, prev*4, prev*8)
			}
		}
		out = append(out, n)
	}
	return out, nil
}

// scontrol show topology keys we read; others are ignored, since newer Slurm
// versions add fields.
var scontrolTopologyLeads = []string{"SwitchName", "BlockName"}

// ParseScontrolTopology parses the output of `scontrol show topology`.
// Slurm 22.05 (topology/tree) prints one line per switch, from the format
// strings "SwitchName=%s Level=%u LinkSpeed=%u", " Nodes=%s" and
// " Switches=%s" (all three are in Debian's libslurm.so.38):
//
//	SwitchName=s0 Level=0 LinkSpeed=1 Nodes=tux[0-3]
//	SwitchName=s4 Level=1 LinkSpeed=1 Nodes=tux[0-15] Switches=s[0-3]
//
// Whether an upper switch prints Nodes= (all nodes below it, as slurmctld
// computes them) has not been seen on a live cluster; either way membership is
// taken from the leaves only, and Level= is checked against the levels the
// children imply. Newer Slurm with topology/block prints "BlockName=b1
// BlockIndex=0 Nodes=node[01-04] BlockSize=4" lines (written from memory of
// Slurm's documentation, not from a captured output; unknown keys are
// ignored). Empty output, and libslurm's "No topology information available"
// (which it logs to stderr), give a flat cluster. source names the input in
// errors.
func ParseScontrolTopology(r io.Reader, source string) (*Cluster, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	// libslurm logs this to stderr; accept it in case both streams were kept
	if strings.TrimSpace(string(data)) == "No topology information available" {
		return &Cluster{Source: source}, nil
	}
	lines, err := ReadConfLines(bytes.NewReader(data), source)
	if err != nil {
		return nil, err
	}
	spec := &clusterSpec{file: source, scontrol: true}
	for _, l := range lines {
		lead := l.Pairs[0]
		vals := map[string]ConfPair{}
		for _, p := range l.Pairs[1:] {
			vals[strings.ToLower(p.Key)] = p
		}
		switch strings.ToLower(lead.Key) {
		case "switchname":
			sw := switchSpec{name: lead.Value, line: lead.Line, level: -1}
			if p, ok := vals["nodes"]; ok && p.Value != "" {
				nodes, err := spec.expandAt(p)
				if err != nil {
					return nil, err
				}
				sw.nodes, sw.nodesLine, sw.hasNodes = nodes, p.Line, true
			}
			if p, ok := vals["switches"]; ok && p.Value != "" {
				ch, err := spec.expandAt(p)
				if err != nil {
					return nil, err
				}
				sw.children, sw.childLine, sw.hasSwitch = ch, p.Line, true
			}
			if p, ok := vals["linkspeed"]; ok {
				v, err := strconv.ParseUint(p.Value, 10, 32)
				if err != nil {
					return nil, &ConfError{File: source, Line: p.Line, Key: p.Key, Value: p.Value, Msg: fmt.Sprintf("%q is not a whole number", p.Value)}
				}
				sw.linkSpeed = int(v)
			}
			if p, ok := vals["level"]; ok {
				v, err := strconv.Atoi(p.Value)
				if err != nil || v < 0 {
					return nil, &ConfError{File: source, Line: p.Line, Key: p.Key, Value: p.Value, Msg: fmt.Sprintf("%q is not a switch level", p.Value)}
				}
				sw.level, sw.levelGiven = v, true
			}
			spec.switches = append(spec.switches, sw)
		case "blockname":
			p, ok := vals["nodes"]
			if !ok {
				return nil, &ConfError{File: source, Line: lead.Line, Key: lead.Key, Msg: "block without Nodes="}
			}
			nodes, err := spec.expandAt(p)
			if err != nil {
				return nil, err
			}
			spec.blocks = append(spec.blocks, groupSpec{name: lead.Value, line: lead.Line, nodes: nodes})
		default:
			return nil, &ConfError{File: source, Line: lead.Line, Key: lead.Key,
				Msg: fmt.Sprintf("unexpected line; `scontrol show topology` lines begin with %s", strings.Join(scontrolTopologyLeads, " or "))}
		}
	}
	c, err := spec.build(source)
	if err != nil {
		return nil, err
	}
	for _, sw := range spec.switches {
		if got, ok := c.Switch(sw.name); ok && sw.levelGiven && got.Level != sw.level {
			return nil, spec.errorf(sw.line, "Level", "switch %q has Level=%d, but its child switches put it at level %d (leaves 0, others 1 + their highest child)", sw.name, sw.level, got.Level)
		}
	}
	return c, nil
}
