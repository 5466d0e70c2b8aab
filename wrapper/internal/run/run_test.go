package run

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
)

// Setup refuses to run outside an allocation and inside a job step, with
// Slurm's exit code and a message that says what to do; inside an
// allocation it returns the configuration with the allocation and command.
func TestSetup(t *testing.T) {
	deps := func(vars map[string]string) Deps {
		return Deps{Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}, Getenv: func(k string) string { return vars[k] }}
	}
	o := Options{dryRun: true, ckptSignal: "USR2"}
	if _, err := Setup(o, nil, []string{"true"}, deps(nil)); exitcode.Of(err) != exitcode.Slurm {
		t.Errorf("outside an allocation: %v (exit %d), want exit %d", err, exitcode.Of(err), exitcode.Slurm)
	}
	step := slurmEnv4x8()
	step["SLURM_STEP_ID"] = "0"
	if _, err := Setup(o, nil, []string{"true"}, deps(step)); exitcode.Of(err) != exitcode.Slurm || !strings.Contains(fmt.Sprint(err), "call it once from the batch script") {
		t.Errorf("inside a step: %v (exit %d), want exit %d saying where to call it", err, exitcode.Of(err), exitcode.Slurm)
	}
	cfg, err := Setup(o, map[string]bool{"dry-run": true}, []string{"python", "t.py"}, deps(slurmEnv4x8()))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.alloc == nil || cfg.alloc.JobID != "42" || len(cfg.alloc.Nodes) != 4 || strings.Join(cfg.argv, " ") != "python t.py" || !cfg.given["dry-run"] {
		t.Errorf("config: alloc %+v, argv %q, given %v", cfg.alloc, cfg.argv, cfg.given)
	}
}
