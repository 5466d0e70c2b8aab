package run

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/trainrun/trainrun/checkpoint"
	"github.com/trainrun/trainrun/internal/slurm"
	"github.com/trainrun/trainrun/topo"
	"github.com/trainrun/trainrun/wrapper/obs"
)

// Spare nodes and restarts inside the allocation after a crash or a lost
// node (issue 21). With --spare-nodes K the job holds K nodes beyond the
// layout's: the layout and the step use the others, the K stay idle. When
// a step fails and a node of it is lost (no exit report came from its
// ranks, or scontrol says it is DOWN or NOT_RESPONDING), Decide
// restarts the step inside the allocation while a spare can take the lost
// node's place: the ranks are placed again on the healthy nodes, with the
// same world size, and srun gets their names (--nodelist).

// spareState is the allocation's node bookkeeping for spare nodes.
type spareState struct {
	all   []string // the allocation's nodes, in Slurm's order
	spare []string // idle nodes, in Slurm's order
	lost  []string // nodes lost during this allocation, never used again in it
	// unhealthy: nodes the health pass kept out before the first step
	// (health.go), each in the place of a spare.
	unhealthy int
	// restartWhy is the decision's message of the last restart inside the
	// allocation (act), for the observer's restart event.
	restartWhy string
}

// spareSource names where --spare-nodes came from, for messages.
func (r *runner) spareSource() string {
	if src := r.cfg.source("spare-nodes"); src.kind == fromPolicy {
		return fmt.Sprintf("the policy's %s=%d (%s)", src.name, r.cfg.fault.spareNodes, src.where)
	}
	return fmt.Sprintf("--spare-nodes %d", r.cfg.fault.spareNodes)
}

// setupSpares sets the spare nodes aside after the gather phase (which
// probed and addressed every node of the allocation): r.alloc.Nodes, and
// so the world size, the layout and the step, are the others. The spares
// are the last nodes in Slurm's order, never the batch node (the
// controller runs there). K must leave at least one node for the layout.
func (r *runner) setupSpares(ctx context.Context) error {
	k, a := r.cfg.fault.spareNodes-r.sess.spare.unhealthy, r.alloc // each node the health pass kept out used a spare
	r.sess.spare.all = append([]string(nil), a.Nodes...)
	if k <= 0 {
		return nil
	}
	if k >= len(a.Nodes) {
		return usageErrorf("%s: the job holds %d node(s) (%s); the layout needs at least one node besides the spares: submit with at least %d nodes (#SBATCH --nodes=%d) or give fewer spare nodes",
			r.spareSource(), len(a.Nodes), a.NodeList, k+1, k+1)
	}
	work, spare := splitSpares(a.Nodes, a.BatchNode, k)
	a, r.sess.spare.spare = withNodes(a, work), spare
	r.alloc = a
	r.logf("spare nodes: %s (%s) stay idle; the layout and the step use the other %d node(s), %d ranks; a step that loses a node restarts inside the job on them",
		strings.Join(spare, ","), r.spareSource(), len(work), a.World())
	r.checkNoKill(ctx)
	return nil
}

// withNodes is allocation a on nodes only (a subset of its nodes, in its
// order): a new allocation, never a changed one.
func withNodes(a *slurm.Allocation, nodes []string) *slurm.Allocation {
	next := *a
	next.Nodes = nodes
	return &next
}

// splitSpares picks k spare nodes: the last in order, skipping the batch
// node; the rest keep their order.
func splitSpares(nodes []string, batch string, k int) (work, spare []string) {
	for i := len(nodes) - 1; i >= 0 && len(spare) < k; i-- {
		if nodes[i] != batch {
			spare = append([]string{nodes[i]}, spare...)
		}
	}
	for _, n := range nodes {
		if !slices.Contains(spare, n) {
			work = append(work, n)
		}
	}
	return work, spare
}

// checkNoKill says, once at start, when the job lacks --no-kill: without
// it Slurm ends the whole job when a node fails, and the spares cannot
// help. scontrol show job does not say; the batch script's #SBATCH lines
// do (slurm.NoKill).
func (r *runner) checkNoKill(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	script, err := r.env.Slurm.BatchScript(ctx, r.alloc.JobID)
	if err != nil {
		r.logf("warning: %s: could not read the batch script to check for --no-kill (%v); without it Slurm ends the job when a node fails and the spare nodes cannot take its place", r.spareSource(), err)
		return
	}
	if ok, _ := slurm.NoKill(script, r.env.Getenv); !ok {
		r.logf("warning: %s: the batch script has no '#SBATCH --no-kill': Slurm ends the whole job when a node fails, and the spare nodes cannot take its place; add '#SBATCH --no-kill' (ignore this if sbatch was given --no-kill on its command line)", r.spareSource())
	}
}

// spareSummary is the summary's lines for the spare and lost nodes (""
// without).
func (r *runner) spareSummary() string {
	var b strings.Builder
	if len(r.sess.spare.spare) > 0 {
		fmt.Fprintf(&b, "  spare       %s (idle: a step that loses a node restarts inside the job on them)\n", strings.Join(r.sess.spare.spare, ","))
	}
	if len(r.sess.spare.lost) > 0 {
		fmt.Fprintf(&b, "  lost        %s (failed in this job: not used again by it)\n", strings.Join(r.sess.spare.lost, ","))
	}
	return b.String()
}

// spareOutcome completes a failed step's outcome for Decide: a node
// of the step that scontrol reports DOWN or NOT_RESPONDING is lost too (its
// ranks may have reported an exit before it went: a restart on it would
// fail again), and SpareNodes counts the spares still healthy. Skipped
// when the step could restart nowhere (--max-restarts 0, no spares).
func (r *runner) spareOutcome(o *Outcome) {
	if !o.Failed() || len(r.sess.spare.spare) == 0 && r.cfg.fault.maxRestarts == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nodes := append(append([]string(nil), r.alloc.Nodes...), r.sess.spare.spare...)
	states, err := r.env.Slurm.NodeStates(ctx, strings.Join(nodes, ","))
	if err != nil {
		r.logf("warning: reading the nodes' state after the failure: %v", err)
	}
	o.SpareNodes = 0
	for _, n := range r.sess.spare.spare {
		if st := states[n]; slurm.NodeFailed(st) {
			r.logf("warning: spare node %s is %s: it cannot take a lost node's place", n, st)
		} else {
			o.SpareNodes++
		}
	}
	for _, n := range r.alloc.Nodes {
		if st := states[n]; slurm.NodeFailed(st) {
			r.NoteFailedNode(checkpoint.FailedNode{Node: n, Cause: checkpoint.CauseNodeFail, Detail: "scontrol show node: State=" + st})
		}
	}
	o.FailedNodes = r.failedNodes()
}

// replaceLostNodes puts spare nodes in the place of the nodes the failed
// step lost and places the ranks again (the same world size): the next
// step runs on the healthy nodes. It returns the nodes replaced.
func (r *runner) replaceLostNodes(f runFacts) ([]string, error) {
	lost := LostNodes(r.failedNodes())
	var gone []string
	for _, n := range lost {
		if slices.Contains(r.alloc.Nodes, n) && !slices.Contains(r.sess.spare.lost, n) {
			gone = append(gone, n)
		}
	}
	if len(gone) == 0 {
		return nil, nil
	}
	if len(gone) > len(r.sess.spare.spare) { // a hang's restart (Decide restarts no failure so), or --shrink
		if ok, err := r.shrinkToFit(f, gone); ok || err != nil { // shrink.go
			return gone, err
		}
		r.logf("warning: %d node(s) lost (%s) and %d spare node(s) left: the step restarts on the same nodes", len(gone), strings.Join(gone, ","), len(r.sess.spare.spare))
		return nil, nil
	}
	r.sess.spare.lost = append(r.sess.spare.lost, gone...)
	took := r.sess.spare.spare[:len(gone)]
	r.sess.spare.spare = r.sess.spare.spare[len(gone):]
	var work []string
	for _, n := range r.sess.spare.all { // Slurm's order: block distribution keeps it
		if (slices.Contains(r.alloc.Nodes, n) || slices.Contains(took, n)) && !slices.Contains(gone, n) {
			work = append(work, n)
		}
	}
	r.alloc = withNodes(r.alloc, work)
	r.logf("spare node(s) %s take the place of the lost %s: the step runs on %s (%d ranks)", strings.Join(took, ","), strings.Join(gone, ","),
		topo.CompressHostlist(work), r.alloc.World())
	p, err := r.place(f, r.choice)
	if err != nil {
		return nil, err
	}
	r.placed = p
	return gone, nil
}

// stepNodeList is srun's --nodelist: the step's nodes when the job holds
// others (spare or lost ones), else "" (the whole allocation).
func (r *runner) stepNodeList() string {
	if len(r.sess.spare.spare) == 0 && len(r.sess.spare.lost) == 0 {
		return ""
	}
	return strings.Join(nodesInRankOrder(r.placed.Slots), ",")
}

// observeRestart tells the observer that the step restarts inside the
// allocation (the report's new incarnation, the restarts metric by cause),
// and forgets the failed step's nodes: the history's end event keeps them.
func (r *runner) observeRestart(resume string) {
	if r.sess.obs != nil {
		r.pollProgress()
	}
	e := obs.Event{Kind: obs.KindRestart, Fault: cmp.Or(faultOf[r.sess.endCause], obs.FaultCrash), Message: r.sess.spare.restartWhy,
		Start:        &obs.Start{Nodes: len(r.alloc.Nodes), GPUs: r.alloc.World(), ResumeFrom: resume},
		FailureClass: string(r.sess.failClass.Class), FailureEvidence: r.sess.failClass.Evidence}
	for _, f := range r.failedNodes() {
		e.FailedNodes = append(e.FailedNodes, obs.FailedNode{Node: f.Node, Cause: string(f.Cause), Detail: f.Detail})
	}
	r.observe(e)
	r.sess.faults.mu.Lock()
	r.sess.faults.nodes = nil
	r.sess.faults.mu.Unlock()
}

// localDiskMessage says that a node-local save (--ckpt-local-dir) failed:
// the file system is the failed ranks' nodes' own, which the controller
// cannot measure from the batch node.
func (r *runner) localDiskMessage(f checkpoint.FailedSave) string {
	what := map[string]string{checkpoint.DiskFull: "is full", checkpoint.DiskQuota: "is over quota", checkpoint.DiskIOError: "failed with an I/O error"}[f.Cause]
	var nodes []string
	for _, rk := range f.Ranks {
		if rk >= 0 && rk < len(r.placed.Slots) && !slices.Contains(nodes, r.placed.Slots[rk].Node) {
			nodes = append(nodes, r.placed.Slots[rk].Node)
		}
	}
	latest := "there is no committed checkpoint yet"
	if t := r.getLastTag(); t != "" {
		latest = "the latest committed checkpoint stays " + t
	}
	return fmt.Sprintf("checkpoint %s was not saved: the node-local --ckpt-local-dir %s on %s %s; %s, training goes on and the next save retries; free space there (df -h on the node: /dev/shm counts against the node's memory) or point --ckpt-local-dir at larger local storage",
		f.Tag, r.cfg.ckptLocal, cmp.Or(strings.Join(nodes, ","), "the failed ranks' nodes"), cmp.Or(what, "failed"), latest)
}
