package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trainrun/trainrun/internal/slurm"
	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
)

// Issue 30 point 5: a sweep's mistakes are refused before anything is
// submitted (no sbatch call), each naming what to change.
func TestSweepFailsEarly(t *testing.T) {
	base := []string{"sweep", "--grid", "lr=1e-4,3e-4", "--gpus-per-node", "8"}
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"unknown placeholder", []string{"--time", "30m", "--fix", "tp=8", "--", "python", "t.py", "--lr", "{lrr}"}, exitcode.Usage, `{lrr} in the command is neither a swept key (lr) nor a trainrun run template`},
		{"stray word before --", []string{"--time", "5", "hours", "--fix", "tp=8", "--", "python", "t.py", "--lr", "{lr}"}, exitcode.Usage, `"hours" before '--' is not a flag or its value`},
		{"swept key unused", []string{"--grid", "wd=0,0.1", "--time", "30m", "--fix", "tp=8", "--", "python", "t.py", "--lr", "{lr}"}, exitcode.Usage, "the swept key wd appears nowhere in the command as {wd}"},
		{"no layout for any trial", []string{"--time", "30m", "--", "python", "t.py", "--lr", "{lr}"}, exitcode.Usage, "no trial could choose a layout"},
		{"a --fix no trial can split", []string{"--time", "30m", "--fix", "tp=3", "--", "python", "t.py", "--lr", "{lr}"}, exitcode.Layout, "no trial could start"},
		{"a model no trial can fit, with --time", []string{"--time", "30m", "--model", "gpt3-175b", "--gpu", "h100-sxm", "--seq-len", "4096", "--global-batch", "64", "--", "python", "t.py", "--lr", "{lr}"}, exitcode.NoFit, "no trial could start"},
		{"a model no trial can fit", []string{"--model", "gpt3-175b", "--gpu", "h100-sxm", "--seq-len", "4096", "--global-batch", "64", "--steps", "10", "--", "python", "t.py", "--lr", "{lr}"}, exitcode.NoFit, "does not fit"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeSlurm{}
			env, _, errb := sweepEnv(f)
			env.getenv = func(string) string { return "" }
			code := dispatch(context.Background(), env, append(append([]string{}, base...), tc.args...))
			if code != tc.code || !strings.Contains(errb.String(), tc.want) {
				t.Errorf("exit %d (want %d), stderr lacks %q:\n%s", code, tc.code, tc.want, errb)
			}
			for _, c := range f.calls {
				if strings.HasPrefix(c, slurm.Sbatch) {
					t.Errorf("submitted anyway: %s", c)
				}
			}
		})
	}
	// The trainer may read its values from the environment instead.
	f := &fakeSlurm{}
	env, _, errb := sweepEnv(f)
	if code := dispatch(context.Background(), env, append(append([]string{}, base...), "--time", "30m", "--fix", "tp=8", "--keys-in-env", "--dry-run", "--", "python", "t.py")); code != exitcode.OK {
		t.Errorf("--keys-in-env: exit %d: %s", code, errb)
	}
}

// `sweep status` shows a failed trial's trainrun error and its log, not only
// Slurm's "FAILED, exit 2:0" (issue 30 point 5), and each trial's job id.
func TestSweepStatusShowsTheTrialsError(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sw")
	f := &fakeSlurm{}
	env, _, errb := sweepEnv(f)
	if code := dispatch(context.Background(), env, []string{"sweep", "--grid", "lr=0.1,0.2", "--time", "5m", "--gpus-per-node", "1", "--fix", "tp=1", "--sweep-dir", dir, "--", "x", "{lr}"}); code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	log := filepath.Join(dir, "logs", "trial-1.out")
	if err := os.WriteFile(log, []byte("trainrun: warning: something minor\ntrainrun: run: --fix \"tp=3\": tp×pp×cp = 3 does not divide the 8 GPUs\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f.showJob = "JobId=78 ArrayJobId=77 ArrayTaskId=0 JobState=RUNNING Reason=None Restarts=0 ExitCode=0:0\n" +
		"JobId=79 ArrayJobId=77 ArrayTaskId=1 JobState=FAILED Reason=NonZeroExitCode Restarts=0 ExitCode=10:0\n"
	env, out, errb := sweepEnv(f)
	if code := dispatch(context.Background(), env, []string{"sweep", "status", dir}); code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	if !strings.Contains(out.String(), `trainrun: run: --fix "tp=3": tp×pp×cp = 3 does not divide the 8 GPUs`) || !strings.Contains(out.String(), "log: "+log) || strings.Contains(out.String(), "minor") {
		t.Errorf("table:\n%s", out)
	}
	env, out, _ = sweepEnv(f)
	dispatch(context.Background(), env, []string{"sweep", "status", dir, "--format", "json"})
	var j struct {
		Sweep  string `json:"sweep"`
		JobID  string `json:"job_id"`
		Trials []struct {
			State, Error, Log string
			JobID             string `json:"job_id"`
		} `json:"trials"`
	}
	if err := json.Unmarshal(out.Bytes(), &j); err != nil {
		t.Fatal(err)
	}
	if j.JobID != "77" || j.Sweep == "" {
		t.Errorf("json: sweep %q, job_id %q", j.Sweep, j.JobID)
	}
	if len(j.Trials) != 2 || j.Trials[1].State != "failed" || !strings.Contains(j.Trials[1].Error, "does not divide") || j.Trials[1].Log != log || j.Trials[0].JobID != "77_0" || j.Trials[0].Error != "" {
		t.Errorf("json: %+v", j.Trials)
	}
}
