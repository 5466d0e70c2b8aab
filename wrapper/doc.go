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
//	internal/run        the run's decisions: Decide(Outcome) Decision
//	internal/shim       the per-task shim (exec-task, trainrun-shim)
//	internal/exitcode   the exit codes and the error that carries one
//	obs                 metrics, webhooks, event log, report
//
// `trainrun run` (cmd_run.go: options, flags, help and the spine, runner.run)
// first resolves its options once: complete (cmd_run_config.go) turns the
// flags, their TRAINRUN_* twins, the partition's policy and TRAINRUN_PLAN
// into a runConfig whose values carry their source; it is the only reader
// of the flag set and the policy, and no phase writes it. Then it runs these
// phases, each a method of runner whose result is one runner field (run_summary.go
// prints what the run will do):
//
//	setup     srun, the allocation, complete               run_setup.go    runner.setup → cfg, alloc
//	dirs      job and checkpoint directories; finished?    run_setup.go    runner.makeDirs → dirs
//	early     the step, its shims waiting (and probing)    run_early.go    runner.startEarly → earlyStep
//	gather    Slurm queries and the probe, in parallel     run_gather.go   runner.gather → runFacts
//	choose    --plan, the planner, or --fix                run_choose.go   runner.choosePlan → choice
//	place     ranks onto GPUs                              run_prepare.go  runner.place → placed, run_place.go
//	store     recover, commit, resume point                run_prepare.go  runner.openRunStore → runStore
//	prepare   templates, plan.json, rank env, srun argv    run_prepare.go  runner.prepare → rankEnv, stepLaunch
//	launch    control channel, launch files, go (or the    run_prepare.go  runner.startStep
//	          step, when it did not start early)
//	monitor   the event loop, one method per event; the    run_monitor.go  monitor.on* → stepResult
//	          stop state machine (stopState, table-tested) run_stop.go
//	decide    finish, stop or requeue; the exit code       internal/run    Decide (pure)
//	act       history, finished marker, scontrol requeue   run_act.go      runner.afterStep, runner.act
//
// The step starts before the plan (run_early.go says why and when it cannot):
// the shims wait for the controller's go while it asks Slurm and plans.
//
// The shim srun starts once per task is internal/shim (`trainrun
// exec-task`, cmd_shim.go, or the lean internal/shim/trainrun-shim binary
// next to trainrun): shimWait (say wait, probe the node when asked, wait for go),
// taskEnv, resolveCommand, startDrain, then superviseTask relays signals
// and the exit over internal/launch.
package main
