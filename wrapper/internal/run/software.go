package run

import (
	"fmt"

	"github.com/spf13/pflag"
	"github.com/trainrun/trainrun/plan"
	"github.com/trainrun/trainrun/plan/policy"
	"github.com/trainrun/trainrun/wrapper/internal/planflags"
)

// softwareInput is one of the planner's software inputs that the plugin's
// options also carry: its flag, the TRAINRUN_* twin the plugin exports for
// the batch script, and the policy key that gives its default.
type softwareInput struct {
	flag, env, option, key string
	value                  func(*planflags.Options) *string
	setting                func(policy.Settings) policy.Setting[string]
	canon                  func(string) (string, error) // parses; "" compares equal to the default
}

var softwareInputs = []softwareInput{
	{"stack", "TRAINRUN_STACK", "--train-stack", "Stack",
		func(o *planflags.Options) *string { return &o.Stack },
		func(s policy.Settings) policy.Setting[string] { return s.Stack },
		func(v string) (string, error) { st, err := plan.ParseStack(v); return string(st), err }},
	{"precision", "TRAINRUN_PRECISION", "--train-precision", "Precision",
		func(o *planflags.Options) *string { return &o.Precision },
		func(s policy.Settings) policy.Setting[string] { return s.Precision },
		func(v string) (string, error) { p, err := plan.ParsePrecision(v); return string(p), err }},
	{"finetune", "TRAINRUN_FINETUNE", "--train-finetune", "Finetune",
		func(o *planflags.Options) *string { return &o.Finetune },
		func(s policy.Settings) policy.Setting[string] { return s.Finetune },
		func(v string) (string, error) { f, err := plan.ParseFinetuneSpec(v); return f.String(), err }},
}

// planSoftware reports what complete found for the stack, precision and
// fine-tuning mode the planner assumes (Config.resolveSoftware): where
// each came from, or the first one refused.
func (r *runner) planSoftware() error {
	for _, n := range r.cfg.software {
		if n.err != nil {
			return n.err
		}
		if n.log != "" {
			r.logf("%s", n.log)
		}
	}
	return nil
}

// addSoftwareUsage says in run's help where --stack, --precision and
// --finetune come from when they are not given.
func addSoftwareUsage(fs *pflag.FlagSet) {
	for _, in := range softwareInputs {
		fs.Lookup(in.flag).Usage += fmt.Sprintf(" (default: %s, which the plugin's #SBATCH %s sets, else the partition's policy %s=)", in.env, in.option, in.key)
	}
}
