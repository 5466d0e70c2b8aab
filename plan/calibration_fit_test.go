package plan

import (
	"fmt"
	"go/format"
	"math"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/trainrun/trainrun/internal/golden"
)

// Calibration against both published-run files, in-sample and
// leave-one-family-out.
//
// Every row is predicted by the physical model (gpus.go, time.go,
// memory.go, stacks.go) with the published layout. The only constants fitted
// here are the stacks' kernel efficiencies (stackEff), one per stack, each on
// that stack's rows alone: the value that makes the median log error of its
// rows zero. Stacks without rows use one pooled value fitted on all rows.
// Leave-one-family-out (LOFO) refits every constant without the held-out
// family's rows and predicts that family with them; a held-out family whose
// stack has no other rows gets the pooled value of the remaining rows.
// With -update the test rewrites testdata/calibration.md and stackfit.go
// (the fitted table the planner uses); otherwise it fails when either is
// stale.

// withStackEff runs f with the package's stack efficiencies replaced.
func withStackEff(eff map[Stack]float64, pooled float64, f func()) {
	saved, savedP := stackEff, stackEffPooled
	stackEff, stackEffPooled = eff, pooled
	defer func() { stackEff, stackEffPooled = saved, savedP }()
	f()
}

// medianLogErr is the median of log(pred/pub) of the rows under eff.
func medianLogErr(t testing.TB, runs []publishedRun, eff map[Stack]float64, pooled float64) float64 {
	var ls []float64
	withStackEff(eff, pooled, func() {
		for _, r := range runs {
			row := predictRun(t, r)
			if row.pub > 0 && row.pred > 0 {
				ls = append(ls, math.Log(row.pred/row.pub))
			}
		}
	})
	if len(ls) == 0 {
		return 0
	}
	sort.Float64s(ls)
	n := len(ls)
	if n%2 == 1 {
		return ls[n/2]
	}
	return (ls[n/2-1] + ls[n/2]) / 2
}

// fitEff bisects the efficiency e in [0.3, 2] that zeroes the median log
// error of runs, with set(e) installing e (predictions grow with e).
func fitEff(t testing.TB, runs []publishedRun, set func(e float64) (map[Stack]float64, float64)) float64 {
	lo, hi := 0.3, 2.0
	for range 24 {
		mid := (lo + hi) / 2
		eff, pooled := set(mid)
		if medianLogErr(t, runs, eff, pooled) > 0 {
			hi = mid
		} else {
			lo = mid
		}
	}
	return math.Round((lo+hi)/2*1000) / 1000
}

// fitStacks fits one efficiency per stack on its own rows and a pooled one
// on all rows.
func fitStacks(t testing.TB, runs []publishedRun) (map[Stack]float64, float64) {
	by := map[Stack][]publishedRun{}
	var fitted []publishedRun
	for _, r := range runs {
		if r.HeldOut {
			continue // predicted only, never fitted on (published-runs-3.json)
		}
		by[stackBase(r.stack())] = append(by[stackBase(r.stack())], r)
		fitted = append(fitted, r)
	}
	runs = fitted
	eff := map[Stack]float64{}
	for s, rs := range by {
		eff[s] = fitEff(t, rs, func(e float64) (map[Stack]float64, float64) { return map[Stack]float64{s: e}, e })
	}
	pooled := fitEff(t, runs, func(e float64) (map[Stack]float64, float64) { return map[Stack]float64{}, e })
	return eff, pooled
}

func absQ(xs []float64, q float64) float64 {
	a := make([]float64, len(xs))
	for i, x := range xs {
		a[i] = math.Abs(x)
	}
	return quantile(a, q)
}

func TestCalibration(t *testing.T) {
	runs := loadRuns(t)
	eff, pooled := fitStacks(t, runs)

	// In-sample: every row with the constants fitted on all rows.
	var rows []calRow
	withStackEff(eff, pooled, func() {
		for _, r := range runs {
			rows = append(rows, predictRun(t, r))
		}
	})
	byID := map[string]int{}
	for i, r := range rows {
		byID[r.id] = i
	}

	// Leave-one-family-out.
	fams := map[string][]publishedRun{}
	for _, r := range runs {
		fams[r.family()] = append(fams[r.family()], r)
	}
	famNames := make([]string, 0, len(fams))
	for f := range fams {
		famNames = append(famNames, f)
	}
	sort.Strings(famNames)
	for _, f := range famNames {
		var train []publishedRun
		for _, r := range runs {
			if r.family() != f {
				train = append(train, r)
			}
		}
		e, p := fitStacks(t, train)
		withStackEff(e, p, func() {
			for _, r := range fams[f] {
				row := predictRun(t, r)
				i := byID[r.ID]
				if row.pub > 0 {
					rows[i].lofo = (row.pred - row.pub) / row.pub
				}
				if v, ok := e[stackBase(r.stack())]; ok {
					rows[i].lofoHow = fmt.Sprintf("%s %.3f", stackLabel(r.stack()), v)
				} else {
					rows[i].lofoHow = fmt.Sprintf("pooled %.3f (no other %s rows)", p, stackLabel(r.stack()))
				}
			}
		})
	}

	doc := calibrationDoc(t, runs, rows, eff, pooled)
	fit := stackFitSource(eff, pooled, rows)
	// Stale when the model or the data changed: -update rewrites both.
	golden.CheckString(t, filepath.Join("testdata", "calibration.md"), doc)
	golden.CheckString(t, "stackfit.go", fit)

	var in, lofo []float64
	evaluable := 0
	for _, r := range fittedRows(rows) { // the bars hold on the rows the constants see; held-out rows are reported
		if r.evaluable && r.fits {
			evaluable++
		}
		if r.pub > 0 {
			in = append(in, r.err)
			lofo = append(lofo, r.lofo)
		}
	}
	t.Logf("calibration: %d rows, %d evaluable; in-sample median |err| %.1f%%, p90 %.1f%%; LOFO median %.1f%%, p90 %.1f%%",
		len(rows), evaluable, 100*absQ(in, 0.5), 100*absQ(in, 0.9), 100*absQ(lofo, 0.5), 100*absQ(lofo, 0.9))
	if n := len(fittedRows(rows)); float64(evaluable) < 0.95*float64(n) {
		t.Errorf("%d of %d rows evaluable and fitting, below 95%%", evaluable, n)
	}
	if absQ(in, 0.5) > 0.10 || absQ(in, 0.9) > 0.25 {
		t.Errorf("in-sample median |error| %.1f%% or p90 %.1f%% above the bars (10%%, 25%%)", 100*absQ(in, 0.5), 100*absQ(in, 0.9))
	}
	if absQ(lofo, 0.5) > 0.10 || absQ(lofo, 0.9) > lofoP90Bar {
		t.Errorf("leave-one-family-out median |error| %.1f%% or p90 %.1f%% above the bars (10%%, %.0f%%)", 100*absQ(lofo, 0.5), 100*absQ(lofo, 0.9), 100*lofoP90Bar)
	}
}

// lofoP90Bar is the leave-one-family-out p90 the test holds the model to.
// Issue 13 asks for 25 %; calibration.md says which families miss it and why.
const lofoP90Bar = 0.25

func stackLabel(s Stack) string {
	if s == StackMegatronCore {
		return "megatron-core"
	}
	return string(s)
}

func calibrationDoc(t testing.TB, runs []publishedRun, rows []calRow, eff map[Stack]float64, pooled float64) string {
	var b strings.Builder
	all := rows
	rows = fittedRows(all)
	b.WriteString("# Planner calibration: predicted vs published tokens/s per GPU\n\n")
	b.WriteString("Generated by `go test ./plan -run TestCalibration -update`; do not edit.\n")
	b.WriteString("Data: testdata/published-runs.json and published-runs-2.json (copies of shared/calibration/; each row's source is in it), and published-runs-3.json (issue 29: MoE and FP8 rows held out, never fitted on; summarised in their own section).\n")
	b.WriteString("Published figures converted to tokens/s/GPU on each row's own FLOP convention (column *from*).\n")
	b.WriteString("*in-sample*: constants fitted on all rows. *LOFO*: the row's whole family left out of every fit (column *LOFO constant* says which constant predicted it).\n\n")
	b.WriteString("| id | family | stack | GPU | layout (as evaluated) | published | predicted | in-sample | LOFO | LOFO constant | memory GiB | from |\n")
	b.WriteString("|---|---|---|---|---|---:|---:|---:|---:|---|---:|---|\n")
	for _, r := range all {
		note := r.how
		if r.note != "" {
			note += "; " + r.note
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %.1f | %.1f | %+.1f%% | %+.1f%% | %s | %.1f / %.1f | %s |\n",
			r.id, r.family, stackLabel(r.stack), r.gpu, r.layout, r.pub, r.pred, 100*r.err, 100*r.lofo, r.lofoHow, r.mem/gib, r.capacity/gib, note)
	}
	group := func(title string, key func(calRow) string) { groupRows(&b, title, rows, key) }
	var in, lo []float64
	ev := 0
	for _, r := range rows {
		in = append(in, r.err)
		lo = append(lo, r.lofo)
		if r.evaluable && r.fits {
			ev++
		}
	}
	fmt.Fprintf(&b, "\n**%d rows, %d evaluable with the published layout fitting (%.0f %%). In-sample: median |error| %.1f %%, p90 %.1f %%. Leave-one-family-out: median |error| %.1f %%, p90 %.1f %%** (targets: 10 %%, 25 %%, 95 %% evaluable).\n",
		len(rows), ev, 100*float64(ev)/float64(len(rows)), 100*absQ(in, 0.5), 100*absQ(in, 0.9), 100*absQ(lo, 0.5), 100*absQ(lo, 0.9))
	group("file", func(r calRow) string { return r.file })
	group("stack", func(r calRow) string { return stackLabel(r.stack) })
	group("GPU", func(r calRow) string { return r.gpu })
	group("family", func(r calRow) string { return r.family })
	group("dense or MoE", func(r calRow) string { return map[bool]string{true: "MoE", false: "dense"}[r.moe] })
	b.WriteString(calibrationMisses(rows))
	b.WriteString(heldOutDoc(all))
	b.WriteString(leaveHalfInDoc(t, runs, eff, pooled))

	b.WriteString("\n## Korthikanti et al. 2022, Figure 1: per-GPU memory, predicted vs published (GiB)\n\n")
	b.WriteString("| id | weights+optimizer pub | pred | err | activations no SP/recompute pub | pred | err | SP+selective pub | pred | err |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	seen := map[string]bool{}
	for _, r := range runs {
		if r.MemoryReported == nil || seen[r.Model] {
			continue
		}
		seen[r.Model] = true
		wo, a1, a2 := korthikantiMemory(t, r)
		mr := r.MemoryReported
		e1, e2, e3 := (wo-mr.WeightsOpt)/mr.WeightsOpt, (a1-mr.ActNoSP)/mr.ActNoSP, (a2-mr.ActSPSel)/mr.ActSPSel
		fmt.Fprintf(&b, "| %s | %.2f | %.2f | %+.2f%% | %.2f | %.2f | %+.2f%% | %.2f | %.2f | %+.2f%% |\n",
			r.ID, mr.WeightsOpt, wo, 100*e1, mr.ActNoSP, a1, 100*e2, mr.ActSPSel, a2, 100*e3)
		for _, e := range []float64{e1, e2, e3} {
			if math.Abs(e) > 0.03 {
				t.Errorf("%s: Korthikanti memory figure off by %.1f%% (> 3%%)", r.ID, 100*e)
			}
		}
	}

	b.WriteString("\n## The constants, and what each was fitted on\n\n")
	b.WriteString("Fitted here, each stack's kernel efficiency on that stack's rows only (stackfit.go; LOFO refits them without the held-out family):\n\n")
	b.WriteString("| stack | rows | kernel efficiency |\n|---|---:|---:|\n")
	n := map[Stack]int{}
	for _, r := range rows {
		n[stackBase(r.stack)]++ // fitted rows only
	}
	keys := make([]string, 0, len(eff))
	for s := range eff {
		keys = append(keys, string(s))
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "| %s | %d | %.3f |\n", stackLabel(Stack(k)), n[Stack(k)], eff[Stack(k)])
	}
	fmt.Fprintf(&b, "| every other stack (megatron-core, deepspeed: no rows) | pooled over all %d | %.3f |\n\n", len(rows), pooled)
	b.WriteString("Row mapping choices (calibration_test.go): the DeepSpeed ZeRO-3 rows of Narayanan 2021 run on Megatron-2022 model code and are evaluated as megatron-2022 (no deepspeed rows remain, so deepspeed takes the pooled value); Lit-GPT, flash-attention's scripts and InternEvo (hand-fused kernels) as fsdp:compile; HSDP as ZeRO-3 over all ranks; unpublished recompute (fms-fsdp block checkpointing, MaxText's custom remat) as the least block recompute that fits; DeepSeek-V3's MLA dimensions from the row's notes; ETP from the notes where stated.\n")
	b.WriteString("Fitted earlier on the first file (issue 3), kept: sustainedClock (A100 rows) and H100 FP8MatmulEff (H100 short-sequence rows); they are not refitted in LOFO, so the first file's LOFO figures for those families are optimistic about the method.\n")
	b.WriteString("Physics terms with stated sources, not fitted (stacks.go): elementwise bytes per stack (eager 3×, Inductor/XLA 1.3× of the fused kernels), kernel gaps (2 µs × kernels per layer), FlashAttention-2-class attention on Hopper for NeMo/PyTorch/JAX, FSDP units gathered whole, BF16 gradients for NeMo/FSDP/JAX, stragglers σ·√(2 ln N) with σ = 1 %.\n\n")
	fmt.Fprintf(&b, "- sustainedClock %.2f, hbmEff %.2f, nvlinkEff %.2f, netEff %.2f, pcieEff %.2f, a2aNetEff %.2f, tpInterfere %.2f, dpHide %.2f, flashSeqKnee %.0f, kernelGap %.0f µs, jitterSigma %.2f\n",
		sustainedClock, hbmEff, nvlinkEff, netEff, pcieEff, a2aNetEff, tpInterfere, dpHide, flashSeqKnee, kernelGap*1e6, jitterSigma)
	for _, nm := range []string{"a100-40gb", "a100-80gb", "h100-sxm"} {
		g := mustGPU(t, nm)
		fmt.Fprintf(&b, "- %s: MatmulEff %.3f (asymptotic %.3f), FP8MatmulEff %.3f, AttentionEff %.2f (current kernels)\n", nm, g.MatmulEff,
			asymptoticEff(g.MatmulEff, g.PeakBF16, g.HBMBandwidth, 2), g.FP8MatmulEff, g.AttentionEff)
	}
	fmt.Fprintf(&b, "- FlashAttention-2-class attention on Hopper: %.2f (fa2HopperEff)\n", fa2HopperEff)
	return b.String()
}

// calibrationMisses lists the families whose LOFO error misses the targets.
func calibrationMisses(rows []calRow) string {
	m := map[string][]float64{}
	for _, r := range rows {
		m[r.family] = append(m[r.family], r.lofo)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString("\n### Families missing the LOFO targets (median |error| > 10 % or p90 > 25 %)\n\n")
	any := false
	for _, k := range keys {
		med, p90 := absQ(m[k], 0.5), absQ(m[k], 0.9)
		if med > 0.10 || p90 > 0.25 {
			any = true
			fmt.Fprintf(&b, "- %s: median %.1f %%, p90 %.1f %%, median signed %+.1f %%%s\n", k, 100*med, 100*p90, 100*quantile(m[k], 0.5), missWhy[k])
		}
	}
	if !any {
		b.WriteString("None.\n")
	}
	return b.String()
}

// missWhy explains, per family, what the model leaves out where it misses.
var missWhy = map[string]string{
	"dgxc-benchmarking (MaxText/JAX)":  ": held out, the jax constant comes from the two PaxML rows alone, which the physics over-predicts (see PaxML); MaxText's custom remat policy (save_dot_except_mlpwi) is evaluated as the least block recompute that fits, not as the policy",
	"dgxc-benchmarking (PaxML/JAX)":    ": held out, the jax constant comes from the two MaxText rows alone; PaxML's intra-node mesh is not published (evaluated as FSDP over all GPUs, TP 1) and its GPT-5B at MBS 4 is small enough that XLA's per-op overheads, not modelled beyond kernelGap, matter",
	"fms-fsdp (IBM)":                   ": the H100 eager rows stay optimistic (+15-47 % LOFO, 7B and 13B worst); HSDP (shard inside the node, replicate across) is modelled as ZeRO-3 over all ranks, block checkpointing's n is not published (least that fits is assumed), and when the family is held out no other eager-PyTorch rows exist, so fsdp takes the pooled constant",
	"internevo":                        ": internevo-7b-1024gpu-tp1-zeroall (ZeRO-1 over all 1,024 ranks, 2,271 tokens/s) is predicted as fast as sharding in groups of 8: the model has no shard-group size and no per-step ring latency (n−1 steps per bucket), which is what makes 1,024-rank all-gathers slow over 4×100 Gb/s RoCE; the other rows are within +8-22 %",
	"flash-attention training scripts": ": the micro-batch is not published (a gpu_mem expression in the yaml); 1 is assumed, so the 760M-2.7B models' GEMMs are smaller and slower in the model than in the runs (pessimistic)",
	"tinyllama (lit-gpt)":              ": one row; the GPU count behind the 24k tokens/s figure is assumed (16), and the fused-PyTorch constant comes from other families",
}

// stackFitSource renders stackfit.go: the fitted efficiencies and each row's
// cross-validated error, from which Evaluate derives step_s_range.
func stackFitSource(eff map[Stack]float64, pooled float64, rows []calRow) string {
	var b strings.Builder
	b.WriteString("// Code generated by go test ./plan -run TestCalibration -update; DO NOT EDIT.\n\npackage plan\n\n")
	b.WriteString("// stackEff is each stack's kernel efficiency (stacks.go), fitted on the\n// calibration rows of that stack only; stacks without rows use\n// stackEffPooled, fitted on all rows. testdata/calibration.md shows the fit.\n")
	b.WriteString("var stackEff = map[Stack]float64{\n")
	keys := make([]string, 0, len(eff))
	for s := range eff {
		keys = append(keys, string(s))
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "\t%q: %.3f,\n", k, eff[Stack(k)])
	}
	b.WriteString("}\n\n")
	fmt.Fprintf(&b, "var stackEffPooled = %.3f\n\n", pooled)
	b.WriteString("// calErrors is every calibration row's leave-one-family-out error of\n// tokens/s/GPU ((predicted − published) / published), for step_s_range.\n")
	b.WriteString("var calErrors = []calError{\n")
	for _, r := range fittedRows(rows) {
		fmt.Fprintf(&b, "\t{%q, %q, %.4g, %.4f}, // %s\n", string(stackBase(r.stack)), gpuArchOf(r.gpu), r.params, r.lofo, r.id)
	}
	b.WriteString("}\n")
	src, err := format.Source([]byte(b.String()))
	if err != nil {
		return b.String()
	}
	return string(src)
}

func gpuArchOf(calGPU string) string {
	switch {
	case strings.HasPrefix(calGPU, "H100"), strings.HasPrefix(calGPU, "H800"):
		return "hopper"
	case strings.Contains(calGPU, "B200"):
		return "blackwell"
	}
	return "ampere"
}

// groupRows writes one "By <title>" table of rows grouped by key.
func groupRows(b *strings.Builder, title string, rows []calRow, key func(calRow) string) {
	m := map[string][]calRow{}
	for _, r := range rows {
		m[key(r)] = append(m[key(r)], r)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fmt.Fprintf(b, "\n### By %s\n\n| %s | rows | evaluable | in-sample median | in-sample p90 | LOFO median | LOFO p90 | LOFO median signed |\n|---|---:|---:|---:|---:|---:|---:|---:|\n", title, title)
	for _, k := range keys {
		var in, lo []float64
		ev := 0
		for _, r := range m[k] {
			in = append(in, r.err)
			lo = append(lo, r.lofo)
			if r.evaluable && r.fits {
				ev++
			}
		}
		fmt.Fprintf(b, "| %s | %d | %d | %.1f %% | %.1f %% | %.1f %% | %.1f %% | %+.1f %% |\n", k, len(m[k]), ev,
			100*absQ(in, 0.5), 100*absQ(in, 0.9), 100*absQ(lo, 0.5), 100*absQ(lo, 0.9), 100*quantile(lo, 0.5))
	}
}

// fittedRows are the rows the constants are fitted on (not held out).
func fittedRows(rows []calRow) []calRow {
	var out []calRow
	for _, r := range rows {
		if !r.heldOut {
			out = append(out, r)
		}
	}
	return out
}

// heldOutDoc reports the rows no constant was fitted on (published-runs-3.json):
// their in-sample and LOFO errors are both out of sample. And every MoE row,
// LOFO (issue 29's acceptance: MoE LOFO median ≤ 15 % without a calibration).
func heldOutDoc(all []calRow) string {
	var held, moe []calRow
	for _, r := range all {
		if r.heldOut {
			held = append(held, r)
		}
		if r.moe {
			moe = append(moe, r)
		}
	}
	if len(held) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\n## Held out: MoE and FP8 rows never fitted on (published-runs-3.json, issue 29)\n\n")
	b.WriteString("NVIDIA's Megatron-Bridge performance tables (NeMo 25.09-26.02: DeepSeek-V3, Qwen3-30B-A3B, Qwen3-235B-A22B on H100, B200, GB200; BF16, FP8 current scaling, MXFP8) and the DeepSeek-V3 report's H800 figure. No stack constant sees them, so both error columns are out of sample. The recipe's dispatcher (alltoall or flex), its EP all-to-all overlap and MTP are taken from the row (sources in its notes); recompute, as for the other rows, is the least that fits when not published.\n")
	groupRows(&b, "held-out family", held, func(r calRow) string { return r.family })
	groupRows(&b, "held-out GPU", held, func(r calRow) string { return r.gpu })
	groupRows(&b, "held-out precision", held, func(r calRow) string { return r.prec })
	groupRows(&b, "held-out model", held, func(r calRow) string { return r.model })
	b.WriteString("\nWhere the held-out rows miss, and why (not fitted away):\n\n")
	for _, n := range heldOutMisses {
		b.WriteString("- " + n + "\n")
	}
	var lo []float64
	for _, r := range moe {
		lo = append(lo, r.lofo)
	}
	fmt.Fprintf(&b, "\n**Every MoE row (%d: %d fitted, LOFO; %d held out): median |error| %.1f %%, p90 %.1f %%, median signed %+.1f %%** (issue 29: ≤ 15 %% median without a calibration).\n",
		len(moe), len(moe)-len(heldMoE(moe)), len(heldMoE(moe)), 100*absQ(lo, 0.5), 100*absQ(lo, 0.9), 100*quantile(lo, 0.5))
	return b.String()
}

func heldMoE(rows []calRow) []calRow {
	var out []calRow
	for _, r := range rows {
		if r.heldOut {
			out = append(out, r)
		}
	}
	return out
}

// heldOutMisses explain the held-out rows the model misses by more than 25 %.
var heldOutMisses = []string{
	"Qwen3-30B-A3B (128 experts of 768, hidden 2048), +110 % on H100 and +188 % on B200 at micro-batch 1 (+22 % on GB200 at 4): its expert GEMMs are small enough that what the model does not count dominates. The same table has B200 at micro-batch 1 at 9,691 tokens/s/GPU, GB200 at 4 at 26,084 and B300 at 8 at 29,521: read as t = a + b·tokens per micro-batch (B200 and GB200 taken as 10 % apart), a fixed a of about 7 ms per layer and micro-batch, which suggests host-bound launches behind dropless MoE's device-to-host syncs (token counts per expert), which NVIDIA's recipes fight with CUDA graphs of the router and preprocess. No sourced per-kernel host cost is in the model yet.",
	"B200 rows (DeepSeek-V3 +27 %, Qwen3-235B +68 % at 64 GPUs): the catalog's B200 efficiencies are assumed (gpus.go), not measured; GB200 rows with the same software are within 11-27 %.",
	"DeepSeek-V3 on 1,024 H100 (−42 %): the recipe recomputes the MLA up-projections and the MLP (recompute_modules), which trainrun's recompute vocabulary (none, selective = attention core, full) cannot say; the least that fits is full recompute, which also repeats the all-to-all. Without recompute the prediction is 992 tokens/s/GPU (−24 %) but needs 88 GiB.",
	"DeepSeek-V3 report, 2,048 H800 (−37 %, and refused for memory: 116 GiB of 80): DeepSeek's memory savings (RMSNorm and MLA up-projection recompute, FP8-cached activations of the MoE up-projections and SwiGLU inputs, DualPipe's activation schedule) are not options of the model; the figure is a whole-run average (batch-size ramp included), not a steady step.",
}
