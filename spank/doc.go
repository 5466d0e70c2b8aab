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
//
// # The rule for root context
//
// In root context (slurmstepd before it forks the tasks, the job epilog),
// trainrun opens nothing a user can name or create with root's credentials:
//
//   - a path the user names (--train-model / TRAINRUN_MODEL's config.json)
//     is opened by ReadUserFile on an OS thread of its own that carries the
//     job's uid, gid and groups for file access (setgroups, setfsgid,
//     setfsuid, raw per-thread system calls) and is discarded after; the
//     open is O_NOFOLLOW|O_NONBLOCK (links resolved as the user first), only
//     a regular file is read, through plan.MaxConfigBytes;
//   - the checkpoint store (.trainrun/latest, listings, manifests, for
//     TRAINRUN_RESUME_DIR) is read by `trainrun __resume-dir` run as the
//     job's user (ResumeDirAs), killed at resume_timeout=, its answer
//     checked (a directory under the store) and its notes capped: a FIFO or
//     a huge manifest costs the user's process, not slurmstepd;
//   - drain records in the job's handoff directory (the user's) are read as
//     the user, and the drain runs as the user (JobEpilog);
//   - what the user cannot read never reaches an error or a note: every
//     message about a user path comes from a read the user could have made.
//
// Values from the job's environment are the user's too: %u comes from the
// job's uid (getpwuid, UserName), never SLURM_JOB_USER; %u, %x and %j may
// not hold '/', "..", NUL, be "." or empty, and the expanded CkptDir is
// checked against CkptRoots again (policy.ExpandCkptDirChecked); the node
// list is expanded within topo's caps (255-byte names, 16 MiB in all) and
// never becomes a file name; degrees, batch and config.json figures are
// capped (plan/limits.go). Root writes only under cache= (refused unless
// root's and not writable by others): its own caches 0600, a job's files
// 0600 owned by the job's user. Go code never runs in a child slurmstepd
// forks: helpers are started with os/exec (fork then exec).
package spank
