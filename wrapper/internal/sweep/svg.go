package sweep

import (
	"encoding/xml"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// SVG geometry: a panel per swept key, with room on its left for the
// y-axis' tick labels and title (they were clipped, and ran into the
// previous panel, at 50 px: issue 30).
const (
	svgPanelW, svgPanelH = 320.0, 220.0
	svgLeft              = 90.0 // y tick labels (up to 10 characters at 11 px) and the rotated axis title
	svgGap               = 40.0 // between one panel's right edge and the next one's left margin
	svgTop               = 40.0
	svgTicks             = 5 // about this many on the metric's axis
)

// SVG draws metric against each swept parameter: one panel per key, one
// dot per trial that reported the metric, labelled with its trial index;
// numeric keys on a linear axis (a log axis when all values are positive
// and span 100x or more), others as categories. The metric's axis is
// logarithmic when its values are all positive and span 10x or more: a
// diverged trial would squash every other one onto the bottom of a linear
// axis. Plain hand-written SVG, as the run report's timeline.
func SVG(title string, keys []string, rows []TrialStatus, metric string) string {
	w := float64(max(1, len(keys)))*(svgLeft+svgPanelW+svgGap) + svgGap
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="12">`+"\n", w, svgTop+svgPanelH+60)
	fmt.Fprintf(&b, `<text x="%.0f" y="20" font-size="14">%s: %s by parameter</text>`+"\n", svgLeft, xmlText(title), xmlText(metric))
	y, ok := metricAxis(rows, metric)
	if !ok {
		b.WriteString(`<text x="50" y="80">no trial reported the metric yet</text></svg>` + "\n")
		return b.String()
	}
	for i, k := range keys {
		x0 := svgLeft + float64(i)*(svgLeft+svgPanelW+svgGap)
		fmt.Fprintf(&b, `<rect x="%.0f" y="%.0f" width="%.0f" height="%.0f" fill="none" stroke="#999"/>`+"\n", x0, svgTop, svgPanelW, svgPanelH)
		y.draw(&b, x0, metric)
		xOf, xName := axis(rows, k, x0+15, x0+svgPanelW-15, &b, svgTop+svgPanelH+15)
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="middle">%s</text>`+"\n", x0+svgPanelW/2, svgTop+svgPanelH+35, xmlText(xName))
		for _, r := range rows {
			v, ok := r.Metric[metric]
			if !ok || math.IsNaN(v) || math.IsInf(v, 0) {
				continue
			}
			cx, cy := xOf(r.Params[k]), y.at(v)
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="4" fill="#1565c0"><title>trial %d: %s=%s %s=%s</title></circle>`+"\n",
				cx, cy, r.Index, xmlText(k), xmlText(r.Params[k]), xmlText(metric), fmtNum(v))
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="9" fill="#555">%d</text>`+"\n", cx+6, cy-5, r.Index)
		}
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// yAxis maps the metric to the panels' y.
type yAxis struct {
	lo, hi float64 // in the transformed space
	log    bool
}

// metricAxis is the y axis for the values rows report (ok false: none).
func metricAxis(rows []TrialStatus, metric string) (yAxis, bool) {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, r := range rows {
		if v, ok := r.Metric[metric]; ok && !math.IsNaN(v) && !math.IsInf(v, 0) {
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
	}
	if lo > hi {
		return yAxis{}, false
	}
	a := yAxis{lo: lo, hi: hi, log: lo > 0 && hi/lo >= 10}
	if a.log {
		a.lo, a.hi = math.Log10(lo), math.Log10(hi)
	}
	if a.hi == a.lo {
		a.hi, a.lo = a.hi+0.5, a.lo-0.5
	}
	return a, true
}

func (a yAxis) at(v float64) float64 {
	if a.log {
		v = math.Log10(v)
	}
	return svgTop + svgPanelH - 10 - (v-a.lo)/(a.hi-a.lo)*(svgPanelH-20)
}

// ticks are round values inside the axis: 1, 2 and 5 times a power of ten
// (only the powers when those are many) on a log axis, multiples of such a
// step on a linear one; the ends when fewer than two fall inside.
func (a yAxis) ticks() []float64 {
	lo, hi := a.lo, a.hi
	var out []float64
	if a.log {
		for _, ms := range [][]float64{{1, 2, 5}, {1}} {
			out = out[:0]
			for k := math.Floor(lo); k <= math.Ceil(hi); k++ {
				for _, m := range ms {
					if t := math.Log10(m) + k; t >= lo-1e-9 && t <= hi+1e-9 {
						out = append(out, math.Pow(10, t))
					}
				}
			}
			if len(out) <= 2*svgTicks {
				break
			}
		}
	} else {
		raw := (hi - lo) / float64(svgTicks-1)
		p := math.Pow(10, math.Floor(math.Log10(raw)))
		step := 10 * p
		for _, m := range []float64{1, 2, 5} {
			if m*p >= raw {
				step = m * p
				break
			}
		}
		for t := math.Ceil(lo/step) * step; t <= hi+step*1e-9; t += step {
			out = append(out, t)
		}
	}
	if len(out) < 2 {
		out = []float64{a.value(lo), a.value(hi)}
	}
	return out
}

// value is the metric at t in the axis' (transformed) space.
func (a yAxis) value(t float64) float64 {
	if a.log {
		return math.Pow(10, t)
	}
	return t
}

// draw writes the ticks, their labels, light grid lines and the axis title
// left of the panel at x0.
func (a yAxis) draw(b *strings.Builder, x0 float64, metric string) {
	for _, v := range a.ticks() {
		y := a.at(v)
		fmt.Fprintf(b, `<line x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="#eee"/>`+"\n", x0+1, y, x0+svgPanelW-1, y)
		fmt.Fprintf(b, `<line x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="#999"/>`+"\n", x0-4, y, x0, y)
		fmt.Fprintf(b, `<text x="%.0f" y="%.1f" text-anchor="end" font-size="11">%s</text>`+"\n", x0-6, y+4, fmtNum(v))
	}
	name := metric
	if a.log {
		name += " (log scale)"
	}
	cy := svgTop + svgPanelH/2
	fmt.Fprintf(b, `<text x="%.0f" y="%.0f" text-anchor="middle" transform="rotate(-90 %.0f %.0f)">%s</text>`+"\n",
		x0-svgLeft+14, cy, x0-svgLeft+14, cy, xmlText(name))
}

// axis maps a parameter's values to x and labels them; it returns the
// axis' title (the key, and "(log scale)" when it is one).
func axis(rows []TrialStatus, key string, x0, x1 float64, b *strings.Builder, labelY float64) (func(string) float64, string) {
	var vals []string
	seen := map[string]bool{}
	numeric, positive := true, true
	for _, r := range rows {
		v := r.Params[key]
		if seen[v] {
			continue
		}
		seen[v] = true
		vals = append(vals, v)
		f, err := strconv.ParseFloat(v, 64)
		numeric = numeric && err == nil
		positive = positive && err == nil && f > 0
	}
	if !numeric || len(vals) < 2 {
		sort.Strings(vals)
		pos := map[string]float64{}
		for i, v := range vals {
			pos[v] = x0 + (x1-x0)*(float64(i)+0.5)/float64(len(vals))
			fmt.Fprintf(b, `<text x="%.1f" y="%.0f" text-anchor="middle">%s</text>`+"\n", pos[v], labelY, xmlText(v))
		}
		return func(v string) float64 { return pos[v] }, key
	}
	f := func(v string) float64 { x, _ := strconv.ParseFloat(v, 64); return x }
	sort.Slice(vals, func(i, j int) bool { return f(vals[i]) < f(vals[j]) })
	lo, hi := f(vals[0]), f(vals[len(vals)-1])
	tr, name := func(x float64) float64 { return x }, key
	if positive && hi/lo >= 100 {
		tr, name = math.Log10, key+" (log scale)"
	}
	xOf := func(v string) float64 { return x0 + (x1-x0)*(tr(f(v))-tr(lo))/(tr(hi)-tr(lo)) }
	for _, v := range vals {
		fmt.Fprintf(b, `<text x="%.1f" y="%.0f" text-anchor="middle" font-size="10">%s</text>`+"\n", xOf(v), labelY, xmlText(v))
	}
	return xOf, name
}

func fmtNum(v float64) string { return strconv.FormatFloat(v, 'g', 4, 64) }

// xmlText escapes s for SVG text and attributes. html.EscapeString left a
// control character of a swept value (or of a sweep.json someone else
// wrote) in place, and the file was not XML (review t4, F9);
// encoding/xml writes any character XML does not allow as U+FFFD.
func xmlText(s string) string {
	var b strings.Builder
	xml.EscapeText(&b, []byte(s))
	return b.String()
}
