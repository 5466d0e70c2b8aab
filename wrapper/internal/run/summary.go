// What trainrun run prints before the step: the summary and the dry run.

package run

import (
	"cmp"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/trainrun/trainrun/internal/shell"
	"github.com/trainrun/trainrun/internal/units"
	"github.com/trainrun/trainrun/plan"
	"github.com/trainrun/trainrun/wrapper/internal/launch"
)

// summary is the one page printed to the job log and written to summary.txt.
func (r *runner) summary() string {
	var b strings.Builder
	a, l := r.alloc, r.choice.Layout
	fmt.Fprintf(&b, "trainrun run: job %s, %d node(s) × %d GPU(s) = %d ranks, partition %s, restart %d\n",
		a.JobID, len(a.Nodes), a.TasksPerNode, a.World(), orDash(a.Partition), a.RestartCount)
	if !a.EndTime.IsZero() {
		fmt.Fprintf(&b, "  time limit  %s, ends %s; checkpoint asked %s before\n", fmtLimit(a.TimeLimit), a.EndTime.Format("2006-01-02 15:04:05 MST"), r.facts.lead)
	}
	fmt.Fprintf(&b, "  layout      tp=%d pp=%d vpp=%d cp=%d ep=%d dp=%d  micro_batch=%d grad_accum=%d recompute=%s zero=%d sp=%t",
		l.TP, l.PP, l.VPP, l.CP, l.EP, l.DP, l.MicroBatch, l.GradAccum, l.Recompute, l.Zero, l.SP)
	if r.choice.Eval != nil {
		fmt.Fprintf(&b, "\n  predicted   step %.3f s (compute %.3f, TP comm %.3f, PP bubble %.3f, DP exposed %.3f), MFU %.1f%%, %.0f GiB/GPU of %.0f\n",
			r.choice.Eval.Time.Step, r.choice.Eval.Time.Compute, r.choice.Eval.Time.TPComm, r.choice.Eval.Time.PPBubble, r.choice.Eval.Time.DPCommExposed, 100*r.choice.Eval.MFU,
			r.choice.Eval.Memory.PerGPU/(1<<30), r.choice.Eval.Memory.Capacity/(1<<30))
		b.WriteString(tightWarning(r.choice.Eval)) // issue 30
	} else {
		fmt.Fprintf(&b, " (pinned with --fix; not evaluated: no prediction)\n")
	}
	fmt.Fprintf(&b, "  placement   rank order tp-cp-ep-dp-pp; %s\n", placementLine(r.placed.Slots, l))
	for _, w := range tpSlowLinks(r.placed.Slots, r.facts.nodes, 4) {
		fmt.Fprintf(&b, "  warning     %s\n", w)
	}
	if p := r.placed.Placement; p != nil && r.choice.Eval != nil {
		fmt.Fprintf(&b, "  traffic     per step: NVLink %s, PCIe %s, leaf %s, spine %s (Slurm's block order: leaf %s, spine %s)\n",
			units.Bytes(p.Traffic.NVLink), units.Bytes(p.Traffic.PCIe), units.Bytes(p.Traffic.Leaf), units.Bytes(p.Traffic.Spine), units.Bytes(p.Baseline.Leaf), units.Bytes(p.Baseline.Spine))
	}
	for _, line := range nodeTable(r.placed.Slots, 8) {
		fmt.Fprintf(&b, "    %s\n", line)
	}
	b.WriteString(r.spareSummary())
	b.WriteString(r.tuneSummary())
	fmt.Fprintf(&b, "  resume      %s\n", cmp.Or(r.ckpt.resume, "(none: first start)"))
	fmt.Fprintf(&b, "  checkpoints %s (signal %s)\n", r.dirs.ckptDir, strings.ToUpper(r.cfg.ckptSignal))
	if r.cfg.ckptLocal != "" {
		fmt.Fprintf(&b, "  tiered      trainers save into %s on each node; trainrun drains it into the store\n", r.cfg.ckptLocal)
	}
	fmt.Fprintf(&b, "  command     %s\n", shell.Join(r.step.cmdArgv))
	b.WriteString(r.containerSummary())
	fmt.Fprintf(&b, "  job dir     %s (plan.json, hostfile, summary.txt, launch/)\n", r.dirs.jobDir)
	return b.String()
}

// placementLine says where the TP groups landed.
func placementLine(slots []rankSlot, l plan.Layout) string {
	groups, onOne := 0, 0
	byGroup := map[[4]int]map[string]bool{}
	for _, s := range slots {
		k := [4]int{s.CP, s.DP, s.PP, 0}
		if byGroup[k] == nil {
			byGroup[k] = map[string]bool{}
		}
		byGroup[k][s.Node] = true
	}
	for _, nodes := range byGroup {
		groups++
		if len(nodes) == 1 {
			onOne++
		}
	}
	return fmt.Sprintf("%d of %d TP groups (size %d) inside one node", onOne, groups, l.TP)
}

// nodeTable lists each node's ranks compactly, at most max lines.
func nodeTable(slots []rankSlot, maxLines int) []string {
	var lines []string
	nodes := nodesInRankOrder(slots)
	byNode := map[string][]rankSlot{}
	for _, s := range slots {
		byNode[s.Node] = append(byNode[s.Node], s)
	}
	for i, n := range nodes {
		if i == maxLines-1 && len(nodes) > maxLines {
			lines = append(lines, fmt.Sprintf("... %d more nodes (see plan.json)", len(nodes)-i))
			break
		}
		rs := byNode[n]
		sort.Slice(rs, func(a, b int) bool { return rs[a].LocalRank < rs[b].LocalRank })
		var parts []string
		for _, s := range rs {
			g := "gpu" + strconv.Itoa(s.GPU)
			if s.GPU < 0 {
				g = "gpu?"
			}
			parts = append(parts, fmt.Sprintf("%d:%s(pp%d,dp%d,tp%d)", s.Rank, g, s.PP, s.DP, s.TP))
		}
		lines = append(lines, fmt.Sprintf("%-10s %s", n, strings.Join(parts, " ")))
	}
	return lines
}

func orDash(s string) string { return cmp.Or(s, "-") }

func fmtLimit(d time.Duration) string {
	if d == 0 {
		return "UNLIMITED"
	}
	return d.String()
}

func (r *runner) printDryRun(renv rankEnv) error {
	if r.cfg.rank < 0 || r.cfg.rank >= len(r.placed.Slots) {
		return usageErrorf("--rank %d: the job has ranks 0..%d", r.cfg.rank, len(r.placed.Slots)-1)
	}
	w := r.env.Stdout
	fmt.Fprint(w, r.summary())
	fmt.Fprintln(w, "\n# srun command line:")
	line := shell.Join(r.step.srunArgv)
	if len(r.step.srunEnv) > 0 {
		line = shell.Join(r.step.srunEnv) + " " + line
	}
	fmt.Fprintln(w, line)
	s := r.placed.Slots[r.cfg.rank]
	fmt.Fprintf(w, "\n# environment of rank %d (node %s, local rank %d, GPU %d), besides what Slurm sets:\n", s.Rank, s.Node, s.LocalRank, s.GPU)
	for _, kv := range launch.MergedEnv(renv.Common, renv.Ranks[r.cfg.rank]) {
		k, v, _ := strings.Cut(kv, "=")
		fmt.Fprintf(w, "%s=%s\n", k, shell.Quote(v))
	}
	fmt.Fprintf(w, "# CUDA_VISIBLE_DEVICES: Slurm's list for the step, reordered by the shim so that device %d (LOCAL_RANK) is GPU %d\n", s.LocalRank, s.GPU)
	return nil
}
