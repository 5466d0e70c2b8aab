package plan

import (
	"fmt"
	"strconv"
	"strings"
)

// DegreeKeys are the keys ParseDegrees accepts.
const DegreeKeys = "tp pp vpp cp ep dp mbs grad_accum recompute"

// ParseDegrees reads a layout written as "tp=8,pp=2,dp=4,recompute=selective"
// over base, as `trainrun env --fix`, `trainrun run --fix` without a model and
// the plugin's --train-layout take it. dpSet says whether dp was given (the
// callers derive it from the GPU count otherwise).
func ParseDegrees(s string, base Layout) (l Layout, dpSet bool, err error) {
	l = base
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok {
			return l, dpSet, fmt.Errorf("%q is not key=value (keys: %s)", kv, DegreeKeys)
		}
		if k == "recompute" {
			switch v {
			case "none", "selective", "full":
				l.Recompute = v
				continue
			}
			return l, dpSet, fmt.Errorf("recompute=%q: accepted: none, selective, full", v)
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return l, dpSet, fmt.Errorf("%s=%q: want a positive integer", k, v)
		}
		switch k {
		case "tp":
			l.TP = n
		case "pp":
			l.PP = n
		case "vpp":
			l.VPP = n
		case "cp":
			l.CP = n
		case "ep":
			l.EP = n
		case "dp":
			l.DP, dpSet = n, true
		case "mbs":
			l.MicroBatch = n
		case "grad_accum", "grad-accum":
			l.GradAccum = n
		default:
			return l, dpSet, fmt.Errorf("unknown key %q; accepted: %s", k, DegreeKeys)
		}
	}
	return l, dpSet, CheckLayoutLimits(l)
}
