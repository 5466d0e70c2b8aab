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
// The plugin itself is spank/plugin (package main, built with
// -buildmode=c-shared): a C file owns every slurm_spank_* symbol and calls
// into this package only from the parent's callbacks (init, init_post_opt,
// option callbacks, job_epilog), never from slurmd context and never after
// slurmstepd forks a task: the task callbacks are C that only spank_setenv
// what ComputeStep prepared. See spank/plugin/doc.go for why.
package spank
