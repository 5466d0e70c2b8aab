package main

import (
	"context"
	"strings"
	"testing"

	"github.com/trainrun/trainrun/internal/slurm"
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
		{"unknown placeholder", []string{"--time", "30m", "--fix", "tp=8", "--", "python", "t.py", "--lr", "{lrr}"}, ExitUsage, `{lrr} in the command is neither a swept key (lr) nor a trainrun run template`},
		{"stray word before --", []string{"--time", "5", "hours", "--fix", "tp=8", "--", "python", "t.py", "--lr", "{lr}"}, ExitUsage, `"hours" before '--' is not a flag or its value`},
		{"swept key unused", []string{"--grid", "wd=0,0.1", "--time", "30m", "--fix", "tp=8", "--", "python", "t.py", "--lr", "{lr}"}, ExitUsage, "the swept key wd appears nowhere in the command as {wd}"},
		{"no layout for any trial", []string{"--time", "30m", "--", "python", "t.py", "--lr", "{lr}"}, ExitUsage, "no trial could choose a layout"},
		{"a --fix no trial can split", []string{"--time", "30m", "--fix", "tp=3", "--", "python", "t.py", "--lr", "{lr}"}, ExitLayout, "no trial could start"},
		{"a model no trial can fit, with --time", []string{"--time", "30m", "--model", "gpt3-175b", "--gpu", "h100-sxm", "--seq-len", "4096", "--global-batch", "64", "--", "python", "t.py", "--lr", "{lr}"}, ExitNoFit, "no trial could start"},
		{"a model no trial can fit", []string{"--model", "gpt3-175b", "--gpu", "h100-sxm", "--seq-len", "4096", "--global-batch", "64", "--steps", "10", "--", "python", "t.py", "--lr", "{lr}"}, ExitNoFit, "does not fit"},
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
	if code := dispatch(context.Background(), env, append(append([]string{}, base...), "--time", "30m", "--fix", "tp=8", "--keys-in-env", "--dry-run", "--", "python", "t.py")); code != ExitOK {
		t.Errorf("--keys-in-env: exit %d: %s", code, errb)
	}
}
