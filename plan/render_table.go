package plan

import (
	"fmt"
	"io"
	"strings"

	"github.com/trainrun/trainrun/internal/units"
)

// maxTableRejections is how many rejections the table shows; JSON lists all.
const maxTableRejections = 6

// noPlanHeadline is the table's line when there is no plan: "fits" only
// where layouts were weighed against memory (exit 3); a layout the rules
// forbid (exit 10) or a job the GPU cannot run (exit 11) says so instead.
func noPlanHeadline(invalid string) string {
	switch invalid {
	case InvalidLayout:
		return "\nNo valid layout: the degrees or the batch cannot be split over these GPUs.\n"
	case InvalidCapability:
		return "\nNo layout: these GPUs lack what the job asks for.\n"
	}
	return "\nNo layout fits.\n"
}

// RenderTable writes the plan for a person: the request, the chosen layout,
// the memory and time breakdowns, throughput and time to train, the why
// lines, the alternatives and the main rejections.
func RenderTable(w io.Writer, m Model, j Job, c Cluster, r Result) error {
	var b strings.Builder
	writeHeader(&b, m, j, c)
	if r.Plan == nil {
		b.WriteString(noPlanHeadline(r.Invalid))
	} else {
		e := *r.Plan
		if !e.Memory.Fits {
			fmt.Fprintf(&b, "\nPinned layout, evaluated as asked: it does NOT fit: %s\n", e.Reason)
		}
		writeEvaluation(&b, m, j, c, e)
	}
	writeAlternatives(&b, r.Alternatives)
	writeRejections(&b, r.Rejected)
	_, err := io.WriteString(w, b.String())
	return err
}

func writeHeader(b *strings.Builder, m Model, j Job, c Cluster) {
	total, active := m.Params(), m.ActiveParams()
	params := fmt.Sprintf("%.1fB params", total/1e9)
	if m.Experts > 0 {
		params = fmt.Sprintf("%.1fB params, %.1fB active (%d experts, top-%d)", total/1e9, active/1e9, m.Experts, m.TopK)
	}
	fmt.Fprintf(b, "model    %s: %d layers, hidden %d, %d heads (%d KV), FFN %d %s, vocab %d; %s\n",
		m.Name, m.Layers, m.Hidden, m.Heads, m.KVHeads, m.FFN, m.FFNType, m.Vocab, params)
	train := "full training"
	if f := FinetuneOf(j); f.Frozen() {
		train = f.Label()
	}
	tokens := ""
	if j.Tokens > 0 {
		tokens = fmt.Sprintf(", %s tokens in total", fmtTokens(j.Tokens))
	}
	fmt.Fprintf(b, "job      seq %d, global batch %d (%s tokens/step), %s, %s%s\n",
		j.SeqLen, j.GlobalBatch, fmtCount(float64(j.SeqLen*j.GlobalBatch)), PrecisionFor(j.Precision, c.GPU), train, tokens)
	fmt.Fprintf(b, "cluster  %d x %s (%.0f GiB, %.0f TFLOP/s dense %s), %d per node, NVLink domain %d, inter-node %.0f GB/s per GPU\n",
		c.GPUs, c.GPU.Name, c.GPU.MemoryBytes/bytesPerGiB, c.GPU.PeakBF16/1e12, c.GPU.Peak16Name(), c.GPUsPerNode, c.NVLinkDomain, c.InterNode/1e9)
}

func writeEvaluation(b *strings.Builder, m Model, j Job, c Cluster, e Evaluation) {
	vpp := ""
	if e.VPP > 1 {
		vpp = fmt.Sprintf(" (VPP %d)", e.VPP)
	}
	sp := "off"
	if e.SP {
		sp = "on"
	}
	fmt.Fprintf(b, "\nlayout   TP %d x PP %d%s x CP %d x DP %d = %d GPUs; EP %d; SP %s\n",
		e.TP, e.PP, vpp, e.CP, e.DP, LayoutGPUs(e.Layout), e.EP, sp)
	rc := e.Recompute
	if rc == "full" && e.RecomputeLayers > 0 {
		rc = fmt.Sprintf("full for %d layers of each model chunk (block)", e.RecomputeLayers)
	}
	fmt.Fprintf(b, "         micro-batch %d x %d accumulation steps; recompute %s; ZeRO %d%s; offload %s\n",
		e.MicroBatch, e.GradAccum, rc, e.Zero, zeroNote(e.Zero), e.Offload)

	mem := e.Memory
	fits := "fits"
	if !mem.Fits {
		fits = fmt.Sprintf("DOES NOT FIT: %.2f GiB over", (mem.PerGPU-mem.Capacity)/bytesPerGiB)
	} else if e.Tight {
		fits = tightLabel(mem, c)
	}
	fmt.Fprintf(b, "\n%-37s %8s\n", "memory per GPU, most loaded stage", "GiB")
	rows := []struct {
		name string
		v    float64
	}{
		{"weights", mem.Weights}, {"gradients", mem.Grads}, {"optimizer states", mem.Optimizer},
		{"activations", mem.Activations}, {"other (CUDA, NCCL, fragmentation)", mem.Other},
	}
	for _, r := range rows {
		fmt.Fprintf(b, "  %-35s %8s\n", r.name, fmtGiB(r.v))
	}
	fmt.Fprintf(b, "  %-35s %8s of %s capacity (%.0f %%): %s\n", "total", fmtGiB(mem.PerGPU), fmtGiB(mem.Capacity), percentOf(mem.PerGPU, mem.Capacity), fits)

	t := e.Time
	fmt.Fprintf(b, "\n%-40s %10s %6s\n", "time per step", "ms", "%")
	trows := []struct {
		name string
		v    float64
	}{
		{"compute (matmuls, attention)", t.Compute}, {"recompute", t.Recompute}, {"TP communication", t.TPComm},
		{"pipeline bubble", t.PPBubble}, {"pipeline p2p, exposed", t.PPComm}, {"DP communication, exposed", t.DPCommExposed},
		{"CP communication", t.CPComm}, {"EP all-to-all", t.EPComm}, {"optimizer step", t.Optimizer}, {"offload transfers", t.Offload}, {"stragglers", t.Straggler},
	}
	for _, r := range trows {
		fmt.Fprintf(b, "  %-38s %10s %6.1f\n", r.name, fmtMillis(r.v), percentOf(r.v, t.Step))
	}
	fmt.Fprintf(b, "  %-38s %10s %6.1f\n", "step", fmtMillis(t.Step), 100.0)
	if r := t.StepRange; r[1] > 0 && e.Calibration != nil { // issue 29: a site calibration moved it
		cn := e.Calibration
		fmt.Fprintf(b, "  %-38s %s to %s ms (site calibration: %d observations, evidence %.1f; uncalibrated %s ms)\n", "likely range", fmtMillis(r[0]), fmtMillis(r[1]),
			cn.Observations, cn.Evidence, fmtMillis(cn.UncalibratedS))
	} else if r[1] > 0 {
		fmt.Fprintf(b, "  %-38s %s to %s ms (cross-validated error of the nearest calibration runs)\n", "likely range", fmtMillis(r[0]), fmtMillis(r[1]))
	}

	fmt.Fprintf(b, "\nthroughput  %s tokens/s per GPU, %s tokens/s in all; %.1f model TFLOP/s per GPU; MFU %.1f %%\n",
		fmtCount(e.TokensPerSPerGPU), fmtCount(e.TokensPerSPerGPU*float64(LayoutGPUs(e.Layout))), e.ModelTFLOPSPerGPU, 100*e.MFU)
	fmt.Fprintf(b, "            model FLOPs per token %.4g (matmuls, forward+backward, causal attention, no recompute)\n", e.ModelFlopsPerToken)
	if s := TrainSeconds(j, e); s > 0 {
		fmt.Fprintf(b, "time to train %s tokens: %s (%s steps, %s GPU-hours)\n",
			fmtTokens(j.Tokens), units.Seconds(s), fmtCount(s/e.Time.Step), fmtCount(s*float64(LayoutGPUs(e.Layout))/3600))
	}
	if len(e.Why) > 0 {
		b.WriteString("\nwhy\n")
		for _, y := range e.Why {
			fmt.Fprintf(b, "  - %s\n", y)
		}
	}
}

func zeroNote(z int) string {
	switch z {
	case 1:
		return " (distributed optimizer)"
	case 2:
		return " (optimizer states and gradients sharded)"
	case 3:
		return " (FSDP: parameters sharded too)"
	}
	return ""
}

func percentOf(part, whole float64) float64 {
	if whole == 0 {
		return 0
	}
	return 100 * part / whole
}

func writeAlternatives(b *strings.Builder, alts []Evaluation) {
	if len(alts) == 0 {
		return
	}
	b.WriteString("\nalternatives                                             tokens/s/GPU   MFU    step s   GiB/GPU\n")
	for i, a := range alts {
		tight := ""
		if a.Tight {
			tight = " TIGHT" // inside the memory margin: ranked down by TightPenalty
		}
		fmt.Fprintf(b, "  %d. %-52s %12s %5.1f%% %8.3f %8s%s\n", i+1, shortLayout(a.Layout), fmtCount(a.TokensPerSPerGPU), 100*a.MFU, a.Time.Step, fmtGiB(a.Memory.PerGPU), tight)
	}
}

// shortLayout is the compact spelling used in the alternatives table.
func shortLayout(l Layout) string {
	s := fmt.Sprintf("tp%d pp%d", l.TP, l.PP)
	if l.VPP > 1 {
		s += fmt.Sprintf(" vpp%d", l.VPP)
	}
	if l.CP > 1 {
		s += fmt.Sprintf(" cp%d", l.CP)
	}
	if l.EP > 1 {
		s += fmt.Sprintf(" ep%d", l.EP)
	}
	s += fmt.Sprintf(" dp%d mbs%d", l.DP, l.MicroBatch)
	if l.SP {
		s += " sp"
	}
	s += " rc:" + l.Recompute
	if l.Recompute == "full" && l.RecomputeLayers > 0 {
		s += fmt.Sprintf(":%d", l.RecomputeLayers)
	}
	s += fmt.Sprintf(" z%d", l.Zero)
	if l.Offload != "" && l.Offload != "none" {
		s += " off:" + l.Offload
	}
	return s
}

func writeRejections(b *strings.Builder, rej []Rejection) {
	if len(rej) == 0 {
		return
	}
	fmt.Fprintf(b, "\nrejected: %d %s", len(rej), plural(len(rej), "layout", "layouts"))
	if len(rej) > maxTableRejections {
		fmt.Fprintf(b, " (first %d shown; --format json lists all)", maxTableRejections)
	}
	b.WriteString("\n")
	for i, r := range rej {
		if i == maxTableRejections {
			break
		}
		fmt.Fprintf(b, "  %s: %s\n", r.Config, r.Reason)
	}
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
