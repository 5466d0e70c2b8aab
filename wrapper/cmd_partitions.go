package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/trainrun/trainrun/plan"
	"github.com/trainrun/trainrun/plan/policy"
	"github.com/trainrun/trainrun/wrapper/internal/planflags"
	"github.com/trainrun/trainrun/wrapper/internal/submit"
)

func init() {
	register(&command{name: "partitions", short: "the cluster's partitions: GPU type, nodes, free GPUs; with a model, what fits where", run: runPartitions})
}

const partitionsSynopsis = "partitions [plan flags] [--free] [--queue] [--metrics-textfile FILE.prom] [--policy FILE] [--format table|json]"

var partitionsHelpTail = joinLines("",
	"For each partition: the GPU type (its nodes' typed GRES, e.g. gpu:h100:8, else the policy's",
	"GPUType=, else a memory feature of the nodes, else --gpu), GPUs per node, nodes idle, mixed,",
	"allocated and other (down, drained), and free GPUs. Given a model and batch (the plan flags),",
	"for each: whether it fits on the partition (all of it, or --gpus), and if so the predicted",
	"tokens/s per GPU, the time to train --tokens and whether the plan is memory- or compute-bound.",
	"--free lists the nodes with idle GPUs: the fragments a small job (trainrun submit's partial",
	"nodes, --gpus-per-node=K) fills.")

type partitionsOptions struct {
	schedOptions
	free  bool
	queue bool // the queue's jobs per user and account, with trainrun jobs' slowdown (issue 34)

	metricsTextfile string // --queue's per-user metrics for node_exporter's textfile collector
}

func runPartitions(ctx context.Context, env *runEnv, args []string) error {
	var o partitionsOptions
	fs := newFlags("partitions", partitionsSynopsis, env.stdout)
	o.addFlags(fs, env.getenv)
	fs.BoolVar(&o.free, "free", false, "also list the nodes with idle GPUs (fragments for partial-node jobs)")
	fs.BoolVar(&o.queue, "queue", false, "also list the queue per user and account: running, pending, and the slowdown (completion over run time) of the jobs trainrun submitted")
	fs.StringVar(&o.metricsTextfile, "metrics-textfile", "", "also write --queue's per-user and per-account metrics (trainrun_queue_*) to this .prom file for node_exporter's textfile collector, atomically (implies --queue)")
	fs.Usage = func() {
		fmt.Fprintf(env.stdout, "Usage: trainrun %s\n\nFlags:\n", partitionsSynopsis)
		fs.PrintDefaults()
		fmt.Fprint(env.stdout, partitionsHelpTail)
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("unexpected argument %q: partitions takes only flags", fs.Arg(0))
	}
	if o.plan.Format != "table" && o.plan.Format != "json" {
		return usageErrorf("--format %q: accepted: table, json", o.plan.Format)
	}
	o.queue = o.queue || o.metricsTextfile != ""
	withModel := o.plan.Model != ""
	for _, f := range planflags.ModelFlags {
		withModel = withModel || fs.Changed(f)
	}
	var fit func(submit.PartitionInfo) partitionFit
	pol := policy.Default()
	if withModel {
		m, j, p, err := o.load(fs)
		if err != nil {
			return err
		}
		adj, err := o.clusterAdjust(fs)
		if err != nil {
			return err
		}
		pol = p
		fit = func(pi submit.PartitionInfo) partitionFit {
			return fitOn(pi, m, j, adj, o.plan.SearchOptions(plan.Pins{}), o.plan.GPUs)
		}
	} else if o.policyFile != "" {
		p, err := planflags.LoadPolicy(o.policyFile)
		if err != nil {
			return err
		}
		pol = p
	}
	infos, err := submit.LoadPartitions(ctx, env.slurm, pol, o.plan.GPU, nil)
	if err != nil {
		return withSlurmCode(err)
	}
	rows := make([]partitionRow, len(infos))
	for i, pi := range infos {
		rows[i] = toPartitionRow(pi)
		if fit != nil {
			f := fit(pi)
			rows[i].Fit = &f
		}
	}
	var free []freeNode
	if o.free {
		free = freeNodes(infos)
	}
	queue, err := o.loadQueue(ctx, env)
	if err != nil {
		return err
	}
	if err := writeQueueMetrics(o.metricsTextfile, queue); err != nil {
		return err
	}
	if o.plan.Format == "json" {
		enc := json.NewEncoder(env.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(partitionsJSON{Partitions: rows, Free: free, Queue: queue})
	}
	if err := printPartitions(env.stdout, rows, free, o.free); err != nil {
		return err
	}
	return printQueue(env.stdout, queue, o.queue)
}

// partitionRow is one partition of `trainrun partitions --format json`.
type partitionRow struct {
	Name        string        `json:"name"`
	State       string        `json:"state"`
	GPUType     string        `json:"gpu_type"`
	GresType    string        `json:"gres_type"`
	TypeError   string        `json:"gpu_type_error,omitempty"`
	GPUsPerNode int           `json:"gpus_per_node"`
	Nodes       int           `json:"nodes"`
	Idle        int           `json:"idle"`
	Mixed       int           `json:"mixed"`
	Allocated   int           `json:"allocated"`
	Other       int           `json:"other"`
	FreeGPUs    int           `json:"free_gpus"`
	GPUs        int           `json:"gpus"`
	Cost        *float64      `json:"gpu_hour_cost"`
	Fit         *partitionFit `json:"fit,omitempty"`
}

// partitionFit is the model's plan on one partition.
type partitionFit struct {
	GPUs             int     `json:"gpus"`
	Fits             bool    `json:"fits"`
	Why              string  `json:"why"`
	Layout           string  `json:"layout,omitempty"`
	TokensPerSPerGPU float64 `json:"tokens_per_s_per_gpu"`
	TrainS           float64 `json:"train_s"`
	Bound            string  `json:"bound,omitempty"` // memory or compute
}

type freeNode struct {
	Node       string   `json:"node"`
	Partitions []string `json:"partitions"`
	GPUType    string   `json:"gres_type"`
	FreeGPUs   int      `json:"free_gpus"`
	GPUs       int      `json:"gpus"`
	State      string   `json:"state"`
}

type partitionsJSON struct {
	Partitions []partitionRow         `json:"partitions"`
	Free       []freeNode             `json:"free,omitempty"`
	Queue      []submit.GroupSlowdown `json:"queue,omitempty"` // --queue
}

func toPartitionRow(pi submit.PartitionInfo) partitionRow {
	r := partitionRow{Name: pi.Name, State: pi.State, GPUType: pi.GPUType, GresType: pi.GresType, GPUsPerNode: pi.GPUsPerNode,
		Nodes: len(pi.Nodes), Idle: pi.Idle, Mixed: pi.Mixed, Allocated: pi.Allocated, Other: pi.Other, FreeGPUs: pi.FreeGPUs, GPUs: pi.TotalGPUs}
	if pi.TypeErr != nil {
		r.TypeError = pi.TypeErr.Error()
	}
	if pi.Cost >= 0 {
		c := pi.Cost
		r.Cost = &c
	}
	return r
}

// fitOn plans the model on the whole partition (or gpus of it).
func fitOn(pi submit.PartitionInfo, m plan.Model, j plan.Job, adj func(*plan.Cluster), so plan.SearchOptions, gpus int) partitionFit {
	p, ok := pi.ForChoice()
	if !ok {
		why := fmt.Sprintf("partition is %s", pi.State)
		if pi.TypeErr != nil {
			why = pi.TypeErr.Error()
		}
		return partitionFit{Why: why}
	}
	n := p.Nodes * p.GPUsPerNode
	if gpus > 0 {
		if gpus > n {
			return partitionFit{GPUs: gpus, Why: fmt.Sprintf("--gpus %d: the partition has %d", gpus, n)}
		}
		n = gpus
	}
	c := plan.ClusterFor(p.GPU, n, min(p.GPUsPerNode, n))
	adj(&c)
	r := plan.Search(m, j, c, so)
	if msg := plan.NoFit(m, j, c, so, r); msg != "" || r.Plan == nil {
		return partitionFit{GPUs: n, Why: msg, Bound: "memory"}
	}
	e := r.Plan
	f := partitionFit{GPUs: n, Fits: true, Layout: e.Layout.Config(), TokensPerSPerGPU: e.TokensPerSPerGPU, TrainS: plan.TrainSeconds(j, *e), Bound: boundOf(*e)}
	f.Why = fmt.Sprintf("fits: %.1f of %.1f GiB per GPU", e.Memory.PerGPU/(1<<30), e.Memory.Capacity/(1<<30))
	return f
}

// boundOf says whether memory shaped the plan (it recomputes, offloads or
// fills the card) or compute limits it.
func boundOf(e plan.Evaluation) string {
	if e.Recompute != "none" && e.Recompute != "" || e.Offload != "none" && e.Offload != "" || e.Memory.Capacity > 0 && e.Memory.PerGPU > 0.9*e.Memory.Capacity {
		return "memory"
	}
	return "compute"
}

// freeNodes are the usable nodes with idle GPUs, fullest first.
func freeNodes(infos []submit.PartitionInfo) []freeNode {
	seen := map[string]bool{}
	var out []freeNode
	for _, pi := range infos {
		for _, n := range pi.Nodes {
			g, typ := n.GPUs()
			free := g - n.GPUsUsed()
			if seen[n.Name] || free <= 0 || !submit.Usable(n.State) {
				continue
			}
			seen[n.Name] = true
			out = append(out, freeNode{Node: n.Name, Partitions: n.Partitions, GPUType: typ, FreeGPUs: free, GPUs: g, State: n.State})
		}
	}
	return out
}

func printPartitions(w io.Writer, rows []partitionRow, free []freeNode, showFree bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	withFit := len(rows) > 0 && rows[0].Fit != nil
	head := "PARTITION\tSTATE\tGPU\tGPUS/NODE\tIDLE\tMIXED\tALLOC\tOTHER\tFREE GPUS"
	if withFit {
		head += "\tFITS\tGPUS\tTOKENS/S/GPU\tTRAIN\tBOUND\tWHY"
	}
	fmt.Fprintln(tw, head)
	for _, r := range rows {
		typ := r.GPUType
		if typ == "" {
			typ = "?"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d/%d", r.Name, r.State, typ, r.GPUsPerNode, r.Idle, r.Mixed, r.Allocated, r.Other, r.FreeGPUs, r.GPUs)
		if f := r.Fit; f != nil {
			fmt.Fprintf(tw, "\t%v\t%d\t%.0f\t%s\t%s\t%s", f.Fits, f.GPUs, f.TokensPerSPerGPU, shortDur(f.TrainS), f.Bound, f.Why)
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range rows {
		if r.TypeError != "" {
			fmt.Fprintf(w, "note: %s\n", r.TypeError)
		}
	}
	if !showFree {
		return nil
	}
	fmt.Fprintln(w, "\nnodes with idle GPUs:")
	if len(free) == 0 {
		fmt.Fprintln(w, "  none")
		return nil
	}
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tPARTITIONS\tGRES TYPE\tFREE\tSTATE")
	for _, n := range free {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t%s\n", n.Node, strings.Join(n.Partitions, ","), n.GPUType, n.FreeGPUs, n.GPUs, n.State)
	}
	return tw.Flush()
}
