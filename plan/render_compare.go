package plan

import (
	"fmt"
	"io"
	"strings"

	"github.com/trainrun/trainrun/internal/units"
)

// BoundBy says what limits a plan, for comparing GPU types: the seed asks that
// memory-bound work go to large-memory GPUs and compute-bound work to fast
// ones.
//   - "memory": the layout pays to fit in memory: it offloads, or recomputes
//     every layer (a second forward pass).
//   - "communication": communication and the pipeline bubble and p2p take
//     more than 35 % of the step.
//   - "compute": otherwise; the GPU's peak decides.
func BoundBy(e Evaluation) (kind, detail string) {
	t := e.Time
	comm := t.TPComm + t.PPBubble + t.PPComm + t.DPCommExposed + t.CPComm + t.EPComm
	switch {
	case e.Offload != "" && e.Offload != "none":
		return "memory", fmt.Sprintf("offloads %s to host memory (%.0f %% of the step)", e.Offload, percentOf(t.Offload, t.Step))
	case e.Recompute == "full" && e.RecomputeLayers > 0:
		return "memory", fmt.Sprintf("recomputes %d layers of each model chunk to fit (%.0f %% of the step)", e.RecomputeLayers, percentOf(t.Recompute, t.Step))
	case e.Recompute == "full":
		return "memory", "recomputes every layer to fit, a second forward pass"
	case t.Step > 0 && comm/t.Step > 0.35:
		return "communication", fmt.Sprintf("%.0f %% of the step is communication and pipeline bubble", percentOf(comm, t.Step))
	}
	return "compute", fmt.Sprintf("%.0f %% of the step is compute", percentOf(t.Compute+t.Recompute+t.Optimizer, t.Step))
}

// RenderComparison writes the side-by-side table of one plan per GPU type
// and says which is faster, which is cheaper per token (in GPU-hours: prices
// differ by type, multiply by yours) and why.
func RenderComparison(w io.Writer, m Model, j Job, rs []GPUResult) error {
	var b strings.Builder
	label := func(g GPUResult) string { return fmt.Sprintf("%s x %d", g.Cluster.GPU.Name, g.Cluster.GPUs) }
	width := 26
	for _, g := range rs {
		width = max(width, len(label(g))+2, len(shortLayout(layoutOf(g)))+2)
	}
	row := func(name string, cell func(g GPUResult, e *Evaluation) string) {
		fmt.Fprintf(&b, "  %-30s", name)
		for _, g := range rs {
			fmt.Fprintf(&b, "%-*s", width, cell(g, g.Result.Plan))
		}
		b.WriteString("\n")
	}
	fit := func(f func(g GPUResult, e *Evaluation) string) func(GPUResult, *Evaluation) string {
		return func(g GPUResult, e *Evaluation) string {
			if e == nil {
				return "-"
			}
			return f(g, e)
		}
	}
	fmt.Fprintf(&b, "comparison for %s\n", m.Name)
	row("", func(g GPUResult, _ *Evaluation) string { return label(g) })
	row("layout", func(g GPUResult, e *Evaluation) string {
		if e == nil {
			return "nothing fits"
		}
		return shortLayout(e.Layout)
	})
	row("tokens/s in all", fit(func(g GPUResult, e *Evaluation) string {
		return fmtCount(e.TokensPerSPerGPU * float64(LayoutGPUs(e.Layout)))
	}))
	row("tokens/s per GPU", fit(func(g GPUResult, e *Evaluation) string { return fmtCount(e.TokensPerSPerGPU) }))
	row("step time", fit(func(g GPUResult, e *Evaluation) string { return fmt.Sprintf("%.3f s", e.Time.Step) }))
	row("MFU", fit(func(g GPUResult, e *Evaluation) string { return fmt.Sprintf("%.1f %%", 100*e.MFU) }))
	row("memory per GPU", fit(func(g GPUResult, e *Evaluation) string {
		return fmt.Sprintf("%s of %s GiB", fmtGiB(e.Memory.PerGPU), fmtGiB(e.Memory.Capacity))
	}))
	row("bound by", fit(func(g GPUResult, e *Evaluation) string { k, _ := BoundBy(*e); return k }))
	row("GPU-hours per 1B tokens", fit(func(g GPUResult, e *Evaluation) string {
		return fmt.Sprintf("%.1f", gpuHoursPerBillion(*e))
	}))
	if j.Tokens > 0 {
		row("time to train "+fmtTokens(j.Tokens), fit(func(g GPUResult, e *Evaluation) string { return units.Seconds(TrainSeconds(j, *e)) }))
	}

	// The verdict.
	var fastest, cheapest *GPUResult
	for i := range rs {
		g := &rs[i]
		e := g.Result.Plan
		if e == nil || !e.Memory.Fits {
			continue
		}
		if fastest == nil || clusterTokens(*e) > clusterTokens(*fastest.Result.Plan) {
			fastest = g
		}
		if cheapest == nil || gpuHoursPerBillion(*e) < gpuHoursPerBillion(*cheapest.Result.Plan) {
			cheapest = g
		}
	}
	b.WriteString("\n")
	if fastest == nil {
		b.WriteString("nothing fits on any of these GPU types\n")
		_, err := io.WriteString(w, b.String())
		return err
	}
	for i := range rs {
		g := &rs[i]
		if g == fastest {
			continue
		}
		if e := g.Result.Plan; e != nil && e.Memory.Fits {
			fmt.Fprintf(&b, "faster: %s, %.2fx the tokens/s of %s; %s\n", label(*fastest), clusterTokens(*fastest.Result.Plan)/clusterTokens(*e), label(*g),
				because(*fastest, *g))
		}
	}
	if len(rs) == 1 || countFitting(rs) == 1 {
		fmt.Fprintf(&b, "faster: %s (the only one that fits)\n", label(*fastest))
	}
	fmt.Fprintf(&b, "cheaper per token: %s, %.1f GPU-hours per billion tokens (compare with your prices per GPU-hour)\n",
		label(*cheapest), gpuHoursPerBillion(*cheapest.Result.Plan))
	b.WriteString("why:\n")
	for _, g := range rs {
		e := g.Result.Plan
		if e == nil {
			fmt.Fprintf(&b, "  %s: nothing fits in %.0f GiB per GPU (memory-bound)\n", label(g), g.Cluster.GPU.MemoryBytes/bytesPerGiB)
			continue
		}
		kind, detail := BoundBy(*e)
		fmt.Fprintf(&b, "  %s: %s-bound: %s; %.0f TFLOP/s dense BF16 peak, %.0f GiB, MFU %.1f %%\n",
			label(g), kind, detail, g.Cluster.GPU.PeakBF16/1e12, g.Cluster.GPU.MemoryBytes/bytesPerGiB, 100*e.MFU)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// because says in one clause why fast beats slow: memory (slow must
// recompute or offload to fit, fast need not), peak FLOP/s, or time lost to
// communication and the pipeline.
func because(fast, slow GPUResult) string {
	fe, se := *fast.Result.Plan, *slow.Result.Plan
	fk, _ := BoundBy(fe)
	sk, sd := BoundBy(se)
	fg, sg := fast.Cluster.GPU, slow.Cluster.GPU
	switch {
	case sk == "memory" && fk != "memory":
		return fmt.Sprintf("%s is memory-bound (%s), %s is not: memory-bound work belongs on large-memory GPUs (%.0f vs %.0f GiB)",
			sg.Name, sd, fg.Name, fg.MemoryBytes/bytesPerGiB, sg.MemoryBytes/bytesPerGiB)
	case fg.PeakBF16 > 1.2*sg.PeakBF16:
		return fmt.Sprintf("%s has %.1fx the dense BF16 peak per GPU", fg.Name, fg.PeakBF16/sg.PeakBF16)
	}
	lost := func(e Evaluation) float64 {
		t := e.Time
		return percentOf(t.TPComm+t.PPBubble+t.PPComm+t.DPCommExposed+t.CPComm+t.EPComm+t.Offload+t.Recompute, t.Step)
	}
	return fmt.Sprintf("%s loses %.0f %% of its step to communication, pipeline and recompute, %s %.0f %%", fg.Name, lost(fe), sg.Name, lost(se))
}

func layoutOf(g GPUResult) Layout {
	if g.Result.Plan == nil {
		return Layout{}
	}
	return g.Result.Plan.Layout
}

func clusterTokens(e Evaluation) float64 { return e.TokensPerSPerGPU * float64(LayoutGPUs(e.Layout)) }

// gpuHoursPerBillion is GPU-hours per 1e9 tokens: 1e9 / tokens_per_s_per_gpu / 3600.
func gpuHoursPerBillion(e Evaluation) float64 {
	if e.TokensPerSPerGPU <= 0 {
		return 0
	}
	return 1e9 / e.TokensPerSPerGPU / 3600
}

func countFitting(rs []GPUResult) int {
	n := 0
	for _, g := range rs {
		if g.Result.Plan != nil && g.Result.Plan.Memory.Fits {
			n++
		}
	}
	return n
}
