package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trainrun/trainrun/internal/golden"
	"github.com/trainrun/trainrun/internal/slurm"
)

// cli is the package's one in-process runner of trainrun's commands, for
// tests: a runEnv over buffers whose environment is vars and nothing else
// (a test never reads the real one), stdin the given text, and Slurm's
// client the zero value (every query fails, as on a machine without Slurm)
// unless slurm is set.
type cli struct {
	vars  map[string]string
	stdin string
	slurm slurm.Client
}

// env is the runEnv a command of c runs with, and its two outputs.
func (c cli) env() (*runEnv, *bytes.Buffer, *bytes.Buffer) {
	var out, errb bytes.Buffer
	vars := c.vars
	return &runEnv{stdout: &out, stderr: &errb, stdin: strings.NewReader(c.stdin),
		getenv: func(k string) string { return vars[k] }, slurm: c.slurm}, &out, &errb
}

// run runs `trainrun args...` as main does and returns its exit code and
// outputs.
func (c cli) run(args ...string) (code int, stdout, stderr string) {
	env, out, errb := c.env()
	code = dispatch(context.Background(), env, args)
	return code, out.String(), errb.String()
}

// runRun runs `trainrun run args...` and returns its error unmapped to an
// exit code.
func (c cli) runRun(args ...string) (stdout, stderr string, err error) {
	env, out, errb := c.env()
	err = runRun(context.Background(), env, args)
	return out.String(), errb.String(), err
}

// checkGolden compares got with testdata/name (internal/golden: -update
// rewrites it).
func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	golden.CheckString(t, filepath.Join("testdata", name), got)
}

// slurmEnv4x8 is the batch-step environment of `sbatch -N4 --ntasks-per-node=8
// --gpus-per-node=8 -p low` on the harness cluster (Slurm 22.05).
func slurmEnv4x8() map[string]string {
	return map[string]string{
		"SLURM_JOB_ID": "42", "SLURM_JOB_NODELIST": "n[1-4]", "SLURM_JOB_NUM_NODES": "4",
		"SLURM_TASKS_PER_NODE": "8(x4)", "SLURM_GPUS_ON_NODE": "8", "SLURM_JOB_GPUS": "0,1,2,3,4,5,6,7",
		"SLURM_GPUS_PER_NODE": "8", "SLURM_JOB_PARTITION": "low", "SLURM_SUBMIT_DIR": "/tmp/sub", "SLURMD_NODENAME": "n1",
	}
}
