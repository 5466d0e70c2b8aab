package lossspike

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Steps is a set of step numbers as ranges, the value of
// TRAINRUN_SKIP_STEPS: "57-63,120-121,200" (inclusive, ascending, not
// overlapping). A step is the number the trainer reports after it
// (report_progress(step)): the trainer skips the optimizer step it would
// report as S, still drawing its batch, so the data that follows is the
// same as without the skip.
type Steps []Range

// Range is lo..hi inclusive.
type Range struct{ Lo, Hi int64 }

// ParseSteps reads the variable's format; "" is the empty set.
func ParseSteps(s string) (Steps, error) {
	var out Steps
	for _, part := range strings.Split(strings.TrimSpace(s), ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(part, "-")
		a, err1 := strconv.ParseInt(lo, 10, 64)
		b := a
		var err2 error
		if isRange {
			b, err2 = strconv.ParseInt(hi, 10, 64)
		}
		if err1 != nil || err2 != nil || a < 1 || b < a {
			return nil, fmt.Errorf("skip steps %q: %q is not a step (1, 2, ...) or a range LO-HI with LO <= HI", s, part)
		}
		out = out.Add(a, b)
	}
	return out, nil
}

// Add returns the set with lo..hi added (merged with what it touches).
func (s Steps) Add(lo, hi int64) Steps {
	out := append(slices.Clone(s), Range{lo, hi})
	slices.SortFunc(out, func(a, b Range) int { return int(min(max(a.Lo-b.Lo, -1), 1)) })
	merged := out[:0]
	for _, r := range out {
		if n := len(merged); n > 0 && r.Lo <= merged[n-1].Hi+1 {
			merged[n-1].Hi = max(merged[n-1].Hi, r.Hi)
			continue
		}
		merged = append(merged, r)
	}
	return merged
}

// Contains says whether step is skipped.
func (s Steps) Contains(step int64) bool {
	for _, r := range s {
		if step >= r.Lo && step <= r.Hi {
			return true
		}
	}
	return false
}

func (s Steps) String() string {
	parts := make([]string, len(s))
	for i, r := range s {
		if r.Lo == r.Hi {
			parts[i] = strconv.FormatInt(r.Lo, 10)
		} else {
			parts[i] = fmt.Sprintf("%d-%d", r.Lo, r.Hi)
		}
	}
	return strings.Join(parts, ",")
}
