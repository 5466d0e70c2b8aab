// Package layering holds no code: its test checks the module's layering,
// which the README states and reviewers would otherwise have to keep:
//
//   - plan/... does no I/O: it imports none of os, os/exec, net/http,
//     syscall;
//   - checkpoint/... knows neither the planner nor the topology: it imports
//     neither plan/... nor topo/...;
//   - processes are started in three places only: internal/slurm (Slurm's
//     client commands), the exec-task shim (wrapper/internal/shim: the
//     trainer) and the SPANK epilog (trainrun itself); test/ is exempt;
//   - the shim stays lean: wrapper/internal/shim/... depends on neither the
//     planner nor the metrics, net/http or TLS (it starts once per GPU);
//   - Slurm's client commands are named (as a command to run) in
//     internal/slurm only, and Slurm's environment (SLURM_*) is read there
//     only (spank/, which reads it through Slurm's own API, excepted).
package layering
