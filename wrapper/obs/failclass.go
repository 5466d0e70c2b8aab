package obs

import (
	"fmt"
	"io"
	"strings"
)

// Failure classes (issue 31): a failed step's class in the report and the
// metric trainrun_step_failures_total{class}.

// countFailure counts a failed step (an end or a restart) by its class.
func (o *Observer) countFailure(e *Event) {
	if e.FailureClass != "" {
		o.m.stepFailures.WithLabelValues(e.FailureClass).Inc()
	}
}

// writeFailureClasses prints the failed steps by class, and each with the
// line that says so.
func (r *Report) writeFailureClasses(w io.Writer) {
	count := map[string]int{}
	var lines []string
	for _, in := range r.Incarnations {
		if in.FailureClass == "" {
			continue
		}
		count[in.FailureClass]++
		lines = append(lines, fmt.Sprintf("  restart %d, %s: %s: %s", in.Restart, in.End.UTC().Format("15:04:05Z"), in.FailureClass, in.FailureEvidence))
	}
	if len(lines) == 0 {
		return
	}
	var parts []string
	for _, c := range sortedKeys(count) {
		parts = append(parts, fmt.Sprintf("%s %d", c, count[c]))
	}
	fmt.Fprintf(w, "failed steps: %d (%s)\n%s\n", len(lines), strings.Join(parts, ", "), strings.Join(lines, "\n"))
}

// countHealth counts a node's failed health checks.
func (o *Observer) countHealth(e *Event) {
	for _, f := range e.FailedNodes {
		o.m.healthFailures.WithLabelValues(f.Node, orText(f.Cause, "unknown")).Inc()
	}
}

// writeHealth prints the nodes that failed the health pass.
func (r *Report) writeHealth(w io.Writer) {
	if len(r.Health) == 0 {
		return
	}
	fmt.Fprintf(w, "health: %d node check(s) failed, each node kept out of its step\n", len(r.Health))
	for _, e := range r.Health {
		for _, f := range e.FailedNodes {
			fmt.Fprintf(w, "  %s, restart %d, %s: node %s failed %s: %s\n", e.Time.UTC().Format("15:04:05Z"), e.Restart, orText(e.Why, "before a step"), f.Node, f.Cause, f.Detail)
		}
	}
}

// badputParts are a restart's badput parts, in order.
var badputParts = []string{"detect", "stop", "decide", "health", "relaunch", "first_step", "redone"}

// writeBadput prints each restart's breakdown and their mean.
func (r *Report) writeBadput(w io.Writer) {
	if len(r.Badput) == 0 {
		return
	}
	fmt.Fprintf(w, "restart badput (s): %-8s", "total")
	for _, p := range badputParts {
		fmt.Fprintf(w, " %10s", p)
	}
	fmt.Fprintln(w)
	sum := map[string]float64{}
	for i, e := range r.Badput {
		total := 0.0
		for _, p := range badputParts {
			total += e.Badput[p]
			sum[p] += e.Badput[p]
		}
		fmt.Fprintf(w, "  %-3d %s %8.1f", i+1, e.Time.UTC().Format("15:04:05Z"), total)
		for _, p := range badputParts {
			fmt.Fprintf(w, " %10.1f", e.Badput[p])
		}
		fmt.Fprintln(w)
	}
	if n := float64(len(r.Badput)); n > 1 {
		total := 0.0
		for _, p := range badputParts {
			total += sum[p]
		}
		fmt.Fprintf(w, "  mean          %8.1f", total/n)
		for _, p := range badputParts {
			fmt.Fprintf(w, " %10.1f", sum[p]/n)
		}
		fmt.Fprintln(w)
	}
}
