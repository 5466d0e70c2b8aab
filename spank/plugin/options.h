/* options.h: the --train-* options as the C half registers them.
 * Generated from spank.Options by `go test ./spank -run TestCOptionTable -update`;
 * do not edit. The index of a row is the option's val, and the Go half
 * checks the row count when it loads. */
static const struct tr_opt tr_opts[] = {
	{ "train-model", "NAME",
	  "model to train: a trainrun preset (trainrun plan --list-models) or an absolute path of a Hugging Face config.json; exported as TRAINRUN_MODEL [env TRAINRUN_MODEL]",
	  "TRAINRUN_MODEL", 1 },
	{ "train-layout", "tp=N,pp=N,...",
	  "parallel layout, as trainrun run --fix: tp pp vpp cp ep dp mbs grad_accum recompute zero sp offload (dp defaults to the tasks left over); sets RANK order and TRAINRUN_TP... [env TRAINRUN_LAYOUT]",
	  "TRAINRUN_LAYOUT", 1 },
	{ "train-ckpt", "DIR",
	  "checkpoint directory (absolute; %u user, %j job id, %x job name), within the site's CkptRoots; exported as TRAINRUN_CKPT_DIR [env TRAINRUN_CKPT_DIR]",
	  "TRAINRUN_CKPT_DIR", 1 },
	{ "train-ckpt-signal", "SIG[@LEAD]",
	  "signal that asks the trainer for a checkpoint, and how long before the time limit (e.g. USR2@10m); exported as TRAINRUN_CKPT_SIGNAL, TRAINRUN_CKPT_LEAD [env TRAINRUN_CKPT_SIGNAL]",
	  "TRAINRUN_CKPT_SIGNAL", 1 },
	{ "train-nccl", "on|off",
	  "off: inject only the torchrun and TRAINRUN_* variables, not the NCCL/CUDA ones; on: inject them even where the policy has InjectEnv=no (if it lets users override it) [env TRAINRUN_NCCL]",
	  "TRAINRUN_NCCL", 1 },
	{ "train-explain", NULL,
	  "dry run: every task prints the environment trainrun would set and why, and nothing is injected [env TRAINRUN_EXPLAIN]",
	  "TRAINRUN_EXPLAIN", 0 },
	{ "train-batch", "GLOBALxSEQLEN",
	  "global batch and sequence length, e.g. 1024x8192 (1024 sequences of 8192 tokens per step); with --train-model the plugin plans the layout (TRAINRUN_TP..., TRAINRUN_PLAN); exported as TRAINRUN_BATCH [env TRAINRUN_BATCH]",
	  "TRAINRUN_BATCH", 1 },
};
