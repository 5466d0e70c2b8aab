package main

import (
	"context"

	"github.com/trainrun/trainrun/wrapper/internal/shim"
)

func init() {
	register(&command{name: "exec-task", short: "internal: run one task of a 'trainrun run' step (srun starts it)", run: runExecTask, hidden: true})
}

// runExecTask is the per-task shim, internal/shim (the lean trainrun-shim
// binary runs the same code without the rest of trainrun).
func runExecTask(ctx context.Context, env *runEnv, args []string) error {
	return shim.Run(ctx, shim.Env{Getenv: env.getenv, Stdout: env.stdout, Stderr: env.stderr}, args)
}
