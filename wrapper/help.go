package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/trainrun/trainrun/plan"
	"github.com/trainrun/trainrun/topo"
	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
)

// Help is printed on stdout (`trainrun plan --help | less` must show it);
// errors and warnings stay on stderr. Every flag set's --help ends with the
// command's Examples (below), printed by parseFlags, so a subcommand cannot
// forget them; TestHelpOnStdoutWithExamples checks each one.

// example is one command line a user types first, with what it shows.
type example struct{ what, cmd string }

// examples are keyed by the flag set's name (fs.Name(): "plan", "ckpt list").
// TestHelpExamplesRun runs the ones that need neither Slurm nor a file.
var examples = map[string][]example{
	"plan": {
		{"the layout, memory and step time of Llama-3-70B on 64 H100s", "trainrun plan --model llama3-70b --gpu h100-sxm --gpus 64 --seq-len 8192 --global-batch 512"},
		{"the same as Megatron-LM flags", "trainrun plan --model llama3-70b --gpu h100-sxm --gpus 64 --seq-len 8192 --global-batch 512 --format megatron"},
		{"H100 or more A100s? side by side, with the time for 2T tokens", "trainrun plan --model llama3-8b --gpu h100-sxm:64,a100-80gb:128 --seq-len 8192 --global-batch 512 --tokens 2T"},
		{"evaluate a pinned layout (see 'trainrun help fix')", "trainrun plan --model llama3-8b --gpu h100-sxm --gpus 8 --seq-len 4096 --global-batch 64 --fix tp=2,pp=1"},
		{"the model presets", "trainrun plan --list-models"},
	},
	"run": {
		{"in a batch script (sbatch --open-mode=append keeps earlier incarnations' logs)", "exec trainrun run --model llama3-70b --seq-len 8192 --global-batch 1024 --ckpt-dir /lustre/$USER/ckpt/run1 -- python pretrain.py {megatron_args} --load {resume}"},
		{"a fixed layout, no planning", "exec trainrun run --fix tp=8,pp=2 --ckpt-dir /lustre/$USER/ckpt/run1 -- python train.py --tp {tp} --pp {pp}"},
		{"what it would run, inside salloc", "trainrun run --fix tp=2 --dry-run -- python train.py"},
		{"continue a finished run with more steps: a new store, started from its last checkpoint", "exec trainrun run --name run1-more --init-from /lustre/$USER/ckpt/run1/step-5000 --ckpt-dir /lustre/$USER/ckpt/run1-more -- python train.py --steps 8000 --load {resume}"},
	},
	"topo": {
		{"this node, like nvidia-smi topo -m, plus NIC roles", "trainrun topo"},
		{"the built-in captures of real machines", "trainrun topo --machine list"},
		{"an NCCL_TOPO_FILE for a cloud VM", "trainrun topo --machine ibmcloud-h100-vsi --format nccl-xml"},
		{"the cluster's switch tree", "trainrun topo --cluster --topology-conf /etc/slurm/topology.conf"},
	},
	"env": {
		{"rank 3's NCCL and torchrun variables on two HGX H100 nodes, with the reason for each", "trainrun env --machine hgx-h100 --rank 3 --fix tp=8,dp=2 --nodelist 'n[1-2]' --explain"},
		{"from a saved plan", "trainrun env --plan plan.json --rank 0"},
	},
	"partitions": {
		{"GPU type, nodes and free GPUs of every partition", "trainrun partitions --free"},
		{"where a job fits and how fast", "trainrun partitions --model llama3-70b --seq-len 8192 --global-batch 1024 --tokens 300B"},
	},
	"submit": {
		{"choose the partition and size, show every candidate, submit nothing", "trainrun submit --model llama3-70b --seq-len 8192 --global-batch 1024 --tokens 300B --dry-run -- train.sh"},
		{"submit where it finishes first; unknown flags pass to sbatch", "trainrun submit --model llama3-8b --seq-len 4096 --global-batch 256 --tokens 20B --mail-type=END -- train.sh"},
	},
	"sweep": {
		{"a 2 x 2 grid, at most 2 trials at a time, one job array; see it first", "trainrun sweep --grid lr=1e-4,3e-4 --grid wd=0,0.1 --max-concurrent 2 --time 30m --fix tp=1 --dry-run -- python train.py --lr {lr} --weight-decay {wd}"},
		{"20 random trials on a log scale", "trainrun sweep --random 20 --range lr=1e-5:1e-2:log --seed 1 --time 1h --fix tp=8 -- python train.py --lr {lr}"},
		{"every trial's state, metric and the best one", "trainrun sweep status trainrun-sweep-NAME"},
	},
	"sweep status": {
		{"every trial: parameters, state (a failed one with trainrun's error and its log), steps, metrics", "trainrun sweep status trainrun-sweep-NAME"},
		{"for a script", "trainrun sweep status trainrun-sweep-NAME --format json"},
	},
	"branches": {
		{"3 branches from one checkpoint, merged after all 3 finished", "trainrun branches --from ckpt/step-1000 --data code=/d/code,web=/d/web,math=/d/math --time 1h --merge 'python3 contrib/trainer/merge_checkpoints.py --weights {weights} --out {out} {branches}' -- python train.py --data {data} --save-final"},
	},
	"calib": {
		{"import a run's observations into the site calibration", "trainrun calib import --calibration /shared/calib /lustre/$USER/ckpt/run1/.trainrun/observations.jsonl"},
		{"what the calibration holds", "trainrun calib list --calibration /shared/calib"},
		{"plan with it", "trainrun plan --model llama3-70b --gpu h100-sxm --gpus 64 --seq-len 8192 --global-batch 512 --calibration /shared/calib"},
	},
	"report": {
		{"every incarnation of a run: checkpoints, requeues, goodput", "trainrun report trainrun-job-1234"},
		{"its timeline as SVG, and the data as JSON", "trainrun report --svg run.svg --format json trainrun-job-1234"},
	},
	"policy":       {{"validate the site's policy", "trainrun policy check /etc/slurm/trainrun.conf"}, {"what partition gpu gets, and from which line", "trainrun policy show --partition gpu /etc/slurm/trainrun.conf"}},
	"policy check": {{"validate the site's policy", "trainrun policy check /etc/slurm/trainrun.conf"}},
	"policy show":  {{"what partition gpu gets, and from which line", "trainrun policy show --partition gpu /etc/slurm/trainrun.conf"}},
	"ckpt": {
		{"every checkpoint of a store", "trainrun ckpt list --ckpt-dir /lustre/$USER/ckpt/run1"},
		{"the checkpoint a restart would resume from", "trainrun ckpt latest --ckpt-dir /lustre/$USER/ckpt/run1"},
		{"ask the running job for a checkpoint now", "trainrun ckpt request --ckpt-dir /lustre/$USER/ckpt/run1"},
	},
	"ckpt list":     {{"every checkpoint: state, step, size, which is latest", "trainrun ckpt list --ckpt-dir /lustre/$USER/ckpt/run1"}},
	"ckpt verify":   {{"reread every file of every committed checkpoint", "trainrun ckpt verify --all --ckpt-dir /lustre/$USER/ckpt/run1"}},
	"ckpt prune":    {{"what keeping the newest 3 would delete", "trainrun ckpt prune --keep 3 --dry-run --ckpt-dir /lustre/$USER/ckpt/run1"}},
	"ckpt latest":   {{"the checkpoint a restart would resume from", "trainrun ckpt latest --ckpt-dir /lustre/$USER/ckpt/run1"}},
	"ckpt request":  {{"a checkpoint now, then stop the job", "trainrun ckpt request --then stop --ckpt-dir /lustre/$USER/ckpt/run1"}},
	"ckpt drain":    {{"the job epilog's pass, by hand", "trainrun ckpt drain --local /tmp/ckpt --ckpt-dir /lustre/$USER/ckpt/run1"}},
	"ckpt compress": {{"compress every committed checkpoint losslessly", "trainrun ckpt compress --all --ckpt-dir /lustre/$USER/ckpt/run1"}},
	"ckpt restore":  {{"an uncompressed copy of one checkpoint", "trainrun ckpt restore step-1000 --to /tmp/step-1000 --ckpt-dir /lustre/$USER/ckpt/run1"}},
}

// writeExamples prints the Examples section of the flag set named name.
func writeExamples(w io.Writer, name string) {
	ex := examples[name]
	if len(ex) == 0 {
		return
	}
	fmt.Fprintln(w, "\nExamples:")
	for _, e := range ex {
		fmt.Fprintf(w, "  # %s\n  %s\n", e.what, e.cmd)
	}
	fmt.Fprintln(w, "\nMore: 'trainrun help exit-codes', 'trainrun help fix', 'trainrun help trainer'.")
}

// helpTopics are `trainrun help TOPIC`.
var helpTopics = map[string]struct {
	short string
	write func(w io.Writer)
}{
	"exit-codes": {"what each exit status means and what a job script should do", func(w io.Writer) { fmt.Fprint(w, exitCodeHelp()) }},
	"fix":        {"the --fix grammar (plan, env, run, the plugin's --train-layout)", writeFixHelp},
	"trainer":    {"what the training process gets and must do (environment, checkpoint handshake)", writeTrainerHelp},
}

// runHelp is `trainrun help [TOPIC|COMMAND]`.
func runHelp(ctx context.Context, env *runEnv, args []string) int {
	if len(args) == 0 {
		usage(env.stdout)
		return exitcode.OK
	}
	if t, ok := helpTopics[args[0]]; ok {
		t.write(env.stdout)
		return exitcode.OK
	}
	if c, ok := commands[args[0]]; ok && !c.hidden {
		return dispatch(ctx, env, append([]string{c.name}, append(args[1:], "--help")...))
	}
	fmt.Fprintf(env.stderr, "trainrun: help: no command or topic %q; topics: %s; commands: %s\n", args[0], strings.Join(topicNames(), ", "), strings.Join(commandNames(), ", "))
	return exitcode.Usage
}

func topicNames() []string {
	var out []string
	for n := range helpTopics {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// commandNames are the commands a user sees (not the internal ones), sorted.
func commandNames() []string {
	var out []string
	for n, c := range commands {
		if !c.hidden {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

func writeFixHelp(w io.Writer) {
	fmt.Fprint(w, joinLines(
		"--fix KEY=VALUE,... pins parts of the layout; the planner chooses the rest.",
		"One grammar everywhere: trainrun plan --fix, env --fix, run --fix, submit/sweep --fix and the plugin's",
		"--train-layout. Keys (each at most once, comma-separated, spaces allowed after a comma):",
		"",
		"  tp, pp, vpp, cp, ep, dp   tensor, pipeline (and interleaved chunks per stage), context, expert, data",
		"                            parallel degrees: positive integers; tp·pp·cp·dp is the GPU count",
		"  etp                       Megatron-Core's expert tensor-parallel size (default tp); ep·etp divides tp·dp·cp",
		"  mbs, grad_accum           micro-batch (sequences) and accumulation steps; global batch = mbs·dp·grad_accum",
		"  recompute                 none | selective | full",
		"  zero                      0-3 (optimizer / gradient / parameter sharding)",
		"  sp                        true | false (sequence parallelism, with tp > 1)",
		"  offload                   none | optimizer | params | nvme (params and nvme need zero=3; nvme needs --nvme-bw)",
		"",
		"Rules a layout must keep (breaking one exits "+fmt.Sprint(exitcode.Layout)+" 'layout', not 3 'no-fit'):",
		"  tp·pp·cp divides the GPUs; heads and KV heads divisible by tp; layers split over pp (and pp·vpp);",
		"  global batch divisible by mbs·dp; seq_len divisible by 2·cp; experts divisible by ep.",
		"When every degree is pinned, plan evaluates that layout and prints it even when it does not fit.",
		"",
		"Examples:",
		"  trainrun plan --model llama3-70b --gpu h100-sxm --gpus 64 --seq-len 8192 --global-batch 512 --fix tp=8,pp=4",
		"  trainrun plan --model mixtral-8x7b --gpu h100-sxm --gpus 64 --seq-len 4096 --global-batch 512 --fix tp=4,ep=8,etp=1",
		"  trainrun env --machine hgx-h100 --rank 3 --fix tp=8,dp=2 --nodelist 'n[1-2]'",
	))
	fmt.Fprintf(w, "\nAccepted keys: %s\n", plan.PinKeys)
}

func writeTrainerHelp(w io.Writer) {
	fmt.Fprint(w, joinLines(
		"What `trainrun run` gives every training process, and what it expects back.",
		"",
		"Environment (torchrun-compatible): MASTER_ADDR MASTER_PORT WORLD_SIZE RANK LOCAL_RANK LOCAL_WORLD_SIZE",
		"  NODE_RANK GROUP_RANK. Rank order is Megatron's tp-cp-ep-dp-pp (TP varies fastest).",
		"The plan: TRAINRUN_TP TRAINRUN_PP TRAINRUN_VPP TRAINRUN_CP TRAINRUN_EP TRAINRUN_DP TRAINRUN_MICRO_BATCH",
		"  TRAINRUN_GRAD_ACCUM TRAINRUN_RECOMPUTE, and TRAINRUN_PLAN (the plan's JSON file).",
		"Checkpoints: TRAINRUN_CKPT_DIR (one subdirectory per checkpoint), TRAINRUN_RESUME_DIR (the latest",
		"  committed checkpoint, empty on a first start), TRAINRUN_RESTART_COUNT, TRAINRUN_CKPT_SIGNAL.",
		"Faults: TRAINRUN_SKIP_STEPS (a loss spike's steps to skip, e.g. 57-63,120; client: should_skip(step)),",
		"  TRAINRUN_COLLECTIVE_LOG and TRAINRUN_STACK_FILE (a hang's evidence; client: record_collectives()).",
		"  Export TRAINRUN_RESHARD=dp in the job when the trainer loads a checkpoint saved at another dp: then",
		"  --shrink yes continues on fewer nodes (a smaller TRAINRUN_DP, a larger TRAINRUN_GRAD_ACCUM).",
		"Templates in the command: {tp} {pp} {vpp} {cp} {ep} {dp} {micro_batch} {grad_accum} {resume} {ckpt_dir}",
		"  {megatron_args} (the whole Megatron flag set), {deepspeed_config} and {torchtitan_args}.",
		"Megatron stacks: TRAINRUN_MEGATRON_ARGS, the same flags as shell-quoted words (run and the plugin).",
		"",
		"The checkpoint handshake:",
		"  1. trainrun sends TRAINRUN_CKPT_SIGNAL (default SIGUSR2; NCCL uses SIGUSR1) before the time limit, on",
		"     preemption or on 'trainrun ckpt request'. Treat SIGTERM the same: Slurm sends it to every process.",
		"  2. Set a flag in the handler (never save inside it), agree with the other ranks on the step, save into",
		"     a new directory TRAINRUN_CKPT_DIR/<tag>/ (e.g. step-1200); once a rank's files are durable it creates",
		"     the empty file <tag>/.trainrun/done.<RANK>. After a checkpoint asked for because the job must stop,",
		"     exit 0: trainrun decides what happens next.",
		"  3. trainrun verifies (every shard, sizes and checksums in a manifest), commits atomically, updates latest,",
		"     and only then requeues. A restart resumes from the latest verified checkpoint only.",
		"Native markers (Megatron's latest_checkpointed_iteration.txt, PyTorch DCP's .metadata, Hugging Face and",
		"Lightning layouts) work without the handshake, with a weaker guarantee that trainrun states.",
		"",
		"contrib/trainer/trainrun_client.py implements the trainer side (standard library only);",
		"contrib/trainer/train_example.py is a complete PyTorch example.",
	))
}

// didYouMean is ` (did you mean "X"?)` for the candidate within edit
// distance 2 of s (`trainrun pln`), else "".
func didYouMean(s string, candidates []string) string {
	best, bestD := "", 3
	for _, c := range candidates {
		if d := topo.EditDistance(s, c); d < bestD {
			best, bestD = c, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}
