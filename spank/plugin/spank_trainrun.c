/*
 * spank_trainrun.c: the Slurm-facing half of spank_trainrun.so.
 *
 * Every slurm_spank_* entry point lives here and switches on
 * spank_context(). Go (package main next to this file, built with
 * -buildmode=c-shared) is called only where measurements showed it safe:
 *
 *   local (srun) and allocator (sbatch, salloc): init, option callbacks,
 *       init_post_opt -- validation at submission;
 *   remote (slurmstepd), in the parent before any fork: init_post_opt --
 *       discovery and the per-task environment;
 *   job_script (epilog process): job_epilog -- per-job cleanup.
 *
 * Never in slurmd context (the daemon forked away the Go runtime's threads:
 * a blocking Go call hangs slurmd), never in task_init_privileged/task_init
 * (the forked task child: a Go call there can hang forever), never in
 * user_init/task_post_fork/task_exit (with contain_spank they run in a
 * clone(CLONE_VM) child). task_init only spank_setenv's what Go prepared.
 *
 * In remote context nothing fails before the fork (a failing remote
 * init/init_post_opt drains the node of a batch job): errors are kept and
 * returned from task_init, as pyxis does with user_init errors, where a
 * `required` plugin fails the task and an `optional` one only warns.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <slurm/slurm.h>
#include <slurm/spank.h>

#include "shim.h"
#include "_cgo_export.h"

/* Slurm's functions are resolved when srun, sbatch, slurmstepd or slurmd
 * loads the plugin. Weak references let `go build ./...` link this package
 * as a plain executable too (it is only ever used as the c-shared plugin). */
#pragma weak spank_context
#pragma weak spank_option_register
#pragma weak spank_get_item
#pragma weak spank_getenv
#pragma weak spank_setenv
#pragma weak slurm_error
#pragma weak slurm_info

SPANK_PLUGIN(trainrun, 1);

#define TR_MAX_OPTS 16

static int tr_nopts;
static char *tr_twin[TR_MAX_OPTS];  /* environment twin of each option */
static int tr_hasarg[TR_MAX_OPTS];
static char *tr_val[TR_MAX_OPTS];   /* value given (strdup), NULL = none */
static int tr_disabled;              /* local/allocator config failed */

/* Remote: kept for task_init. */
static char *tr_err;
static uint32_t tr_node_id;         /* this node's index in the step */
struct tr_task {
	int n, cap;
	char **keys, **vals;
	char *explain;
};
static struct tr_task *tr_task;
static int tr_ntasks;

void tr_log_error(const char *msg) { slurm_error("%s", msg); }
void tr_log_info(const char *msg) { slurm_info("%s", msg); }

int tr_getenv(spank_t sp, const char *name, char *buf, int len)
{
	if (!sp || spank_getenv(sp, name, buf, len) != ESPANK_SUCCESS)
		return 0;
	return 1;
}

int tr_setenv(spank_t sp, const char *name, const char *value, int overwrite)
{
	return spank_setenv(sp, name, value, overwrite) == ESPANK_SUCCESS ? 0 : -1;
}

const char *tr_opt_value(int idx)
{
	if (idx < 0 || idx >= tr_nopts)
		return NULL;
	return tr_val[idx];
}

static void tr_tasks_free(void)
{
	for (int i = 0; i < tr_ntasks; i++) {
		for (int j = 0; j < tr_task[i].n; j++) {
			free(tr_task[i].keys[j]);
			free(tr_task[i].vals[j]);
		}
		free(tr_task[i].keys);
		free(tr_task[i].vals);
		free(tr_task[i].explain);
	}
	free(tr_task);
	tr_task = NULL;
	tr_ntasks = 0;
}

int tr_tasks_reset(int n)
{
	tr_tasks_free();
	if (n <= 0)
		return 0;
	tr_task = calloc(n, sizeof(*tr_task));
	if (!tr_task)
		return -1;
	tr_ntasks = n;
	return 0;
}

int tr_task_add(int task, const char *key, const char *value)
{
	if (task < 0 || task >= tr_ntasks)
		return -1;
	struct tr_task *t = &tr_task[task];
	if (t->n == t->cap) {
		int cap = t->cap ? 2 * t->cap : 32;
		char **k = realloc(t->keys, cap * sizeof(char *));
		if (!k)
			return -1;
		t->keys = k;
		char **v = realloc(t->vals, cap * sizeof(char *));
		if (!v)
			return -1;
		t->vals = v;
		t->cap = cap;
	}
	t->keys[t->n] = strdup(key);
	t->vals[t->n] = strdup(value);
	if (!t->keys[t->n] || !t->vals[t->n])
		return -1;
	t->n++;
	return 0;
}

int tr_task_explain(int task, const char *text)
{
	if (task < 0 || task >= tr_ntasks)
		return -1;
	free(tr_task[task].explain);
	tr_task[task].explain = strdup(text);
	return tr_task[task].explain ? 0 : -1;
}

/* The job's user and group, (uint32_t)-1 where Slurm does not say. */
static void tr_job_ids(spank_t sp, uint32_t *uid, uint32_t *gid)
{
	uid_t u;
	gid_t g;
	*uid = *gid = (uint32_t)-1;
	if (spank_get_item(sp, S_JOB_UID, &u) == ESPANK_SUCCESS)
		*uid = (uint32_t)u;
	if (spank_get_item(sp, S_JOB_GID, &g) == ESPANK_SUCCESS)
		*gid = (uint32_t)g;
}

/* Errors come back from Go as malloc'd strings (C.CString). */
static int tr_report(char *msg)
{
	if (!msg)
		return 0;
	slurm_error("%s", msg);
	free(msg);
	return -1;
}

static void tr_keep_error(char *msg)
{
	if (!msg)
		return;
	free(tr_err);
	tr_err = msg;
}

/* One callback for every option; val is its index in spank.Options. */
static int tr_option_cb(int val, const char *optarg, int remote)
{
	if (val < 0 || val >= tr_nopts)
		return 0;
	const char *v = tr_hasarg[val] ? (optarg ? optarg : "") : "1";
	/* Idempotent: Slurm may call us twice with the same value. */
	if (!tr_val[val] || strcmp(tr_val[val], v) != 0) {
		free(tr_val[val]);
		tr_val[val] = strdup(v);
	}
	if (remote || tr_disabled)
		return 0; /* validated at submission; rechecked in init_post_opt */
	return tr_report(trgo_validate(val, (char *)v));
}

static int tr_register_options(spank_t sp)
{
	tr_nopts = trgo_option_count();
	if (tr_nopts > TR_MAX_OPTS)
		tr_nopts = TR_MAX_OPTS;
	for (int i = 0; i < tr_nopts; i++) {
		struct spank_option o = { 0 };
		char *name = NULL, *arginfo = NULL, *usage = NULL, *twin = NULL;
		int has_arg = 0;
		trgo_option(i, &name, &arginfo, &usage, &twin, &has_arg);
		o.name = name;
		o.arginfo = has_arg ? arginfo : NULL;
		o.usage = usage;
		o.has_arg = has_arg;
		o.val = i;
		o.cb = tr_option_cb;
		tr_twin[i] = twin;
		tr_hasarg[i] = has_arg;
		if (spank_option_register(sp, &o) != ESPANK_SUCCESS) {
			slurm_error("trainrun: init: cannot register --%s", name);
			return -1;
		}
	}
	return 0;
}

int slurm_spank_init(spank_t sp, int ac, char **av)
{
	switch (spank_context()) {
	case S_CTX_LOCAL:
	case S_CTX_ALLOCATOR:
		if (tr_register_options(sp) != 0)
			return -1;
		if (tr_report(trgo_local_init(ac, av)) != 0) {
			tr_disabled = 1;
			return -1;
		}
		return 0;
	case S_CTX_REMOTE:
		/* Options must be registered here for the remote callbacks to run;
		 * nothing else: option values arrive after init. */
		tr_register_options(sp);
		return 0;
	default:
		return 0; /* slurmd: no Go, ever. job_script: see job_epilog. */
	}
}

int slurm_spank_init_post_opt(spank_t sp, int ac, char **av)
{
	switch (spank_context()) {
	case S_CTX_LOCAL:
	case S_CTX_ALLOCATOR:
		if (tr_disabled)
			return 0;
		return tr_report(trgo_local_post_opt());
	case S_CTX_REMOTE: {
		uint32_t step = 0;
		if (spank_get_item(sp, S_JOB_STEPID, &step) != ESPANK_SUCCESS)
			return 0;
		if (step == SLURM_EXTERN_CONT || step == SLURM_INTERACTIVE_STEP)
			return 0;
		if (step == SLURM_BATCH_SCRIPT) {
			/* #SBATCH --train-*: hand the values to the script's srun
			 * steps through their environment twins. */
			for (int i = 0; i < tr_nopts; i++)
				if (tr_val[i] && tr_twin[i])
					spank_setenv(sp, tr_twin[i], tr_val[i], 1);
			return 0;
		}
		struct tr_step st = { 0 };
		st.step_id = step;
		spank_get_item(sp, S_JOB_ID, &st.job_id);
		spank_get_item(sp, S_JOB_NNODES, &st.nnodes);
		spank_get_item(sp, S_JOB_NODEID, &st.node_id);
		spank_get_item(sp, S_JOB_LOCAL_TASK_COUNT, &st.local_tasks);
		spank_get_item(sp, S_JOB_TOTAL_TASK_COUNT, &st.total_tasks);
		spank_get_item(sp, S_SLURM_RESTART_COUNT, &st.restart);
		tr_job_ids(sp, &st.uid, &st.gid);
		tr_node_id = st.node_id;
		tr_keep_error(trgo_remote_post_opt(sp, &st, ac, av));
		return 0; /* never fail here: see the top of this file */
	}
	default:
		return 0;
	}
}

/* In the forked task child: plain C only. */
int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
	int id = -1;
	if (spank_context() != S_CTX_REMOTE)
		return 0;
	if (spank_get_item(sp, S_TASK_ID, &id) != ESPANK_SUCCESS)
		return 0;
	if (tr_err) {
		/* One line per step (node 0, task 0), not one per task. */
		if (id == 0 && tr_node_id == 0)
			slurm_error("%s", tr_err);
		return -1;
	}
	if (id < 0 || id >= tr_ntasks)
		return 0;
	struct tr_task *t = &tr_task[id];
	for (int j = 0; j < t->n; j++) {
		if (spank_setenv(sp, t->keys[j], t->vals[j], 1) != ESPANK_SUCCESS) {
			slurm_error("trainrun: task_init: cannot set %s", t->keys[j]);
			return -1;
		}
	}
	if (t->explain) {
		size_t len = strlen(t->explain), off = 0;
		while (off < len) {
			ssize_t w = write(STDERR_FILENO, t->explain + off, len - off);
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0)
				break;
			off += (size_t)w;
		}
	}
	return 0;
}

/* job_script context: a fresh process; Go is safe (Go's os/exec starts the
 * drains; nothing forks Go state after).
 *
 * Slurm 22.05 gives S_JOB_ID, S_JOB_UID and S_JOB_GID in job_script context
 * (checked on the harness's 22.05.8 with a job of a non-root user: the
 * epilog got its uid). Should a release not, the ids stay (uint32_t)-1 and Go
 * takes the owner of the job's handoff directory, which the step callbacks
 * gave to the job's user (S_JOB_UID in remote context), and says so in the
 * log; an id that is not that owner drains nothing. */
int slurm_spank_job_epilog(spank_t sp, int ac, char **av)
{
	uint32_t job = 0, uid, gid;
	if (spank_context() != S_CTX_JOB_SCRIPT)
		return 0;
	if (spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS)
		return 0;
	tr_job_ids(sp, &uid, &gid);
	char *msg = trgo_job_epilog(job, uid, gid, ac, av);
	if (msg) {
		slurm_error("%s", msg); /* logged; an epilog failure would drain */
		free(msg);
	}
	return 0;
}
