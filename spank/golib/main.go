package main

/*
#include <stdlib.h>
#include "abi.h"
*/
import "C"

import (
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/trainrun/trainrun/spank"
)

func main() {}

//export trgo_abi_version
func trgo_abi_version() C.int { return C.TR_ABI_VERSION }

// trgo_bind takes the C half's table of calls (logging, the job's
// environment, option values, the per-task arrays). Called once, right
// after dlopen, before any other export.
//
//export trgo_bind
func trgo_bind(ops *C.struct_tr_ops) { C.tr_set_ops(ops) }

// local is the configuration srun/sbatch/salloc loaded (trgo_local_init,
// called by the C half the first time it needs Go there).
var local *spank.Config

// guard recovers a panic into *out as a trainrun: message.
func guard(phase string, out **C.char) {
	if r := recover(); r != nil {
		stack := strings.ReplaceAll(string(debug.Stack()), "\n", " | ")
		if len(stack) > 2000 {
			stack = stack[:2000]
		}
		*out = C.CString(fmt.Sprintf("trainrun: %s: internal error (please report): %v: %s", phase, r, stack))
	}
}

func args(ac C.int, av **C.char) []string {
	if ac <= 0 || av == nil {
		return nil
	}
	out := make([]string, int(ac))
	for i, p := range unsafe.Slice(av, int(ac)) {
		out[i] = C.GoString(p)
	}
	return out
}

// trgo_option_count lets the C half check that its generated option table
// (spank/plugin/options.h, from spank.Options) is the one this half
// indexes: a mismatched pair refuses to load.
//
//export trgo_option_count
func trgo_option_count() C.int { return C.int(len(spank.Options)) }

// trgo_local_init loads plugstack.conf's arguments and the policy in srun,
// sbatch and salloc, so a broken policy fails submission (required) or is
// one warning (optional).
//
//export trgo_local_init
func trgo_local_init(ac C.int, av **C.char) (msg *C.char) {
	defer guard("config", &msg)
	c, err := spank.LoadConfig(args(ac, av))
	if err != nil {
		return C.CString("trainrun: config: " + err.Error() + "; the trainrun plugin is inactive for this job")
	}
	local = c
	return nil
}

// submitPartition is the partition a submission is for, as far as srun or
// sbatch's environment tells ("" = the site-wide settings).
func submitPartition() string {
	for _, k := range []string{"SLURM_JOB_PARTITION", "SBATCH_PARTITION", "SALLOC_PARTITION", "SLURM_PARTITION"} {
		if v := os.Getenv(k); v != "" && !strings.Contains(v, ",") {
			return v
		}
	}
	return ""
}

//export trgo_validate
func trgo_validate(idx C.int, val *C.char) (msg *C.char) {
	defer guard("submit", &msg)
	if local == nil || idx < 0 || int(idx) >= len(spank.Options) {
		return nil
	}
	v := C.GoString(val)
	o := spank.Options[idx]
	if err := spank.Validate(local, submitPartition(), int(idx), v); err != nil {
		if o.HasArg {
			return C.CString(fmt.Sprintf("trainrun: submit: --%s=%s: %v", o.Name, v, err))
		}
		return C.CString(fmt.Sprintf("trainrun: submit: --%s: %v", o.Name, err))
	}
	return nil
}

func givenOptions() map[string]string {
	given := map[string]string{}
	for i, o := range spank.Options {
		if p := C.tr_opt_value(C.int(i)); p != nil {
			given[o.Name] = C.GoString(p)
		}
	}
	return given
}

// trgo_local_post_opt checks the environment twins of options not given.
//
//export trgo_local_post_opt
func trgo_local_post_opt() (msg *C.char) {
	defer guard("submit", &msg)
	if local == nil {
		return nil
	}
	if _, err := spank.Resolve(local, submitPartition(), givenOptions(), os.Getenv); err != nil {
		return C.CString("trainrun: submit: " + strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	return nil
}

// trgo_remote_post_opt runs in slurmstepd before it forks the tasks: it
// computes every local task's environment and hands it to task_init. The
// returned message is kept and reported from task_init.
//
//export trgo_remote_post_opt
func trgo_remote_post_opt(sp unsafe.Pointer, st *C.struct_tr_step, ac C.int, av **C.char) (msg *C.char) {
	defer guard("step", &msg)
	C.tr_tasks_reset(0)
	c, err := spank.LoadConfig(args(ac, av))
	if err != nil {
		return C.CString("trainrun: config: " + err.Error() + "; no trainrun environment injected")
	}
	if err := spank.CheckCacheDir(c.CacheDir); err != nil {
		return C.CString("trainrun: config: " + err.Error() + "; no trainrun environment injected")
	}
	st.config_ok = 1
	// In slurmstepd (root), what the user names is read as the user
	// (spank/doc.go): the model's config.json, the checkpoint store.
	c.As = spank.JobCred(uint32(st.uid), uint32(st.gid))
	buf := make([]byte, 64<<10)
	getenv := func(k string) (string, bool) {
		ck := C.CString(k)
		defer C.free(unsafe.Pointer(ck))
		if C.tr_getenv(sp, ck, (*C.char)(unsafe.Pointer(&buf[0])), C.int(len(buf))) == 0 {
			return "", false
		}
		return C.GoString((*C.char)(unsafe.Pointer(&buf[0]))), true
	}
	get := func(k string) string { v, _ := getenv(k); return v }
	// The partition selects the policy: from the job prolog's record of
	// what slurmd said, not the job's environment, which the user writes.
	part, note := spank.StepPartition(c.CacheDir, uint32(st.job_id), get("SLURM_JOB_PARTITION"))
	if note != "" {
		logInfo(fmt.Sprintf("trainrun: step %d.%d: note: %s", st.job_id, st.step_id, note))
	}
	req, err := spank.Resolve(c, part, givenOptions(), get)
	if err != nil {
		return C.CString("trainrun: step: " + strings.ReplaceAll(err.Error(), "\n", "; ") + "; no trainrun environment injected")
	}
	step := spank.Step{
		JobID: uint32(st.job_id), StepID: uint32(st.step_id),
		NodeID: int(st.node_id), NNodes: int(st.nnodes),
		LocalTasks: int(st.local_tasks), TotalTasks: int(st.total_tasks),
		Restart: int(st.restart), Nodelist: get("SLURM_STEP_NODELIST"),
		User: spank.UserName(uint32(st.uid)), JobName: get("SLURM_JOB_NAME"), Getenv: getenv,
	}
	// S_SLURM_RESTART_COUNT is the batch step's; an srun step inside a
	// requeued job has 0 there but inherits SLURM_RESTART_COUNT.
	if n, err := strconv.Atoi(get("SLURM_RESTART_COUNT")); err == nil && n > step.Restart {
		step.Restart = n
	}
	if step.Nodelist == "" {
		step.Nodelist = get("SLURM_JOB_NODELIST")
	}
	step.Resolve = func(host string) []string {
		return spank.NodeAddrs(c.CacheDir, "", host, func(h string) []string { return spank.Resolve4(h, time.Second) }, time.Now())
	}
	// The job epilog finishes drains a shim could not; the shims find where
	// to leave their records in TRAINRUN_HANDOFF_DIR.
	if h, err := spank.PrepareJobDir(c.CacheDir, step.JobID, uint32(st.uid), uint32(st.gid)); err != nil {
		logInfo(fmt.Sprintf("trainrun: step %d.%d: note: no drain handoff to the job epilog: %v", step.JobID, step.StepID, err))
	} else {
		step.HandoffDir = h
	}
	node, _, err := spank.NodeTopology(c.CacheDir, "")
	if err != nil {
		return C.CString("trainrun: step: reading this node's topology: " + err.Error() + "; no trainrun environment injected")
	}
	tasks, notes, err := spank.ComputeStep(c, req, step, node)
	if err != nil {
		return C.CString("trainrun: step: " + err.Error() + "; no trainrun environment injected")
	}
	for _, n := range notes {
		logInfo(fmt.Sprintf("trainrun: step %d.%d: note: %s", step.JobID, step.StepID, n))
	}
	if C.tr_tasks_reset(C.int(len(tasks))) != 0 {
		return C.CString("trainrun: step: out of memory; no trainrun environment injected")
	}
	for i, t := range tasks {
		for _, kv := range t.Vars {
			k, v, _ := strings.Cut(kv, "=")
			ck, cv := C.CString(k), C.CString(v)
			rc := C.tr_task_add(C.int(i), ck, cv)
			C.free(unsafe.Pointer(ck))
			C.free(unsafe.Pointer(cv))
			if rc != 0 {
				C.tr_tasks_reset(0)
				return C.CString("trainrun: step: out of memory; no trainrun environment injected")
			}
		}
		if t.Explain != "" {
			ce := C.CString(t.Explain)
			C.tr_task_explain(C.int(i), ce)
			C.free(unsafe.Pointer(ce))
		}
	}
	if err := spank.WriteStepEnv(c.CacheDir, step, tasks, c.As); err != nil {
		logInfo("trainrun: step: note: cannot record the step's environment: " + err.Error())
	}
	return nil
}

// trgo_job_epilog finishes the drains the job's shims left (as the job's
// user, bounded) and removes the job's per-job files.
//
//export trgo_job_epilog
func trgo_job_epilog(job, uid, gid C.uint32_t, ac C.int, av **C.char) (msg *C.char) {
	defer guard("epilog", &msg)
	c, err := spank.ParseArgs(args(ac, av))
	if err != nil {
		return C.CString("trainrun: epilog: " + err.Error())
	}
	if err := spank.JobEpilog(c, uint32(job), uint32(uid), uint32(gid), logInfo); err != nil {
		return C.CString("trainrun: epilog: " + err.Error())
	}
	return nil
}

func logInfo(s string) {
	cs := C.CString(s)
	C.tr_log_info(cs)
	C.free(unsafe.Pointer(cs))
}
