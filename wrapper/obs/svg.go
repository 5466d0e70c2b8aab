package obs

import (
	"fmt"
	"html"
	"io"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/trainrun/trainrun/internal/units"
)

// The timeline is plain SVG written here by hand: it is a handful of
// rectangles, lines and labels, no maintained Go plotting module is among
// the project's dependencies (gonum/plot would pull in a font stack and
// image codecs for this), and the output is deterministic text that a
// golden test can hold and any browser, rsvg-convert or Inkscape can show.

const (
	svgW     = 1000
	plotX0   = 130.0
	plotX1   = 970.0
	rowInc   = 105.0 // incarnations row top
	rowH     = 34.0  // incarnations row height
	rowCkpt  = 172.0 // checkpoints row top
	ckptH    = 16.0
	chartTop = 240.0
	chartBot = 390.0
	axisY    = 410.0
	legendY  = 460.0
	svgH     = 490
)

var causeColor = map[string]string{
	EndFinished: "#2e7d32", EndRequeued: "#1565c0", EndStopped: "#6a1b9a", EndLimit: "#ad1457", EndCrash: "#c62828", EndRestarted: "#ef6c00", "": "#616161",
}

// WriteSVG draws the run's timeline: incarnations coloured by how they
// ended, the requeue waits between them, the work each interruption lost,
// checkpoints (save and commit), interruptions, and the trainer's steps
// against the predicted pace.
func (r *Report) WriteSVG(w io.Writer) error {
	var b strings.Builder
	span := r.Last.Sub(r.First)
	if span <= 0 {
		span = time.Second
	}
	x := func(tm time.Time) float64 {
		return plotX0 + (plotX1-plotX0)*tm.Sub(r.First).Seconds()/span.Seconds()
	}
	writeSVGHead(&b)
	r.drawTitle(&b, r.Totals())
	drawRowLabels(&b)
	r.drawWaits(&b, x)
	r.drawIncarnations(&b, x, span)
	r.drawCheckpoints(&b, x)
	r.drawInterrupts(&b, x)
	r.drawProgress(&b, x)
	r.drawAxis(&b, span)
	drawLegend(&b)
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// writeSVGHead opens the document: its size, the hatch patterns of the
// waits and the lost work, and a white background.
func writeSVGHead(b *strings.Builder) {
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="DejaVu Sans, Helvetica, Arial, sans-serif" font-size="12">`+"\n", svgW, svgH, svgW, svgH)
	b.WriteString(`<defs>
<pattern id="wait" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" fill="#eeeeee"/><line x1="0" y1="0" x2="0" y2="6" stroke="#9e9e9e" stroke-width="2"/></pattern>
<pattern id="lost" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(-45)"><rect width="6" height="6" fill="#ffcdd2"/><line x1="0" y1="0" x2="0" y2="6" stroke="#c62828" stroke-width="2"/></pattern>
</defs>
<rect width="100%" height="100%" fill="white"/>
`)
}

// drawTitle writes the title and the one-line verdict (and the throughput
// line when there is one).
func (r *Report) drawTitle(b *strings.Builder, t Totals) {
	esc := html.EscapeString
	title := "trainrun job " + r.JobID
	if r.JobName != "" {
		title += " (" + r.JobName + ")"
	}
	if r.Partition != "" {
		title += " on " + r.Partition
	}
	status := "not finished"
	if t.Finished {
		status = "finished"
	}
	fmt.Fprintf(b, `<text x="10" y="22" font-size="16" font-weight="bold">%s</text>`+"\n", esc(title))
	sub := fmt.Sprintf("%d incarnation(s), %s wall, %s · %d checkpoint(s) · %s waiting in requeue · %s of work lost",
		len(r.Incarnations), units.Duration(t.Wall), status, len(r.Checkpoints), units.Duration(t.Waiting), units.Duration(t.Lost))
	fmt.Fprintf(b, `<text x="10" y="42" fill="#333">%s</text>`+"\n", esc(sub))
	if line := r.throughputLine(t); line != "" {
		fmt.Fprintf(b, `<text x="10" y="60" fill="#333">%s</text>`+"\n", esc(line))
	}
}

func drawRowLabels(b *strings.Builder) {
	fmt.Fprintf(b, `<text x="10" y="%.0f" font-weight="bold">incarnations</text>`+"\n", rowInc+rowH/2+4)
	fmt.Fprintf(b, `<text x="10" y="%.0f" font-weight="bold">checkpoints</text>`+"\n", rowCkpt+ckptH/2+4)
	fmt.Fprintf(b, `<text x="10" y="%.0f" font-weight="bold">trainer step</text>`+"\n", chartTop+12)
}

// drawWaits hatches the requeue waits between incarnations.
func (r *Report) drawWaits(b *strings.Builder, x func(time.Time) float64) {
	for _, wt := range r.Waits() {
		x0, x1 := x(wt.From), x(wt.To)
		fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="url(#wait)" stroke="#9e9e9e"/>`+"\n", x0, rowInc+6, x1-x0, rowH-12)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="#555" font-size="11">wait %s</text>`+"\n", (x0+x1)/2, rowInc-4, units.Duration(wt.To.Sub(wt.From)))
	}
}

// drawIncarnations draws each incarnation as a bar coloured by its end,
// labelled, with the work it lost hatched at its end.
func (r *Report) drawIncarnations(b *strings.Builder, x func(time.Time) float64, span time.Duration) {
	esc := html.EscapeString
	for _, in := range r.Incarnations {
		end := in.End
		if end.IsZero() {
			end = in.StoppedAt
		}
		x0, x1 := x(in.Start), x(end)
		if x1-x0 < 2 {
			x1 = x0 + 2
		}
		col := causeColor[in.Cause]
		fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" rx="3" fill="%s"><title>%s</title></rect>`+"\n",
			x0, rowInc, x1-x0, rowH, col, esc(fmt.Sprintf("restart %d: %s, ran %s", in.Restart, in.EndText(), units.Duration(end.Sub(in.Start)))))
		if in.Lost > 0 {
			lx1 := x(in.StoppedAt)
			lx0 := lx1 - (plotX1-plotX0)*in.Lost.Seconds()/span.Seconds()
			fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="url(#lost)" stroke="#c62828"/>`+"\n", lx0, rowInc+rowH-10, max(lx1-lx0, 1), 10.0)
		}
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" fill="white" font-weight="bold">%s</text>`+"\n", x0+4, rowInc+rowH/2+4, esc(incarnationLabel(in, x1-x0)))
		if in.Lost > 0 {
			fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="end" fill="#c62828" font-size="11">lost %s</text>`+"\n", x(in.StoppedAt)-2, rowInc+rowH+12, units.Duration(in.Lost))
		}
	}
}

// incarnationLabel is the longest label that fits a bar width px wide
// (bold 12 px: about 7 px a character): "#N how it ended", "#N cause", or
// just "#N".
func incarnationLabel(in Incarnation, width float64) string {
	short := in.Interrupt
	if in.Cause == EndCrash || in.Cause == "" || short == "" {
		short = strings.Fields(shortEnd(in))[0]
	}
	for _, l := range []string{fmt.Sprintf("#%d %s", in.Restart, shortEnd(in)), fmt.Sprintf("#%d %s", in.Restart, short)} {
		if float64(utf8.RuneCountInString(l))*7.8 < width-8 {
			return l
		}
	}
	return fmt.Sprintf("#%d", in.Restart)
}

// drawCheckpoints draws each checkpoint's save (asked -> complete), its
// commit, and the commit mark with its tag.
func (r *Report) drawCheckpoints(b *strings.Builder, x func(time.Time) float64) {
	esc := html.EscapeString
	for i, c := range r.Checkpoints {
		xc := x(c.Time)
		if !c.AskedAt.IsZero() && !c.CompleteAt.IsZero() {
			xa, xd := x(c.AskedAt), x(c.CompleteAt)
			fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#ef6c00"><title>save %s</title></rect>`+"\n", xa, rowCkpt+3, max(xd-xa, 3), ckptH-6, units.Duration(c.Save))
		}
		if !c.CompleteAt.IsZero() {
			xd := x(c.CompleteAt)
			fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#5d4037"><title>commit %s</title></rect>`+"\n", xd, rowCkpt+3, max(xc-xd, 1), ckptH-6, units.Duration(c.Commit))
		}
		fmt.Fprintf(b, `<path d="M%.1f %.1f l6 8 l-6 8 l-6 -8 z" fill="#ffb300" stroke="#5d4037"><title>%s</title></path>`+"\n", xc, rowCkpt, esc(fmt.Sprintf("%s committed, %s", c.Tag, units.Bytes(c.Bytes))))
		dy := 30.0
		if i%2 == 1 {
			dy = 43
		}
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="#5d4037" font-size="10">%s</text>`+"\n", xc, rowCkpt+dy, esc(c.Tag))
	}
	if len(r.Checkpoints) == 0 {
		fmt.Fprintf(b, `<text x="%.0f" y="%.0f" fill="#777">none committed</text>`+"\n", plotX0, rowCkpt+ckptH/2+4)
	}
}

// drawInterrupts draws each interruption as a line through every row.
func (r *Report) drawInterrupts(b *strings.Builder, x func(time.Time) float64) {
	for _, it := range r.Interrupts {
		xi := x(it.Time)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#c62828" stroke-width="1.5" stroke-dasharray="4 3"/>`+"\n", xi, rowInc-18, xi, chartBot)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="#c62828" font-size="11" font-weight="bold">%s</text>`+"\n", xi, rowInc-22, html.EscapeString(it.Cause))
	}
}

// drawAxis draws the time axis, elapsed since the first start, with round
// ticks and their grid lines through the progress chart.
func (r *Report) drawAxis(b *strings.Builder, span time.Duration) {
	fmt.Fprintf(b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="#333"/>`+"\n", plotX0, axisY, plotX1, axisY)
	tick := niceTick(span)
	for d := time.Duration(0); d >= 0 && d <= span; d += tick { // d < 0: the sum wrapped (a span of centuries from an event without a time)
		xt := plotX0 + (plotX1-plotX0)*d.Seconds()/span.Seconds()
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.0f" x2="%.1f" y2="%.0f" stroke="#333"/>`+"\n", xt, axisY, xt, axisY+5)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.0f" x2="%.1f" y2="%.0f" stroke="#eeeeee"/>`+"\n", xt, chartTop, xt, chartBot)
		fmt.Fprintf(b, `<text x="%.1f" y="%.0f" text-anchor="middle" font-size="11">%s</text>`+"\n", xt, axisY+18, fmtTick(d))
	}
	fmt.Fprintf(b, `<text x="%.0f" y="%.0f" text-anchor="middle" font-size="11" fill="#555">time since the first start (%s)</text>`+"\n", (plotX0+plotX1)/2, axisY+34, r.First.UTC().Format("2006-01-02 15:04:05Z"))
}

// drawLegend writes the legend: a swatch and a label per colour and mark,
// left to right.
func drawLegend(b *strings.Builder) {
	lx := 10.0
	item := func(swatch, label string) {
		fmt.Fprintf(b, `<g transform="translate(%.0f %.0f)">%s<text x="20" y="11" font-size="11">%s</text></g>`+"\n", lx, legendY, swatch, html.EscapeString(label))
		lx += 26 + float64(len(label))*6.4
	}
	box := func(fill string) string {
		return fmt.Sprintf(`<rect width="14" height="14" rx="2" fill="%s" stroke="#555" stroke-width="0.5"/>`, fill)
	}
	item(box(causeColor[EndFinished]), "finished")
	item(box(causeColor[EndRequeued]), "requeued")
	item(box(causeColor[EndStopped]), "stopped")
	item(box(causeColor[EndCrash]), "failed")
	item(box(causeColor[""]), "killed")
	item(box("url(#wait)"), "requeue wait")
	item(box("url(#lost)"), "work lost")
	item(box("#ef6c00"), "checkpoint save")
	item(box("#5d4037"), "commit")
	item(`<path d="M7 0 l6 7 l-6 7 l-6 -7 z" fill="#ffb300" stroke="#5d4037"/>`, "committed")
	item(`<line x1="7" y1="0" x2="7" y2="14" stroke="#c62828" stroke-width="1.5" stroke-dasharray="4 3"/>`, "interruption")
}

func shortEnd(in Incarnation) string {
	switch in.Cause {
	case "":
		return "killed"
	case EndCrash:
		return "failed (" + orText(in.Crash, CrashStepFailed) + ")"
	}
	if in.Interrupt != "" && in.Cause != EndFinished {
		return in.Interrupt + " → " + in.Cause
	}
	return in.Cause
}

func (r *Report) throughputLine(t Totals) string {
	var parts []string
	if s := r.Start; s != nil && s.StepSeconds > 0 {
		parts = append(parts, fmt.Sprintf("predicted %.3g s/step (MFU %.0f%%)", s.StepSeconds, 100*s.MFU))
	}
	if o := r.observedStep(); o > 0 {
		parts = append(parts, fmt.Sprintf("observed %.3g s/step", o))
	}
	if t.Steps > 0 && t.Wall > 0 {
		eff := t.Wall.Seconds() / float64(t.Steps)
		p := fmt.Sprintf("effective %.3g s/step over the run", eff)
		if s := r.Start; s != nil && s.StepSeconds > 0 {
			p += fmt.Sprintf(" (%.0f%% of predicted)", 100*s.StepSeconds/eff)
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, " · ")
}

// drawProgress plots the trainer's step against time, one line per
// incarnation, and the predicted pace from each incarnation's first point.
func (r *Report) drawProgress(b *strings.Builder, x func(time.Time) float64) {
	fmt.Fprintf(b, `<rect x="%.0f" y="%.0f" width="%.0f" height="%.0f" fill="none" stroke="#ccc"/>`+"\n", plotX0, chartTop, plotX1-plotX0, chartBot-chartTop)
	if len(r.Progress) == 0 {
		fmt.Fprintf(b, `<text x="%.0f" y="%.0f" text-anchor="middle" fill="#777">no progress reported by the trainer (Checkpointer.report_progress)</text>`+"\n", (plotX0+plotX1)/2, (chartTop+chartBot)/2)
		return
	}
	maxStep := int64(1)
	for _, p := range r.Progress {
		maxStep = max(maxStep, p.Step)
	}
	y := func(s float64) float64 { return chartBot - (chartBot-chartTop)*s/float64(maxStep) }
	for _, frac := range []float64{0, 0.5, 1} {
		s := math.Round(frac * float64(maxStep))
		fmt.Fprintf(b, `<text x="%.0f" y="%.1f" text-anchor="end" font-size="10" fill="#555">%.0f</text>`+"\n", plotX0-4, y(s)+3, s)
	}
	pred := 0.0
	if r.Start != nil {
		pred = r.Start.StepSeconds
	}
	byRestart := map[int][]Event{}
	var order []int
	for _, p := range r.Progress {
		if _, ok := byRestart[p.Restart]; !ok {
			order = append(order, p.Restart)
		}
		byRestart[p.Restart] = append(byRestart[p.Restart], p)
	}
	for _, rs := range order {
		ps := byRestart[rs]
		var pts []string
		for _, p := range ps {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(p.Time), y(float64(p.Step))))
		}
		if pred > 0 && len(ps) > 1 {
			// The predicted pace from the first report, up to the last
			// report's time or the chart's top, whichever comes first.
			f, l := ps[0], ps[len(ps)-1]
			endT, endS := l.Time, float64(f.Step)+l.Time.Sub(f.Time).Seconds()/pred
			if endS > float64(maxStep) {
				endS = float64(maxStep)
				endT = f.Time.Add(time.Duration((endS - float64(f.Step)) * pred * float64(time.Second)))
			}
			fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#9e9e9e" stroke-dasharray="5 4"/>`+"\n",
				x(f.Time), y(float64(f.Step)), x(endT), y(endS))
		}
		fmt.Fprintf(b, `<polyline points="%s" fill="none" stroke="#1565c0" stroke-width="2"/>`+"\n", strings.Join(pts, " "))
		for _, p := range ps {
			fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="2" fill="#1565c0"/>`+"\n", x(p.Time), y(float64(p.Step)))
		}
	}
	fmt.Fprintf(b, `<text x="10" y="%.0f" font-size="10" fill="#1565c0">— reported by the trainer</text>`+"\n", chartTop+30)
	if pred > 0 {
		fmt.Fprintf(b, `<text x="10" y="%.0f" font-size="10" fill="#777">- - predicted pace</text>`+"\n", chartTop+44)
	}
}

// fmtTick writes an axis offset compactly: +0, +45s, +10m, +1h, +1h30m.
func fmtTick(d time.Duration) string {
	switch {
	case d == 0:
		return "0"
	case d < time.Minute:
		return fmt.Sprintf("+%ds", int(d.Seconds()))
	case d < time.Hour:
		if d%time.Minute == 0 {
			return fmt.Sprintf("+%dm", int(d.Minutes()))
		}
		return fmt.Sprintf("+%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d%time.Hour == 0:
		return fmt.Sprintf("+%dh", int(d.Hours()))
	}
	return fmt.Sprintf("+%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
}

// niceTick is a round tick spacing giving 5 to 10 ticks over span.
func niceTick(span time.Duration) time.Duration {
	steps := []time.Duration{time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 15 * time.Second, 30 * time.Second,
		time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute,
		time.Hour, 2 * time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour}
	for _, s := range steps {
		if span/s <= 10 {
			return s
		}
	}
	return span / 8
}
