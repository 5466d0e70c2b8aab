/* abi.h: the interface between the two halves of trainrun's SPANK plugin.
 *
 *   spank_trainrun.so      C only (spank/plugin): every slurm_spank_* entry
 *                          point, the option table, the per-task arrays that
 *                          task_init applies. What Slurm loads.
 *   libtrainrun-spank.so   Go (spank/golib, -buildmode=c-shared): config,
 *                          policy, topology, placement, the per-task
 *                          environment, the job epilog. dlopen()ed by the C
 *                          half from its own directory only where Go is
 *                          needed and safe, so slurmd, an srun or sbatch that
 *                          uses no --train-* option, the batch step and the
 *                          forked task children never have a Go runtime.
 *
 * The Go half never calls Slurm: everything it needs from Slurm or from the
 * C half's state goes through struct tr_ops, handed over by trgo_bind. Both
 * halves check TR_ABI_VERSION, so a mixed install fails with a message
 * instead of calling through a wrong layout.
 */
#ifndef TRAINRUN_ABI_H
#define TRAINRUN_ABI_H

#include <stdint.h>

#define TR_ABI_VERSION 2

/* The file name of the Go half, looked for next to spank_trainrun.so. */
#define TR_GOLIB_NAME "libtrainrun-spank.so"

/* The step as slurmstepd knows it before forking the tasks. */
struct tr_step {
	uint32_t job_id, step_id, nnodes, node_id, local_tasks, total_tasks, restart;
	uint32_t uid, gid; /* the job's user; (uint32_t)-1 when Slurm gave none */
	/* Set by the Go half: 1 once plugstack.conf's arguments and the files
	 * they name (policy, topology) loaded without error. */
	int32_t config_ok;
};

/* What the C half lends the Go half. sp is the spank_t of the callback in
 * progress (opaque to Go). */
struct tr_ops {
	void (*log_error)(const char *msg);
	void (*log_info)(const char *msg);
	/* The job's environment (remote). 1 when set, 0 when not. */
	int (*getenv)(void *sp, const char *name, char *buf, int len);
	/* The value an option callback stored, or NULL. */
	const char *(*opt_value)(int idx);
	/* The per-task environment task_init applies: tasks_reset(n) drops what
	 * was there and prepares n local tasks. 0 on success. */
	int (*tasks_reset)(int n);
	int (*task_add)(int task, const char *key, const char *value);
	int (*task_explain)(int task, const char *text);
};

/* The Go half's exports (spank/golib/main.go). Messages are malloc'd; the
 * caller frees them; NULL means success. */
typedef int (*trgo_abi_version_fn)(void);
typedef int (*trgo_option_count_fn)(void);
typedef void (*trgo_bind_fn)(const struct tr_ops *ops);
typedef char *(*trgo_local_init_fn)(int ac, char **av);
typedef char *(*trgo_validate_fn)(int idx, char *val);
typedef char *(*trgo_local_post_opt_fn)(void);
typedef char *(*trgo_remote_post_opt_fn)(void *sp, struct tr_step *st, int ac, char **av);
typedef char *(*trgo_job_epilog_fn)(uint32_t job, uint32_t uid, uint32_t gid, int ac, char **av);

/* In the Go half: calls through the bound ops (spank/golib/ops.c). */
void tr_log_error(const char *msg);
void tr_log_info(const char *msg);
int tr_getenv(void *sp, const char *name, char *buf, int len);
const char *tr_opt_value(int idx);
int tr_tasks_reset(int n);
int tr_task_add(int task, const char *key, const char *value);
int tr_task_explain(int task, const char *text);
void tr_set_ops(const struct tr_ops *ops);

#endif
