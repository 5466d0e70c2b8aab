package main

import (
	"github.com/spf13/pflag"
	"github.com/trainrun/trainrun/internal/slurm"
	"github.com/trainrun/trainrun/wrapper/internal/planflags"
)

// planPolicyOptions are trainrun plan's --policy and --partition: the
// site's trainrun.conf gives the partition's hardware defaults (NVMeBW for
// --nvme-bw) as it does for trainrun run inside the allocation.
type planPolicyOptions struct {
	file, partition string
}

func (o *planPolicyOptions) addFlags(fs *pflag.FlagSet, getenv func(string) string) {
	fs.StringVar(&o.file, "policy", getenv("TRAINRUN_POLICY"), "the site's trainrun.conf (env TRAINRUN_POLICY): the partition's NVMeBW is the default of --nvme-bw")
	fs.StringVar(&o.partition, "partition", slurm.JobFromEnv(getenv).Partition, "with --policy: the partition whose settings apply (env SLURM_JOB_PARTITION; a partition the policy does not name, or none, gets the site-wide ones)")
}

// apply sets what the policy gives to the plan's options where their
// flags are not given.
func (o *planPolicyOptions) apply(env *runEnv, fs *pflag.FlagSet, po *planOptions) error {
	if o.file == "" {
		po.calibrationDir(env.getenv, "")
		return nil
	}
	pf, err := planflags.LoadPolicy(o.file)
	if err != nil {
		return planflags.ReportPolicyErrors(env.stderr, o.file, err)
	}
	po.PolicyNVMeBW(fs.Changed("nvme-bw"), pf.Effective(o.partition))
	po.calibrationDir(env.getenv, pf.Effective(o.partition).Calibration.Value)
	return nil
}
