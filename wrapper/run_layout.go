package main

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/trainrun/trainrun/plan"
)

// fixedLayout parses --fix for `trainrun run` when every degree it needs is
// pinned or derivable: dp defaults to world/(tp·pp·cp), mbs to 1, and
// grad_accum comes from --global-batch. Keys as in PRODUCT.md.
func fixedLayout(fix string, world, globalBatch int) (plan.Layout, error) {
	l := plan.Layout{TP: 1, PP: 1, VPP: 1, CP: 1, EP: 1, MicroBatch: 1, Recompute: "none", Zero: 0, Offload: "none"}
	dpSet := false
	for _, kv := range strings.Split(fix, ",") {
		kv = strings.TrimSpace(kv)
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return l, usageErrorf("--fix %q: %q is not key=value (keys: tp pp vpp cp ep dp mbs recompute zero sp offload)", fix, kv)
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		num := func() (int, error) {
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				return 0, usageErrorf("--fix %s=%q: want a positive integer", k, v)
			}
			return n, nil
		}
		var err error
		switch k {
		case "tp":
			l.TP, err = num()
		case "pp":
			l.PP, err = num()
		case "vpp":
			l.VPP, err = num()
		case "cp":
			l.CP, err = num()
		case "ep":
			l.EP, err = num()
		case "dp":
			l.DP, err = num()
			dpSet = true
		case "mbs", "micro_batch":
			l.MicroBatch, err = num()
		case "recompute":
			if v != "none" && v != "selective" && v != "full" {
				return l, usageErrorf("--fix recompute=%q: want none, selective or full", v)
			}
			l.Recompute = v
		case "zero":
			n, e := strconv.Atoi(v)
			if e != nil || n < 0 || n > 3 {
				return l, usageErrorf("--fix zero=%q: want 0, 1, 2 or 3", v)
			}
			l.Zero = n
		case "sp":
			b, e := strconv.ParseBool(v)
			if e != nil {
				return l, usageErrorf("--fix sp=%q: want true or false", v)
			}
			l.SP = b
		case "offload":
			if v != "none" && v != "optimizer" && v != "params" {
				return l, usageErrorf("--fix offload=%q: want none, optimizer or params", v)
			}
			l.Offload = v
		default:
			return l, usageErrorf("--fix: unknown key %q; accepted: tp pp vpp cp ep dp mbs recompute zero sp offload", k)
		}
		if err != nil {
			return l, err
		}
	}
	model := l.TP * l.PP * l.CP
	if !dpSet {
		if world%model != 0 {
			return l, withCode(ExitNoFit, fmt.Errorf("--fix %q: tp×pp×cp = %d does not divide the %d GPUs of the allocation; "+
				"choose degrees whose product divides %d, or ask for a multiple of %d GPUs", fix, model, world, world, model))
		}
		l.DP = world / model
	}
	if got := model * l.DP; got != world {
		return l, withCode(ExitNoFit, fmt.Errorf("--fix %q: tp×pp×cp×dp = %d but the allocation has %d GPUs (one process per GPU); "+
			"drop dp= to derive it, or change the degrees", fix, got, world))
	}
	if l.EP > 1 && (l.DP*l.CP)%l.EP != 0 {
		return l, withCode(ExitNoFit, fmt.Errorf("--fix %q: ep=%d must divide dp×cp=%d (Megatron takes expert-parallel ranks from the data-parallel ones)", fix, l.EP, l.DP*l.CP))
	}
	l.GradAccum = 1
	if globalBatch > 0 {
		per := l.MicroBatch * l.DP
		if globalBatch%per != 0 {
			return l, withCode(ExitNoFit, fmt.Errorf("--global-batch %d is not a multiple of micro_batch×dp = %d×%d = %d", globalBatch, l.MicroBatch, l.DP, per))
		}
		l.GradAccum = globalBatch / per
	}
	return l, nil
}

// planFile is the subset of `trainrun plan --format json` that `--plan FILE` needs.
type planFile struct {
	Plan *plan.Evaluation `json:"plan"`
}

// readRunPlan loads a plan written by `trainrun plan --format json`.
func readRunPlan(path string, world int) (*plan.Evaluation, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, usageErrorf("--plan %s: %v", path, err)
	}
	var pf planFile
	if err := json.Unmarshal(b, &pf); err != nil {
		return nil, usageErrorf("--plan %s: not the JSON of 'trainrun plan --format json': %v", path, err)
	}
	if pf.Plan == nil {
		return nil, withCode(ExitNoFit, fmt.Errorf("--plan %s: \"plan\" is null (nothing fitted when it was planned; see its \"rejected\")", path))
	}
	l := pf.Plan.Layout
	if l.TP <= 0 || l.PP <= 0 || l.CP <= 0 || l.DP <= 0 {
		return nil, usageErrorf("--plan %s: tp=%d pp=%d cp=%d dp=%d: every degree must be positive", path, l.TP, l.PP, l.CP, l.DP)
	}
	if n := l.TP * l.PP * l.CP * l.DP; n != world {
		return nil, withCode(ExitNoFit, fmt.Errorf("--plan %s: tp×pp×cp×dp = %d GPUs but the allocation has %d; plan again for %d GPUs or change the allocation",
			path, n, world, world))
	}
	if pf.Plan.Memory.Capacity > 0 && !pf.Plan.Memory.Fits {
		return nil, withCode(ExitNoFit, fmt.Errorf("--plan %s: the plan does not fit: needs %.1f GiB per GPU, capacity %.1f GiB",
			path, pf.Plan.Memory.PerGPU/(1<<30), pf.Plan.Memory.Capacity/(1<<30)))
	}
	return pf.Plan, nil
}

// templateNames are the placeholders PRODUCT.md defines for the user's command.
var templateNames = []string{"tp", "pp", "vpp", "cp", "ep", "dp", "micro_batch", "grad_accum", "resume", "ckpt_dir", "megatron_args"}

var templateRE = regexp.MustCompile(`\{[a-z_]+\}`)

// substituteTemplates replaces the placeholders in argv. An argument that is
// exactly {megatron_args} becomes one argument per flag; inside a longer
// argument (bash -c "...") the flags are joined with spaces. Unknown {words}
// are left alone (they may be the program's own syntax) and returned so the
// caller can warn about likely typos.
func substituteTemplates(argv []string, vals map[string]string, megatron []string) (out []string, unknown []string) {
	seen := map[string]bool{}
	for _, a := range argv {
		if a == "{megatron_args}" {
			out = append(out, megatron...)
			continue
		}
		s := templateRE.ReplaceAllStringFunc(a, func(m string) string {
			name := m[1 : len(m)-1]
			if name == "megatron_args" {
				return strings.Join(megatron, " ")
			}
			if v, ok := vals[name]; ok {
				return v
			}
			if !seen[m] {
				seen[m] = true
				unknown = append(unknown, m)
			}
			return m
		})
		out = append(out, s)
	}
	sort.Strings(unknown)
	return out, unknown
}

// templateValues gives each placeholder's value for a layout.
func templateValues(l plan.Layout, resume, ckptDir string) map[string]string {
	return map[string]string{
		"tp": strconv.Itoa(l.TP), "pp": strconv.Itoa(l.PP), "vpp": strconv.Itoa(max(l.VPP, 1)),
		"cp": strconv.Itoa(l.CP), "ep": strconv.Itoa(l.EP), "dp": strconv.Itoa(l.DP),
		"micro_batch": strconv.Itoa(l.MicroBatch), "grad_accum": strconv.Itoa(l.GradAccum),
		"resume": resume, "ckpt_dir": ckptDir,
	}
}

// megatronArgsFallback renders the layout as Megatron-LM flags. It is used
// until the planner's plan.MegatronArgs is available in this build.
func megatronArgsFallback(l plan.Layout) []string {
	a := []string{
		"--tensor-model-parallel-size", strconv.Itoa(l.TP),
		"--pipeline-model-parallel-size", strconv.Itoa(l.PP),
	}
	if l.VPP > 1 {
		a = append(a, "--num-virtual-stages-per-pipeline-rank", strconv.Itoa(l.VPP))
	}
	if l.CP > 1 {
		a = append(a, "--context-parallel-size", strconv.Itoa(l.CP))
	}
	if l.EP > 1 {
		a = append(a, "--expert-model-parallel-size", strconv.Itoa(l.EP))
	}
	a = append(a, "--micro-batch-size", strconv.Itoa(l.MicroBatch),
		"--global-batch-size", strconv.Itoa(l.MicroBatch*l.DP*l.GradAccum))
	if l.SP && l.TP > 1 {
		a = append(a, "--sequence-parallel")
	}
	switch l.Recompute {
	case "selective":
		a = append(a, "--recompute-granularity", "selective")
	case "full":
		a = append(a, "--recompute-granularity", "full", "--recompute-method", "uniform")
	}
	if l.Zero >= 1 {
		a = append(a, "--use-distributed-optimizer")
	}
	return a
}
