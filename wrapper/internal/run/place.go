package run

import (
	"fmt"
	"net"
	"strings"

	"github.com/trainrun/trainrun/internal/slurm"
	"github.com/trainrun/trainrun/plan"
	"github.com/trainrun/trainrun/topo"
	"github.com/trainrun/trainrun/wrapper/internal/launch"
)

// rankSlot is where one global rank runs and what it is in the layout.
type rankSlot struct {
	Rank      int    `json:"rank"`
	Node      string `json:"node"`
	NodeRank  int    `json:"node_rank"` // index of Node among the job's nodes in rank order
	LocalRank int    `json:"local_rank"`
	GPU       int    `json:"gpu"`            // the node's GPU index (as Slurm and nvidia-smi number it); -1 = not probed: the step's GPUSlot-th GPU
	GPUSlot   int    `json:"gpu_slot"`       // position of the GPU among the job's GPUs on the node (placement's GPU index)
	CPUs      string `json:"cpus,omitempty"` // CPU list of the GPU's NUMA node, when known
	TP        int    `json:"tp"`
	CP        int    `json:"cp"`
	EP        int    `json:"ep"`
	DP        int    `json:"dp"`
	PP        int    `json:"pp"`
}

// blockPlacement is Slurm's default block order: ranks fill node 0's GPUs,
// then node 1's, in the allocation's node order, local rank i on the node's
// i-th GPU. With Megatron's rank order this keeps each TP group on one node
// whenever tp divides the GPUs per node. It is the placement used until the
// topology-aware placement (plan placement) is available in this build.
func blockPlacement(a *slurm.Allocation, l plan.Layout, gpuIDs map[string][]int) ([]rankSlot, error) {
	world := a.World()
	if l.TP*l.PP*l.CP*l.DP != world {
		return nil, fmt.Errorf("layout tp=%d pp=%d cp=%d dp=%d needs %d GPUs, allocation has %d", l.TP, l.PP, l.CP, l.DP, l.TP*l.PP*l.CP*l.DP, world)
	}
	slots := make([]rankSlot, world)
	for r := range world {
		ni, lr := r/a.TasksPerNode, r%a.TasksPerNode
		node := a.Nodes[ni]
		gpu := -1 // unknown: the shim takes the step's LOCAL_RANK-th GPU on the node
		if ids := gpuIDs[node]; len(ids) == a.TasksPerNode {
			gpu = ids[lr]
		} else if node == a.BatchNode && len(a.GPUIDs) == a.TasksPerNode {
			gpu = a.GPUIDs[lr]
		}
		tp, cp, ep, dp, pp := plan.MegatronCoords(l, r)
		slots[r] = rankSlot{Rank: r, Node: node, NodeRank: ni, LocalRank: lr, GPU: gpu, GPUSlot: lr, TP: tp, CP: cp, EP: ep, DP: dp, PP: pp}
	}
	return slots, nil
}

// nodesInRankOrder lists the distinct nodes in the order their first rank appears.
func nodesInRankOrder(slots []rankSlot) []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range slots {
		if !seen[s.Node] {
			seen[s.Node] = true
			out = append(out, s.Node)
		}
	}
	return out
}

// sameOrderAsSlurm reports whether Slurm's block distribution over the
// allocation's node order puts every rank where slots does (then srun needs
// no hostfile).
func sameOrderAsSlurm(a *slurm.Allocation, slots []rankSlot) bool {
	for _, s := range slots {
		if a.Nodes[s.Rank/a.TasksPerNode] != s.Node {
			return false
		}
	}
	return true
}

// hostfile renders SLURM_HOSTFILE: line i holds global rank i's host.
func hostfile(slots []rankSlot) string {
	var b strings.Builder
	for _, s := range slots {
		b.WriteString(s.Node)
		b.WriteByte('\n')
	}
	return b.String()
}

// masterPort is the rendezvous port derived from the job id (jobMasterPort,
// shared with trainrun env: 20000-29999, below the ephemeral range), so jobs
// that share a node do not collide; a requeued job (same id) reuses its port,
// which the rendezvous store opens with SO_REUSEADDR.
func masterPort(jobID string) int { return plan.MasterPort(jobID) }

// freeMasterPort is the step's MASTER_PORT: masterPort(job), unless rank 0
// runs on this node (the batch step's, which is the allocation's first) and
// something already listens on that port here, when it is the next port up
// that is free (at most 64 tries, wrapping within 20000-29999), and the log
// says so. Two jobs on one node hash to the same port about once in 10,000
// pairs: CI saw job 44's rendezvous fail on 20725, job 20000's port. The
// launch files carry the port to every rank; trainrun env and the plugin
// keep the derived one. listen is net.Listen (tests replace it).
func freeMasterPort(jobID string, local bool, listen func(network, addr string) (net.Listener, error), logf func(string, ...any)) int {
	p := masterPort(jobID)
	if !local {
		return p
	}
	for i := 0; i < 64; i++ {
		q := plan.MasterPortBase + (p-plan.MasterPortBase+i)%plan.MasterPortSpan
		l, err := listen("tcp", fmt.Sprintf(":%d", q))
		if err != nil {
			continue
		}
		l.Close()
		if i > 0 {
			logf("MASTER_PORT %d (derived from job %s) is in use on this node, the rendezvous host: using %d", p, jobID, q)
		}
		return q
	}
	return p
}

// rankEnv is the environment of every process: common to all plus per rank.
type rankEnv struct {
	Common map[string]string
	Ranks  []map[string]string
}

// envInputs is what computeEnv needs beyond the allocation and the slots.
type envInputs struct {
	Layout       plan.Layout
	MasterAddr   string
	MasterPort   int
	PlanPath     string
	CkptDir      string
	ResumeDir    string
	CkptSignal   string
	JobDir       string
	RestartCount int
	Framework    []plan.RankVar // the framework's own variables (plan.MegatronEnv)
}

// runRankEnv gives each rank the torchrun-compatible and TRAINRUN_* variables
// of PRODUCT.md ("Environment of every training process") from plan's one
// table, as the plugin's plan.RankEnv does: the launcher and plan rows, then
// run's own. Rows that differ between ranks go to Ranks, the rest to Common.
func runRankEnv(a *slurm.Allocation, slots []rankSlot, in envInputs) rankEnv {
	l := in.Layout
	l.VPP = max(l.VPP, 1)
	job := plan.RunJob{PlanPath: in.PlanPath, CkptDir: in.CkptDir, ResumeDir: in.ResumeDir, CkptSignal: in.CkptSignal,
		JobDir: in.JobDir, RestartCount: in.RestartCount}
	rows := func(s rankSlot) []plan.RankVar {
		rp := plan.RankPlacement{Rank: s.Rank, Node: s.Node, NodeRank: s.NodeRank, LocalRank: s.LocalRank, GPU: s.GPU,
			TP: s.TP, CP: s.CP, EP: s.EP, DP: s.DP, PP: s.PP}
		v := plan.LauncherVars(rp, len(slots), a.TasksPerNode, in.MasterAddr, in.MasterPort, "")
		v = append(v, plan.PlanVars(l)[:plan.ContractPlanVars]...)
		v = append(v, in.Framework...)
		return append(v, plan.RunVars(job, s.Node, s.GPU)...)
	}
	env := rankEnv{Common: map[string]string{}, Ranks: make([]map[string]string, len(slots))}
	for _, v := range rows(rankSlot{GPU: -1}) {
		if !v.PerRank {
			env.Common[v.Key] = v.Value
		}
	}
	for i, s := range slots {
		env.Ranks[i] = map[string]string{}
		for _, v := range rows(s) {
			if v.PerRank {
				env.Ranks[i][v.Key] = v.Value
			}
		}
	}
	return env
}

// placeRanks places the ranks with the topology-aware placement (plan.Place:
// TP inside NVLink domains, rails aligned, fewest bytes over the slowest
// switch level), from the probed node topologies and the cluster model. It
// falls back to Slurm's block order, saying why, when the placement cannot
// take the layout.
func placeRanks(a *slurm.Allocation, l plan.Layout, traffic plan.Traffic, facts map[string]launch.NodeFacts, cl *topo.Cluster) ([]rankSlot, *plan.Placement, []string, error) {
	G := a.TasksPerNode
	var notes []string
	nodes := make([]plan.PlaceNode, len(a.Nodes))
	for i, n := range a.Nodes {
		pn := plan.PlaceNode{Name: n, Leaf: cl.Leaf(n), Block: cl.Block(n)}
		if f, ok := facts[n]; ok && f.Topo != nil && len(f.Topo.GPUs) == G && wholeNode(f.GPUs, G) {
			rails, why := plan.RailsOf(f.Topo)
			pn.Rails = rails
			if rails == nil && why != "" && i == 0 {
				notes = append(notes, "rails: "+why)
			}
		}
		nodes[i] = pn
	}
	plan.NVLinkBlocks(nodes, nvlinkDomains(facts))
	p, err := plan.Place(plan.PlaceInput{Layout: l, GPUsPerNode: G, Nodes: nodes, Traffic: traffic})
	if err != nil {
		slots, berr := blockPlacement(a, l, gpuIDsOf(facts))
		if berr != nil {
			return nil, nil, nil, berr
		}
		return slots, nil, append(notes, fmt.Sprintf("%v; ranks placed in Slurm's block order", err)), nil
	}
	slots := make([]rankSlot, len(p.Ranks))
	for i, r := range p.Ranks {
		gpu := -1
		f := facts[r.Node]
		if len(f.GPUs) == G {
			gpu = f.GPUs[r.GPU]
		} else if r.Node == a.BatchNode && len(a.GPUIDs) == G {
			gpu = a.GPUIDs[r.GPU]
		}
		s := rankSlot{Rank: r.Rank, Node: r.Node, NodeRank: r.NodeRank, LocalRank: r.LocalRank, GPU: gpu, GPUSlot: r.GPU,
			TP: r.TP, CP: r.CP, EP: r.EP, DP: r.DP, PP: r.PP}
		if f.Topo != nil && len(f.Topo.GPUs) == G && r.GPU < len(f.Topo.GPUs) {
			s.CPUs = cpuListString(f.Topo.GPUs[r.GPU].LocalCPUs)
		}
		slots[i] = s
	}
	return slots, p, notes, nil
}

// nvlinkDomains maps each probed node to its NVLink clique ("" when not
// fabric attached or not probed): trays of one GB200 NVL72 clique are one
// placement block, trays of another clique never share one.
func nvlinkDomains(facts map[string]launch.NodeFacts) map[string]string {
	m := make(map[string]string, len(facts))
	for n, f := range facts {
		if f.Topo != nil {
			m[n] = f.Topo.NVLinkDomain()
		}
	}
	return m
}

// wholeNode: the job holds GPUs 0..G-1 of the node (or it is not known).
func wholeNode(ids []int, g int) bool {
	if ids == nil {
		return true
	}
	if len(ids) != g {
		return false
	}
	for i, id := range ids {
		if id != i {
			return false
		}
	}
	return true
}

func gpuIDsOf(facts map[string]launch.NodeFacts) map[string][]int {
	m := map[string][]int{}
	for n, f := range facts {
		m[n] = f.GPUs
	}
	return m
}

// cpuListString renders CPUs as a Linux CPU list ("0-15,32-47").
func cpuListString(c topo.CPUList) string {
	var parts []string
	for i := 0; i < len(c); {
		j := i
		for j+1 < len(c) && c[j+1] == c[j]+1 {
			j++
		}
		if i == j {
			parts = append(parts, fmt.Sprint(c[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", c[i], c[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}
