// Package run is the controller of `trainrun run`: inside a Slurm
// allocation it plans the layout, places one rank per GPU, launches the
// step with srun and watches it, and when the step ends decides whether to
// finish, restart inside the allocation, or requeue the job, with which exit
// code. wrapper's cmd_run.go is the command: it parses the flags into
// Options (AddFlags, Validate) and calls
//
//	cfg, err := run.Setup(opts, given, argv, deps) // the allocation and the resolved configuration
//	err = run.Run(ctx, cfg, deps)                 // the phases below; the error carries the exit code
//
// Deps is the outside world (outputs, environment, the Slurm client, the
// start time). Config is the resolved configuration: each option from its
// flag, else its TRAINRUN_* twin, else the partition's policy, else the
// flag's default, with where it came from (config.go, complete: the only
// reader of the flags given and of the policy; no phase writes it).
//
// # Phases
//
// Run drives one runner (runner.go: the configuration, and the value each
// phase returned, in their order). Each phase is a method whose result is
// that value; the files say what each reads:
//
//	setup     srun, the allocation, complete               setup.go, config.go   setup → Config
//	dirs      job and checkpoint directories; finished?    setup.go, name.go     runner.makeDirs → runDirs
//	early     the step, its shims waiting (and probing)    early.go              runner.startEarly → earlyStep
//	gather    Slurm queries and the probe, in parallel     gather.go, probe.go   runner.gather → runFacts
//	choose    --plan, the planner, or --fix                choose.go, layout.go  runner.choosePlan → choice
//	place     ranks onto GPUs                              place.go, tpsplit.go  runner.place → placed
//	store     recover, commit, resume point                prepare.go, init.go   runner.openRunStore → runStore
//	prepare   templates, plan.json, rank env, srun argv    prepare.go            runner.prepare → stepLaunch, rankEnv
//	launch    control channel, launch files, go            prepare.go, launch.go runner.startStep
//	monitor   the event loop, one method per event; the    monitor.go, stop.go   monitor.on* → stepResult
//	          stop state machine (stopState, table-tested)
//	decide    finish, stop or requeue; the exit code       decide.go             Decide (pure)
//	act       history, finished marker, scontrol requeue   act.go                runner.afterStep, runner.act
//
// Beside them: hangs and restarts inside the allocation (hang.go), a
// hang's evidence in hangs/<n>/ (hangevidence.go), loss spikes and their
// rollback (lossspike.go), shrinking onto fewer nodes (shrink.go), moving
// a late-bound job to a partition that finishes it sooner (migrate.go:
// DecideMigrate, pure), resizing a requeued job within its size range
// and deriving the next run's layout from the old size's plan (resize.go:
// DecideResize, pure), failed
// saves and nodes (faults.go, exclude.go: JudgeNodes), spare nodes
// (spare.go), the grace budget (grace.go), checkpoint compression
// (compress.go), the observer and its events (obs.go), the site
// calibration's record (calib.go), the summary and the dry run
// (summary.go), {megatron_args} and its kin (megatron_args.go), containers
// and srun's added options (container.go: pyxis's options on the step's
// srun, the runtime prefix in the launch files, --srun-arg).
//
// The step starts before the plan (early.go says why and when it cannot):
// the shims wait for the controller's go while it asks Slurm and plans. The
// shim srun starts once per task is internal/shim; the files and messages
// between the two are internal/launch.
//
// Decide is the last decision, the core promise of the product: pure and
// table-tested over every stop reason (StopReason).
//
// What the other commands use: InitialCheckpoint (--init-from),
// TemplateNames (sweep checks a command's templates), PlanFlagsNotForRun,
// and ReadRunPlan. A run's identity in its job (--name, or one derived from
// the command) is wrapper/internal/runname, which sweep and branches name
// their trials with; the job directory's layout is wrapper/internal/jobdir.
package run
