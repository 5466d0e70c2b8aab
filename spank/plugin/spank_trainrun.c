/*
 * spank_trainrun.c: trainrun's SPANK plugin, the half Slurm loads.
 *
 * Plain C. Every slurm_spank_* entry point lives here and switches on
 * spank_context(). The Go half (libtrainrun-spank.so, spank/golib: config,
 * policy, topology, placement, the per-task environment, the job epilog) is
 * dlopen()ed from this file's own directory the first time it is needed, and
 * only where measurements showed Go safe:
 *
 *   local (srun), allocator (sbatch, salloc): when a --train-* option or a
 *       TRAINRUN_* twin is given (validation at submission), or when the
 *       plugstack arguments and policy were not yet seen to load on this
 *       node (the config stamp below);
 *   remote (slurmstepd), in the parent before any fork: init_post_opt of a
 *       job step -- discovery and the per-task environment;
 *   job_script (epilog process): job_epilog -- finish the checkpoint drains
 *       the job's shims left, as the job's user, bounded; per-job files.
 *
 * Never in slurmd (it loaded us before daemonizing: a Go runtime there
 * would have lost its threads, and a blocking Go call hung slurmd), never in
 * the batch or extern step, never in task_init_privileged/task_init (the
 * forked task child: a Go call there can hang forever), never in
 * user_init/task_post_fork/task_exit (with contain_spank they run in a
 * clone(CLONE_VM) child). Options are registered from a C table
 * (options.h, generated from spank.Options), so srun --help and jobs that
 * use no --train-* option pay for no Go runtime at all.
 *
 * In remote context nothing fails before the fork (a failing remote
 * init/init_post_opt drains the node of a batch job): errors are kept and
 * returned from task_init, as pyxis does with user_init errors, where a
 * `required` plugin fails the task and an `optional` one only warns.
 *
 * The config stamp: srun and sbatch must reject a job when plugstack.conf's
 * arguments or the policy file are broken and the plugin is `required`.
 * Checking needs Go; to spare every srun that, slurmstepd (root), after the
 * Go half loaded the config without error, writes CACHE/config.ok holding
 * the arguments and the identity (device, inode, size, mtime, ctime) of the
 * files they name, taken before and after the load. srun compares that with
 * what it sees now: the same bytes mean the same files that loaded fine, so
 * there is nothing to check; any difference (an edit, a new file, other
 * arguments, no stamp: a login node) loads Go and checks. The stamp is
 * trusted only when root owns it and nobody else can write it.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <slurm/slurm.h>
#include <slurm/spank.h>

#include "../golib/abi.h"

SPANK_PLUGIN(trainrun, 1);

struct tr_opt {
	const char *name, *arginfo, *usage, *twin;
	int has_arg;
};
#include "options.h"
#define TR_NOPTS ((int)(sizeof(tr_opts) / sizeof(tr_opts[0])))

static char *tr_val[TR_NOPTS];  /* value given (strdup), NULL = none */
static int tr_config_failed;    /* local: the Go half or its config failed */

/* Remote: kept for task_init. */
static char *tr_err;
static uint32_t tr_node_id;     /* this node's index in the step */
struct tr_task {
	int n, cap;
	char **keys, **vals;
	char *explain;
};
static struct tr_task *tr_task;
static int tr_ntasks;

/* ---- the calls lent to the Go half (struct tr_ops) ---- */

static void ops_log_error(const char *msg) { slurm_error("%s", msg); }
static void ops_log_info(const char *msg) { slurm_info("%s", msg); }

static int ops_getenv(void *sp, const char *name, char *buf, int len)
{
	if (!sp || spank_getenv((spank_t)sp, name, buf, len) != ESPANK_SUCCESS)
		return 0;
	return 1;
}

static const char *ops_opt_value(int idx)
{
	if (idx < 0 || idx >= TR_NOPTS)
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

static int ops_tasks_reset(int n)
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

static int ops_task_add(int task, const char *key, const char *value)
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
	if (!t->keys[t->n] || !t->vals[t->n]) {
		free(t->keys[t->n]);
		free(t->vals[t->n]);
		return -1;
	}
	t->n++;
	return 0;
}

static int ops_task_explain(int task, const char *text)
{
	if (task < 0 || task >= tr_ntasks)
		return -1;
	free(tr_task[task].explain);
	tr_task[task].explain = strdup(text);
	return tr_task[task].explain ? 0 : -1;
}

static const struct tr_ops tr_ops_table = {
	.log_error = ops_log_error,
	.log_info = ops_log_info,
	.getenv = ops_getenv,
	.opt_value = ops_opt_value,
	.tasks_reset = ops_tasks_reset,
	.task_add = ops_task_add,
	.task_explain = ops_task_explain,
};

/* ---- loading the Go half ---- */

static struct {
	trgo_abi_version_fn abi_version;
	trgo_option_count_fn option_count;
	trgo_bind_fn bind;
	trgo_local_init_fn local_init;
	trgo_validate_fn validate;
	trgo_local_post_opt_fn local_post_opt;
	trgo_remote_post_opt_fn remote_post_opt;
	trgo_job_epilog_fn job_epilog;
} tr_go;
static int tr_go_state;  /* 0 not tried, 1 loaded, -1 failed */
static char *tr_go_err;  /* why loading failed */

static char *tr_msgf(const char *fmt, ...)
{
	char *s = NULL;
	va_list ap;
	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		s = NULL;
	va_end(ap);
	return s;
}

/* tr_go_load dlopen()s the Go half next to this file, once per process.
 * Never from an environment variable or a user's argument: slurmstepd runs
 * it as root. */
static int tr_go_load(void)
{
	if (tr_go_state)
		return tr_go_state > 0 ? 0 : -1;
	tr_go_state = -1;
	Dl_info di;
	if (!dladdr((void *)&tr_go_load, &di) || !di.dli_fname) {
		tr_go_err = tr_msgf("trainrun: cannot tell where spank_trainrun.so is installed, so cannot find %s", TR_GOLIB_NAME);
		return -1;
	}
	char path[PATH_MAX];
	const char *slash = strrchr(di.dli_fname, '/');
	int dirlen = slash ? (int)(slash - di.dli_fname) : 1;
	const char *dir = slash ? di.dli_fname : ".";
	if (snprintf(path, sizeof(path), "%.*s/%s", dirlen, dir, TR_GOLIB_NAME) >= (int)sizeof(path)) {
		tr_go_err = tr_msgf("trainrun: the path of %s next to %s is too long", TR_GOLIB_NAME, di.dli_fname);
		return -1;
	}
	/* RTLD_LAZY: go-nvml leaves NVML's symbols to be resolved when NVML
	 * is opened; RTLD_LOCAL: nothing of it joins the process's namespace;
	 * RTLD_NODELETE: a Go runtime cannot be unloaded. */
	void *h = dlopen(path, RTLD_LAZY | RTLD_LOCAL | RTLD_NODELETE);
	if (!h) {
		const char *e = dlerror();
		tr_go_err = tr_msgf("trainrun: cannot load %s: %s; install it next to spank_trainrun.so (make install does)", path, e ? e : "unknown error");
		return -1;
	}
#define TR_SYM(field, name)                                                                          \
	if (!(*(void **)&tr_go.field = dlsym(h, name))) {                                                 \
		tr_go_err = tr_msgf("trainrun: %s has no %s: install spank_trainrun.so and it from one build", path, name); \
		return -1;                                                                                    \
	}
	TR_SYM(abi_version, "trgo_abi_version");
	TR_SYM(option_count, "trgo_option_count");
	TR_SYM(bind, "trgo_bind");
	TR_SYM(local_init, "trgo_local_init");
	TR_SYM(validate, "trgo_validate");
	TR_SYM(local_post_opt, "trgo_local_post_opt");
	TR_SYM(remote_post_opt, "trgo_remote_post_opt");
	TR_SYM(job_epilog, "trgo_job_epilog");
#undef TR_SYM
	int abi = tr_go.abi_version();
	if (abi != TR_ABI_VERSION || tr_go.option_count() != TR_NOPTS) {
		tr_go_err = tr_msgf("trainrun: %s (interface %d, %d options) does not match spank_trainrun.so (interface %d, %d options): install both from one build",
				    path, abi, tr_go.option_count(), TR_ABI_VERSION, TR_NOPTS);
		return -1;
	}
	tr_go.bind(&tr_ops_table);
	tr_go_state = 1;
	return 0;
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

/* Errors come back from Go as malloc'd strings. */
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

/* tr_local_go loads the Go half and its config in srun/sbatch/salloc, once.
 * A failure is printed once and remembered; init_post_opt then fails, which
 * rejects the job when the plugin is required and is only a warning when it
 * is optional (an option callback's failure would reject it either way). */
static int tr_local_go(int ac, char **av)
{
	static int done;
	if (done)
		return tr_config_failed ? -1 : 0;
	done = 1;
	if (tr_go_load() != 0) {
		slurm_error("%s; the trainrun plugin is inactive for this job", tr_go_err);
		tr_config_failed = 1;
		return -1;
	}
	if (tr_report(tr_go.local_init(ac, av)) != 0) {
		tr_config_failed = 1;
		return -1;
	}
	return 0;
}

/* ---- the config stamp (see the top of this file) ---- */

#define TR_SIG_MAX 8192

static const char *tr_arg_value(int ac, char **av, const char *key)
{
	size_t n = strlen(key);
	for (int i = 0; i < ac; i++)
		if (av[i] && strncmp(av[i], key, n) == 0 && av[i][n] == '=')
			return av[i] + n + 1;
	return NULL;
}

/* tr_config_sig writes the stamp's content for these arguments as they are
 * now; -1 when it does not fit. */
static int tr_config_sig(int ac, char **av, char *buf, size_t len)
{
	size_t off = 0;
	int n = snprintf(buf, len, "trainrun config stamp %d\n", TR_ABI_VERSION);
	if (n < 0 || (size_t)n >= len)
		return -1;
	off = (size_t)n;
	for (int i = 0; i < ac; i++) {
		const char *a = av[i] ? av[i] : "";
		n = snprintf(buf + off, len - off, "arg %s\n", a);
		if (n < 0 || (size_t)n >= len - off)
			return -1;
		off += (size_t)n;
		if (strncmp(a, "policy=", 7) != 0 && strncmp(a, "topology=", 9) != 0)
			continue;
		struct stat st;
		const char *p = strchr(a, '=') + 1;
		if (stat(p, &st) != 0)
			n = snprintf(buf + off, len - off, "file %s missing\n", p);
		else
			n = snprintf(buf + off, len - off, "file %s %llu %llu %lld %lld.%09ld %lld.%09ld\n", p,
				     (unsigned long long)st.st_dev, (unsigned long long)st.st_ino, (long long)st.st_size,
				     (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec, (long long)st.st_ctim.tv_sec, st.st_ctim.tv_nsec);
		if (n < 0 || (size_t)n >= len - off)
			return -1;
		off += (size_t)n;
	}
	return 0;
}

/* CACHE/config.ok, CACHE as the Go half reads cache= (default /run/trainrun). */
static int tr_stamp_path(int ac, char **av, char *buf, size_t len)
{
	const char *cache = tr_arg_value(ac, av, "cache");
	if (!cache || cache[0] != '/')
		cache = "/run/trainrun";
	int n = snprintf(buf, len, "%s/config.ok", cache);
	return n < 0 || (size_t)n >= len ? -1 : 0;
}

/* tr_stamp_matches: 1 when CACHE/config.ok, owned by root and writable by
 * nobody else, holds exactly sig. */
static int tr_stamp_matches(int ac, char **av, const char *sig)
{
	char path[PATH_MAX], have[TR_SIG_MAX];
	if (tr_stamp_path(ac, av, path, sizeof(path)) != 0)
		return 0;
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return 0;
	struct stat st;
	ssize_t n = -1;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == 0 && !(st.st_mode & 022))
		n = read(fd, have, sizeof(have) - 1);
	close(fd);
	if (n < 0)
		return 0;
	have[n] = '\0';
	return strcmp(have, sig) == 0;
}

static void tr_stamp_write(int ac, char **av, const char *sig)
{
	char path[PATH_MAX], tmp[PATH_MAX + 32];
	if (geteuid() != 0 || tr_stamp_matches(ac, av, sig))
		return;
	if (tr_stamp_path(ac, av, path, sizeof(path)) != 0)
		return;
	snprintf(tmp, sizeof(tmp), "%s.%ld", path, (long)getpid());
	int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0)
		return;
	size_t len = strlen(sig), off = 0;
	while (off < len) {
		ssize_t w = write(fd, sig + off, len - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			break;
		off += (size_t)w;
	}
	if (close(fd) != 0 || off != len || rename(tmp, path) != 0)
		unlink(tmp);
}

/* ---- callbacks ---- */

/* plugstack.conf's arguments, kept from init for the option callbacks. */
static int tr_ac;
static char **tr_av;

/* One callback for every option; val is its index in tr_opts. A bad value
 * is rejected here, at submission, whether the plugin is required or
 * optional; a config that does not load is left to init_post_opt. */
static int tr_option_cb(int val, const char *optarg, int remote)
{
	if (val < 0 || val >= TR_NOPTS)
		return 0;
	const char *v = tr_opts[val].has_arg ? (optarg ? optarg : "") : "1";
	/* Idempotent: Slurm may call us twice with the same value. */
	if (!tr_val[val] || strcmp(tr_val[val], v) != 0) {
		free(tr_val[val]);
		tr_val[val] = strdup(v);
	}
	if (remote || tr_local_go(tr_ac, tr_av) != 0)
		return 0; /* remote: validated at submission, rechecked in init_post_opt */
	return tr_report(tr_go.validate(val, (char *)v));
}

static int tr_register_options(spank_t sp)
{
	for (int i = 0; i < TR_NOPTS; i++) {
		struct spank_option o = { 0 };
		o.name = (char *)tr_opts[i].name;
		o.arginfo = (char *)tr_opts[i].arginfo;
		o.usage = (char *)tr_opts[i].usage;
		o.has_arg = tr_opts[i].has_arg;
		o.val = i;
		o.cb = tr_option_cb;
		if (spank_option_register(sp, &o) != ESPANK_SUCCESS) {
			slurm_error("trainrun: init: cannot register --%s", tr_opts[i].name);
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
		tr_ac = ac;
		tr_av = av;
		return tr_register_options(sp);
	case S_CTX_REMOTE:
		/* Options must be registered here for the remote callbacks to run;
		 * nothing else: option values arrive after init. */
		tr_register_options(sp);
		return 0;
	default:
		return 0; /* slurmd: no Go, ever. job_script: see job_epilog. */
	}
}

/* tr_local_post_opt checks the TRAINRUN_* twins of options not given (the
 * options themselves were checked by their callbacks) and the config. With
 * no option, no twin and a config stamp that matches, Go is not loaded. */
static int tr_local_post_opt(int ac, char **av)
{
	int given = 0;
	for (int i = 0; i < TR_NOPTS; i++) {
		const char *e = getenv(tr_opts[i].twin);
		if (tr_val[i] || (e && *e))
			given = 1;
	}
	if (!given) {
		char sig[TR_SIG_MAX];
		if (tr_config_sig(ac, av, sig, sizeof(sig)) == 0 && tr_stamp_matches(ac, av, sig))
			return 0; /* nothing to validate, and the config loaded fine here */
	}
	if (tr_local_go(ac, av) != 0)
		return -1;
	return tr_report(tr_go.local_post_opt());
}

int slurm_spank_init_post_opt(spank_t sp, int ac, char **av)
{
	switch (spank_context()) {
	case S_CTX_LOCAL:
	case S_CTX_ALLOCATOR:
		return tr_local_post_opt(ac, av);
	case S_CTX_REMOTE: {
		uint32_t step = 0;
		if (spank_get_item(sp, S_JOB_STEPID, &step) != ESPANK_SUCCESS)
			return 0;
		if (step == SLURM_EXTERN_CONT || step == SLURM_INTERACTIVE_STEP)
			return 0;
		if (step == SLURM_BATCH_SCRIPT) {
			/* #SBATCH --train-*: hand the values to the script's srun
			 * steps through their environment twins. */
			for (int i = 0; i < TR_NOPTS; i++)
				if (tr_val[i])
					spank_setenv(sp, tr_opts[i].twin, tr_val[i], 1);
			return 0;
		}
		if (tr_go_load() != 0) {
			tr_keep_error(tr_msgf("%s; no trainrun environment injected", tr_go_err));
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
		char before[TR_SIG_MAX], after[TR_SIG_MAX];
		int sig = tr_config_sig(ac, av, before, sizeof(before)) == 0;
		tr_keep_error(tr_go.remote_post_opt(sp, &st, ac, av));
		if (sig && st.config_ok && tr_config_sig(ac, av, after, sizeof(after)) == 0 && strcmp(before, after) == 0)
			tr_stamp_write(ac, av, after);
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
	if (tr_go_load() != 0) {
		slurm_error("%s; the job epilog did nothing", tr_go_err);
		return 0; /* an epilog failure would drain the node */
	}
	tr_job_ids(sp, &uid, &gid);
	char *msg = tr_go.job_epilog(job, uid, gid, ac, av);
	if (msg) {
		slurm_error("%s", msg); /* logged; an epilog failure would drain */
		free(msg);
	}
	return 0;
}

/* job_script context, the prolog: record the job's partition as slurmd
 * gives it to the prolog (SLURM_JOB_PARTITION in the prolog's environment,
 * from the job record), in CACHE/job-N/partition (root's, 0644), because
 * in slurmstepd the partition is only in the job's environment, which the
 * user writes (issue 12 finding 4). The Go half prefers this record
 * (spank.JobPartition). Plain C: no Go is needed here. Never fails the
 * prolog (that would drain the node): without a record the step falls back
 * to the environment and says so in the log. */
int slurm_spank_job_prolog(spank_t sp, int ac, char **av)
{
	uint32_t job = 0;
	const char *part = getenv("SLURM_JOB_PARTITION");
	const char *cache = tr_arg_value(ac, av, "cache");
	char dir[PATH_MAX], path[PATH_MAX + 16];
	if (spank_context() != S_CTX_JOB_SCRIPT)
		return 0;
	if (spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS || job == 0 || !part || !*part ||
	    strlen(part) > 200 || strchr(part, '/') || strchr(part, '\n'))
		return 0;
	if (!cache || cache[0] != '/')
		cache = "/run/trainrun";
	if (snprintf(dir, sizeof(dir), "%s/job-%u", cache, job) >= (int)sizeof(dir))
		return 0;
	(void)mkdir(cache, 0755);
	if (mkdir(dir, 0755) != 0 && errno != EEXIST)
		return 0;
	struct stat st;
	if (lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 022))
		return 0; /* not the directory root made: write nothing there */
	snprintf(path, sizeof(path), "%s/partition", dir);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0) {
		slurm_info("trainrun: prolog: job %u: cannot record the partition in %s: %s", job, path, strerror(errno));
		return 0;
	}
	size_t n = strlen(part);
	if (write(fd, part, n) != (ssize_t)n)
		slurm_info("trainrun: prolog: job %u: short write to %s", job, path);
	close(fd);
	return 0;
}
