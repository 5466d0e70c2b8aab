package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/trainrun/trainrun/internal/shell"
	"github.com/trainrun/trainrun/internal/slurm"
	"github.com/trainrun/trainrun/plan"
	"github.com/trainrun/trainrun/topo"
	"github.com/trainrun/trainrun/wrapper/internal/container"
	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
	"github.com/trainrun/trainrun/wrapper/internal/planflags"
	"github.com/trainrun/trainrun/wrapper/internal/planjson"
)

func init() {
	register(&command{name: "env", short: "print the environment a training rank gets (torchrun, plan, NCCL) and why", run: runEnvCmd})
}

// envOptions are the flags of `trainrun env`.
type envOptions struct {
	Rank          int
	Root, Machine string
	Stack         string // the training software: MegatronEnv's variables are Megatron's
	Explain       bool
	Format        string
	// the admin policy
	Policy, Partition string
	// the layout: a plan JSON (trainrun plan --format json), or --fix degrees
	PlanFile string
	Fix      string
	// the placement
	Nodelist, TopologyConf string
	GPUsPerNode            int
	// the job's facts
	MasterAddr string
	MasterPort int
	NodeAddrs  []string
	NCCLConf   string
	TopoFile   string
}

func (o *envOptions) AddFlags(fs *pflag.FlagSet) {
	fs.IntVar(&o.Rank, "rank", -1, "global rank whose environment to print (default: SLURM_PROCID, else 0)")
	fs.StringVar(&o.Root, "root", "", "read a captured machine from DIR (DIR/sys, DIR/proc, DIR/etc) instead of this one")
	fs.StringVar(&o.Machine, "machine", "", "read a built-in captured machine by name (see 'trainrun topo --machine list')")
	fs.BoolVar(&o.Explain, "explain", false, "say why for every variable, and what was kept from the user, nccl.conf or a plugin")
	fs.StringVar(&o.Format, "format", "table", "table (KEY=VALUE lines, shell-quoted) | json; shell is table's old name, kept for one release")
	fs.StringVar(&o.Stack, "stack", "", "training software (megatron-core, nemo, megatron-2022, fsdp..., deepspeed..., jax; default: TRAINRUN_STACK, else megatron-core): Megatron's stacks get CUDA_DEVICE_MAX_CONNECTIONS by its rule")
	fs.StringVar(&o.Policy, "policy", "", "the site's trainrun.conf: NCCLForce, NCCLDefault, NCCLPrecedence and Fabric shape the NCCL variables")
	fs.StringVar(&o.Partition, "partition", "", "partition whose policy settings apply (default: SLURM_JOB_PARTITION; site-wide settings when neither)")
	fs.StringVar(&o.PlanFile, "plan", "", "plan JSON from 'trainrun plan --format json' (degrees and traffic); exported as TRAINRUN_PLAN")
	fs.StringVar(&o.Fix, "fix", "", "degrees without a plan file: tp=8,pp=4,cp=1,ep=1,dp=N,vpp=1,mbs=1,grad_accum=1,recompute=none (dp defaults to the GPUs left over)")
	fs.StringVar(&o.Nodelist, "nodelist", "", "the job's nodes as a Slurm hostlist (default: SLURM_JOB_NODELIST, else this machine alone)")
	fs.StringVar(&o.TopologyConf, "topology-conf", "", "Slurm topology.conf for placement (default: scontrol inside an allocation, else one switch)")
	fs.IntVar(&o.GPUsPerNode, "gpus-per-node", 0, "ranks per node (default: the GPUs of the machine read)")
	fs.StringVar(&o.MasterAddr, "master-addr", "", "MASTER_ADDR (default: the node of rank 0)")
	fs.IntVar(&o.MasterPort, "master-port", 0, "MASTER_PORT (default: derived from SLURM_JOB_ID inside a job, as trainrun run does, so jobs sharing a node do not collide; else 29500)")
	fs.StringSliceVar(&o.NodeAddrs, "node-addr", nil, "this node's address as Slurm reaches it (default: its hostname resolved, on the live machine)")
	fs.StringVar(&o.NCCLConf, "nccl-conf", "", "the site's nccl.conf (default: ROOT/etc/nccl.conf when present)")
	fs.StringVar(&o.TopoFile, "topo-file", "", "an NCCL topology XML to point NCCL_TOPO_FILE at where the node's own view is flat")
}

func runEnvCmd(ctx context.Context, env *runEnv, args []string) error {
	fs := newFlags("env", "env [--rank R] [--root DIR | --machine NAME] [--plan FILE | --fix tp=8,pp=4] [--policy FILE --partition P] [--explain]", env.stdout)
	var o envOptions
	o.AddFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("unexpected argument %q: env takes only flags", fs.Arg(0))
	}
	o.Format = tableFormat(o.Format, "shell")
	if o.Format != "shell" && o.Format != "json" {
		return usageErrorf("--format %q: accepted: table, json", o.Format)
	}
	e, header, err := computeEnv(ctx, env, &o)
	if err != nil {
		return err
	}
	if o.Format == "json" {
		enc := json.NewEncoder(env.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(e)
	}
	for _, n := range e.Notes {
		fmt.Fprintf(env.stderr, "trainrun: env: note: %s\n", n)
	}
	if o.Explain {
		for _, h := range header {
			fmt.Fprintf(env.stdout, "# %s\n", h)
		}
	}
	return writeEnvShell(env.stdout, e, o.Explain)
}

// computeEnv reads the machine and the job's facts and calls plan.RankEnv.
// header says, for --explain, which rank of which placement this is.
func computeEnv(ctx context.Context, env *runEnv, o *envOptions) (e *plan.Env, header []string, err error) {
	node, err := discoverNode(o.Root, o.Machine)
	if err != nil {
		return nil, nil, err
	}
	// Files beside sysfs (etc/nccl.conf, var/run/nvidia-topologyd): the
	// --root tree, this machine's /, none for a built-in machine.
	root := o.Root
	if root == "" && o.Machine == "" {
		root = "/"
	}
	G := o.GPUsPerNode
	if G == 0 {
		G = len(node.GPUs)
	}
	if G < 1 {
		return nil, nil, usageErrorf("no GPUs found on %s: pass --gpus-per-node to describe the job anyway", cmp.Or(node.Root, "this machine"))
	}
	hosts, err := envHosts(env, o, node)
	if err != nil {
		return nil, nil, err
	}
	ml, traffic, planPath, err := envLayout(o, len(hosts), G)
	if err != nil {
		return nil, nil, err
	}
	p, err := envPlacement(env, o, node, hosts, G, ml, traffic)
	if err != nil {
		return nil, nil, err
	}
	if err := envRank(env, o, len(p.Ranks)); err != nil {
		return nil, nil, err
	}
	conf, virtTopo, err := envNCCLFiles(o, root)
	if err != nil {
		return nil, nil, err
	}
	pol, err := envPolicy(env, o)
	if err != nil {
		return nil, nil, err
	}
	user := map[string]string{}
	for _, k := range plan.ManagedEnvKeys(pol) {
		if v := env.getenv(k); v != "" {
			user[k] = v
		}
	}
	addrs := o.NodeAddrs
	if len(addrs) == 0 && root == "/" {
		addrs = resolve(ctx, p.Ranks[o.Rank].Node)
	}
	port := o.MasterPort
	if port == 0 {
		port = 29500
		if id := slurm.JobFromEnv(env.getenv).ID; id != "" {
			port = plan.MasterPort(id)
		}
	}
	st, err := plan.ParseStack(cmp.Or(o.Stack, env.getenv("TRAINRUN_STACK")))
	if err != nil {
		return nil, nil, usageErrorf("--stack: %v", err)
	}
	e, err = plan.RankEnv(plan.EnvInput{
		Node: node, Placement: p, Rank: o.Rank, Plan: ml, PlanPath: planPath, Stack: st,
		MasterAddr: o.MasterAddr, MasterPort: port, NodeAddrs: addrs,
		UserEnv: user, NCCLConf: conf, Policy: pol, TopoFile: o.TopoFile, VirtualTopology: virtTopo,
	})
	if err != nil {
		return nil, nil, usageErrorf("%v", err)
	}
	rp := p.Ranks[o.Rank]
	header = []string{
		fmt.Sprintf("rank %d of %d on %s (node rank %d), local rank %d, GPU %d; tp=%d cp=%d ep=%d dp=%d pp=%d",
			rp.Rank, len(p.Ranks), rp.Node, rp.NodeRank, rp.LocalRank, rp.GPU, rp.TP, rp.CP, rp.EP, rp.DP, rp.PP),
		"placement: " + p.Order,
		"machine read: " + cmp.Or(node.Root, "/") + " (every node of the job is taken to be built like it)",
	}
	for _, w := range p.Why {
		header = append(header, "placement: "+w)
	}
	header = append(header, envContainer(env, o))
	return e, header, nil
}

// envHosts is the job's nodes: --nodelist, else SLURM_JOB_NODELIST, else
// this machine.
func envHosts(env *runEnv, o *envOptions, node *topo.Node) ([]string, error) {
	expr := o.Nodelist
	if expr == "" {
		expr = slurm.JobFromEnv(env.getenv).NodeList
	}
	if expr == "" {
		return []string{cmp.Or(node.Hostname, "localhost")}, nil
	}
	hosts, err := topo.ExpandHostlist(expr)
	if err != nil {
		return nil, usageErrorf("node list %q: %v", expr, err)
	}
	return hosts, nil
}

// envLayout is the layout (--plan, --fix, else data parallel only) in
// Megatron's terms, its traffic and the plan file's path.
func envLayout(o *envOptions, nodes, G int) (ml plan.Layout, traffic plan.Traffic, planPath string, err error) {
	var layout plan.Layout
	world := nodes * G
	if o.PlanFile != "" {
		ev, err := readPlanFile(o.PlanFile)
		if err != nil {
			return ml, traffic, "", err
		}
		layout, traffic = ev.Layout, ev.Traffic
		if planPath, err = filepath.Abs(o.PlanFile); err != nil {
			planPath = o.PlanFile
		}
	}
	if o.Fix != "" {
		if layout, err = planflags.ParseDegrees(o.Fix, layout, world); err != nil {
			return ml, traffic, "", err
		}
	} else if o.PlanFile == "" {
		layout = plan.Layout{TP: 1, PP: 1, CP: 1, EP: 1, DP: world}
	}
	if ml, err = plan.MegatronLayout(layout, world); err != nil {
		return ml, traffic, "", usageErrorf("the layout %v; the job has %d nodes × %d GPUs = %d (use --nodelist/--gpus-per-node, or --fix with dp=%d)", err, nodes, G, world, world/max(1, layout.TP*max(layout.CP, 1)*max(layout.PP, 1)))
	}
	return ml, traffic, planPath, nil
}

// envPlacement places the ranks; every node is taken to be built like the
// one read.
func envPlacement(env *runEnv, o *envOptions, node *topo.Node, hosts []string, G int, ml plan.Layout, traffic plan.Traffic) (*plan.Placement, error) {
	rails, _ := plan.RailsOf(node)
	cl, err := clusterModel(env, o.TopologyConf)
	if err != nil {
		return nil, err
	}
	if len(rails) != G {
		rails = nil // fewer ranks than GPUs: local rank i drives GPU i
	}
	nodes, err := plan.PlaceNodes(hosts, cl, rails)
	if err != nil {
		return nil, usageErrorf("%v", err)
	}
	clique := plan.LocalNVLinkBlocks(nodes, node)
	p, err := plan.Place(plan.PlaceInput{Layout: ml, GPUsPerNode: G, Nodes: nodes, Traffic: traffic})
	if err != nil {
		return nil, usageErrorf("%v", err)
	}
	if clique != "" {
		p.Why = append(p.Why, clique)
	}
	return p, nil
}

// envRank settles o.Rank: --rank, else SLURM_PROCID, else 0.
func envRank(env *runEnv, o *envOptions, ranks int) error {
	if o.Rank == -1 {
		o.Rank = 0
		if v := slurm.TaskFromEnv(env.getenv).ProcID; v != "" {
			var err error
			if o.Rank, err = strconv.Atoi(v); err != nil {
				return withCode(exitcode.Slurm, fmt.Errorf("SLURM_PROCID=%q is not a number", v))
			}
		}
	}
	if o.Rank < 0 || o.Rank >= ranks {
		return usageErrorf("--rank %d: the job has ranks 0..%d", o.Rank, ranks-1)
	}
	return nil
}

// envNCCLFiles reads nccl.conf (the flag, else the machine's
// /etc/nccl.conf) and whether a virtual topology file is there.
func envNCCLFiles(o *envOptions, root string) (conf map[string]string, virtTopo bool, err error) {
	confPath := o.NCCLConf
	if confPath == "" && root != "" {
		confPath = filepath.Join(root, "etc/nccl.conf")
		if _, err := os.Stat(confPath); err != nil {
			confPath = ""
		}
	}
	if confPath != "" {
		data, err := os.ReadFile(confPath)
		if err != nil {
			return nil, false, usageErrorf("--nccl-conf: %v", err)
		}
		if conf, err = plan.ParseNCCLConf(data); err != nil {
			return nil, false, usageErrorf("%s: %v", confPath, err)
		}
	}
	if root != "" {
		if _, err := os.Stat(filepath.Join(root, "var/run/nvidia-topologyd/virtualTopology.xml")); err == nil {
			virtTopo = true
		}
	}
	return conf, virtTopo, nil
}

// envPolicy is the NCCL part of the site policy for the partition.
func envPolicy(env *runEnv, o *envOptions) (plan.NCCLPolicy, error) {
	if o.Policy == "" {
		if o.Partition != "" {
			return plan.NCCLPolicy{}, usageErrorf("--partition %s without --policy: name the trainrun.conf to read", o.Partition)
		}
		return plan.NCCLPolicy{}, nil
	}
	pf, err := planflags.LoadPolicy(o.Policy)
	if err != nil {
		return plan.NCCLPolicy{}, planflags.ReportPolicyErrors(env.stderr, o.Policy, err)
	}
	part := o.Partition
	if part == "" {
		part = slurm.JobFromEnv(env.getenv).Partition
	}
	if part != "" && !pf.HasPartition(part) {
		fmt.Fprintf(env.stderr, "trainrun: env: note: %s has no PartitionName=%s line: its site-wide settings apply\n", o.Policy, part)
	}
	return pf.Effective(part).NCCL(), nil
}

// envContainer is --explain's line on the container the ranks run in: the
// one trainrun run would use from PYXIS_CONTAINER_IMAGE and
// TRAINRUN_CONTAINER_RUNTIME and the policy's Container* keys (its
// --container-* flags are run's, not env's); the variables above are what
// the trainer sees inside it too.
func envContainer(env *runEnv, o *envOptions) string {
	spec, err := container.Resolve(container.Given{Flags: map[string]string{}, Runtime: env.getenv("TRAINRUN_CONTAINER_RUNTIME"), RtFrom: "TRAINRUN_CONTAINER_RUNTIME", Getenv: env.getenv})
	if err == nil && o.Policy != "" {
		if pf, perr := planflags.LoadPolicy(o.Policy); perr == nil {
			st := pf.Effective(cmp.Or(o.Partition, slurm.JobFromEnv(env.getenv).Partition))
			err = spec.ApplySite(container.Site{Image: st.ContainerImage.Value, ImageFrom: "the policy's ContainerImage (" + st.ContainerImage.Source.String() + ")",
				Runtime: st.ContainerRuntime.Value}, env.getenv("TRAINRUN_CONTAINER_RUNTIME") != "")
		}
	}
	switch {
	case err != nil:
		return "container: " + err.Error()
	case !spec.On():
		return "container: none (the ranks run on the host; trainrun run --container-image IMG runs them in one, with these variables)"
	}
	return fmt.Sprintf("container: %s, from %s; the trainer sees these variables inside it", spec.Describe(), spec.Settings[0].From)
}

// resolve looks the node's name up (IPv4 only), briefly.
func resolve(ctx context.Context, host string) []string {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	ips, err := net.DefaultResolver.LookupIP(ctx, "ip4", host)
	if err != nil {
		return nil
	}
	var out []string
	for _, ip := range ips {
		out = append(out, ip.String())
	}
	return out
}

// readPlanFile takes the chosen layout out of `trainrun plan --format json`.
func readPlanFile(path string) (*plan.Evaluation, error) {
	data, err := planjson.ReadFile(path)
	if err != nil {
		return nil, usageErrorf("--plan: %v", err)
	}
	r, err := planjson.Decode(data) // the layout's fields checked: they become variables
	if err != nil {
		return nil, usageErrorf("--plan %s: %v", path, err)
	}
	if r.Plan == nil {
		return nil, usageErrorf("--plan %s: \"plan\" is null (nothing fitted); pick a layout with --fix", path)
	}
	return r.Plan, nil
}

// writeEnvShell prints KEY=VALUE lines, quoted for a POSIX shell where
// needed; with explain, a comment before each says why, and the variables
// left to someone else are listed as comments.
func writeEnvShell(w io.Writer, e *plan.Env, explain bool) error {
	var errs []error
	pr := func(format string, a ...any) {
		if _, err := fmt.Fprintf(w, format, a...); err != nil {
			errs = append(errs, err)
		}
	}
	for _, v := range e.Vars {
		switch {
		case v.Inject:
			if explain {
				pr("# %s (%s): %s\n", v.Key, v.Source, oneLine(v.Why))
			}
			pr("%s=%s\n", v.Key, shell.Quote(v.Value))
		case explain && v.Value != "":
			pr("# %s=%s stays (%s, not injected): %s\n", v.Key, v.Value, v.Source, oneLine(v.Why))
		case explain:
			pr("# %s not set: %s\n", v.Key, oneLine(v.Why))
		}
	}
	if explain {
		for _, n := range e.Notes {
			pr("# note: %s\n", oneLine(n))
		}
	}
	return errors.Join(errs...)
}

func oneLine(s string) string { return strings.ReplaceAll(s, "\n", " ") }
