package topo

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
)

func loadConf(t *testing.T, path string) *Cluster {
	t.Helper()
	c, err := LoadTopologyConf(path)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func parseConf(t *testing.T, text string) *Cluster {
	t.Helper()
	c, err := ParseTopologyConf(strings.NewReader(text), "topology.conf")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

type distCase struct {
	a, b string
	want int
}

func checkDistances(t *testing.T, c *Cluster, cases []distCase) {
	t.Helper()
	for _, d := range cases {
		if got := c.Distance(d.a, d.b); got != d.want {
			t.Errorf("Distance(%s, %s) = %d, want %d", d.a, d.b, got, d.want)
		}
		if got := c.Distance(d.b, d.a); got != d.want {
			t.Errorf("Distance(%s, %s) = %d, want %d (not symmetric)", d.b, d.a, got, d.want)
		}
	}
}

// The EXAMPLE section of topology.conf(5): a tree, blocks and rings in one file.
func TestTopologyConfManExample(t *testing.T) {
	c := loadConf(t, "testdata/slurm/topology.conf.tree-block-ring.examples")
	if !c.HasTree() || !c.HasBlocks() || c.Levels() != 2 {
		t.Fatalf("HasTree %v HasBlocks %v Levels %d; want true true 2", c.HasTree(), c.HasBlocks(), c.Levels())
	}
	for node, leaf := range map[string]string{"dev0": "s0", "dev5": "s0", "dev6": "s1", "dev17": "s2", "node1": "", "dev18": ""} {
		if got := c.Leaf(node); got != leaf {
			t.Errorf("Leaf(%s) = %q, want %q", node, got, leaf)
		}
	}
	checkDistances(t, c, []distCase{
		{"dev0", "dev0", 0}, {"dev0", "dev5", 1}, {"dev0", "dev6", 2}, {"dev11", "dev12", 2},
		{"dev0", "node1", 3}, // node1 is in a block, not in the tree: beyond the top
	})
	s3, ok := c.Switch("s3")
	if !ok || s3.Level != 1 || !slices.Equal(s3.Switches, []string{"s0", "s1", "s2"}) || s3.Nodes != nil || s3.Line != 8 {
		t.Errorf("s3 = %+v, %v", s3, ok)
	}
	if s0, _ := c.Switch("s0"); !slices.Equal(s0.Parents, []string{"s3"}) || len(s0.Nodes) != 6 {
		t.Errorf("s0 = %+v", s0)
	}
	for node, block := range map[string]string{"node1": "block1", "node32": "block1", "node33": "block2", "node128": "block4", "dev0": "", "node129": ""} {
		if got := c.Block(node); got != block {
			t.Errorf("Block(%s) = %q, want %q", node, got, block)
		}
	}
	if got := c.BlockSizes(); !slices.Equal(got, []int{30, 120}) {
		t.Errorf("BlockSizes = %v", got)
	}
	if got := c.Ring("node09"); got != "ring1" {
		t.Errorf("Ring(node09) = %q", got)
	}
	// rings name node01..node09 (new) and node10..node16 (also in block1)
	if got := len(c.Nodes()); got != 18+128+9 {
		t.Errorf("%d nodes, want %d", got, 18+128+9)
	}
}

// topology.shtml's two-level fat tree: every leaf under four spines.
func TestTopologyConfFatTree(t *testing.T) {
	c := loadConf(t, "testdata/slurm/topology.conf.tree-linkspeed.example")
	if c.Levels() != 2 {
		t.Fatalf("Levels = %d", c.Levels())
	}
	checkDistances(t, c, []distCase{{"tux0", "tux3", 1}, {"tux3", "tux4", 2}, {"tux0", "tux15", 2}})
	s0, _ := c.Switch("s0")
	if !slices.Equal(s0.Parents, []string{"s4", "s5", "s6", "s7"}) || s0.LinkSpeed != 900 {
		t.Errorf("s0 = %+v", s0)
	}
	if s7, _ := c.Switch("s7"); s7.LinkSpeed != 1800 || s7.Level != 1 {
		t.Errorf("s7 = %+v", s7)
	}
	// switches come leaves first
	var names []string
	for _, s := range c.Switches() {
		names = append(names, s.Name)
	}
	if want := []string{"s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7"}; !slices.Equal(names, want) {
		t.Errorf("Switches order %v, want %v", names, want)
	}
}

// The same fabric as scontrol show topology prints it: the same model.
func TestScontrolTopologySameAsConf(t *testing.T) {
	f, err := os.Open("testdata/slurm/scontrol-show-topology-22.05.tree.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc, err := ParseScontrolTopology(f, "scontrol show topology")
	if err != nil {
		t.Fatal(err)
	}
	conf := loadConf(t, "testdata/slurm/topology.conf.tree-linkspeed.example")
	for _, a := range conf.Nodes() {
		if sc.Leaf(a) != conf.Leaf(a) {
			t.Errorf("Leaf(%s): scontrol %q, conf %q", a, sc.Leaf(a), conf.Leaf(a))
		}
		for _, b := range conf.Nodes() {
			if sc.Distance(a, b) != conf.Distance(a, b) {
				t.Errorf("Distance(%s, %s): scontrol %d, conf %d", a, b, sc.Distance(a, b), conf.Distance(a, b))
			}
		}
	}
	if !slices.Equal(sc.Nodes(), conf.Nodes()) {
		t.Errorf("nodes: scontrol %v, conf %v", sc.Nodes(), conf.Nodes())
	}
	s4, _ := sc.Switch("s4")
	if s4.Nodes != nil || len(s4.Switches) != 4 {
		t.Errorf("upper switch from scontrol keeps its Nodes= as members: %+v", s4)
	}
}

func TestScontrolTopologyCases(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		wantErr string
		check   func(t *testing.T, c *Cluster)
	}{
		{name: "no topology plugin: empty stdout", in: "", check: func(t *testing.T, c *Cluster) {
			if c.HasTree() || c.Distance("a", "b") != 1 {
				t.Errorf("want flat")
			}
		}},
		{name: "no topology plugin: the message, if stderr was kept", in: "No topology information available\n", check: func(t *testing.T, c *Cluster) {
			if c.HasTree() || c.Distance("a", "b") != 1 {
				t.Errorf("want flat")
			}
		}},
		{name: "three levels, upper switches without Nodes", in: "SwitchName=l0 Level=0 LinkSpeed=1 Nodes=n[1-2]\nSwitchName=l1 Level=0 LinkSpeed=1 Nodes=n[3-4]\n" +
			"SwitchName=l2 Level=0 LinkSpeed=1 Nodes=n[5-6]\nSwitchName=sp0 Level=1 LinkSpeed=1 Switches=l[0-1]\n" +
			"SwitchName=sp1 Level=1 LinkSpeed=1 Switches=l2\nSwitchName=core Level=2 LinkSpeed=1 Switches=sp[0-1]\n",
			check: func(t *testing.T, c *Cluster) {
				checkDistances(t, c, []distCase{{"n1", "n2", 1}, {"n1", "n3", 2}, {"n1", "n5", 3}, {"n4", "n6", 3}})
			}},
		{name: "blocks, newer Slurm", in: "BlockName=b1 BlockIndex=0 Nodes=gb[01-18] BlockSize=18\nBlockName=b2 BlockIndex=1 Nodes=gb[19-36] BlockSize=18\n",
			check: func(t *testing.T, c *Cluster) {
				if c.Block("gb18") != "b1" || c.Block("gb19") != "b2" || c.HasTree() {
					t.Errorf("blocks wrong: %v %v", c.Block("gb18"), c.Block("gb19"))
				}
			}},
		{name: "wrong level", in: "SwitchName=l0 Level=0 LinkSpeed=1 Nodes=n1\nSwitchName=sp Level=2 LinkSpeed=1 Switches=l0\n",
			wantErr: `scontrol:2: Level: switch "sp" has Level=2, but its child switches put it at level 1`},
		{name: "not scontrol output", in: "NodeName=n1 State=IDLE\n", wantErr: "scontrol:1: NodeName: unexpected line"},
		{name: "bad hostlist", in: "SwitchName=l0 Level=0 LinkSpeed=1 Nodes=n[3-1]\n", wantErr: `scontrol:1: Nodes: hostlist "n[3-1]", column 3: bad range`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseScontrolTopology(strings.NewReader(tc.in), "scontrol")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, c)
		})
	}
}

func TestClusterHandBuilt(t *testing.T) {
	t.Run("three levels", func(t *testing.T) {
		c := parseConf(t, `
# core -> two spines -> four leaves of two nodes
SwitchName=core Switches=spine[0-1]
SwitchName=spine0 Switches=leaf[0-1]
SwitchName=spine1 Switches=leaf[2-3]
SwitchName=leaf0 Nodes=n[01-02]
SwitchName=leaf1 Nodes=n[03-04]
SwitchName=leaf2 Nodes=n[05-06]
SwitchName=leaf3 Nodes=n[07-08]
`)
		if c.Levels() != 3 {
			t.Errorf("Levels = %d", c.Levels())
		}
		checkDistances(t, c, []distCase{{"n01", "n02", 1}, {"n01", "n03", 2}, {"n01", "n05", 3}, {"n04", "n08", 3}, {"n01", "x9", 4}, {"x9", "x9", 0}})
		if c.Leaf("n06") != "leaf2" {
			t.Errorf("Leaf(n06) = %q", c.Leaf("n06"))
		}
	})
	t.Run("uneven depth: a leaf straight under the core", func(t *testing.T) {
		c := parseConf(t, "SwitchName=core Switches=spine0,leafX\nSwitchName=spine0 Switches=leaf0\nSwitchName=leaf0 Nodes=a[1-2]\nSwitchName=leafX Nodes=b1\n")
		// core is level 2 (1 + spine0's level), so a1 and b1 meet at level 2
		checkDistances(t, c, []distCase{{"a1", "b1", 3}, {"a1", "a2", 1}})
	})
	t.Run("forest: two trees without a common root", func(t *testing.T) {
		c := parseConf(t, "SwitchName=s0 Nodes=a[1-2]\nSwitchName=s1 Nodes=b[1-2]\n")
		if c.Levels() != 1 {
			t.Errorf("Levels = %d", c.Levels())
		}
		checkDistances(t, c, []distCase{{"a1", "a2", 1}, {"a1", "b1", 2}})
	})
	t.Run("continuation, comments, case, spaces around =", func(t *testing.T) {
		c := parseConf(t, "switchname=s0 \\\n   NODES = n[1-4] # four nodes\nSWITCHNAME=s1 Nodes=n[5-8]\nSwitchName=top switches=\"s0,s1\" linkspeed=100\n")
		checkDistances(t, c, []distCase{{"n1", "n4", 1}, {"n4", "n5", 2}})
		if top, _ := c.Switch("top"); top.LinkSpeed != 100 || top.Line != 4 {
			t.Errorf("top = %+v", top)
		}
	})
	t.Run("no topology", func(t *testing.T) {
		for name, c := range map[string]*Cluster{"nil": nil, "FlatCluster": FlatCluster([]string{"a", "b"}), "empty file": parseConf(t, "# nothing\n\n")} {
			if c.Distance("a", "b") != 1 || c.Distance("a", "a") != 0 || c.Leaf("a") != "" || c.Levels() != 1 || c.Block("a") != "" {
				t.Errorf("%s: not one switch", name)
			}
		}
	})
	t.Run("blocks only", func(t *testing.T) {
		c := parseConf(t, "BlockName=rack1 Nodes=gb[001-018]\nBlockName=rack2 Nodes=gb[019-036]\nBlockSizes=18,36,72\n")
		if c.Block("gb018") != "rack1" || c.Block("gb019") != "rack2" || c.HasTree() || c.Distance("gb001", "gb036") != 1 {
			t.Errorf("blocks: %q %q tree %v", c.Block("gb018"), c.Block("gb019"), c.HasTree())
		}
	})
	t.Run("more leaves than the distance table holds", func(t *testing.T) {
		var b strings.Builder
		n := maxDistMatrix + 4
		for i := 0; i < n; i++ {
			fmt.Fprintf(&b, "SwitchName=l%d Nodes=n%d\n", i, i)
		}
		fmt.Fprintf(&b, "SwitchName=sp0 Switches=l[0-%d]\nSwitchName=sp1 Switches=l[%d-%d]\nSwitchName=core Switches=sp[0-1]\n", n/2-1, n/2, n-1)
		c := parseConf(t, b.String())
		if c.dist != nil {
			t.Fatal("expected the ancestor-list path")
		}
		checkDistances(t, c, []distCase{{"n0", "n1", 2}, {"n0", fmt.Sprint("n", n-1), 3}, {"n0", "zz", 4}})
	})
}

func TestTopologyConfErrors(t *testing.T) {
	tests := []struct {
		name string
		conf string
		want string // the whole message or its start
	}{
		{"unknown key", "SwitchName=s0 Nodes=n1\nSwitchName=s1 Nodes=n2\nSwitchName=s2 Switchs=s[0-1]\n",
			`topology.conf:3: Switchs: unknown key "Switchs"; accepted: SwitchName, Switches, Nodes, LinkSpeed, BlockName, BlockSizes, RingName (did you mean Switches?)`},
		{"unknown leading key", "NodeName=n1\n", `topology.conf:1: NodeName: unknown key "NodeName"`},
		{"line not starting with a leading key", "Nodes=n1 SwitchName=s0\n", "topology.conf:1: Nodes: a line must begin with SwitchName=, BlockName=, BlockSizes= or RingName=, not Nodes="},
		{"key on the wrong line", "BlockName=b1 Nodes=n[1-2] LinkSpeed=5\n", "topology.conf:1: LinkSpeed: not valid on a BlockName= line; it takes only Nodes"},
		{"duplicate key on a line", "SwitchName=s0 Nodes=n1 nodes=n2\n", "topology.conf:1: nodes: given twice on one line (first on line 1)"},
		{"empty value", "SwitchName=s0 Nodes=\n", "topology.conf:1: Nodes: empty value"},
		{"bad hostlist names line and key", "# c\nSwitchName=s0 Nodes=n[1-3\n", `topology.conf:2: Nodes: hostlist "n[1-3", column 2: '[' is never closed`},
		{"bad LinkSpeed", "SwitchName=s0 Nodes=n1 LinkSpeed=fast\n", `topology.conf:1: LinkSpeed: "fast" is not a whole number`},
		{"undefined child switch", "SwitchName=s0 Nodes=n1\nSwitchName=top Switches=s[0-1]\n",
			`topology.conf:2: Switches: switch "top" lists child switch "s1", which is not defined; add a SwitchName=s1 line or fix the name`},
		{"switch defined twice", "SwitchName=s0 Nodes=n1\nSwitchName=s0 Nodes=n2\n", `topology.conf:2: SwitchName: switch "s0" is defined again (first on line 1)`},
		{"node in two leaves", "SwitchName=s0 Nodes=n[1-4]\nSwitchName=s1 Nodes=n[4-8]\n",
			`topology.conf:2: Nodes: node "n4" is under leaf switches "s0" (line 1) and "s1"`},
		{"cycle", "SwitchName=a Switches=b\nSwitchName=b Switches=c\nSwitchName=c Switches=a\n", "topology.conf:1: Switches: switches form a cycle: a -> b -> c -> a"},
		{"self child", "SwitchName=a Switches=a\n", `topology.conf:1: Switches: switch "a" lists itself as a child`},
		{"both nodes and switches", "SwitchName=s0 Nodes=n1\nSwitchName=s1 Nodes=n2 Switches=s0\n", `topology.conf:2: SwitchName: switch "s1" has both Nodes= and Switches=`},
		{"neither nodes nor switches", "SwitchName=s0 LinkSpeed=1\n", `topology.conf:1: SwitchName: switch "s0" has neither Nodes= nor Switches=`},
		{"switch name is a hostlist", "SwitchName=s[0-1] Nodes=n1\n", "topology.conf:1: SwitchName: \"s[0-1]\": SwitchName takes one name"},
		{"switch name too long", "SwitchName=" + strings.Repeat("x", 65) + " Nodes=n1\n", "allows at most 64"},
		{"continuation keeps physical lines", "SwitchName=s0 \\\n  Nodes=n1 \\\n  Bogus=1\n", `topology.conf:3: Bogus: unknown key "Bogus"`},
		{"block without nodes", "BlockName=b1\n", "topology.conf:1: BlockName: BlockName=b1 has no Nodes="},
		{"node in two blocks", "BlockName=b1 Nodes=n[1-4]\nBlockName=b2 Nodes=n[4-7]\n", `topology.conf:2: Nodes: node "n4" is in blocks "b1" (line 1) and "b2"`},
		{"block defined twice", "BlockName=b1 Nodes=n1\nBlockName=b1 Nodes=n2\n", `topology.conf:2: BlockName: block "b1" is defined again`},
		{"block smaller than base", "BlockName=b1 Nodes=n[1-4]\nBlockName=b2 Nodes=n[5-6]\nBlockSizes=4\n", `topology.conf:2: Nodes: block "b2" has 2 nodes, fewer than the base block size 4 of BlockSizes= (line 3)`},
		{"block sizes not doubling", "BlockName=b1 Nodes=n[1-4]\nBlockSizes=4,12\n", "topology.conf:2: BlockSizes: 12 after 4: each size must be the previous one times a power of two"},
		{"block sizes not a number", "BlockName=b1 Nodes=n[1-4]\nBlockSizes=four\n", `topology.conf:2: BlockSizes: "four" is not a positive whole number`},
		{"block sizes twice", "BlockName=b1 Nodes=n[1-4]\nBlockSizes=4\nBlockSizes=4\n", "topology.conf:3: BlockSizes: given again (first on line 2)"},
		{"block sizes without blocks", "SwitchName=s0 Nodes=n1\nBlockSizes=4\n", "topology.conf:2: BlockSizes: BlockSizes= without any BlockName= line"},
		{"ring too long", "RingName=r0 Nodes=n[1-17]\n", `topology.conf:1: Nodes: ring "r0" has 17 nodes`},
		{"include", "Include /etc/slurm/other.conf\n", "topology.conf:1: Include: Include is not supported here"},
		{"not key=value", "SwitchName=s0 Nodes=n1 oops\n", `topology.conf:1: Nodes: "oops" after Nodes=n1 is not Key=Value (a value with spaces needs quotes)`},
		{"not key=value first", "oops SwitchName=s0\n", `topology.conf:1: oops: expected oops=VALUE, found "oops SwitchName=s0"`},
		{"operator", "SwitchName=s0 Nodes+=n1\n", `topology.conf:1: Nodes: operator "+=" is not supported`},
		{"unterminated quote", "SwitchName=s0 Nodes=\"n1\n", `topology.conf:1: Nodes: unterminated '"' in value`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseTopologyConf(strings.NewReader(tc.conf), "topology.conf")
			if err == nil {
				t.Fatalf("no error; want %q", tc.want)
			}
			if !strings.HasPrefix(err.Error(), tc.want) && !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error\n got %q\nwant %q", err, tc.want)
			}
			var ce *ConfError
			if !errors.As(err, &ce) || ce.Line == 0 || ce.File != "topology.conf" {
				t.Errorf("error %#v does not carry file and line", err)
			}
		})
	}
}

func TestLoadTopologyConfMissing(t *testing.T) {
	_, err := LoadTopologyConf("testdata/slurm/no-such-topology.conf")
	if err == nil || !strings.Contains(err.Error(), "no-such-topology.conf") {
		t.Errorf("error %v does not name the file", err)
	}
}

func TestReadConfLines(t *testing.T) {
	in := "a=1 b = \"two words\" # comment\n\n  c=3\\\n d=4\nurl=http://x/\\#frag\n"
	lines, err := ReadConfLines(strings.NewReader(in), "f")
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(lines)
	want := "[{1 [{a 1 1} {b two words 1}]} {3 [{c 3 3} {d 4 4}]} {5 [{url http://x/#frag 5}]}]"
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// fatTree2048 is a topology.conf for 2,048 nodes: 64 leaves of 32 nodes,
// 8 spines each connected to every leaf, as large IB fabrics are built.
func fatTree2048() string {
	var b strings.Builder
	b.WriteString("# 2,048 nodes, 64 leaves x 32, 8 spines\n")
	for l := 0; l < 64; l++ {
		fmt.Fprintf(&b, "SwitchName=leaf%02d Nodes=gpu-r%02d-n[01-32] LinkSpeed=400\n", l, l)
	}
	for s := 0; s < 8; s++ {
		fmt.Fprintf(&b, "SwitchName=spine%d Switches=leaf[00-63] LinkSpeed=400\n", s)
	}
	return b.String()
}

func TestFatTree2048(t *testing.T) {
	c := parseConf(t, fatTree2048())
	if len(c.Nodes()) != 2048 || len(c.Switches()) != 72 {
		t.Fatalf("%d nodes %d switches", len(c.Nodes()), len(c.Switches()))
	}
	checkDistances(t, c, []distCase{{"gpu-r00-n01", "gpu-r00-n32", 1}, {"gpu-r00-n01", "gpu-r63-n32", 2}})
}

func BenchmarkParseTopologyConf2048(b *testing.B) {
	conf := fatTree2048()
	b.SetBytes(int64(len(conf)))
	for b.Loop() {
		if _, err := ParseTopologyConf(strings.NewReader(conf), "topology.conf"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDistance2048(b *testing.B) {
	c, err := ParseTopologyConf(strings.NewReader(fatTree2048()), "topology.conf")
	if err != nil {
		b.Fatal(err)
	}
	nodes := c.Nodes()
	i := 0
	for b.Loop() {
		c.Distance(nodes[i%2048], nodes[(i*7919)%2048])
		i++
	}
}

// FuzzParseTopologyConf: no input panics, and an accepted one gives a model
// whose distances are symmetric and 0 only on the diagonal.
func FuzzParseTopologyConf(f *testing.F) {
	for _, p := range []string{"testdata/slurm/topology.conf.tree-block-ring.examples", "testdata/slurm/topology.conf.tree-linkspeed.example"} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	f.Add("SwitchName=a Switches=b\nSwitchName=b Nodes=n[1-2]\n")
	f.Fuzz(func(t *testing.T, conf string) {
		c, err := ParseTopologyConf(strings.NewReader(conf), "topology.conf")
		if err != nil {
			return
		}
		nodes := c.Nodes()
		if len(nodes) > 50 {
			nodes = nodes[:50]
		}
		for _, a := range nodes {
			for _, b := range nodes {
				d := c.Distance(a, b)
				if d != c.Distance(b, a) || (d == 0) != (a == b) || d > c.Levels()+1 {
					t.Fatalf("Distance(%s, %s) = %d, reverse %d, Levels %d", a, b, d, c.Distance(b, a), c.Levels())
				}
			}
		}
	})
}

// FuzzParseScontrolTopology (scontrol show topology, from Slurm): no
// panic; what parses has symmetric distances bounded by its levels, as
// for topology.conf.
func FuzzParseScontrolTopology(f *testing.F) {
	b, err := os.ReadFile("testdata/slurm/scontrol-show-topology-22.05.tree.txt")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(string(b))
	f.Add("No topology information available")
	f.Add("SwitchName=s0 Level=1 LinkSpeed=1 Nodes=n[1-2] Switches=s1\nSwitchName=s1 Level=0 LinkSpeed=1 Nodes=n[3-4]\n")
	f.Fuzz(func(t *testing.T, out string) {
		c, err := ParseScontrolTopology(strings.NewReader(out), "scontrol show topology")
		if err != nil {
			return
		}
		nodes := c.Nodes()
		if len(nodes) > 20 {
			nodes = nodes[:20]
		}
		for _, a := range nodes {
			for _, b := range nodes {
				if d := c.Distance(a, b); d != c.Distance(b, a) || (d == 0) != (a == b) || d > c.Levels()+1 {
					t.Fatalf("Distance(%s, %s) = %d, reverse %d, Levels %d", a, b, d, c.Distance(b, a), c.Levels())
				}
			}
		}
	})
}
