package topo

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Cluster is the network shape of a Slurm cluster as Slurm's topology plugins
// see it: a tree of switches (topology/tree) and NVLink blocks
// (topology/block), from topology.conf (ParseTopologyConf) or from `scontrol
// show topology` (ParseScontrolTopology). One file may hold both a tree and
// blocks (the fabric tree and the NVL72 racks): Slurm uses one plugin at a time
// in topology.conf, but the model keeps both.
//
// A nil *Cluster, or one without switches, is the flat case: every node hangs
// off one switch. All methods work on it.
type Cluster struct {
	// Source says where the model came from, e.g. "topology.conf" or
	// "scontrol show topology"; "" for a flat cluster made without one.
	Source string

	switches []Switch       // sorted by level, then name
	swIndex  map[string]int // name -> index in switches
	leafOf   map[string]int // node -> index in switches of its leaf
	nodes    []string       // every node of the tree, blocks and rings, in order of first appearance
	levels   int            // number of switch levels; 0 without a tree

	// Distance between leaves: leafOrd maps a switch index to its leaf
	// ordinal; dist holds 1+level of the lowest common ancestor for every
	// pair of leaves (0 = none), when there are at most maxDistMatrix leaves;
	// otherwise anc holds each leaf's ancestors sorted by level.
	leafOrd []int
	nLeaves int
	dist    []uint8
	anc     [][]int

	blocks     []Block
	blockOf    map[string]int
	blockSizes []int

	rings  []Ring
	ringOf map[string]int
}

// Switch is one SwitchName of the tree.
type Switch struct {
	Name      string
	Level     int      // 0 for a leaf (a switch with Nodes); 1 + the highest child level otherwise, as Slurm computes it
	LinkSpeed int      // LinkSpeed= as configured (Slurm does not use it); 0 if unset
	Nodes     []string // a leaf's nodes in hostlist order; nil for an upper switch
	Switches  []string // child switches in hostlist order; nil for a leaf
	Parents   []string // switches that list this one, sorted; several in a fat tree
	Line      int      // line of its definition; 0 when not from a file
}

// Block is one BlockName: nodes that share an NVLink domain (an NVL72 rack).
type Block struct {
	Name  string
	Nodes []string
	Line  int
}

// Ring is one RingName (topology/ring): nodes in ring order.
type Ring struct {
	Name  string
	Nodes []string
	Line  int
}

// maxDistMatrix bounds the leaf-pair distance table (maxDistMatrix^2 bytes).
const maxDistMatrix = 4096

// FlatCluster is a cluster without topology: all nodes on one switch.
// nodes may be nil.
func FlatCluster(nodes []string) *Cluster {
	return &Cluster{nodes: slices.Clone(nodes)}
}

// HasTree reports whether the cluster has a switch tree.
func (c *Cluster) HasTree() bool { return c != nil && len(c.switches) > 0 }

// HasBlocks reports whether the cluster has NVLink blocks.
func (c *Cluster) HasBlocks() bool { return c != nil && len(c.blocks) > 0 }

// Levels is the number of switch levels: 1 for the flat case (one switch),
// 2 for leaves under one spine level, and so on.
func (c *Cluster) Levels() int {
	if !c.HasTree() {
		return 1
	}
	return c.levels
}

// Nodes returns every node the topology names, in order of first appearance.
func (c *Cluster) Nodes() []string {
	if c == nil {
		return nil
	}
	return slices.Clone(c.nodes)
}

// Switches returns the switches, leaves first (by level, then name).
func (c *Cluster) Switches() []Switch {
	if c == nil {
		return nil
	}
	return slices.Clone(c.switches)
}

// Switch returns the named switch.
func (c *Cluster) Switch(name string) (Switch, bool) {
	if c == nil {
		return Switch{}, false
	}
	i, ok := c.swIndex[name]
	if !ok {
		return Switch{}, false
	}
	return c.switches[i], true
}

// Leaf returns the name of node's leaf switch. It is "" in the flat case (all
// nodes share the one switch) and for a node the tree does not list. Compare
// nodes with Distance, which handles both.
func (c *Cluster) Leaf(node string) string {
	if !c.HasTree() {
		return ""
	}
	if i, ok := c.leafOf[node]; ok {
		return c.switches[i].Name
	}
	return ""
}

// Distance is how far apart two nodes are in the switch tree: 0 for the same
// node, 1 for nodes on the same leaf switch, and 1 + the level of their lowest
// common ancestor otherwise (2 across leaves under one spine level, 3 across
// spines under a core level, ...). In a fat tree with several parents per
// switch the lowest common ancestor is the lowest-level switch both reach.
// Nodes with no common ancestor, or not in the tree, are Levels()+1 apart:
// farther than anything the tree describes. In the flat case distinct nodes
// are 1 apart.
func (c *Cluster) Distance(a, b string) int {
	if a == b {
		return 0
	}
	if !c.HasTree() {
		return 1
	}
	la, okA := c.leafOf[a]
	lb, okB := c.leafOf[b]
	if !okA || !okB {
		return c.levels + 1
	}
	if la == lb {
		return 1
	}
	if c.dist != nil {
		if d := c.dist[c.leafOrd[la]*c.nLeaves+c.leafOrd[lb]]; d != 0 {
			return int(d)
		}
		return c.levels + 1
	}
	return c.ancestorDistance(la, lb)
}

// ancestorDistance finds the lowest common ancestor from the ancestor lists
// (sorted by level) when the table is too large to keep.
func (c *Cluster) ancestorDistance(la, lb int) int {
	ab := c.anc[c.leafOrd[lb]]
	for _, s := range c.anc[c.leafOrd[la]] {
		if slices.Contains(ab, s) { // ancestor lists are short: the tree's height times the fan-in
			return 1 + c.switches[s].Level
		}
	}
	return c.levels + 1
}

// Block returns the name of node's NVLink block, or "" when it has none.
func (c *Cluster) Block(node string) string {
	if c == nil {
		return ""
	}
	if i, ok := c.blockOf[node]; ok {
		return c.blocks[i].Name
	}
	return ""
}

// Blocks returns the blocks in file order.
func (c *Cluster) Blocks() []Block {
	if c == nil {
		return nil
	}
	return slices.Clone(c.blocks)
}

// BlockSizes returns BlockSizes= (the base block size first); nil if unset.
func (c *Cluster) BlockSizes() []int {
	if c == nil {
		return nil
	}
	return slices.Clone(c.blockSizes)
}

// Ring returns the name of node's ring (topology/ring), or "".
func (c *Cluster) Ring(node string) string {
	if c == nil {
		return ""
	}
	if i, ok := c.ringOf[node]; ok {
		return c.rings[i].Name
	}
	return ""
}

// Rings returns the rings in file order.
func (c *Cluster) Rings() []Ring {
	if c == nil {
		return nil
	}
	return slices.Clone(c.rings)
}

// clusterSpec is what a parser read, before validation.
type clusterSpec struct {
	file       string
	scontrol   bool // from scontrol output: upper switches list all their descendants in Nodes
	switches   []switchSpec
	blocks     []groupSpec
	rings      []groupSpec
	blockSizes []int
	sizesLine  int
}

type switchSpec struct {
	name       string
	line       int
	nodes      []string
	nodesLine  int
	hasNodes   bool
	children   []string
	childLine  int
	hasSwitch  bool
	linkSpeed  int
	level      int // as given by scontrol, -1 otherwise
	levelGiven bool
}

type groupSpec struct {
	name  string
	line  int
	nodes []string
}

func (s *clusterSpec) errorf(line int, key, format string, a ...any) error {
	return &ConfError{File: s.file, Line: line, Key: key, Msg: fmt.Sprintf(format, a...)}
}

// build validates the spec and makes the model.
func (s *clusterSpec) build(source string) (*Cluster, error) {
	nTree, nBlock, nRing := 0, 0, 0
	for _, sw := range s.switches {
		nTree += len(sw.nodes)
	}
	for _, b := range s.blocks {
		nBlock += len(b.nodes)
	}
	for _, r := range s.rings {
		nRing += len(r.nodes)
	}
	c := &Cluster{Source: source, swIndex: make(map[string]int, len(s.switches)), leafOf: make(map[string]int, nTree),
		blockOf: make(map[string]int, nBlock), ringOf: make(map[string]int, nRing)}
	seen := make(map[string]bool, nTree+nBlock+nRing)
	addNode := func(n string) {
		if !seen[n] {
			seen[n] = true
			c.nodes = append(c.nodes, n)
		}
	}
	if err := s.buildTree(c, addNode); err != nil {
		return nil, err
	}
	if err := s.buildBlocks(c, addNode); err != nil {
		return nil, err
	}
	if err := s.buildRings(c, addNode); err != nil {
		return nil, err
	}
	return c, nil
}

func (s *clusterSpec) buildTree(c *Cluster, addNode func(string)) error {
	if len(s.switches) == 0 {
		return nil
	}
	byName, err := s.switchIndex()
	if err != nil {
		return err
	}
	g, err := s.linkSwitches(byName)
	if err != nil {
		return err
	}
	level, err := s.switchLevels(g.children)
	if err != nil {
		return err
	}
	newIdx := s.addSwitches(c, g, level)
	// nodes in file order
	for _, sw := range s.switches {
		if !sw.hasSwitch {
			for _, node := range sw.nodes {
				addNode(node)
				c.leafOf[node] = c.swIndex[sw.name]
			}
		}
	}
	c.buildDistances(g.children, newIdx)
	return nil
}

// switchIndex is each switch's index by name; it refuses a switch defined
// twice, one with both Nodes= and Switches=, and one with neither.
func (s *clusterSpec) switchIndex() (map[string]int, error) {
	byName := map[string]int{}
	for i, sw := range s.switches {
		if j, dup := byName[sw.name]; dup {
			return nil, s.errorf(sw.line, "SwitchName", "switch %q is defined again (first on line %d); give each switch one line", sw.name, s.switches[j].line)
		}
		byName[sw.name] = i
		switch {
		case sw.hasNodes && sw.hasSwitch && !s.scontrol: // scontrol prints Nodes= (all descendants) on upper switches too
			return nil, s.errorf(sw.line, "SwitchName", "switch %q has both Nodes= and Switches=; Slurm's tree plugin would treat it as a leaf and ignore Switches=: put the nodes on a leaf switch of their own", sw.name)
		case !sw.hasNodes && !sw.hasSwitch:
			return nil, s.errorf(sw.line, "SwitchName", "switch %q has neither Nodes= nor Switches=; a leaf lists its nodes, an upper switch its child switches", sw.name)
		}
	}
	return byName, nil
}

// switchGraph is the switches' tree as the spec gives it (indices of
// s.switches): each one's children and parents, and which are leaves.
type switchGraph struct {
	children, parents [][]int
	isLeaf            []bool
}

// linkSwitches links the switches by their Switches= lists and checks the
// leaves' nodes: a child must be defined and not the switch itself, and a
// node is under one leaf.
func (s *clusterSpec) linkSwitches(byName map[string]int) (switchGraph, error) {
	n := len(s.switches)
	children := make([][]int, n)
	parents := make([][]int, n)
	isLeaf := make([]bool, n)
	nNodes := 0
	for _, sw := range s.switches {
		nNodes += len(sw.nodes)
	}
	leafLine := make(map[string]int, nNodes)
	leafName := make(map[string]string, nNodes)
	for i, sw := range s.switches {
		if sw.hasSwitch {
			for _, ch := range sw.children {
				j, ok := byName[ch]
				if !ok {
					return switchGraph{}, s.errorf(sw.childLine, "Switches", "switch %q lists child switch %q, which is not defined; add a SwitchName=%s line or fix the name", sw.name, ch, ch)
				}
				if j == i {
					return switchGraph{}, s.errorf(sw.childLine, "Switches", "switch %q lists itself as a child: the switches must form a tree", sw.name)
				}
				if slices.Contains(children[i], j) {
					continue // listed twice, as Slurm's hostlist would allow
				}
				children[i] = append(children[i], j)
				parents[j] = append(parents[j], i)
			}
			continue
		}
		isLeaf[i] = true
		for _, node := range sw.nodes {
			if prev, dup := leafName[node]; dup {
				if prev == sw.name {
					continue
				}
				return switchGraph{}, s.errorf(sw.nodesLine, "Nodes", "node %q is under leaf switches %q (line %d) and %q; Slurm only warns about such multi-homed nodes, but trainrun needs one leaf per node to place ranks: keep it on one", node, prev, leafLine[node], sw.name)
			}
			leafName[node] = sw.name
			leafLine[node] = sw.nodesLine
		}
	}
	return switchGraph{children: children, parents: parents, isLeaf: isLeaf}, nil
}

// switchLevels is each switch's level (a leaf 0, its parent 1, ...), with
// cycle detection (Slurm gives up with "Switch configuration is not a tree").
func (s *clusterSpec) switchLevels(children [][]int) ([]int, error) {
	n := len(s.switches)
	level := make([]int, n)
	state := make([]uint8, n) // 0 new, 1 on the stack, 2 done
	var stack []int
	var visit func(i int) error
	visit = func(i int) error {
		switch state[i] {
		case 2:
			return nil
		case 1:
			k := slices.Index(stack, i)
			names := make([]string, 0, len(stack)-k+1)
			for _, j := range stack[k:] {
				names = append(names, s.switches[j].name)
			}
			names = append(names, s.switches[i].name)
			return s.errorf(s.switches[i].childLine, "Switches", "switches form a cycle: %s; Switches= must point down the tree", strings.Join(names, " -> "))
		}
		state[i] = 1
		stack = append(stack, i)
		for _, j := range children[i] {
			if err := visit(j); err != nil {
				return err
			}
			level[i] = max(level[i], level[j]+1)
		}
		stack = stack[:len(stack)-1]
		state[i] = 2
		return nil
	}
	for i := range s.switches {
		if err := visit(i); err != nil {
			return nil, err
		}
	}
	return level, nil
}

// addSwitches puts the model's switches into c, sorted by level then name,
// and returns each spec index's place in that order.
func (s *clusterSpec) addSwitches(c *Cluster, g switchGraph, level []int) []int {
	n := len(s.switches)
	children, parents, isLeaf := g.children, g.parents, g.isLeaf
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		if level[order[a]] != level[order[b]] {
			return level[order[a]] < level[order[b]]
		}
		return s.switches[order[a]].name < s.switches[order[b]].name
	})
	newIdx := make([]int, n)
	for k, i := range order {
		newIdx[i] = k
	}
	names := func(idx []int) []string {
		if len(idx) == 0 {
			return nil
		}
		out := make([]string, len(idx))
		for k, j := range idx {
			out[k] = s.switches[j].name
		}
		return out
	}
	c.switches = make([]Switch, n)
	for k, i := range order {
		sw := s.switches[i]
		ps := names(parents[i])
		sort.Strings(ps)
		out := Switch{Name: sw.name, Level: level[i], LinkSpeed: sw.linkSpeed, Switches: names(children[i]), Parents: ps}
		if !s.scontrol {
			out.Line = sw.line
		}
		if isLeaf[i] {
			out.Nodes = slices.Clone(sw.nodes)
		}
		c.switches[k] = out
		c.swIndex[sw.name] = k
		c.levels = max(c.levels, level[i]+1)
	}
	return newIdx
}

// buildDistances fills the leaf-pair table (or the ancestor lists) from the
// children lists, which are in the spec's indices (newIdx maps them).
func (c *Cluster) buildDistances(childrenSpec [][]int, newIdx []int) {
	n := len(c.switches)
	children := make([][]int, n)
	for i, ch := range childrenSpec {
		for _, j := range ch {
			children[newIdx[i]] = append(children[newIdx[i]], newIdx[j])
		}
	}
	c.leafOrd = make([]int, n)
	var leaves []int
	for i, sw := range c.switches {
		c.leafOrd[i] = -1
		if sw.Switches == nil {
			c.leafOrd[i] = len(leaves)
			leaves = append(leaves, i)
		}
	}
	c.nLeaves = len(leaves)
	// descendant leaves of every switch, bottom up (switches are sorted by level)
	desc := make([][]int, n)
	for i := range c.switches {
		if c.leafOrd[i] >= 0 {
			desc[i] = []int{c.leafOrd[i]}
			continue
		}
		mark := map[int]bool{}
		for _, j := range children[i] {
			for _, l := range desc[j] {
				if !mark[l] {
					mark[l] = true
					desc[i] = append(desc[i], l)
				}
			}
		}
	}
	if c.nLeaves <= maxDistMatrix && c.levels < 255 {
		c.dist = make([]uint8, c.nLeaves*c.nLeaves)
		for i := range c.switches { // by level: the first writer is the lowest common ancestor
			d := uint8(1 + c.switches[i].Level)
			for _, a := range desc[i] {
				row := c.dist[a*c.nLeaves:]
				for _, b := range desc[i] {
					if row[b] == 0 {
						row[b] = d
					}
				}
			}
		}
		return
	}
	c.anc = make([][]int, c.nLeaves)
	for i := range c.switches { // ascending level, so each list is sorted by level
		for _, l := range desc[i] {
			c.anc[l] = append(c.anc[l], i)
		}
	}
}

func (s *clusterSpec) buildBlocks(c *Cluster, addNode func(string)) error {
	if len(s.blocks) == 0 {
		if s.blockSizes != nil {
			return s.errorf(s.sizesLine, "BlockSizes", "BlockSizes= without any BlockName= line; define the blocks or remove it")
		}
		return nil
	}
	names := map[string]int{}
	for i, b := range s.blocks {
		if j, dup := names[b.name]; dup {
			return s.errorf(b.line, "BlockName", "block %q is defined again (first on line %d)", b.name, s.blocks[j].line)
		}
		names[b.name] = i
		for _, node := range b.nodes {
			if j, dup := c.blockOf[node]; dup {
				if j == i {
					continue
				}
				return s.errorf(b.line, "Nodes", "node %q is in blocks %q (line %d) and %q; a node belongs to one NVLink block", node, s.blocks[j].name, s.blocks[j].line, b.name)
			}
			c.blockOf[node] = i
			addNode(node)
		}
		if len(s.blockSizes) > 0 && len(b.nodes) < s.blockSizes[0] {
			return s.errorf(b.line, "Nodes", "block %q has %d nodes, fewer than the base block size %d of BlockSizes= (line %d); topology.conf(5): each block must have at least that many", b.name, len(b.nodes), s.blockSizes[0], s.sizesLine)
		}
		c.blocks = append(c.blocks, Block{Name: b.name, Nodes: slices.Clone(b.nodes), Line: b.line})
	}
	c.blockSizes = slices.Clone(s.blockSizes)
	if s.scontrol {
		for i := range c.blocks {
			c.blocks[i].Line = 0
		}
	}
	return nil
}

func (s *clusterSpec) buildRings(c *Cluster, addNode func(string)) error {
	names := map[string]int{}
	for i, r := range s.rings {
		if j, dup := names[r.name]; dup {
			return s.errorf(r.line, "RingName", "ring %q is defined again (first on line %d)", r.name, s.rings[j].line)
		}
		names[r.name] = i
		if len(r.nodes) > 16 {
			return s.errorf(r.line, "Nodes", "ring %q has %d nodes; topology.conf(5) allows at most 16 per ring", r.name, len(r.nodes))
		}
		for _, node := range r.nodes {
			if j, dup := c.ringOf[node]; dup && j != i {
				return s.errorf(r.line, "Nodes", "node %q is in rings %q (line %d) and %q", node, s.rings[j].name, s.rings[j].line, r.name)
			}
			c.ringOf[node] = i
			addNode(node)
		}
		c.rings = append(c.rings, Ring{Name: r.name, Nodes: slices.Clone(r.nodes), Line: r.line})
	}
	return nil
}
