package main

import (
	"bytes"
	"context"
	"strings"

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
