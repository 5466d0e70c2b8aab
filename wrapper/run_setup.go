// The setup phase of trainrun run: srun, the allocation, the site's policy,
// the job and checkpoint directories.

package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/trainrun/trainrun/internal/safefs"
	"github.com/trainrun/trainrun/internal/slurm"
	"github.com/trainrun/trainrun/plan/policy"
	"github.com/trainrun/trainrun/topo"
	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
)

// setup checks srun and reads the allocation.
func (r *runner) setup() error {
	if !slurm.HaveSrun() {
		if !r.opts.dryRun {
			return withCode(exitcode.Slurm, errors.New("srun not found in PATH: run trainrun on a node with the Slurm client commands (srun, scontrol) installed"))
		}
		r.logf("warning: srun not found in PATH; a real launch would fail (exit %d)", exitcode.Slurm)
	}
	a, err := parseAllocation(r.env.getenv, topo.ExpandHostlist)
	if err != nil {
		return err
	}
	if a.InStep {
		return withCode(exitcode.Slurm, fmt.Errorf("trainrun run is running inside a job step (SLURM_STEP_ID=%s): call it once from the batch script, not under srun; it starts the step itself", slurm.JobFromEnv(r.env.getenv).StepID))
	}
	r.alloc = a
	if r.self, err = os.Executable(); err != nil {
		return err
	}
	r.shim = leanShim(r.self, r.env.getenv("TRAINRUN_SHIM"))
	return r.applyPolicy()
}

// makeDirs makes the job and checkpoint directories; finished says that the
// run already finished (its store says so) and must not start again.
func (r *runner) makeDirs() (finished bool, err error) {
	a := r.alloc
	base := r.opts.jobDir
	if base == "" {
		sub := a.SubmitDir
		if sub == "" {
			sub, _ = os.Getwd()
		}
		base = filepath.Join(sub, "trainrun-"+a.JobID)
	}
	if base, err = filepath.Abs(base); err != nil {
		return false, err
	}
	if err := mkdirOwnUnlessDry(r.opts.dryRun, base); err != nil {
		return false, withCode(exitcode.Usage, fmt.Errorf("job directory %s: %w (set --job-dir or TRAINRUN_JOB_DIR to a writable directory all nodes share)", base, err))
	}
	primary, err := r.resolveRun(base)
	if err != nil {
		return false, err
	}
	r.ckptDir = r.opts.ckptDir
	if r.ckptDir == "" {
		r.ckptDir = filepath.Join(r.jobDir, "checkpoints")
		if err := mkdirOwnUnlessDry(r.opts.dryRun, r.ckptDir); err != nil {
			return false, withCode(exitcode.Usage, fmt.Errorf("default --ckpt-dir: %w", err))
		}
	} else if !primary && !r.fs.Changed("ckpt-dir") {
		// TRAINRUN_CKPT_DIR or the policy's CkptDir is the job's, shared by
		// every run in it: each run but the first gets its own store below.
		r.ckptDir = filepath.Join(r.ckptDir, "runs", r.runName)
	}
	if r.ckptDir, err = filepath.Abs(r.ckptDir); err != nil {
		return false, err
	}
	if err := mkdirUnlessDry(r.opts.dryRun, r.ckptDir); err != nil {
		return false, withCode(exitcode.Usage, fmt.Errorf("--ckpt-dir %s: %w", r.ckptDir, err))
	}
	if !r.opts.dryRun {
		return r.finishedBefore()
	}
	return false, nil
}

// mkdirOwnUnlessDry creates a directory trainrun makes for the user (the
// job directory, the default store under it) fresh with mode 0700, or
// accepts an existing one only when it is the user's own and not writable by
// others (issue 12, finding 3: a job directory another uid pre-created
// would let it plant launch files and checkpoints).
func mkdirOwnUnlessDry(dry bool, dir string) error {
	if dry {
		return nil
	}
	return safefs.MkdirOwn(dir, "directory")
}

func mkdirUnlessDry(dry bool, dir string) error {
	if dry {
		return nil
	}
	return os.MkdirAll(dir, 0o755)
}

// ckptSignalName is the checkpoint signal without "SIG", upper case.
func (r *runner) ckptSignalName() string {
	return strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(r.opts.ckptSignal)), "SIG")
}

// policyFlags maps run's flags to the policy keys that give their defaults.
var policyFlags = []struct{ flag, key string }{
	{"ckpt-signal", "CkptSignal"}, {"ckpt-lead", "CkptLead"}, {"max-requeue", "MaxRequeue"},
	{"max-failures", "MaxFailuresNoProgress"}, {"ckpt-dir", "CkptDir"}, {"ckpt-keep", "CkptKeep"}, {"ckpt-keep-every", "CkptKeepEvery"},
	{"ckpt-compress", "CkptCompress"}, {"hang-timeout", "HangTimeout"}, {"max-restarts", "MaxRestarts"}, {"spare-nodes", "SpareNodes"},
}

// applyPolicy reads the site's trainrun.conf (--policy) for the job's
// partition: its values are the defaults of the checkpoint flags, a flag the
// user sets must be one UserOverride allows, the checkpoint directory must
// lie under CkptRoots, and the NCCL settings shape each rank's environment.
func (r *runner) applyPolicy() error {
	if r.opts.policy == "" {
		return nil
	}
	pf, err := loadPolicyFile(r.opts.policy)
	if err != nil {
		return reportPolicyErrors(r.env.stderr, r.opts.policy, err)
	}
	st := pf.Effective(r.alloc.Partition)
	r.policyGPU = st.GPUType
	r.policy = &partPolicy{pol: pf, st: st, file: r.opts.policy}
	ov := st.UserOverride.Value
	for _, pfl := range policyFlags {
		if !r.fs.Changed(pfl.flag) {
			continue
		}
		allowed := ov.All
		for _, k := range ov.Keys {
			allowed = allowed || strings.EqualFold(k, pfl.key)
		}
		if !allowed {
			return usageErrorf("--%s: the site's policy (%s, %s) does not let users override %s (UserOverride=%s); drop the flag or ask the admins",
				pfl.flag, r.opts.policy, st.UserOverride.Source, pfl.key, ov)
		}
	}
	if !r.fs.Changed("ckpt-signal") && r.env.getenv("TRAINRUN_CKPT_SIGNAL") == "" && st.CkptSignal.Value != "" {
		r.opts.ckptSignal = st.CkptSignal.Value
	}
	if !r.fs.Changed("ckpt-lead") && st.CkptLead.Value > 0 {
		r.opts.plan.CkptLead = st.CkptLead.Value
		r.leadFixed = true // the policy's lead is used as given
	}
	if !r.fs.Changed("max-requeue") {
		r.opts.maxRequeue = st.MaxRequeue.Value
	}
	r.leadAdapt = st.CkptLeadAdapt.Value
	r.graceBudg = st.CkptGraceBudget.Value
	if !r.fs.Changed("ckpt-keep") {
		r.opts.ckptKeep = st.CkptKeep.Value
	}
	if !r.fs.Changed("ckpt-keep-every") {
		r.opts.ckptEvery = st.CkptKeepEvery.Value
	}
	if !r.fs.Changed("ckpt-compress") && st.CkptCompress.Value != "" {
		r.opts.compress = st.CkptCompress.Value
	}
	if !r.fs.Changed("max-failures") {
		r.opts.maxFailures = st.MaxFailuresNoProgress.Value
	}
	if !r.fs.Changed("ckpt-dir") && r.env.getenv("TRAINRUN_CKPT_DIR") == "" && st.CkptDir.Value != "" {
		user := slurm.JobFromEnv(r.env.getenv).User
		if user == "" {
			user = r.env.getenv("USER")
		}
		r.opts.ckptDir = policy.ExpandCkptDir(st.CkptDir.Value, user, r.alloc.JobID, slurm.JobFromEnv(r.env.getenv).Name)
	}
	if roots := st.CkptRoots.Value; roots != nil && r.opts.ckptDir != "" {
		dir, _ := filepath.Abs(r.opts.ckptDir)
		ok := false
		for _, root := range roots {
			ok = ok || dir == root || strings.HasPrefix(dir, strings.TrimSuffix(root, "/")+"/")
		}
		if !ok {
			return usageErrorf("--ckpt-dir %s is not under the checkpoint roots the site allows (%s: CkptRoots=%s); choose a directory below one of them",
				dir, st.CkptRoots.Source, strings.Join(roots, ","))
		}
	}
	r.ncclPolicy = st.NCCL()
	r.obsPolicy(st)
	r.faultPolicy(st)
	return nil
}
