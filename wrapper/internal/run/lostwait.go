package run

import (
	"context"
	"slices"
	"strings"
	"syscall"
	"time"
)

// A lost node's step (issue 31, the badput's largest part in the lost-node
// e2e test: 15 s of 20): once a rank failed, srun ends only when slurmctld
// has declared the lost node down (SlurmdTimeout: minutes at a site), and
// the restart waits. When the failure's evidence is complete, the
// controller kills the step instead: every rank has reported an exit or
// closed its connection, and some node's ranks all closed theirs before the
// first failure and reported nothing (its processes went first: the node is
// lost). Those records are what stepFailedNodes judges, so the kill changes
// no verdict; the restarted step runs with --overlap beside the old step's
// remains on the lost node.

// lostWait is how long after the first failure the controller lets srun
// end by itself (kill-on-bad-exit ends the healthy nodes' tasks in about a
// second).
const lostWait = 2 * time.Second

// cutLostWait kills the step when its failure points to a lost node and
// srun still waits for it; once.
func (m *monitor) cutLostWait(now time.Time) {
	if m.firstFail == nil || m.lostCut || m.killing > 0 || now.Sub(m.firstFail.At) < lostWait {
		return
	}
	lost := m.silentNodes()
	if len(lost) == 0 {
		return
	}
	m.lostCut = true
	m.r.logf("node(s) %s: every rank silent since before rank %d failed %.1f s ago, the others accounted for: not waiting for Slurm to declare them down; killing the step",
		strings.Join(lost, ","), m.firstFail.Rank, now.Sub(m.firstFail.At).Seconds())
	// srun first: scancel of a step on a node slurmctld cannot reach took
	// 6 s here; it goes on in the background.
	syscall.Kill(-m.proc.Pid, syscall.SIGKILL)
	if m.stepID != "" {
		r, job, step := m.r, m.r.alloc.JobID, m.stepID
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = r.env.Slurm.KillStep(ctx, job, step)
		}()
	}
}

// silentNodes are the step's nodes none of whose ranks reported an exit
// and all of whose connections closed before the first failure, when every
// other rank reported an exit or closed its connection (nil otherwise).
func (m *monitor) silentNodes() []string {
	return lostBeforeFailure(m.r.placed.Slots, m.exits, m.ctl.ClosedAt, m.firstFail.At)
}

// lostBeforeFailure is silentNodes' rule over the slots, the exits, each
// rank's connection close (closedAt) and the first failure's time.
func lostBeforeFailure(slots []rankSlot, exits map[int]int, closedAt func(int) (time.Time, bool), failAt time.Time) []string {
	closedBefore := map[string]bool{}
	reported := map[string]bool{}
	var order []string
	for _, sl := range slots {
		if !slices.Contains(order, sl.Node) {
			order = append(order, sl.Node)
			closedBefore[sl.Node] = true
		}
		if _, ok := exits[sl.Rank]; ok {
			reported[sl.Node] = true
			continue
		}
		t, closed := closedAt(sl.Rank)
		if !closed {
			return nil // a rank still connected: the evidence is not complete
		}
		if !t.Before(failAt) {
			closedBefore[sl.Node] = false
		}
	}
	var lost []string
	for _, n := range order {
		if !reported[n] && closedBefore[n] {
			lost = append(lost, n)
		}
	}
	return lost
}
