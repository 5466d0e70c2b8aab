package plan

import (
	"fmt"
	"math"
	"strconv"
)

// RankVar is one row of the rank-environment table: a variable trainrun
// sets in every training process (PRODUCT.md, "Environment of every
// training process"). The table is built here once and read by RankEnv
// (`trainrun env` and the SPANK plugin), PlanEnv (`trainrun plan --format
// env`) and `trainrun run`, so adding a TRAINRUN_* variable is one row.
type RankVar struct {
	Key, Value string
	Why        string // RankEnv's explanation
	PerRank    bool   // differs between ranks of one job
	KeepUser   bool   // a value the user set is kept (MASTER_ADDR/PORT)
}

// LauncherVars are torchrun's variables of rank rp in a job of world ranks,
// localWorld of them on rp's node, with the rendezvous at addr:port on
// rank0Node (the node of rank 0, named in MASTER_ADDR's explanation).
func LauncherVars(rp RankPlacement, world, localWorld int, addr string, port int, rank0Node string) []RankVar {
	i := strconv.Itoa
	return []RankVar{
		{Key: "MASTER_ADDR", Value: addr, Why: "rendezvous host: the node of rank 0 (" + rank0Node + ")", KeepUser: true},
		{Key: "MASTER_PORT", Value: i(port), Why: "rendezvous port on MASTER_ADDR", KeepUser: true},
		{Key: "WORLD_SIZE", Value: i(world), Why: "ranks in the job: tp·cp·dp·pp"},
		{Key: "RANK", Value: i(rp.Rank), PerRank: true, Why: fmt.Sprintf("global rank in Megatron's tp-cp-ep-dp-pp order: tp=%d cp=%d ep=%d dp=%d pp=%d", rp.TP, rp.CP, rp.EP, rp.DP, rp.PP)},
		{Key: "LOCAL_RANK", Value: i(rp.LocalRank), PerRank: true, Why: fmt.Sprintf("slot on %s; it drives GPU %d, the one nearest rail %d", rp.Node, rp.GPU, rp.LocalRank)},
		{Key: "LOCAL_WORLD_SIZE", Value: i(localWorld), Why: "ranks on this node"},
		{Key: "NODE_RANK", Value: i(rp.NodeRank), PerRank: true, Why: "this node's index in rank order (the node of rank 0 is 0)"},
		{Key: "GROUP_RANK", Value: i(rp.NodeRank), PerRank: true, Why: "torchrun's name for NODE_RANK"},
	}
}

// ContractPlanVars is how many of PlanVars' rows PRODUCT.md's list names
// (TRAINRUN_TP … TRAINRUN_RECOMPUTE); the rest are extras beyond it.
const ContractPlanVars = 9

// PlanVars are the plan's TRAINRUN_* variables of layout l, as given (each
// caller normalises l its own way), in a fixed order: the contract's first,
// then TRAINRUN_RECOMPUTE_LAYERS, TRAINRUN_SP, TRAINRUN_ZERO and
// TRAINRUN_OFFLOAD so a trainer other than Megatron can apply the whole plan.
// TRAINRUN_PLAN, the path of the plan JSON, is the launcher's to add.
func PlanVars(l Layout) []RankVar {
	i := strconv.Itoa
	return []RankVar{
		{Key: "TRAINRUN_TP", Value: i(l.TP), Why: "the plan's tensor-parallel degree"},
		{Key: "TRAINRUN_PP", Value: i(l.PP), Why: "the plan's pipeline-parallel degree"},
		{Key: "TRAINRUN_VPP", Value: i(l.VPP), Why: "the plan's virtual pipeline stages per rank"},
		{Key: "TRAINRUN_CP", Value: i(l.CP), Why: "the plan's context-parallel degree"},
		{Key: "TRAINRUN_EP", Value: i(l.EP), Why: "the plan's expert-parallel degree"},
		{Key: "TRAINRUN_DP", Value: i(l.DP), Why: "the plan's data-parallel degree"},
		{Key: "TRAINRUN_MICRO_BATCH", Value: i(l.MicroBatch), Why: "the plan's micro-batch size"},
		{Key: "TRAINRUN_GRAD_ACCUM", Value: i(l.GradAccum), Why: "the plan's micro-batches per step per data-parallel rank"},
		{Key: "TRAINRUN_RECOMPUTE", Value: l.Recompute, Why: "the plan's activation recomputation"},
		{Key: "TRAINRUN_RECOMPUTE_LAYERS", Value: i(l.RecomputeLayers), Why: "the plan's layers per model chunk recomputed in full (0 = all)"},
		{Key: "TRAINRUN_SP", Value: strconv.FormatBool(l.SP), Why: "the plan's sequence parallelism"},
		{Key: "TRAINRUN_ZERO", Value: i(l.Zero), Why: "the plan's optimizer-state sharding stage"},
		{Key: "TRAINRUN_OFFLOAD", Value: l.Offload, Why: "the plan's offload to host memory"},
	}
}

// RunJob is what `trainrun run` adds to every rank beyond the launcher and
// plan variables: its checkpoint store and job directory.
type RunJob struct {
	PlanPath, CkptDir, ResumeDir, CkptSignal, JobDir string
	RestartCount                                     int
}

// RunVars are the variables only `trainrun run` sets (PRODUCT.md): the
// run's files and, per rank, its node and the node's GPU index (gpu < 0:
// not probed, TRAINRUN_GPU is left to the shim).
func RunVars(j RunJob, node string, gpu int) []RankVar {
	v := []RankVar{
		{Key: "TRAINRUN_PLAN", Value: j.PlanPath, Why: "the plan JSON this layout comes from"},
		{Key: "TRAINRUN_CKPT_DIR", Value: j.CkptDir, Why: "the run's durable checkpoint store"},
		{Key: "TRAINRUN_RESUME_DIR", Value: j.ResumeDir, Why: "the checkpoint to resume from (empty: start fresh)"},
		{Key: "TRAINRUN_RESTART_COUNT", Value: strconv.Itoa(j.RestartCount), Why: "how often Slurm requeued the job"},
		{Key: "TRAINRUN_CKPT_SIGNAL", Value: j.CkptSignal, Why: "the signal that asks for a checkpoint"},
		{Key: "TRAINRUN_JOB_DIR", Value: j.JobDir, Why: "the job directory"},
		{Key: "CUDA_DEVICE_ORDER", Value: CUDADeviceOrder, Why: "PCI bus order, the order nvidia-smi, NVML and the placement use"},
		{Key: "TRAINRUN_NODE", Value: node, PerRank: true, Why: "the rank's node"},
	}
	if gpu >= 0 {
		v = append(v, RankVar{Key: "TRAINRUN_GPU", Value: strconv.Itoa(gpu), PerRank: true, Why: "the node's GPU index of the rank"})
	}
	return v
}

// CUDADeviceOrder is the CUDA_DEVICE_ORDER every rank gets.
const CUDADeviceOrder = "PCI_BUS_ID"

// MegatronLayout returns l with DP as Megatron's data-parallel size
// world/(TP·CP·PP), checking that the degrees use exactly world GPUs; a
// layout whose DP excludes EP (world = TP·CP·EP·DP·PP, DP being the
// expert-data-parallel size) is converted. The error names the degrees and
// the product; the caller adds what world is ("the step has N tasks").
func MegatronLayout(l Layout, world int) (Layout, error) {
	one := func(v int) int { return max(v, 1) }
	tp, cp, ep, dp, pp := one(l.TP), one(l.CP), one(l.EP), one(l.DP), one(l.PP)
	n, ok := checkedMul(tp, cp, dp, pp)
	withEP, okEP := checkedMul(n, ep)
	switch {
	case ok && n == world:
	case ok && okEP && ep > 1 && withEP == world:
		l.DP = dp * ep
	case !ok:
		return l, &LayoutSizeError{TP: tp, CP: cp, EP: ep, DP: dp, PP: pp, World: world, Overflow: true}
	default:
		return l, &LayoutSizeError{TP: tp, CP: cp, EP: ep, DP: dp, PP: pp, World: world, Uses: n}
	}
	return l, nil
}

// LayoutSizeError is MegatronLayout's error: the degrees do not use world
// GPUs. Unit words the message ("GPUs", "tasks"; default "GPUs").
type LayoutSizeError struct {
	TP, CP, EP, DP, PP, World, Uses int
	Overflow                        bool
	Unit                            string
}

func (e *LayoutSizeError) Error() string {
	unit := e.Unit
	if unit == "" {
		unit = "GPUs"
	}
	if e.Overflow {
		return fmt.Sprintf("tp=%d cp=%d dp=%d pp=%d: the product overflows; the step has %d %s", e.TP, e.CP, e.DP, e.PP, e.World, unit)
	}
	return fmt.Sprintf("tp=%d cp=%d dp=%d pp=%d (ep=%d) uses %d %s", e.TP, e.CP, e.DP, e.PP, e.EP, e.Uses, unit)
}

// checkedMul is the product of positive vs, ok false when it overflows an int.
func checkedMul(vs ...int) (int, bool) {
	p := 1
	for _, v := range vs {
		if v > 0 && p > math.MaxInt/v {
			return 0, false
		}
		p *= v
	}
	return p, true
}

// MegatronCoords decomposes a global rank in Megatron's order tp-cp-ep-dp-pp
// (TP fastest; zero degrees count as 1). For dense layers Megatron's groups
// are tp-cp-dp-pp; EP splits the data-parallel ranks (ep is the position
// inside the dp·cp block modulo ep). The placement uses the same maths.
func MegatronCoords(l Layout, rank int) (tp, cp, ep, dp, pp int) {
	c := coords(normLayout(l), rank)
	return c.tp, c.cp, c.ep, c.dp, c.pp
}
