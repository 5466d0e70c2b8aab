// Command libtrainrun-spank.so (built with -buildmode=c-shared; see the
// Makefile's spank target) is the Go half of trainrun's SPANK plugin.
//
// Slurm loads spank_trainrun.so (spank/plugin, plain C), which holds every
// slurm_spank_* entry point, the plugin's identity and the option table, and
// dlopen()s this library from its own directory the first time it needs Go
// (abi.h is the interface). A Go runtime loaded into a process that forks
// cannot be used in the child (golang/go#15538, #12873), and slurmd loads
// plugins before it daemonizes, so Go is loaded only in processes that do
// not fork after calling it, and only when there is work for it:
//
//	context    callback                  Go?  what
//	local      init                      no   register options (C table, options.h)
//	allocator  init                      no   (same)
//	local      option callbacks          yes  validate each --train-* value (reject = exit 255)
//	allocator  init_post_opt             if   twins given, or the config stamp does not match:
//	                                          load plugstack args + policy (broken + required
//	                                          = rejected), validate the TRAINRUN_* twins
//	remote     init                      no   register options (values arrive after init)
//	remote     option callbacks          no   store the value
//	remote     init_post_opt (batch)     no   export #SBATCH values as their twins to the script
//	remote     init_post_opt (step)      yes  topology (cached), policy, placement, every local
//	                                          task's environment -> C arrays; errors kept;
//	                                          config stamp written when the config loaded;
//	                                          user paths read as the job's user (spank/doc.go:
//	                                          a locked thread with the user's fs ids, and
//	                                          `trainrun __resume-dir` exec'd as the user)
//	remote     task_init (forked child)  no   spank_setenv the task's prepared array, or
//	                                          return the kept error (required: task fails;
//	                                          optional: Slurm only warns)
//	job_script job_epilog                yes  finish checkpoint drains the job's shims left
//	                                          (trainrun ckpt drain as the job's user,
//	                                          bounded); remove per-job files
//	slurmd     any                       no   never loaded there
//
// Nothing in remote context fails before the fork: a failing remote init or
// init_post_opt drains the node of a batch job. Every export recovers its
// panics into a "trainrun: <phase>: internal error" message. golib.map
// exports only trgo_*; the library calls Slurm only through the table of
// functions the C half lends it (trgo_bind), so it needs no Slurm headers.
package main
