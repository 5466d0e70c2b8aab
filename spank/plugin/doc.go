// Command spank_trainrun.so (built with -buildmode=c-shared; see the
// Makefile's spank target) is trainrun's SPANK plugin.
//
// spank_trainrun.c holds every slurm_spank_* entry point and the plugin's
// identity (SPANK_PLUGIN), and switches on spank_context(). The exported Go
// functions in main.go are called only from callbacks that run in a parent
// process Slurm does not fork afterwards, because a Go runtime loaded into a
// process that forks cannot be used in the child (golang/go#15538, #12873):
//
//	context    callback                  Go?  what
//	local      init                      yes  register options; load plugstack args + policy
//	allocator  init                      yes  (a broken policy fails submission if required)
//	local      option callbacks          yes  validate each --train-* value (reject = exit 255)
//	allocator  init_post_opt             yes  validate the TRAINRUN_* twins of options not given
//	remote     init                      no   register options (values arrive after init)
//	remote     option callbacks          no   store the value
//	remote     init_post_opt (batch)     no   export #SBATCH values as their twins to the script
//	remote     init_post_opt (step)      yes  topology (cached), policy, placement, every local
//	                                          task's environment -> C arrays; errors kept
//	remote     task_init (forked child)  no   spank_setenv the task's prepared array, or
//	                                          return the kept error (required: task fails;
//	                                          optional: Slurm only warns)
//	job_script job_epilog                yes  finish checkpoint drains the job's shims left
//	                                          (trainrun ckpt drain as the job's user,
//	                                          bounded); remove per-job files
//	slurmd     init                      no   slurmd daemonized after loading us: the Go
//	                                          runtime's threads are gone there
//
// Nothing in remote context fails before the fork: a failing remote init or
// init_post_opt drains the node of a batch job. Every export recovers its
// panics into a "trainrun: <phase>: internal error" message. The version
// script spank_trainrun.map exports only plugin_* and slurm_spank_*.
package main
