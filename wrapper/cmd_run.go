package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/trainrun/trainrun/checkpoint"
	"github.com/trainrun/trainrun/wrapper/internal/run"
)

func init() {
	register(&command{name: "run", short: "plan, place and launch the training step inside a Slurm allocation", run: runRun})
}

const runSynopsis = "run [flags] -- CMD [ARGS...]"

var runHelpTail = joinLines(
	"",
	"Inside an allocation (sbatch or salloc), plans the layout (or takes --fix/--plan), places one rank",
	"per GPU, writes plan.json, hostfile and summary.txt into the job directory and launches the step",
	"with srun. Each task gets the torchrun variables (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE,",
	"NODE_RANK, MASTER_ADDR, MASTER_PORT) and TRAINRUN_* (trainrun help trainer lists them).",
	"",
	"With the SPANK plugin, '#SBATCH --train-model=NAME --train-batch=GLOBALxSEQLEN' reach trainrun run",
	"as TRAINRUN_MODEL and TRAINRUN_BATCH: they stand for --model and --seq-len/--global-batch where",
	"those flags are not given (so '#SBATCH --train-model=llama3-70b' then 'trainrun run --seq-len 8192",
	"--global-batch 1024 -- ...' plans llama3-70b). Likewise --train-stack, --train-precision and",
	"--train-finetune reach it as TRAINRUN_STACK, TRAINRUN_PRECISION and TRAINRUN_FINETUNE: each of",
	"--stack, --precision and --finetune comes from its flag, else that twin, else the partition's",
	"policy (Stack=, Precision=, Finetune=), else the flag's default.",
	"",
	"Templates in CMD: {tp} {pp} {vpp} {cp} {ep} {dp} {micro_batch} {grad_accum} {resume} {ckpt_dir}",
	"{megatron_args} ({megatron_args} as a whole argument expands to one argument per flag; inside a",
	"longer argument, to shell-quoted words) {deepspeed_config} (the plan's ds_config.json in the job dir)",
	"{torchtitan_args} (plan --format torchtitan's overrides, expanded as {megatron_args} is; put it last).",
	"On a Megatron stack the ranks also get TRAINRUN_MEGATRON_ARGS: {megatron_args} as shell-quoted words.",
	"",
	"Checkpoints: trainrun asks every training process to checkpoint with TRAINRUN_CKPT_SIGNAL (once),",
	"--ckpt-lead before the job's end time, on SIGUSR1 to trainrun itself (#SBATCH --signal=B:USR1@90;",
	"the script must 'exec trainrun run ...' for the batch shell's signal to reach it, see",
	"contrib/jobs/), and Slurm's own SIGTERM at preemption reaches the trainer directly. The trainer",
	"saves to TRAINRUN_CKPT_DIR/<tag>/, marks "+checkpoint.DonePattern+", and exits 0; trainrun",
	"commits the checkpoint and requeues the job (scontrol requeue) up to --max-requeue times.",
	"'trainrun ckpt request --then continue|stop|requeue' asks for one while the job runs.",
	"Tiered: with --ckpt-local-dir the trainer saves into TRAINRUN_CKPT_LOCAL_DIR/<tag>/ on node-local",
	"storage and marks done there; each node's first task drains it into the store in the background,",
	"trainrun commits when every node's drain is done, and the step ends only after its drains.",
	"Grace budget: each checkpoint's time from request to commit is kept in the job's history; trainrun",
	"warns when the lead, the partition's GraceTime or KillWait is shorter (policy CkptLeadAdapt=yes",
	"raises the lead).",
	"Hangs: every rank's report_progress is its liveness (TRAINRUN_HEARTBEAT_FD, node-local). A step",
	"without progress for --hang-timeout is logged (rank, node, GPU, process state), asked for a stack",
	"dump (SIGURG, faulthandler), killed and restarted inside the job from the latest checkpoint up to",
	"--max-restarts times, then requeued. Stragglers (1.5x their peers' step time) are logged.",
	"Faults: a save the disk refuses (ENOSPC, EDQUOT, EIO; the trainer marks "+checkpoint.FailedPattern+")",
	"is discarded and reported with the file system's free space; the latest stays, the next save retries, and a",
	"stop whose save failed requeues from it. A failed step's node (lost, or its rank failed first) is kept in the",
	"history; a requeued job excludes lost nodes (scontrol update ExcNodeList; use #SBATCH --no-kill).",
	"Restarts: a crash or a lost node is first restarted inside the job (--max-restarts; a lost node only",
	"onto a --spare-nodes node, with the same world size), then the job is requeued.",
	"Tune: --tune K[:STEPS] first runs the planner's K best layouts STEPS steps each as steps of the job",
	"(TRAINRUN_CKPT_DIR a scratch directory, removed after; each trial's step is killed once its",
	"report_progress gives a steady step time, or at its share of --tune-budget), drops one that fails,",
	"records every trial as an observation and trains the fastest measured layout (kept for a requeue in",
	"CKPT_DIR/.trainrun/tune.json). --dry-run lists the candidates.",
	"",
)

func runRun(ctx context.Context, env *runEnv, args []string) error {
	t0 := time.Now()
	var o run.Options
	fs := newFlags("run", runSynopsis, env.stdout)
	o.AddFlags(fs, env.getenv)
	fs.Usage = func() {
		fmt.Fprintf(env.stdout, "Usage: trainrun %s\n\nFlags:\n", runSynopsis)
		fs.PrintDefaults()
		fmt.Fprint(env.stdout, runHelpTail)
		fmt.Fprint(env.stdout, exitCodeTable())
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	argv := fs.Args()
	if len(argv) == 0 {
		return usageErrorf("no training command: put it after --, e.g. trainrun run --fix tp=8 -- python train.py --tp {tp}")
	}
	if err := o.Validate(); err != nil {
		return err
	}
	deps := run.Deps{Stdout: env.stdout, Stderr: env.stderr, Getenv: env.getenv, Slurm: env.slurm, Version: version, Start: t0}
	cfg, err := run.Setup(o, givenFlags(fs), argv, deps)
	if err != nil {
		return err
	}
	return run.Run(ctx, cfg, deps)
}

// givenFlags are the flags set on fs's command line.
func givenFlags(fs *pflag.FlagSet) map[string]bool {
	given := map[string]bool{}
	fs.Visit(func(f *pflag.Flag) { given[f.Name] = true })
	return given
}
