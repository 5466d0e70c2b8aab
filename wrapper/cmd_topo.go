package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/trainrun/trainrun/topo"
	"github.com/trainrun/trainrun/topo/nvml"
	"github.com/trainrun/trainrun/topo/snapshot"
)

func init() {
	register(&command{name: "topo", short: "show a node's GPUs, NVLink, NICs and NUMA layout (this machine, --root or --machine)", run: runTopo})
}

func runTopo(ctx context.Context, env *runEnv, args []string) error {
	fs := newFlags("topo", "topo [--root DIR | --machine NAME|list] [--format matrix|json|nccl-xml]", env.stderr)
	root := fs.String("root", "", "read a captured machine: DIR/sys (and DIR/proc, DIR/etc where present) instead of /sys, /proc, /etc")
	machine := fs.String("machine", "", "read a built-in machine snapshot (e.g. hgx-h100); 'list' lists them")
	format := fs.String("format", "matrix", "output: matrix (like nvidia-smi topo -m), json, or nccl-xml (an NCCL_TOPO_FILE)")
	cluster := fs.Bool("cluster", false, "show the cluster model from the local Slurm instead of one node")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("unexpected argument %q; topo takes only flags (run 'trainrun topo --help')", fs.Arg(0))
	}
	switch *format {
	case "matrix", "json", "nccl-xml":
	default:
		return usageErrorf("--format %q: accepted: matrix, json, nccl-xml", *format)
	}
	if *cluster {
		return usageErrorf("--cluster is not wired yet in this build: the cluster model (hostlists, topology.conf) is read by another part of trainrun; use --root or --machine for one node")
	}
	if *machine == "list" {
		return listMachines(env)
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
			return withCode(ExitFailure, err)
		}
		_, err = env.stdout.Write(b)
		return err
	}
	return topo.WriteMatrix(env.stdout, n)
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
			return nil, withCode(ExitFailure, err)
		}
		return nil, withCode(ExitFailure, fmt.Errorf("this machine: %w", err))
	}
	return n, nil
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
