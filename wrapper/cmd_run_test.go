package main

import (
	"os"
	"strings"
	"testing"

	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
)

// The dry run on an allocation given by environment, without Slurm: the
// srun line and rank 5's environment, as a golden file.
func TestRunDryRun(t *testing.T) {
	m := slurmEnv4x8()
	m["SLURM_JOB_NODELIST"], m["SLURM_JOB_NUM_NODES"], m["SLURM_TASKS_PER_NODE"] = "n[1-2]", "2", "8(x2)"
	m["TRAINRUN_JOB_DIR"] = "/shared/job42"
	m["SLURM_RESTART_COUNT"] = "1"
	out, errb, err := cli{vars: m}.runRun([]string{"--dry-run", "--probe", "none", "--rank", "5", "--fix", "tp=4,pp=2", "--global-batch", "16",
		"--ckpt-dir", "/shared/ck", "--", "python", "train.py", "--tp", "{tp}", "--pp", "{pp}", "--dp", "{dp}", "--load", "{resume}", "{megatron_args}"}...)
	if err != nil {
		t.Fatalf("%v\n%s", err, errb)
	}
	self, _ := os.Executable()
	got := strings.ReplaceAll(out, self, "TRAINRUN")
	checkGolden(t, "run_dryrun.golden", got)
}

func TestRunUserErrors(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		args []string
		code int
		msg  string
	}{
		{name: "no command", args: []string{"--fix", "tp=2"}, code: exitcode.Usage, msg: "no training command"},
		{name: "no layout", args: []string{"--dry-run", "--probe", "none", "--", "true"}, code: exitcode.Usage, msg: "--fix"},
		{name: "does not divide", args: []string{"--dry-run", "--probe", "none", "--fix", "tp=3", "--", "true"}, code: exitcode.Layout, msg: "does not divide"},
		{name: "bad signal", args: []string{"--ckpt-signal", "FOO", "--fix", "tp=2", "--", "true"}, code: exitcode.Usage, msg: "--ckpt-signal"},
		{name: "not in allocation", env: map[string]string{"SLURM_JOB_ID": ""}, args: []string{"--dry-run", "--fix", "tp=2", "--", "true"}, code: exitcode.Slurm, msg: "not inside a Slurm allocation"},
		{name: "policy: override not allowed", args: []string{"--dry-run", "--probe", "none", "--policy", "../contrib/trainrun.conf.example", "--max-requeue", "3", "--fix", "tp=2", "--", "true"},
			code: exitcode.Usage, msg: "does not let users override MaxRequeue"},
		{name: "policy: checkpoint root", args: []string{"--dry-run", "--probe", "none", "--policy", "../contrib/trainrun.conf.example", "--ckpt-dir", "/home/me/ck", "--fix", "tp=2", "--", "true"},
			code: exitcode.Usage, msg: "not under the checkpoint roots the site allows"},
		{name: "policy: debug partition allows nothing", env: map[string]string{"SLURM_JOB_PARTITION": "debug"}, args: []string{"--dry-run", "--probe", "none", "--policy", "../contrib/trainrun.conf.example", "--ckpt-lead", "1m", "--fix", "tp=2", "--", "true"},
			code: exitcode.Usage, msg: "UserOverride=none"},
		{name: "bad rank", args: []string{"--dry-run", "--probe", "none", "--rank", "99", "--fix", "tp=2", "--", "true"}, code: exitcode.Usage, msg: "--rank 99"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := slurmEnv4x8()
			m["TRAINRUN_JOB_DIR"] = t.TempDir()
			for k, v := range tc.env {
				if v == "" {
					delete(m, k)
				} else {
					m[k] = v
				}
			}
			_, _, err := cli{vars: m}.runRun(tc.args...)
			if err == nil || exitcode.Of(err) != tc.code || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("got %v (code %d), want code %d with %q", err, exitcode.Of(err), tc.code, tc.msg)
			}
		})
	}
}

func TestRunHelpShowsExitCodes(t *testing.T) {
	code, help, _ := cli{}.run("run", "--help")
	if code != exitcode.OK || !strings.Contains(help, "Exit codes:") || !strings.Contains(help, "127  not-found") || !strings.Contains(help, "{megatron_args}") {
		t.Errorf("code %d, help:\n%s", code, help)
	}
}

// The site policy gives the defaults: the partition's lead and requeue limit,
// the expanded checkpoint directory, NCCLForce in each rank's environment.
func TestRunPolicyDefaults(t *testing.T) {
	m := slurmEnv4x8()
	m["SLURM_JOB_PARTITION"], m["SLURM_JOB_USER"], m["SLURM_JOB_NAME"] = "preempt", "alice", "llm"
	m["TRAINRUN_JOB_DIR"] = t.TempDir()
	out, errb, err := cli{vars: m}.runRun("--dry-run", "--probe", "none", "--policy", "../contrib/trainrun.conf.example", "--fix", "tp=8", "--", "true")
	if err != nil {
		t.Fatalf("%v\n%s", err, errb)
	}
	for _, want := range []string{"checkpoints /lustre/ckpt/alice/llm (signal USR2)", "TRAINRUN_CKPT_DIR=/lustre/ckpt/alice/llm"} {
		if !strings.Contains(out, want) {
			t.Errorf("dry run lacks %q:\n%s", want, out)
		}
	}
}
