package main

import (
	"fmt"

	"github.com/spf13/pflag"
	"github.com/trainrun/trainrun/plan"
	"github.com/trainrun/trainrun/plan/policy"
)

// partPolicy is the site's policy as trainrun run read it for the job's
// partition (nil without --policy).
type partPolicy struct {
	pol  *policy.Policy
	st   policy.Settings
	file string
}

// softwareInput is one of the planner's software inputs that the plugin's
// options also carry: its flag, the TRAINRUN_* twin the plugin exports for
// the batch script, and the policy key that gives its default.
type softwareInput struct {
	flag, env, option, key string
	value                  func(*planOptions) *string
	setting                func(policy.Settings) policy.Setting[string]
	canon                  func(string) (string, error) // parses; "" compares equal to the default
}

var softwareInputs = []softwareInput{
	{"stack", "TRAINRUN_STACK", "--train-stack", "Stack",
		func(o *planOptions) *string { return &o.Stack },
		func(s policy.Settings) policy.Setting[string] { return s.Stack },
		func(v string) (string, error) { st, err := plan.ParseStack(v); return string(st), err }},
	{"precision", "TRAINRUN_PRECISION", "--train-precision", "Precision",
		func(o *planOptions) *string { return &o.Precision },
		func(s policy.Settings) policy.Setting[string] { return s.Precision },
		func(v string) (string, error) { p, err := plan.ParsePrecision(v); return string(p), err }},
	{"finetune", "TRAINRUN_FINETUNE", "--train-finetune", "Finetune",
		func(o *planOptions) *string { return &o.Finetune },
		func(s policy.Settings) policy.Setting[string] { return s.Finetune },
		func(v string) (string, error) { r, err := plan.ParseFinetune(v); return fmt.Sprint(r), err }},
}

// planSoftware sets the stack, precision and fine-tuning mode the planner
// assumes: each from its flag, else its TRAINRUN_* twin (the plugin's
// #SBATCH --train-* option), else the partition's policy, else the flag's
// default; and --nvme-bw from the policy's NVMeBW where it is not given. A bad value is refused naming where it came from, and a value
// that differs from the policy's must be one UserOverride allows.
func (r *runner) planSoftware() error {
	po := &r.opts.plan
	for _, in := range softwareInputs {
		dst := in.value(po)
		var src string
		switch v := r.env.getenv(in.env); {
		case r.fs.Changed(in.flag):
			src = "--" + in.flag + " " + *dst
		case v != "":
			*dst, src = v, fmt.Sprintf("%s=%s (the twin of #SBATCH %s)", in.env, v, in.option)
		case r.policy != nil && in.setting(r.policy.st).Source.Kind != policy.FromDefault:
			s := in.setting(r.policy.st)
			*dst, src = s.Value, fmt.Sprintf("the policy's %s=%s (%s)", in.key, s.Value, s.Source)
		default:
			continue
		}
		got, err := in.canon(*dst)
		if err != nil {
			return usageErrorf("%s: %v", src, err)
		}
		if r.policy != nil {
			s := in.setting(r.policy.st)
			def, err := in.canon(s.Value)
			if err == nil && got != def && !r.policy.pol.MayOverride(in.key, r.alloc.Partition) {
				return usageErrorf("%s: the site's policy (%s) plans partition %s for %s=%s (%s) and does not let users override %s (UserOverride); drop it or ask the admins",
					src, r.policy.file, r.alloc.Partition, in.key, s.Value, s.Source, in.key)
			}
		}
		if !r.fs.Changed(in.flag) {
			r.logf("planning with %s %s, from %s", in.flag, *dst, src)
		}
	}
	if r.policy != nil {
		policyNVMeBW(po, r.fs.Changed("nvme-bw"), r.policy.st)
	}
	return nil
}

// policyNVMeBW makes the partition's NVMeBW (GB/s per node) the default of
// --nvme-bw; o.NVMeBW > 0 afterwards says that a bandwidth was given.
func policyNVMeBW(o *planOptions, flagGiven bool, st policy.Settings) {
	if !flagGiven && st.NVMeBW.Value > 0 {
		o.NVMeBW = st.NVMeBW.Value
	}
	policyMemoryMargin(o, st)
}

// addSoftwareUsage says in run's help where --stack, --precision and
// --finetune come from when they are not given.
func addSoftwareUsage(fs *pflag.FlagSet) {
	for _, in := range softwareInputs {
		fs.Lookup(in.flag).Usage += fmt.Sprintf(" (default: %s, which the plugin's #SBATCH %s sets, else the partition's policy %s=)", in.env, in.option, in.key)
	}
}
