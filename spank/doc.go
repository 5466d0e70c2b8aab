// Package spank is the behaviour of the SPANK plugin spank_trainrun.so, in
// plain testable Go: the plugstack.conf arguments (ParseArgs), the --train-*
// options and their TRAINRUN_* twins (Options, Validate, Resolve), the
// per-node topology cache (NodeTopology), and the environment of every local
// task of a step (ComputeStep), computed with the same plan.Place and
// plan.RankEnv that `trainrun env` uses, and the job epilog (JobEpilog):
// the drains of node-local checkpoints that a killed shim left are finished
// from the records it wrote into the job's handoff directory (PrepareJobDir,
// TRAINRUN_HANDOFF_DIR), by `trainrun ckpt drain` run as the job's user.
//
// The plugin itself has two halves: spank/plugin, the C spank_trainrun.so
// that Slurm loads (every slurm_spank_* symbol, the option table), and
// spank/golib, the Go libtrainrun-spank.so it dlopen()s where Go is needed:
// option callbacks and init_post_opt in srun/sbatch/salloc, init_post_opt
// of a step in slurmstepd before it forks the tasks, the job epilog. Never
// slurmd, never a task child: the task callbacks are C that only
// spank_setenv what ComputeStep prepared. See spank/golib/doc.go for why.
package spank
