// Command trainrun is the composition root: it reads Slurm's environment, builds
// the real adapters (sysfs, NVML, srun, scontrol), runs the planner and the
// checkpoint lifecycle, and owns signals and exit codes.
//
// # Architecture
//
// Each cmd_*.go file is one command: its options, flags, help and a
// run function; main.go dispatches and is the only place that turns errors
// into exit codes (internal/exitcode holds the codes). The machinery lives
// in packages below:
//
//	../internal/slurm   the only code that runs scontrol, srun, scancel or
//	                    reads an allocation's SLURM_* (Client, Runner, ParseRecord)
//	internal/launch     the controller ↔ shim contract: the launch files
//	                    (Common, Rank, WriteDir, Read), control messages (Msg,
//	                    Encode, Parse), Server, Client, signal names, srun argv
//	internal/run        the `trainrun run` controller: Setup, Run, Decide
//	internal/planflags  trainrun plan's flags, which every planning command
//	                    takes, and the planner's inputs built from them
//	internal/shim       the per-task shim (exec-task, trainrun-shim)
//	internal/exitcode   the exit codes and the error that carries one
//	obs                 metrics, webhooks, event log, report
//
// `trainrun run` (cmd_run.go: flags, help) parses its options and hands
// them to internal/run: Setup resolves them once (the flags, their
// TRAINRUN_* twins, the partition's policy and TRAINRUN_PLAN) into an
// immutable configuration, and Run runs the phases (setup, dirs, early,
// gather, choose, place, store, prepare, launch, monitor, decide, act);
// `go doc ./wrapper/internal/run` has the table of where each lives.
//
// The shim srun starts once per task is internal/shim (`trainrun
// exec-task`, cmd_shim.go, or the lean internal/shim/trainrun-shim binary
// next to trainrun): shimWait (say wait, probe the node when asked, wait for go),
// taskEnv, resolveCommand, startDrain, then superviseTask relays signals
// and the exit over internal/launch.
package main
