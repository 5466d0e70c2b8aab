package sweep

import (
	"encoding/xml"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// SVG draws metric against each swept parameter: one panel per key, one
// dot per trial that reported the metric; numeric keys on a linear axis (a
// log axis when all values are positive and span 100x or more), others as
// categories. Plain hand-written SVG, as the run report's timeline.
func SVG(title string, keys []string, rows []TrialStatus, metric string) string {
	const pw, ph, pad, top = 320.0, 220.0, 50.0, 40.0
	w := pad + float64(max(1, len(keys)))*(pw+pad)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="12">`+"\n", w, top+ph+60)
	fmt.Fprintf(&b, `<text x="%.0f" y="20" font-size="14">%s: %s by parameter</text>`+"\n", pad, xmlText(title), xmlText(metric))
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, r := range rows {
		if v, ok := r.Metric[metric]; ok && !math.IsNaN(v) && !math.IsInf(v, 0) {
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
	}
	if lo > hi {
		b.WriteString(`<text x="50" y="80">no trial reported the metric yet</text></svg>` + "\n")
		return b.String()
	}
	if hi == lo {
		hi, lo = hi+0.5, lo-0.5
	}
	for i, k := range keys {
		x0 := pad + float64(i)*(pw+pad)
		fmt.Fprintf(&b, `<rect x="%.0f" y="%.0f" width="%.0f" height="%.0f" fill="none" stroke="#999"/>`+"\n", x0, top, pw, ph)
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="middle">%s</text>`+"\n", x0+pw/2, top+ph+35, xmlText(k))
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="end">%s</text>`+"\n", x0-4, top+10, fmtNum(hi))
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="end">%s</text>`+"\n", x0-4, top+ph, fmtNum(lo))
		xOf := axis(rows, k, x0+15, x0+pw-15, &b, top+ph+15)
		for _, r := range rows {
			v, ok := r.Metric[metric]
			if !ok || math.IsNaN(v) || math.IsInf(v, 0) {
				continue
			}
			y := top + ph - 10 - (v-lo)/(hi-lo)*(ph-20)
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="4" fill="#1565c0"><title>trial %d: %s=%s %s=%s</title></circle>`+"\n",
				xOf(r.Params[k]), y, r.Index, xmlText(k), xmlText(r.Params[k]), xmlText(metric), fmtNum(v))
		}
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// axis maps a parameter's values to x and labels them.
func axis(rows []TrialStatus, key string, x0, x1 float64, b *strings.Builder, labelY float64) func(string) float64 {
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
		return func(v string) float64 { return pos[v] }
	}
	f := func(v string) float64 { x, _ := strconv.ParseFloat(v, 64); return x }
	sort.Slice(vals, func(i, j int) bool { return f(vals[i]) < f(vals[j]) })
	lo, hi := f(vals[0]), f(vals[len(vals)-1])
	tr := func(x float64) float64 { return x }
	if positive && hi/lo >= 100 {
		tr = math.Log10
	}
	xOf := func(v string) float64 { return x0 + (x1-x0)*(tr(f(v))-tr(lo))/(tr(hi)-tr(lo)) }
	for _, v := range vals {
		fmt.Fprintf(b, `<text x="%.1f" y="%.0f" text-anchor="middle" font-size="10">%s</text>`+"\n", xOf(v), labelY, xmlText(v))
	}
	return xOf
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
