package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/trainrun/trainrun/internal/slurm"
	"github.com/trainrun/trainrun/plan"
	"github.com/trainrun/trainrun/topo"
	"github.com/trainrun/trainrun/wrapper/internal/planflags"
)

// renderPlacement writes --format hostfile|placement for the chosen plan.
func renderPlacement(env *runEnv, format string, o *planflags.PlaceOptions, m plan.Model, j plan.Job, c plan.Cluster, e *plan.Evaluation) error {
	if e == nil {
		return nil
	}
	in, err := placementInput(env, o, c.GPUsPerNode, e.Layout, e.Traffic)
	if err != nil {
		return err
	}
	p, err := plan.Place(in)
	if err != nil {
		return usageErrorf("%v", err)
	}
	return writePlacement(env, format, p)
}

func writePlacement(env *runEnv, format string, p *plan.Placement) error {
	switch format {
	case "hostfile":
		_, err := fmt.Fprint(env.stdout, p.Hostfile())
		return err
	case "placement":
		enc := json.NewEncoder(env.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(p)
	}
	return usageErrorf("--format %q: placement formats are hostfile and placement", format)
}

// placementInput gathers the nodes (--nodelist, else the allocation's
// SLURM_JOB_NODELIST) and the cluster model (--topology-conf, else the live
// `scontrol show topology` inside an allocation, else one switch).
func placementInput(env *runEnv, o *planflags.PlaceOptions, gpusPerNode int, l plan.Layout, tr plan.Traffic) (plan.PlaceInput, error) {
	expr, from := o.Nodelist, "--nodelist"
	if expr == "" {
		expr, from = slurm.JobFromEnv(env.getenv).NodeList, "SLURM_JOB_NODELIST"
	}
	if expr == "" {
		return plan.PlaceInput{}, usageErrorf("placement needs the nodes: pass --nodelist 'gpu[001-016]' or run inside an allocation (SLURM_JOB_NODELIST)")
	}
	hosts, err := topo.ExpandHostlist(expr)
	if err != nil {
		return plan.PlaceInput{}, usageErrorf("%s %q: %v", from, expr, err)
	}
	if gpusPerNode < 1 {
		return plan.PlaceInput{}, usageErrorf("placement needs the GPUs per node: pass --gpus-per-node")
	}
	cl, err := clusterModel(env, o.TopologyConf)
	if err != nil {
		return plan.PlaceInput{}, err
	}
	nodes, err := plan.PlaceNodes(hosts, cl, nil)
	if err != nil {
		return plan.PlaceInput{}, usageErrorf("%v", err)
	}
	world := len(hosts) * gpusPerNode
	ml, err := plan.MegatronLayout(l, world)
	if err != nil {
		return plan.PlaceInput{}, usageErrorf("the layout %v; the node list has %d nodes × %d GPUs", err, len(hosts), gpusPerNode)
	}
	return plan.PlaceInput{Layout: ml, GPUsPerNode: gpusPerNode, Nodes: nodes, Traffic: tr}, nil
}

// clusterModel loads topology.conf, or asks the live Slurm, or returns nil
// (one switch).
func clusterModel(env *runEnv, path string) (*topo.Cluster, error) {
	if path != "" {
		c, err := topo.LoadTopologyConf(path)
		if err != nil {
			return nil, usageErrorf("--topology-conf: %v", err)
		}
		return c, nil
	}
	if slurm.JobFromEnv(env.getenv).ID == "" {
		return nil, nil
	}
	c, err := env.slurm.Topology(context.Background())
	if err != nil {
		fmt.Fprintf(env.stderr, "trainrun: placement: %v: treating all nodes as one switch\n", err)
		return nil, nil
	}
	return c, nil
}
