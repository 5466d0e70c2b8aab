package run

import (
	"fmt"
	"maps"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/trainrun/trainrun/plan"
	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
	"github.com/trainrun/trainrun/wrapper/internal/planjson"
)

// ReadRunPlan loads a plan written by `trainrun plan --format json`.
func ReadRunPlan(path string, world int) (*plan.Evaluation, error) {
	b, err := planjson.ReadFile(path)
	if err != nil {
		return nil, usageErrorf("--plan %s: %v", path, err)
	}
	pf, err := planjson.Decode(b) // the layout's fields checked: they reach every rank's environment
	if err != nil {
		return nil, usageErrorf("--plan %s: %v", path, err)
	}
	if pf.Plan == nil {
		return nil, withCode(exitcode.NoFit, fmt.Errorf("--plan %s: \"plan\" is null (nothing fitted when it was planned; see its \"rejected\")", path))
	}
	l := pf.Plan.Layout
	if l.TP <= 0 || l.PP <= 0 || l.CP <= 0 || l.DP <= 0 {
		return nil, usageErrorf("--plan %s: tp=%d pp=%d cp=%d dp=%d: every degree must be positive", path, l.TP, l.PP, l.CP, l.DP)
	}
	if n := l.TP * l.PP * l.CP * l.DP; n != world {
		return nil, withCode(exitcode.NoFit, fmt.Errorf("--plan %s: tp×pp×cp×dp = %d GPUs but the allocation has %d; plan again for %d GPUs or change the allocation",
			path, n, world, world))
	}
	if pf.Plan.Memory.Capacity > 0 && !pf.Plan.Memory.Fits {
		return nil, withCode(exitcode.NoFit, fmt.Errorf("--plan %s: the plan does not fit: needs %.1f GiB per GPU, capacity %.1f GiB",
			path, pf.Plan.Memory.PerGPU/(1<<30), pf.Plan.Memory.Capacity/(1<<30)))
	}
	return pf.Plan, nil
}

// TemplateNames are the placeholders PRODUCT.md defines for the user's command.
var TemplateNames = []string{"tp", "pp", "vpp", "cp", "ep", "dp", "micro_batch", "grad_accum", "resume", "ckpt_dir", "megatron_args", "deepspeed_config", "torchtitan_args"}

var templateRE = regexp.MustCompile(`\{[a-z_]+\}`)

// substituteTemplates replaces the placeholders in argv. An argument that is
// exactly {megatron_args} becomes one argument per flag; inside a longer
// argument (bash -c "...") the flags are joined with spaces, each
// shell-quoted where a shell would split or expand it. Unknown {words}
// are left alone (they may be the program's own syntax) and returned so the
// caller can warn about likely typos.
func substituteTemplates(argv []string, vals map[string]string, megatron []string, lists ...map[string][]string) (out []string, unknown []string) {
	words := map[string][]string{"megatron_args": megatron} // and {torchtitan_args}, the same way
	for _, l := range lists {
		maps.Copy(words, l)
	}
	seen := map[string]bool{}
	for _, a := range argv {
		if w, ok := words[strings.Trim(a, "{}")]; ok && a == "{"+strings.Trim(a, "{}")+"}" {
			out = append(out, w...)
			continue
		}
		s := templateRE.ReplaceAllStringFunc(a, func(m string) string {
			name := m[1 : len(m)-1]
			if w, ok := words[name]; ok {
				return plan.ShellJoin(w)
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
