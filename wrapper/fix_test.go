package main

import (
	"strings"
	"testing"

	"github.com/trainrun/trainrun/plan"
	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
)

// Issue 20: `trainrun plan`, `env` and `run` read --fix with one grammar. The
// same bad key is refused by each with the same list of keys, and the keys one
// of them used to refuse (grad_accum in run, zero in env) are taken by all.
func TestFixOneGrammar(t *testing.T) {
	// 32 GPUs each: 4 nodes × 8 (the run's allocation is slurmEnv4x8), so
	// tp=8 leaves dp=4 and a global batch of 16 gives grad_accum=4.
	commands := map[string][]string{
		"plan": {"plan", "--model", "llama3-8b", "--gpu", "h100-sxm", "--gpus", "32", "--seq-len", "4096", "--global-batch", "16"},
		"env":  {"env", "--machine", "hgx-h100", "--nodelist", "gpu[01-04]", "--node-addr", "10.0.0.11"},
		"run":  {"run", "--dry-run", "--probe", "none", "--global-batch", "16"},
	}
	try := func(t *testing.T, args []string, fix string) (string, int) {
		t.Helper()
		m := slurmEnv4x8()
		m["TRAINRUN_JOB_DIR"] = t.TempDir()
		if args[0] != "run" {
			m = nil
		}
		args = append(append([]string{}, args...), "--fix", fix)
		if args[0] == "run" {
			args = append(args, "--", "true")
		}
		code, _, errs := cli{vars: m}.run(args...)
		return errs, code
	}
	for name, args := range commands {
		t.Run(name, func(t *testing.T) {
			errs, code := try(t, args, "bogus=1")
			want := `--fix "bogus=1": unknown key "bogus"; accepted: ` + plan.PinKeys
			if code != exitcode.Usage || !strings.Contains(errs, want) {
				t.Errorf("--fix bogus=1: exit %d, stderr %q; want %d and %q", code, errs, exitcode.Usage, want)
			}
			for _, fix := range []string{"tp=8,grad_accum=4", "tp=8,zero=1"} {
				if errs, code := try(t, args, fix); code != exitcode.OK {
					t.Errorf("--fix %s: exit %d, stderr:\n%s", fix, code, errs)
				}
			}
			errs, code = try(t, args, "tp=8,pp=2305843009213693953")
			if want := "pp=2305843009213693953: larger than 1048576"; code != exitcode.Usage || !strings.Contains(errs, want) {
				t.Errorf("overflowing pp: exit %d, stderr %q; want %d and %q", code, errs, exitcode.Usage, want)
			}
		})
	}
}
