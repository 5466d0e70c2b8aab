/* ops.c: the Go half's calls into the C half, through the table the C half
 * lent with trgo_bind. Before binding (a plain `go build` of this package,
 * never loaded by Slurm) every call is a harmless no-op. */
#include <stddef.h>

#include "abi.h"

static const struct tr_ops *tr_ops;

void tr_set_ops(const struct tr_ops *ops) { tr_ops = ops; }

void tr_log_error(const char *msg)
{
	if (tr_ops && tr_ops->log_error)
		tr_ops->log_error(msg);
}

void tr_log_info(const char *msg)
{
	if (tr_ops && tr_ops->log_info)
		tr_ops->log_info(msg);
}

int tr_getenv(void *sp, const char *name, char *buf, int len)
{
	return tr_ops && tr_ops->getenv ? tr_ops->getenv(sp, name, buf, len) : 0;
}

const char *tr_opt_value(int idx)
{
	return tr_ops && tr_ops->opt_value ? tr_ops->opt_value(idx) : NULL;
}

int tr_tasks_reset(int n)
{
	return tr_ops && tr_ops->tasks_reset ? tr_ops->tasks_reset(n) : -1;
}

int tr_task_add(int task, const char *key, const char *value)
{
	return tr_ops && tr_ops->task_add ? tr_ops->task_add(task, key, value) : -1;
}

int tr_task_explain(int task, const char *text)
{
	return tr_ops && tr_ops->task_explain ? tr_ops->task_explain(task, text) : -1;
}
