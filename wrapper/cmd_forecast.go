package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/trainrun/trainrun/checkpoint"
	"github.com/trainrun/trainrun/internal/atomicfile"
	"github.com/trainrun/trainrun/internal/forecast"
	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
	"github.com/trainrun/trainrun/wrapper/internal/jobdir"
	"github.com/trainrun/trainrun/wrapper/internal/losshist"
	"github.com/trainrun/trainrun/wrapper/internal/planflags"
)

// `trainrun forecast` (issue 32): is this run on track? The fitting is
// internal/forecast's; the history wrapper/internal/losshist's; this file
// reads them and prints.

func init() {
	register(&command{name: "forecast", short: "forecast a run's loss at its token budget from its loss history (are we on track?)", run: runForecast})
	examples["forecast"] = []example{
		{"the loss at 2T tokens with its 80% band, and whether it reaches 1.9", "trainrun forecast /lustre/$USER/ckpt/run1 --tokens 2T --target-loss 1.9"},
		{"the same from the job directory, as JSON for a script", "trainrun forecast trainrun-1234 --tokens 2T --target-loss 1.9 --format json"},
		{"draw the curve, the fit, the band, the target and the checkpoints", "trainrun forecast /lustre/$USER/ckpt/run1 --tokens 2T --target-loss 1.9 --svg run1.svg"},
	}
}

type forecastOpts struct {
	tokens, format, svg, metric string
	target, level               float64
	samples                     int
}

func runForecast(ctx context.Context, env *runEnv, args []string) error {
	fs := newFlags("forecast", "forecast CKPT_DIR|JOB_DIR|JOBID|metrics.jsonl [--tokens N] [--target-loss X] [--format table|json] [--svg FILE]", env.stdout)
	var o forecastOpts
	fs.StringVar(&o.tokens, "tokens", "", "the run's token budget, where the loss is forecast (1e12, 2T, 300B; default: the budget the run recorded in its store, from its --tokens or --train-steps)")
	fs.Float64Var(&o.target, "target-loss", 0, "the loss the run must reach by its budget (--tokens): gives the verdict and the tokens needed")
	fs.StringVar(&o.format, "format", "table", "table|json")
	fs.StringVar(&o.svg, "svg", "", "also draw the curve, the fit, the band, the target and the checkpoints into this SVG file")
	fs.StringVar(&o.metric, "metric", "loss", "the metric of report_progress(metrics=...) to forecast")
	fs.Float64Var(&o.level, "level", 0.8, "the band's coverage (0.8: the 10th to the 90th percentile)")
	fs.IntVar(&o.samples, "samples", 200, "bootstrap replicates")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageErrorf("forecast needs one run: its checkpoint directory (--ckpt-dir), its job directory (trainrun-JOBID), a job id, or a metrics.jsonl; got %d arguments", fs.NArg())
	}
	if o.format != "table" && o.format != "json" {
		return usageErrorf("--format %q: accepted: table, json", o.format)
	}
	if !(o.level > 0 && o.level < 1) {
		return usageErrorf("--level %v: want a coverage between 0 and 1, such as 0.8", o.level)
	}
	if o.target < 0 || math.IsNaN(o.target) || math.IsInf(o.target, 0) {
		return usageErrorf("--target-loss %v: want a loss above 0", o.target)
	}
	opts := forecast.Options{Target: o.target, Level: o.level, Samples: o.samples, Seed: 1}
	if o.tokens != "" {
		t, err := planflags.ParseTokens(o.tokens)
		if err != nil || t <= 0 {
			return usageErrorf("--tokens %q: want a token count such as 2T, 300B or 1e12", o.tokens)
		}
		opts.Budget = t
	}
	hist, ckptDir, err := forecastSource(fs.Arg(0))
	if err != nil {
		return err
	}
	es, err := losshist.Read(hist)
	if err != nil {
		return err
	}
	pts, bySteps := losshist.Points(es, o.metric)
	if err := recordedBudget(env, &opts, o, ckptDir, es, bySteps); err != nil {
		return err
	}
	if bySteps && len(pts) > 0 {
		fmt.Fprintf(env.stderr, "trainrun: forecast: %s reports no tokens (report_progress(step, tokens=...)): steps stand in for tokens, so --tokens and every token figure below are steps\n", hist)
	}
	if len(pts) == 0 {
		return withCode(exitcode.Usage, fmt.Errorf("%s: no reports with metric %q (%d reports in all): the trainer passes report_progress(step, tokens, metrics={%q: ...}), and tokens must be counted", hist, o.metric, len(es), o.metric))
	}
	res, ferr := forecast.Forecast(pts, opts)
	if ferr != nil && !errors.Is(ferr, forecast.ErrTooFew) {
		return ferr
	}
	if o.format == "json" {
		if err := writeForecastJSON(env.stdout, hist, len(pts), res); err != nil {
			return err
		}
	} else {
		writeForecastTable(env.stdout, hist, len(pts), res)
	}
	if o.svg != "" { // too early: the curve alone, titled so
		svg := forecastSVG(pts, res, ckptTokens(ckptDir, es, bySteps), bySteps)
		if err := atomicfile.WriteFile(o.svg, []byte(svg), 0o644); err != nil {
			return fmt.Errorf("--svg %s: %w", o.svg, err)
		}
	}
	return nil
}

// recordedBudget is the budget the run recorded in its store (trainrun run
// --tokens or --train-steps), where --tokens is not given.
func recordedBudget(env *runEnv, opts *forecast.Options, o forecastOpts, ckptDir string, es []losshist.Entry, bySteps bool) error {
	if o.tokens != "" {
		return nil
	}
	if ckptDir != "" {
		b, ok, err := losshist.ReadBudget(ckptDir)
		if err != nil {
			return withCode(exitcode.Usage, err)
		}
		if v, how, in := b.In(es, bySteps); ok && in {
			opts.Budget = v
			fmt.Fprintf(env.stderr, "trainrun: forecast: at the run's budget, %s, recorded in %s (--tokens to forecast elsewhere)\n", how, losshist.BudgetPath(ckptDir))
			return nil
		}
	}
	if o.target > 0 {
		return usageErrorf("--target-loss needs the run's budget, by which it must reach the target: --tokens (the store records none: the run had neither --tokens nor --train-steps)")
	}
	return nil
}

// forecastSource finds the loss history of arg: a metrics.jsonl, a store
// (its .trainrun/metrics.jsonl), a job directory (its plan.json names the
// store), or a job id (the job directory trainrun-JOBID here).
func forecastSource(arg string) (hist, ckptDir string, err error) {
	if fi, err := os.Stat(arg); err == nil && !fi.IsDir() {
		return arg, "", nil
	}
	if _, err := os.Stat(arg); err != nil && !strings.ContainsRune(arg, '/') {
		if fi, err := os.Stat("trainrun-" + arg); err == nil && fi.IsDir() {
			arg = "trainrun-" + arg
		}
	}
	if fi, err := os.Stat(arg); err != nil || !fi.IsDir() {
		return "", "", usageErrorf("%s: not a store, job directory, job id (no trainrun-%s here) or metrics.jsonl", arg, arg)
	}
	if _, err := os.Stat(losshist.Path(arg)); err == nil {
		return losshist.Path(arg), arg, nil
	}
	var doc struct {
		CkptDir string `json:"ckpt_dir"`
	}
	if b, err := os.ReadFile(filepath.Join(arg, jobdir.Plan)); err == nil && json.Unmarshal(b, &doc) == nil && doc.CkptDir != "" {
		return losshist.Path(doc.CkptDir), doc.CkptDir, nil
	}
	return "", "", withCode(exitcode.Usage, fmt.Errorf("%s: no loss history (%s): the run keeps one when it has a --ckpt-dir and its trainer reports metrics={\"loss\": ...}", arg, losshist.Path(arg)))
}

// ckptTokens are the tokens at each committed checkpoint of the store,
// from the history's step-to-tokens (nil without a store).
func ckptTokens(ckptDir string, es []losshist.Entry, bySteps bool) []float64 {
	if ckptDir == "" {
		return nil
	}
	st, err := checkpoint.Open(ckptDir)
	if err != nil {
		return nil
	}
	list, err := st.List()
	if err != nil {
		return nil
	}
	var out []float64
	for _, c := range list {
		for _, e := range es {
			if e.Step >= int64(c.Step) && c.Step > 0 {
				x := float64(e.Tokens)
				if bySteps {
					x = float64(c.Step)
				}
				out = append(out, x)
				break
			}
		}
	}
	return out
}

type forecastBandJSON struct {
	Lo  *float64 `json:"lo"` // null: never (the law's floor lies above the target)
	Mid *float64 `json:"mid"`
	Hi  *float64 `json:"hi"`
}

func bandJSON(b forecast.Band) forecastBandJSON {
	f := func(v float64) *float64 {
		if math.IsInf(v, 0) || math.IsNaN(v) {
			return nil
		}
		return &v
	}
	return forecastBandJSON{f(b.Lo), f(b.Mid), f(b.Hi)}
}

func writeForecastJSON(w io.Writer, hist string, n int, r forecast.Result) error {
	doc := map[string]any{
		"history": hist, "points": n, "used": r.Used, "spikes": r.Spikes,
		"observed_tokens": r.Observed, "warmup_end_tokens": r.WarmupEnd,
		"law":   map[string]float64{"e": r.Law.E, "a": r.Law.A, "alpha": r.Law.Alpha, "ref_tokens": r.Law.Ref, "drop": r.Law.Drop, "drop_at_tokens": r.Law.DropAt},
		"noise": map[string]float64{"abs": r.Noise, "rel": r.NoiseRel, "lag1_autocorr": r.Autocorr},
		"level": r.Level, "verdict": r.Verdict, "why": r.Why,
	}
	if r.Budget > 0 && r.Used > 0 {
		doc["budget_tokens"], doc["loss"] = r.Budget, bandJSON(r.Loss)
	}
	if r.Target > 0 && r.Used > 0 && r.Verdict != forecast.TooEarly {
		doc["target_loss"], doc["tokens_to_target"], doc["p_reach"] = r.Target, bandJSON(r.TokensToTarget), r.PReach
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

func writeForecastTable(w io.Writer, hist string, n int, r forecast.Result) {
	si := forecast.SI
	fmt.Fprintf(w, "history      %s: %d reports, up to %s tokens\n", hist, n, si(r.Observed))
	if r.Used == 0 {
		fmt.Fprintf(w, "verdict      %s: %s\n", cmp.Or(r.Verdict, forecast.TooEarly), r.Why)
		return
	}
	fmt.Fprintf(w, "fit          L(D) = %.4g + %.4g*(D/%s)^-%.3f", r.Law.E, r.Law.A, si(r.Law.Ref), r.Law.Alpha)
	if r.Law.DropAt > 0 {
		fmt.Fprintf(w, " - %.4g after %s (schedule change)", r.Law.Drop, si(r.Law.DropAt))
	}
	fmt.Fprintf(w, "\n             on %d points from %s tokens (before: warm-up); %d spikes left out\n", r.Used, si(r.WarmupEnd), r.Spikes)
	fmt.Fprintf(w, "noise        %.4g (%.2f%% of the loss) about the fit, lag-1 autocorrelation %.2f\n", r.Noise, 100*r.NoiseRel, r.Autocorr)
	if r.Budget > 0 {
		fmt.Fprintf(w, "at %-9s loss %.4g, %.0f%% band %.4g - %.4g (floor %.4g)\n", si(r.Budget), r.Loss.Mid, 100*r.Level, r.Loss.Lo, r.Loss.Hi, r.Law.Floor())
	} else {
		fmt.Fprintf(w, "at budget    give --tokens for the loss at the run's budget\n")
	}
	if r.Target > 0 {
		t := r.TokensToTarget
		fmt.Fprintf(w, "target %-5.4g reached at %s tokens (%.0f%% band %s - %s)\n", r.Target, si(t.Mid), 100*r.Level, si(t.Lo), si(t.Hi))
		fmt.Fprintf(w, "verdict      %s (P(loss at %s <= %.4g) = %.2f): %s\n", r.Verdict, si(r.Budget), r.Target, r.PReach, r.Why)
	}
}

// forecastSVG draws the reports (grey), the fit (solid where observed,
// dashed beyond), its band, the target and the checkpoints, tokens on a
// log axis: what a reader needs to judge the forecast at a glance.
func forecastSVG(pts []forecast.Point, r forecast.Result, ckpts []float64, bySteps bool) string {
	const W, H, L, R, T, B = 800.0, 480.0, 70.0, 20.0, 40.0, 50.0
	x0 := math.Log10(math.Max(pts[0].Tokens, 1))
	x1 := math.Log10(math.Max(r.Budget, r.Observed) * 1.05)
	lo, hi := forecastLossRange(pts, r)
	// a loss spanning more than 5x (a regression's MSE) is drawn on a log axis
	logY := lo > 0 && hi/lo > 5
	fy := func(v float64) float64 { return v }
	if logY {
		fy = func(v float64) float64 { return math.Log10(math.Max(v, 1e-300)) }
	}
	flo, fhi := fy(lo), fy(hi)
	pad := 0.05 * (fhi - flo)
	flo, fhi = flo-pad, fhi+pad
	px := func(t float64) float64 { return L + (W-L-R)*(math.Log10(t)-x0)/(x1-x0) }
	py := func(v float64) float64 { return T + (H-T-B)*(fhi-math.Max(flo, math.Min(fhi, fy(v))))/(fhi-flo) }
	var s strings.Builder
	fmt.Fprintf(&s, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="12">`+"\n", W, H)
	fmt.Fprintf(&s, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	title := forecastTitle(r)
	fmt.Fprintf(&s, `<text x="%.0f" y="22" font-size="15">%s</text>`+"\n", L, xmlEscape(title))
	fmt.Fprintf(&s, `<rect x="%.0f" y="%.0f" width="%.0f" height="%.0f" fill="none" stroke="#999"/>`+"\n", L, T, W-L-R, H-T-B)
	for e := math.Ceil(x0); e <= x1; e++ { // decades
		x := px(math.Pow(10, e))
		fmt.Fprintf(&s, `<line x1="%.1f" y1="%.0f" x2="%.1f" y2="%.0f" stroke="#eee"/><text x="%.1f" y="%.0f" text-anchor="middle">%s</text>`+"\n", x, T, x, H-B, x, H-B+16, forecast.SI(math.Pow(10, e)))
	}
	for k := 0; k <= 4; k++ {
		f := flo + float64(k)*(fhi-flo)/4
		v := f
		if logY {
			v = math.Pow(10, f)
		}
		fmt.Fprintf(&s, `<text x="%.0f" y="%.1f" text-anchor="end">%.3g</text>`+"\n", L-6, py(v)+4, v)
	}
	xname := "tokens (log)"
	if bySteps {
		xname = "steps (log; the trainer reports no tokens)"
	}
	fmt.Fprintf(&s, `<text x="%.0f" y="%.0f">%s</text>`+"\n", L, H-12, xname)
	fmt.Fprintf(&s, `<text x="16" y="%.0f" transform="rotate(-90 16 %.0f)" text-anchor="middle">loss</text>`+"\n", T+(H-T-B)/2, T+(H-T-B)/2)
	if r.Used > 0 {
		end := math.Max(r.Budget, r.Observed)
		var up, down []string
		for k := 0; k <= 60; k++ {
			t := r.WarmupEnd * math.Pow(end/r.WarmupEnd, float64(k)/60)
			b := r.BandAt(t)
			up = append(up, fmt.Sprintf("%.1f,%.1f", px(t), py(b.Hi)))
			down = append([]string{fmt.Sprintf("%.1f,%.1f", px(t), py(b.Lo))}, down...)
		}
		fmt.Fprintf(&s, `<polygon points="%s %s" fill="#4a90d9" fill-opacity="0.2" stroke="none"/>`+"\n", strings.Join(up, " "), strings.Join(down, " "))
	}
	step := max(1, len(pts)/1500)
	for i := 0; i < len(pts); i += step {
		p := pts[i]
		if p.Tokens <= 0 || math.IsInf(p.Loss, 0) || math.IsNaN(p.Loss) {
			continue
		}
		fmt.Fprintf(&s, `<circle cx="%.1f" cy="%.1f" r="1.5" fill="#888"/>`+"\n", px(p.Tokens), py(p.Loss))
	}
	if r.Used > 0 {
		line := func(from, to float64, dash string) {
			var pp []string
			for k := 0; k <= 80; k++ {
				t := from * math.Pow(to/from, float64(k)/80)
				pp = append(pp, fmt.Sprintf("%.1f,%.1f", px(t), py(r.Law.At(t))))
			}
			fmt.Fprintf(&s, `<polyline points="%s" fill="none" stroke="#1f5fa8" stroke-width="2" %s/>`+"\n", strings.Join(pp, " "), dash)
		}
		line(r.WarmupEnd, r.Observed, "")
		if r.Budget > r.Observed {
			line(r.Observed, r.Budget, `stroke-dasharray="6 4"`)
		}
	}
	for _, c := range ckpts {
		x := px(c)
		fmt.Fprintf(&s, `<line x1="%.1f" y1="%.0f" x2="%.1f" y2="%.0f" stroke="#2a9d4b" stroke-width="1"/>`+"\n", x, H-B-10, x, H-B)
	}
	if r.Target > 0 {
		y := py(r.Target)
		fmt.Fprintf(&s, `<line x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="#d62728" stroke-dasharray="4 3"/><text x="%.0f" y="%.1f" fill="#d62728">target %.4g</text>`+"\n", L, y, W-R, y, L+6, y-4, r.Target)
	}
	if r.Budget > 0 && r.Used > 0 {
		x := px(r.Budget)
		fmt.Fprintf(&s, `<line x1="%.1f" y1="%.0f" x2="%.1f" y2="%.0f" stroke="#555" stroke-dasharray="2 3"/><text x="%.1f" y="%.0f" text-anchor="end">budget %s: %.4g [%.4g, %.4g]</text>`+"\n",
			x, T, x, H-B, x-4, T+14, forecast.SI(r.Budget), r.Loss.Mid, r.Loss.Lo, r.Loss.Hi)
	}
	fmt.Fprintf(&s, `<text x="%.0f" y="%.0f" fill="#555" font-size="11" text-anchor="end">grey: reports; blue: fit (dashed: forecast), %.0f%% band; green: checkpoints</text>`+"\n", W-R, H-12, 100*r.Level)
	s.WriteString("</svg>\n")
	return s.String()
}

// forecastLossRange is the span of losses the chart's y axis must show: the
// reports after the first third of the warmup (the early spike would squash
// the rest), the low end of the band at the budget and the target; a span
// of one point, or none, gets a unit around it.
func forecastLossRange(pts []forecast.Point, r forecast.Result) (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, p := range pts {
		if p.Tokens >= r.WarmupEnd/3 && !math.IsInf(p.Loss, 0) && !math.IsNaN(p.Loss) {
			lo, hi = math.Min(lo, p.Loss), math.Max(hi, p.Loss)
		}
	}
	if r.Budget > 0 && r.Used > 0 {
		lo = math.Min(lo, r.Loss.Lo)
	}
	if r.Target > 0 {
		lo, hi = math.Min(lo, r.Target), math.Max(hi, r.Target)
	}
	if math.IsInf(lo, 0) || math.IsInf(hi, 0) || hi <= lo {
		lo, hi = lo-1, lo+1
		if math.IsInf(lo, 0) {
			lo, hi = 0, 1
		}
	}
	return lo, hi
}

// forecastTitle is the chart's headline: the verdict, or why there is none
// (diverging, too early), cut to fit the width.
func forecastTitle(r forecast.Result) string {
	title := "loss forecast"
	if r.Diverging {
		title = "diverging: the loss rises"
	} else if r.Used == 0 {
		title = "too early to forecast: " + r.Why
	} else if r.Verdict != "" {
		title = fmt.Sprintf("%s (P(reach %.4g) = %.2f)", r.Verdict, r.Target, r.PReach)
	}
	if len(title) > 90 {
		title = title[:87] + "..."
	}
	return title
}

func xmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;").Replace(s)
}

func init() {
	register(&command{name: "scaling", short: "fit loss against model size and tokens over proxy runs and predict a bigger model's loss", run: runScaling})
	examples["scaling"] = []example{
		{"three proxy sizes (their stores, each =its parameter count) predict a 7B model at 140B tokens", "trainrun scaling ckpt/p125m=125M ckpt/p350m=350M ckpt/p760m=760M --params 7B --tokens 140B"},
		{"the same for a script", "trainrun scaling ckpt/p125m=125M ckpt/p350m=350M ckpt/p760m=760M --params 7B --tokens 140B --format json"},
	}
}

// runScaling is `trainrun scaling RUN=PARAMS...`: internal/forecast's
// FitScaling over the runs' loss histories.
func runScaling(ctx context.Context, env *runEnv, args []string) error {
	fs := newFlags("scaling", "scaling RUN=PARAMS... --params N --tokens D [--format table|json]", env.stdout)
	params := fs.String("params", "", "the model to predict: its parameter count (7B, 70e9)")
	tokens := fs.String("tokens", "", "its training tokens (140B, 2T)")
	format := fs.String("format", "table", "table|json")
	metric := fs.String("metric", "loss", "the metric of report_progress(metrics=...) to fit")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *format != "table" && *format != "json" {
		return usageErrorf("--format %q: accepted: table, json", *format)
	}
	n, errN := planflags.ParseTokens(*params)
	d, errD := planflags.ParseTokens(*tokens)
	if *params == "" || errN != nil || n <= 0 || *tokens == "" || errD != nil || d <= 0 {
		return usageErrorf("scaling needs --params N and --tokens D of the model to predict (such as --params 7B --tokens 140B), got %q and %q", *params, *tokens)
	}
	var runs []forecast.SizedRun
	for _, a := range fs.Args() {
		dir, size, ok := strings.Cut(a, "=")
		p, err := planflags.ParseTokens(size)
		if !ok || err != nil || p <= 0 {
			return usageErrorf("%s: want RUN=PARAMS, the run's store, job directory or metrics.jsonl and its model's parameter count (ckpt/p125m=125M)", a)
		}
		hist, _, err := forecastSource(dir)
		if err != nil {
			return err
		}
		es, err := losshist.Read(hist)
		if err != nil {
			return err
		}
		pts, bySteps := losshist.Points(es, *metric)
		if bySteps {
			return usageErrorf("%s: its trainer reports no tokens (report_progress(step, tokens=...)): a fit across model sizes needs tokens", dir)
		}
		runs = append(runs, forecast.SizedRun{Name: dir, Params: p, Points: pts})
	}
	f, err := forecast.FitScaling(runs, n, d, 0.8, 200, 1)
	if err != nil {
		return withCode(exitcode.Usage, err)
	}
	if *format == "json" {
		b, err := json.MarshalIndent(map[string]any{
			"law":  map[string]float64{"e": f.Law.E, "a": f.Law.A, "alpha": f.Law.Alpha, "b": f.Law.B, "beta": f.Law.Beta, "n_unit": 1e9, "d_unit": 1e10},
			"used": f.Used, "rms": f.RMS, "sizes": f.Sizes, "params": n, "tokens": d, "loss": bandJSON(f.Loss), "level": f.Level,
			"extrapolation": f.Extrapolation,
		}, "", "  ")
		if err != nil {
			return err
		}
		env.stdout.Write(append(b, '\n'))
		return nil
	}
	w := env.stdout
	fmt.Fprintf(w, "fit          L(N,D) = %.4g + %.4g/(N/1e9)^%.3f + %.4g/(D/1e10)^%.3f (Hoffmann et al. 2022, eq. 2)\n", f.Law.E, f.Law.A, f.Law.Alpha, f.Law.B, f.Law.Beta)
	fmt.Fprintf(w, "             on %d points of %d runs at %d sizes, residual RMS %.4g\n", f.Used, len(runs), f.Sizes, f.RMS)
	fmt.Fprintf(w, "prediction   %s parameters, %s tokens: loss %.4g, %.0f%% band %.4g - %.4g\n", forecast.SI(n), forecast.SI(d), f.Loss.Mid, 100*f.Level, f.Loss.Lo, f.Loss.Hi)
	if f.Extrapolation > 20 {
		fmt.Fprintf(w, "note         %.1fx past the largest run: the band is calibrated on synthetic laws 2-20x out; this far out, or for a law that departs from L = E + A/N^a + B/D^b, the loss is less certain than it says\n", f.Extrapolation)
	} else if f.Extrapolation > 1 {
		fmt.Fprintf(w, "note         %.1fx past the largest run: the band holds the runs' noise, widened as calibrated on synthetic laws 2-20x out; a law that departs from L = E + A/N^a + B/D^b is less certain than it says\n", f.Extrapolation)
	}
	return nil
}
