package spank

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/trainrun/trainrun/plan"
	"github.com/trainrun/trainrun/plan/policy"
	"github.com/trainrun/trainrun/topo"
)

// Step is what slurmstepd knows about a step before it forks the tasks.
type Step struct {
	JobID, StepID uint32
	NodeID        int    // this node's index in Nodelist
	NNodes        int    // nodes in the step
	LocalTasks    int    // tasks on this node
	TotalTasks    int    // tasks in the step
	Nodelist      string // the step's nodes as a Slurm hostlist
	Restart       int    // S_SLURM_RESTART_COUNT
	User, JobName string
	// Getenv reads the job's environment (spank_getenv): what the user set.
	Getenv func(string) (string, bool)
	// NodeAddrs are this node's addresses (nil = Resolve the node's name).
	NodeAddrs []string
	// Resolve looks a node's name up (nil = Resolve4 within a second).
	Resolve func(host string) []string
	// Root is the machine root to read /etc/nccl.conf from ("" = /).
	Root string
	// HandoffDir is the job's drain handoff directory on this node
	// (PrepareJobDir; "" = none): every task gets TRAINRUN_HANDOFF_DIR, where
	// a node's drainer leaves the record the job epilog finishes from.
	HandoffDir string
}

// TaskEnv is what the C task_init does for one local task.
type TaskEnv struct {
	Rank    int      // the global rank the placement gave the task
	Vars    []string // KEY=VALUE, each spank_setenv'd (overwrite: the decision is made)
	Explain string   // with --train-explain: printed on the task's stderr
}

// launcherKey says whether a variable describes the job (torchrun's and
// the plan's), as opposed to the NCCL/CUDA tuning --train-nccl=off drops.
func launcherKey(k string) bool {
	switch k {
	case "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "NODE_RANK", "GROUP_RANK",
		"CUDA_DEVICE_MAX_CONNECTIONS": // Megatron-LM's requirement (plan.MegatronEnv), not an NCCL variable
		return true
	}
	return strings.HasPrefix(k, "TRAINRUN_")
}

// ComputeStep computes the environment of every local task of a step with
// plan.Place and plan.RankEnv, the functions `trainrun env` calls: same
// inputs (the node's topology, the step's nodes and tasks per node as GPUs
// per node, the layout, the policy of the partition, the user's values of
// the variables, /etc/nccl.conf) give the same values. With a model and a
// batch the layout is PlanStep's, written to JobDir/plan-STEP.json for
// TRAINRUN_PLAN; with a checkpoint directory TRAINRUN_RESUME_DIR is
// ResumeDir's. notes are warnings for the log.
func ComputeStep(c *Config, r *Request, st Step, node *topo.Node) (tasks []TaskEnv, notes []string, err error) {
	hosts, err := topo.ExpandHostlist(st.Nodelist)
	if err != nil {
		return nil, nil, fmt.Errorf("step node list: %v", err) // the error quotes the list, shortened
	}
	if len(hosts) != st.NNodes || st.NodeID < 0 || st.NodeID >= len(hosts) {
		return nil, nil, fmt.Errorf("step node list %q has %d nodes; Slurm says %d and this is node %d", limitStr(st.Nodelist, 200), len(hosts), st.NNodes, st.NodeID)
	}
	G, world := st.LocalTasks, st.TotalTasks
	if G < 1 || world != G*len(hosts) {
		uneven := fmt.Sprintf("%d tasks over %d nodes with %d here: trainrun places the same number of tasks on every node (use --ntasks-per-node)", world, len(hosts), G)
		if !r.LayoutSet && r.Model == "" {
			// Not a training step (srun -n3 hostname): nothing asked of
			// trainrun, so nothing injected and nothing failed, required
			// plugin or not.
			return nil, []string{uneven + "; nothing injected into this step"}, nil
		}
		return nil, nil, errors.New(uneven)
	}
	sp, ml, notes, err := stepLayout(c, r, st, node, len(hosts), G)
	if err != nil {
		return nil, nil, err
	}
	p, pnotes, err := stepPlacement(c, sp, hosts, node, G, ml)
	if err != nil {
		return nil, nil, err
	}
	notes = append(notes, pnotes...)

	conf, virtualTopo, err := ncclFiles(orStr(st.Root, "/"))
	if err != nil {
		return nil, nil, err
	}

	pol := policy.Default()
	if c.Policy != nil {
		pol = c.Policy
	}
	npol := pol.Effective(r.Partition).NCCL()
	user := map[string]string{}
	if st.Getenv != nil {
		for _, k := range plan.ManagedEnvKeys(npol) {
			if v, ok := st.Getenv(k); ok && v != "" {
				user[k] = v
			}
		}
	}
	here := hosts[st.NodeID]
	addrs := st.NodeAddrs
	if len(addrs) == 0 {
		if st.Resolve != nil {
			addrs = st.Resolve(here)
		} else {
			addrs = Resolve4(here, time.Second)
		}
	}
	var planPath string
	if sp != nil {
		if planPath, err = WritePlan(c.CacheDir, st, sp.JSON, c.As); err != nil {
			planPath = ""
			notes = append(notes, fmt.Sprintf("TRAINRUN_PLAN not set: cannot write the plan file: %v", err))
		}
	}
	ckptDir, err := r.ckptDir(pol, st)
	if err != nil {
		return nil, nil, err
	}
	resume, resumeSet, rn := stepResume(c, ckptDir)
	notes = append(notes, rn...)
	extra := r.extraVars(st, ckptDir, resume, resumeSet)
	if kv, note := MegatronArgsVar(sp, r, ml); kv != "" {
		extra = append(extra, kv)
	} else if note != "" {
		notes = append(notes, note)
	}
	stepNotes := slices.Clone(notes) // the plan's and the store's, for --train-explain
	base := plan.EnvInput{
		Node: node, Placement: p, Plan: ml,
		MasterPort: plan.MasterPort(strconv.FormatUint(uint64(st.JobID), 10)), NodeAddrs: addrs,
		UserEnv: user, NCCLConf: conf, Policy: npol, VirtualTopology: virtualTopo, PlanPath: planPath, Stack: r.Stack,
	}
	tasks, enotes, err := r.taskEnvs(base, here, G, extra, stepNotes)
	if err != nil {
		return nil, nil, err
	}
	notes = append(notes, enotes...)
	if !r.Inject {
		notes = append(notes, "the policy's InjectEnv=no: nothing injected (--train-explain shows what would be)")
	}
	return tasks, notes, nil
}

// taskEnvs is the environment of each of the G local tasks on node here:
// plan.RankEnv of base for the task's rank, the launcher's variables (all
// with --train-nccl), extra, and --train-explain's text. notes are the
// first task's.
func (r *Request) taskEnvs(base plan.EnvInput, here string, G int, extra, stepNotes []string) ([]TaskEnv, []string, error) {
	var notes []string
	byLocal := map[int]int{}
	for i, rp := range base.Placement.Ranks {
		if rp.Node == here {
			byLocal[rp.LocalRank] = i
		}
	}
	tasks := make([]TaskEnv, G)
	for lr := 0; lr < G; lr++ {
		rank, ok := byLocal[lr]
		if !ok {
			return nil, nil, fmt.Errorf("placement has no rank for slot %d of %s", lr, here)
		}
		in := base
		in.Rank = rank
		e, err := plan.RankEnv(in)
		if err != nil {
			return nil, nil, err
		}
		if lr == 0 {
			notes = append(notes, e.Notes...)
		}
		t := TaskEnv{Rank: rank}
		for _, v := range e.Injected() {
			if !r.NCCL && !launcherKey(v.Key) {
				continue
			}
			t.Vars = append(t.Vars, v.Key+"="+v.Value)
		}
		t.Vars = append(t.Vars, extra...)
		if r.Explain {
			t.Explain = explain(e, extra, stepNotes, r)
		}
		if !r.Inject || r.Explain {
			t.Vars = nil
		}
		tasks[lr] = t
	}
	return tasks, notes, nil
}

// stepLayout is the step's layout: PlanStep's plan (sp, nil without a
// model), else --train-layout's pins, else data parallel only; as Megatron
// lays it out over world = nodes × G tasks.
func stepLayout(c *Config, r *Request, st Step, node *topo.Node, nodes, G int) (sp *StepPlan, ml plan.Layout, notes []string, err error) {
	world := nodes * G
	if sp, notes, err = PlanStep(c, r, st, node); err != nil {
		return nil, ml, nil, err
	}
	var l plan.Layout
	switch {
	case sp != nil:
		l = sp.Result.Plan.Layout
	case !r.LayoutSet:
		l = plan.Layout{TP: 1, PP: 1, CP: 1, EP: 1, DP: world}
	default:
		if l, err = r.Pins.Layout(world, r.Global); err != nil {
			return nil, ml, nil, fmt.Errorf("--train-layout=%s: %v; the step has %d nodes × %d tasks = %d", r.Pins, err, nodes, G, world)
		}
	}
	if ml, err = MegatronLayout(l, world); err != nil {
		return nil, ml, nil, fmt.Errorf("layout %s: %v; the step has %d nodes × %d tasks = %d", l.Config(), err, nodes, G, world)
	}
	return sp, ml, notes, nil
}

// ncclFiles reads the node's /etc/nccl.conf (nil if absent) and whether
// nvidia-topologyd wrote a virtual topology, under root.
func ncclFiles(root string) (conf map[string]string, virtualTopo bool, err error) {
	if data, err := os.ReadFile(filepath.Join(root, "etc/nccl.conf")); err == nil {
		if conf, err = plan.ParseNCCLConf(data); err != nil {
			return nil, false, fmt.Errorf("%s: %v", filepath.Join(root, "etc/nccl.conf"), err)
		}
	}
	_, verr := os.Stat(filepath.Join(root, "var/run/nvidia-topologyd/virtualTopology.xml"))
	return conf, verr == nil, nil
}

// stepResume is TRAINRUN_RESUME_DIR for the store ckptDir ("": none), read
// as the user in the root context.
func stepResume(c *Config, ckptDir string) (resume string, set bool, notes []string) {
	if ckptDir == "" {
		return "", false, nil
	}
	if c.As != nil { // root context: the store is the user's to read, not root's
		return ResumeDirAs(c.Trainrun, c.As, ckptDir, c.ResumeTimeout)
	}
	return ResumeDir(ckptDir)
}

// ckptDir is TRAINRUN_CKPT_DIR: the request's, expanded for the step ("" =
// none), with ExpandCkptDirChecked: st.User and st.JobName must not leave
// their path component, and the result is checked against CkptRoots again.
func (r *Request) ckptDir(pol *policy.Policy, st Step) (string, error) {
	if r.CkptDir == "" {
		return "", nil
	}
	return policy.ExpandCkptDirChecked(r.CkptDir, st.User, strconv.FormatUint(uint64(st.JobID), 10), st.JobName, pol.Effective(r.Partition).CkptRoots.Value)
}

// extraVars are the TRAINRUN_* variables of the checkpoint handshake and the
// model, the same for every task. TRAINRUN_RESUME_DIR is set (maybe empty)
// only when resumeSet.
func (r *Request) extraVars(st Step, ckptDir, resume string, resumeSet bool) []string {
	var out []string
	if r.Model != "" {
		out = append(out, "TRAINRUN_MODEL="+r.Model)
	}
	if r.Batch() != "" {
		out = append(out, "TRAINRUN_BATCH="+r.Batch())
	}
	if ckptDir != "" {
		out = append(out, "TRAINRUN_CKPT_DIR="+ckptDir)
		if resumeSet {
			out = append(out, "TRAINRUN_RESUME_DIR="+resume)
		}
	}
	if r.Signal != "" {
		out = append(out, "TRAINRUN_CKPT_SIGNAL="+r.Signal) // "USR2", as trainrun run sets it
	}
	if r.Lead > 0 {
		out = append(out, "TRAINRUN_CKPT_LEAD="+strconv.Itoa(int(r.Lead/time.Second)))
	}
	out = append(out, "TRAINRUN_RESTART_COUNT="+strconv.Itoa(st.Restart))
	if st.HandoffDir != "" {
		out = append(out, "TRAINRUN_HANDOFF_DIR="+st.HandoffDir)
	}
	return out
}

func explain(e *plan.Env, extra, stepNotes []string, r *Request) string {
	var b strings.Builder
	head := "trainrun: explain: dry run, nothing injected"
	if !r.Explain {
		head = "trainrun: explain"
	}
	b.WriteString(head + "\n")
	for _, v := range e.Vars {
		why := strings.ReplaceAll(v.Why, "\n", " ")
		switch {
		case v.Inject && !r.NCCL && !launcherKey(v.Key):
			fmt.Fprintf(&b, "# %s=%s not injected (--train-nccl=off): %s\n", v.Key, v.Value, why)
		case v.Inject:
			fmt.Fprintf(&b, "# %s (%s): %s\n%s=%s\n", v.Key, v.Source, why, v.Key, v.Value)
		case v.Value != "":
			fmt.Fprintf(&b, "# %s=%s stays (%s, not injected): %s\n", v.Key, v.Value, v.Source, why)
		default:
			fmt.Fprintf(&b, "# %s not set: %s\n", v.Key, why)
		}
	}
	for _, kv := range extra {
		fmt.Fprintf(&b, "%s\n", kv)
	}
	for _, n := range append(slices.Clone(stepNotes), e.Notes...) {
		fmt.Fprintf(&b, "# note: %s\n", strings.ReplaceAll(n, "\n", " "))
	}
	return b.String()
}

// MegatronLayout is plan.MegatronLayout counting the step's tasks: the
// degrees must use exactly world tasks (as `trainrun env` checks GPUs);
// with ep > 1, dp may be given per expert group.
func MegatronLayout(l plan.Layout, world int) (plan.Layout, error) {
	ml, err := plan.MegatronLayout(l, world)
	var se *plan.LayoutSizeError
	if errors.As(err, &se) {
		se.Unit = "tasks"
	}
	return ml, err
}

// Resolve4 looks a node's name up (IPv4), within timeout; nil on failure.
func Resolve4(host string, timeout time.Duration) []string {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	ips, err := net.DefaultResolver.LookupIP(ctx, "ip4", host)
	if err != nil {
		return nil
	}
	out := make([]string, 0, len(ips))
	for _, ip := range ips {
		out = append(out, ip.String())
	}
	return out
}

// stepPlacement places the step's ranks as trainrun env does: the node's
// rails, the cluster model, the node's NVLink clique where the model has no
// blocks, and the plan's traffic when there is a plan.
func stepPlacement(c *Config, sp *StepPlan, hosts []string, node *topo.Node, G int, ml plan.Layout) (*plan.Placement, []string, error) {
	var notes []string
	rails, _ := plan.RailsOf(node)
	if len(rails) != G {
		rails = nil // fewer ranks than GPUs: local rank i drives GPU i
	}
	nodes, err := plan.PlaceNodes(hosts, c.Cluster, rails)
	if err != nil {
		return nil, nil, fmt.Errorf("placement: %v", err)
	}
	if note := plan.LocalNVLinkBlocks(nodes, node); note != "" {
		notes = append(notes, note)
	}
	var traffic plan.Traffic // the plan's bytes, as trainrun env --plan weighs them
	if sp != nil {
		traffic = sp.Result.Plan.Traffic
	}
	p, err := plan.Place(plan.PlaceInput{Layout: ml, GPUsPerNode: G, Nodes: nodes, Traffic: traffic})
	if err != nil {
		return nil, nil, fmt.Errorf("placement: %v", err)
	}
	return p, notes, nil
}
