/* shim.h: the C side the Go half of spank_trainrun.so calls. Everything
 * here is safe to call in the parent callbacks only; the task callbacks in
 * spank_trainrun.c read what these functions stored. */
#ifndef TRAINRUN_SHIM_H
#define TRAINRUN_SHIM_H

#include <stdint.h>
#include <slurm/spank.h>

/* The step as slurmstepd knows it before forking the tasks. uid/gid: the
 * job's user (S_JOB_UID/S_JOB_GID; (uint32_t)-1 when Slurm gave none). */
struct tr_step {
	uint32_t job_id, step_id, nnodes, node_id, local_tasks, total_tasks, restart;
	uint32_t uid, gid;
};

/* Logging: cgo cannot call Slurm's variadic functions. */
void tr_log_error(const char *msg);
void tr_log_info(const char *msg);

/* The job's environment (remote). Returns 1 when set, 0 when not. */
int tr_getenv(spank_t sp, const char *name, char *buf, int len);
/* Set a variable of the job's environment (remote, before the fork). */
int tr_setenv(spank_t sp, const char *name, const char *value, int overwrite);
/* The value an option callback stored, or NULL. */
const char *tr_opt_value(int idx);

/* The per-task environment task_init applies. tr_tasks_reset(n) drops what
 * was there and prepares n local tasks. */
int tr_tasks_reset(int n);
int tr_task_add(int task, const char *key, const char *value);
int tr_task_explain(int task, const char *text);

#endif
