package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/trainrun/trainrun/internal/slurm"
	"github.com/trainrun/trainrun/topo"
	"github.com/trainrun/trainrun/topo/nvml"
	"github.com/trainrun/trainrun/topo/snapshot"
	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
)

func init() {
	register(&command{name: "topo", short: "show a node's GPUs, NVLink, NICs and NUMA layout (this machine, --root or --machine)", run: runTopo})
}

func runTopo(ctx context.Context, env *runEnv, args []string) error {
	fs := newFlags("topo", "topo [--root DIR | --machine NAME|list] [--format table|json|nccl-xml]\n       trainrun topo --cluster [--topology-conf FILE] [--format table|json]", env.stdout)
	root := fs.String("root", "", "read a captured machine: DIR/sys (and DIR/proc, DIR/etc where present) instead of /sys, /proc, /etc")
	machine := fs.String("machine", "", "read a built-in machine snapshot (e.g. hgx-h100); 'list' lists them")
	format := fs.String("format", "table", "output: table (the matrix, like nvidia-smi topo -m), json, or nccl-xml (an NCCL_TOPO_FILE); matrix is table's old name, kept for one release")
	cluster := fs.Bool("cluster", false, "show the cluster model (switch tree, NVLink blocks) from the local Slurm's 'scontrol show topology' instead of one node")
	topoConf := fs.String("topology-conf", "", "with --cluster: read this topology.conf instead of asking scontrol")
	capture := fs.String("capture", "", "copy what topo reads of this machine (or of --root) into DIR, for --root DIR elsewhere; DIR/"+topo.CaptureManifest+" lists every path copied.\n"+topo.CaptureContents)
	explain := fs.Bool("explain", false, "after the node, say which devices degraded (facts that could not be read) and why, and where each GPU-NIC pairing comes from")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("unexpected argument %q; topo takes only flags (run 'trainrun topo --help')", fs.Arg(0))
	}
	*format = tableFormat(*format, "matrix")
	switch *format {
	case "matrix", "json", "nccl-xml":
	default:
		return usageErrorf("--format %q: accepted: table, json, nccl-xml", *format)
	}
	if *cluster {
		if *root != "" || *machine != "" {
			return usageErrorf("--cluster shows the cluster, --root/--machine one node; pick one")
		}
		if *format == "nccl-xml" {
			return usageErrorf("--format nccl-xml describes one node; with --cluster use matrix or json")
		}
		return showCluster(ctx, env, *topoConf, *format)
	}
	if *topoConf != "" {
		return usageErrorf("--topology-conf goes with --cluster")
	}
	if *machine == "list" {
		return listMachines(env)
	}
	if *capture != "" {
		return captureNode(env, *root, *capture)
	}
	n, err := discoverNode(*root, *machine)
	if err != nil {
		return err
	}
	switch *format {
	case "json":
		b, err := json.MarshalIndent(n, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(env.stdout, "%s\n", b)
		return err
	case "nccl-xml":
		b, err := n.NCCLTopoXML()
		if err != nil {
			return withCode(exitcode.Failure, err)
		}
		if n.FlatPCIe() {
			fmt.Fprintln(env.stderr, "trainrun: topo: warning: no GPU shares a PCIe switch with a NIC here (a VM's flat bus): this file says what sysfs shows, GPU-NIC paths through the host bridge, and NCCL then disables GPUDirect RDMA (PHB is beyond its default PXB). Prefer the platform's own NCCL_TOPO_FILE (Azure: /opt/microsoft/ndvN/topo.xml; AWS: the file aws-ofi-nccl sets).")
		}
		_, err = env.stdout.Write(b)
		return err
	}
	if err := topo.WriteMatrix(env.stdout, n); err != nil || !*explain {
		return err
	}
	return topo.WriteExplain(env.stdout, n)
}

// discoverNode reads the node named by --root or --machine, or this machine
// when both are empty. Other commands that take --root/--machine (trainrun env)
// use it too. Bad input is a usage error naming the flag and the file.
func discoverNode(root, machine string) (*topo.Node, error) {
	if root != "" && machine != "" {
		return nil, usageErrorf("--root and --machine both given; pick one")
	}
	if machine != "" {
		dir, cleanup, err := snapshot.UnpackTemp(machine)
		if err != nil {
			return nil, usageErrorf("--machine %s: %v", machine, err)
		}
		defer cleanup()
		n, err := topo.Discover(topo.Options{Root: dir})
		if err != nil {
			return nil, fmt.Errorf("--machine %s: %w", machine, err)
		}
		n.Root = "machine:" + machine
		return n, nil
	}
	if root != "" {
		st, err := os.Stat(root)
		if err != nil || !st.IsDir() {
			return nil, usageErrorf("--root %s: not a directory; pass the root of a captured machine, the directory that holds sys/", root)
		}
		n, err := topo.Discover(topo.Options{Root: root})
		if err != nil {
			return nil, usageErrorf("--root %s: %v", root, err)
		}
		return n, nil
	}
	// This machine: NVML when the driver loads, sysfs always.
	opts := topo.Options{Root: "/"}
	src, err := nvml.Open()
	if err != nil {
		opts.NVMLUnavailable = strings.TrimPrefix(err.Error(), topo.ErrNVMLUnavailable.Error()+": ")
	} else {
		defer src.Close()
		opts.NVML = src
	}
	n, err := topo.Discover(opts)
	if err != nil {
		if errors.Is(err, topo.ErrNVMLUnavailable) {
			return nil, withCode(exitcode.Failure, err)
		}
		return nil, withCode(exitcode.Failure, fmt.Errorf("this machine: %w", err))
	}
	return n, nil
}

// captureNode writes a captured tree of this machine (or of --root) to dir.
func captureNode(env *runEnv, root, dir string) error {
	var src topo.NVMLSource
	if root == "" {
		if s, err := nvml.Open(); err == nil {
			defer s.Close()
			src = s
		} else {
			fmt.Fprintf(env.stderr, "trainrun: topo: capturing without NVML answers: %v\n", err)
		}
	}
	if err := topo.Capture(root, dir, src); err != nil {
		return usageErrorf("--capture %s: %v", dir, err)
	}
	fmt.Fprintf(env.stdout, "captured %s into %s (every path copied is listed in %s/%s); read it with: trainrun topo --root %s --explain\n", cmp.Or(root, "this machine"), dir, dir, topo.CaptureManifest, dir)
	return nil
}

// showCluster prints the cluster model from a topology.conf or from the live
// Slurm (scontrol show topology).
func showCluster(ctx context.Context, env *runEnv, path, format string) error {
	var c *topo.Cluster
	if path != "" {
		var err error
		if c, err = topo.LoadTopologyConf(path); err != nil {
			return usageErrorf("--topology-conf: %v", err)
		}
	} else {
		var err error
		if c, err = env.slurm.Topology(ctx); err != nil {
			if errors.Is(err, slurm.ErrNotFound) {
				return withCode(exitcode.Slurm, errors.New("scontrol not found: --cluster reads the local Slurm's topology; pass --topology-conf FILE to read a file instead"))
			}
			return withCode(exitcode.Slurm, err)
		}
	}
	view := clusterView(c)
	if format == "json" {
		b, err := json.MarshalIndent(view, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(env.stdout, "%s\n", b)
		return err
	}
	fmt.Fprintf(env.stdout, "Cluster (source: %s): %d nodes, %d switch level(s)\n", cmp.Or(view.Source, "none"), len(view.Nodes), view.Levels)
	tw := tabwriter.NewWriter(env.stdout, 0, 0, 2, ' ', 0)
	if len(view.Switches) > 0 {
		fmt.Fprintln(tw, "\nSwitches (leaves first):")
		for _, s := range view.Switches {
			below := "nodes " + s.Nodes
			if s.Nodes == "" {
				below = "switches " + s.Switches
			}
			fmt.Fprintf(tw, "  %s\tlevel %d\t%s\n", s.Name, s.Level, below)
		}
	}
	if len(view.Blocks) > 0 {
		fmt.Fprintf(tw, "\nNVLink blocks (BlockSizes %s):\n", joinInts(view.BlockSizes))
		for _, b := range view.Blocks {
			fmt.Fprintf(tw, "  %s\t%d nodes\t%s\n", b.Name, b.Count, b.Nodes)
		}
	}
	if len(view.Rings) > 0 {
		fmt.Fprintln(tw, "\nRings:")
		for _, r := range view.Rings {
			fmt.Fprintf(tw, "  %s\t%d nodes\t%s\n", r.Name, r.Count, r.Nodes)
		}
	}
	if len(view.Switches) == 0 && len(view.Blocks) == 0 && len(view.Rings) == 0 {
		fmt.Fprintln(tw, "\nNo switch tree, blocks or rings: every node is one switch away from every other.")
	}
	return tw.Flush()
}

type clusterJSON struct {
	Source     string          `json:"source"`
	Levels     int             `json:"levels"`
	Nodes      []string        `json:"nodes"`
	Switches   []switchJSON    `json:"switches"`
	Blocks     []nodeGroupJSON `json:"blocks"`
	BlockSizes []int           `json:"block_sizes,omitempty"`
	Rings      []nodeGroupJSON `json:"rings"`
}

type switchJSON struct {
	Name     string `json:"name"`
	Level    int    `json:"level"`
	Nodes    string `json:"nodes,omitempty"`    // hostlist
	Switches string `json:"switches,omitempty"` // hostlist
	Parents  string `json:"parents,omitempty"`
}

type nodeGroupJSON struct {
	Name  string `json:"name"`
	Count int    `json:"count"`
	Nodes string `json:"nodes"` // hostlist
}

func clusterView(c *topo.Cluster) clusterJSON {
	v := clusterJSON{Source: c.Source, Levels: c.Levels(), Nodes: c.Nodes(), BlockSizes: c.BlockSizes(),
		Switches: []switchJSON{}, Blocks: []nodeGroupJSON{}, Rings: []nodeGroupJSON{}}
	if v.Nodes == nil {
		v.Nodes = []string{}
	}
	for _, s := range c.Switches() {
		v.Switches = append(v.Switches, switchJSON{Name: s.Name, Level: s.Level, Nodes: topo.CompressHostlist(s.Nodes),
			Switches: topo.CompressHostlist(s.Switches), Parents: topo.CompressHostlist(s.Parents)})
	}
	for _, b := range c.Blocks() {
		v.Blocks = append(v.Blocks, nodeGroupJSON{Name: b.Name, Count: len(b.Nodes), Nodes: topo.CompressHostlist(b.Nodes)})
	}
	for _, r := range c.Rings() {
		v.Rings = append(v.Rings, nodeGroupJSON{Name: r.Name, Count: len(r.Nodes), Nodes: topo.CompressHostlist(r.Nodes)})
	}
	return v
}

func joinInts(v []int) string {
	var s []string
	for _, x := range v {
		s = append(s, strconv.Itoa(x))
	}
	return strings.Join(s, ",")
}

func listMachines(env *runEnv) error {
	tw := tabwriter.NewWriter(env.stdout, 0, 0, 2, ' ', 0)
	for _, name := range snapshot.Names() {
		s, err := snapshot.Lookup(name)
		if err != nil {
			return err
		}
		fmt.Fprintf(tw, "%s\t%s\n", name, s.Title)
	}
	return tw.Flush()
}
