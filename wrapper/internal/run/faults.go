package run

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/trainrun/trainrun/checkpoint"
	"github.com/trainrun/trainrun/internal/slurm"
	"github.com/trainrun/trainrun/internal/units"
	"github.com/trainrun/trainrun/topo"
	"github.com/trainrun/trainrun/wrapper/obs"
)

// Faults beyond preemption (issue 21, part B): a save that a full or failing
// disk stopped, and the nodes a failure points to.

// faultState is what the controller learns of faults during an incarnation.
// The monitor's goroutines (background commits) write it too: mu guards it.
type faultState struct {
	mu          sync.Mutex
	saveFailAt  time.Time // the last failed save (trainer side or commit)
	saveFailMsg string
	seen        map[string]bool // commit errors already counted
	nodes       []checkpoint.FailedNode
}

// NoteFailedNode records a node a failure points to, for the job history
// (its end event), the report, the metrics and the exclusion of the node
// from a requeued job (JudgeNodes). Hang and straggler detection call
// it with checkpoint.CauseHang and Detail naming the rank and GPU, e.g.
// "rank 3 (GPU 1) made no progress for 95 s".
func (r *runner) NoteFailedNode(f checkpoint.FailedNode) {
	fs := &r.sess.faults
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for _, g := range fs.nodes {
		if g.Node == f.Node && g.Cause == f.Cause {
			return
		}
	}
	fs.nodes = append(fs.nodes, f)
	r.logf("node %s: %s (%s)", f.Node, f.Cause, cmp.Or(f.Detail, "no detail"))
}

func (r *runner) failedNodes() []checkpoint.FailedNode {
	r.sess.faults.mu.Lock()
	defer r.sess.faults.mu.Unlock()
	return append([]checkpoint.FailedNode(nil), r.sess.faults.nodes...)
}

// noteSaveFailed records a failed save: the log, the metric (failed saves by
// cause), and the time, which tells a stop whose checkpoint failed
// (saveFailedSince) from one whose trainers saved nothing.
func (r *runner) noteSaveFailed(cause, msg string) {
	fs := &r.sess.faults
	fs.mu.Lock()
	fs.saveFailAt, fs.saveFailMsg = time.Now(), msg
	fs.mu.Unlock()
	r.logf("warning: %s", msg)
	r.observe(obs.Event{Kind: obs.KindCkptFail, Cause: cause, Message: msg})
}

// saveFailedSince is the message of a save that failed at or after t ("" if none).
func (r *runner) saveFailedSince(t time.Time) string {
	r.sess.faults.mu.Lock()
	defer r.sess.faults.mu.Unlock()
	if r.sess.faults.saveFailMsg == "" || t.IsZero() || r.sess.faults.saveFailAt.Before(t) {
		return ""
	}
	return r.sess.faults.saveFailMsg
}

// discardFailedSaves removes the checkpoints the trainers could not save
// (checkpoint.DiscardFailed: every rank answered, some failed), reports each,
// and applies the retention: what it frees the next save can use.
//
// A checkpoint complete but not yet committed (background commits run every
// 15 s) is committed first, through store: the message then names the
// latest that stays, and the trainer's resume point is never left behind a
// failed save.
func (r *runner) discardFailedSaves(store ckptStore) {
	if r.ckpt.store == nil {
		return
	}
	failed, err := r.ckpt.store.DiscardFailed(r.alloc.World())
	if err != nil {
		r.logf("warning: %v", err)
	}
	if len(failed) > 0 && store != nil {
		if tag, changed, err := store.CommitComplete(r.alloc.World()); err == nil && changed {
			r.setLastTag(tag)
			r.logf("checkpoint %s complete and committed as latest", tag)
		}
	}
	for _, f := range failed {
		msg := checkpoint.DiskMessage(r.dirs.ckptDir, f.Tag, f.Cause, r.getLastTag())
		if f.Local {
			msg = r.localDiskMessage(f)
		}
		msg += fmt.Sprintf(" (ranks %s failed; %s of partial files removed)", rankList(f.Ranks), units.Bytes(f.Bytes))
		r.noteSaveFailed(f.Cause, msg)
	}
	if len(failed) > 0 {
		r.prune()
	}
}

// commitDiskFault handles a commit that failed: a disk fault is reported
// once per distinct error with the file system's state and what to do (the
// checkpoint stays uncommitted and the next commit retries it); retention
// frees what it may. It returns the metric's cause.
func (r *runner) commitDiskFault(err error) (cause string, first bool) {
	cause = checkpoint.DiskCause(err)
	key := err.Error()
	r.sess.faults.mu.Lock()
	if r.sess.faults.seen == nil {
		r.sess.faults.seen = map[string]bool{}
	}
	first = !r.sess.faults.seen[key]
	r.sess.faults.seen[key] = true
	r.sess.faults.mu.Unlock()
	if cause == "" {
		return "commit", first
	}
	if first {
		msg := checkpoint.DiskMessage(r.dirs.ckptDir, "commit", cause, r.getLastTag())
		msg = strings.Replace(msg, "checkpoint commit was not saved", "a checkpoint could not be committed", 1) + ": " + err.Error()
		r.sess.faults.mu.Lock()
		r.sess.faults.saveFailAt, r.sess.faults.saveFailMsg = time.Now(), msg
		r.sess.faults.mu.Unlock()
		r.logf("warning: %s", msg)
		r.prune()
	}
	return cause, first
}

// stepFailedNodes finds the nodes a failed step points to: a node none of
// whose ranks reported an exit while others did (lost: its slurmd or its
// processes died with it), else the first failing rank's node. A silent
// node is lost only when one of its ranks' connections closed before the
// first failure was reported, or never closed: when every one closed after
// it, srun cleared the node's ranks on ending the step (kill-on-bad-exit),
// which says nothing of the node (issue 35: a rank that failed its
// rendezvous had the healthy peer node excluded as lost).
func (r *runner) stepFailedNodes(code int, reason StopReason, res stepResult) []checkpoint.FailedNode {
	exits, firstFail := res.Exits, res.FirstFail
	if code == 0 || reason == Cancelled || len(exits) == 0 {
		return r.failedNodes()
	}
	silent := map[string][]int{} // a node's ranks without an exit report
	reported := map[string]bool{}
	var order []string
	for _, sl := range r.placed.Slots {
		if _, ok := silent[sl.Node]; !ok && !reported[sl.Node] {
			order = append(order, sl.Node)
		}
		if _, ok := exits[sl.Rank]; ok {
			reported[sl.Node] = true
		} else {
			silent[sl.Node] = append(silent[sl.Node], sl.Rank)
		}
	}
	lost := false
	for _, n := range order {
		if reported[n] || len(silent[n]) == 0 {
			continue
		}
		if firstFail != nil && closedAfter(silent[n], res.Closed, firstFail.At) {
			r.logf("node %s: ranks %s reported no exit, but their connections closed after rank %d's failure: srun ended them with the step, not a lost node",
				n, rankList(silent[n]), firstFail.Rank)
			continue
		}
		lost = true
		r.NoteFailedNode(checkpoint.FailedNode{Node: n, Cause: checkpoint.CauseNodeFail,
			Detail: fmt.Sprintf("ranks %s never reported an exit: the node or its processes were lost", rankList(silent[n]))})
	}
	if !lost && firstFail != nil && firstFail.Rank >= 0 && firstFail.Rank < len(r.placed.Slots) {
		s := r.placed.Slots[firstFail.Rank]
		r.NoteFailedNode(checkpoint.FailedNode{Node: s.Node, Cause: checkpoint.CauseCrash, Exit: firstFail.Code,
			Detail: fmt.Sprintf("rank %d (GPU %d) failed first with exit %d", s.Rank, s.GPU, firstFail.Code)})
	}
	return r.failedNodes()
}

// closedAfter says whether the connection of every one of ranks closed
// after t (one still open, or closed before, says the node may be lost).
func closedAfter(ranks []int, closed map[int]time.Time, t time.Time) bool {
	for _, rk := range ranks {
		c, ok := closed[rk]
		if !ok || !c.After(t) {
			return false
		}
	}
	return true
}

// badNodesToExclude is the job's ExcNodeList with the nodes the history
// holds evidence against (JudgeNodes, each verdict logged) added, read
// before the requeue: after it Slurm's SIGTERM to the batch step's
// processes kills the queries trainrun starts (seen on Slurm 22.05); ""
// when there is nothing to add.
func (r *runner) badNodesToExclude() (list string, nodes []string) {
	if r.ckpt.store == nil {
		return "", nil
	}
	incs, err := r.ckpt.store.History().Load()
	if err != nil {
		r.logf("warning: %v", err)
		return "", nil
	}
	verdicts := JudgeNodes(incs)
	for _, v := range verdicts {
		r.logf("node %s: %s the requeued job: %s", v.Node, map[bool]string{true: "excluded from", false: "kept in"}[v.Exclude], v.Why)
	}
	if nodes = Excluded(verdicts); len(nodes) == 0 {
		return "", nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	j, err := r.env.Slurm.Job(ctx, r.alloc.JobID)
	if err != nil {
		r.logf("warning: keeping the failed node(s) %s out of the requeued job: %v", strings.Join(nodes, ","), err)
		return "", nil
	}
	list, err = slurm.MergeHostlists(j.Record["ExcNodeList"], nodes)
	if err != nil {
		r.logf("warning: keeping the failed node(s) %s out of the requeued job: %v", strings.Join(nodes, ","), err)
		return "", nil
	}
	if req := j.Record["ReqNodeList"]; req != "" && req != "(null)" {
		if asked, err := topo.ExpandHostlist(req); err == nil {
			for _, n := range asked {
				if slices.Contains(nodes, n) {
					r.logf("warning: the job asks for %s by name (--nodelist=%s): excluding it, the requeued job cannot start until the request changes (scontrol update jobid=%s ReqNodeList=...)", n, req, r.alloc.JobID)
				}
			}
		}
	}
	return list, nodes
}

// excludeBadNodes keeps the nodes out of the requeued job (`scontrol update
// jobid=J ExcNodeList=...`). Slurm takes it only once the job is pending
// again, so it runs right after the requeue: the job stays COMPLETING, and
// cannot start elsewhere, until this batch step (trainrun) has exited. Seen
// on Slurm 22.05 after a node failure: slurmctld answers the update only
// once the batch step is gone (KillWait after the requeue's SIGTERM), and
// applies it even when the client was killed meanwhile. So the intent is
// logged first, the answer awaited briefly, and a client killed at once
// (the requeue's SIGTERM reaches trainrun's children) is started again.
func (r *runner) excludeBadNodes(list string, nodes []string) {
	if list == "" {
		return
	}
	r.logf("excluding %s from the requeued job (ExcNodeList=%s); an admin can drain them: %s",
		strings.Join(nodes, ","), list, slurm.DrainHint(nodes, "trainrun: failed in job "+r.alloc.JobID))
	var err error
	for try := 0; try < 3; try++ {
		t0 := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err = r.env.Slurm.SetExcNodeList(ctx, r.alloc.JobID, list)
		cancel()
		switch {
		case err == nil:
			r.logf("the requeued job excludes %s", strings.Join(nodes, ","))
			return
		case time.Since(t0) >= time.Second:
			r.logf("Slurm has not confirmed the exclusion yet (it applies it once the job has completed): check with scontrol show job %s", r.alloc.JobID)
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	r.logf("warning: keeping the failed node(s) %s out of the requeued job: %v", strings.Join(nodes, ","), err)
}

func rankList(ranks []int) string {
	s := make([]string, 0, len(ranks))
	sort.Ints(ranks)
	for _, r := range ranks {
		s = append(s, fmt.Sprint(r))
	}
	return strings.Join(s, ",")
}
