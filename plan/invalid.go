package plan

import (
	"fmt"
	"strconv"
	"strings"
)

// Why nothing was planned decides what to do about it, so it is told apart
// (issue 30): memory ("does not fit": more GPUs, recompute, LoRA, offload)
// from a layout the rules forbid (divisibility: other degrees, batch or GPU
// count) and from a job the hardware cannot run (capability: another
// precision or GPU). Result.Invalid carries the last two.
const (
	InvalidLayout     = "layout"     // every candidate broke a divisibility rule
	InvalidCapability = "capability" // the GPU or cluster lacks what the job asks for
)

// capabilityReason is why the GPU or cluster cannot run the job with the
// pins at all, whatever the degrees, or "".
func capabilityReason(j Job, c Cluster, p Pins) string {
	switch {
	case j.Precision == FP8 && c.GPU.PeakFP8 <= 0:
		return fmt.Sprintf("%s has no FP8 tensor cores", c.GPU.Name)
	case j.Precision == BF16 && !c.GPU.HasBF16():
		return fmt.Sprintf("%s has no BF16 (its tensor cores do FP16)", c.GPU.Name)
	case p.Offload != nil && *p.Offload == "nvme" && c.NVMeBW <= 0:
		return "offload=nvme needs the nodes' NVMe bandwidth (nvme_bandwidth, --nvme-bw)"
	case p.CP != nil && *p.CP > 1 && (j.Stack == StackMegatron2022 || c.GPU.AttentionEff <= 0):
		return "cp > 1 needs a fused (flash) attention kernel"
	}
	return ""
}

// invalidKind is Result.Invalid for a search that found no layout to
// evaluate against memory.
func invalidKind(j Job, c Cluster, p Pins) string {
	if capabilityReason(j, c, p) != "" {
		return InvalidCapability
	}
	return InvalidLayout
}

// invalidMessage is NoFit's text when r.Invalid is set: the rule and the
// change that applies, never "more GPUs would fit".
func invalidMessage(m Model, j Job, c Cluster, o SearchOptions, r Result) string {
	if why := capabilityReason(j, c, o.Pins); why != "" {
		return fmt.Sprintf("%s cannot run on %s: %s; %s", m.Name, c.GPU.Name, why, capabilityAdvice(j, c, o.Pins))
	}
	reason := ""
	cfg := ""
	if len(r.Rejected) > 0 {
		cfg, reason = r.Rejected[0].Config, r.Rejected[0].Reason
	}
	msg := fmt.Sprintf("no layout of %s can be split over %d x %s", m.Name, c.GPUs, c.GPU.Name)
	if cfg != "" {
		msg += fmt.Sprintf(" (%s: %s)", cfg, reason)
	}
	return msg + "; " + layoutAdvice(m, j, c, o.Pins, reason)
}

func capabilityAdvice(j Job, c Cluster, p Pins) string {
	switch {
	case j.Precision == FP8 && c.GPU.PeakFP8 <= 0:
		return "use --precision " + string(PrecisionFor("", c.GPU)) + ", or a GPU with FP8 (" + strings.Join(gpusWith(func(g GPU) bool { return g.PeakFP8 > 0 }), " ") + ")"
	case j.Precision == BF16 && !c.GPU.HasBF16():
		return "use --precision fp16"
	case p.Offload != nil && *p.Offload == "nvme":
		return "give the nodes' NVMe bandwidth with --nvme-bw GB/s (or the policy's NVMeBW=), or offload=optimizer|params"
	}
	return "drop cp from --fix, or use --stack megatron-core on a GPU with flash attention"
}

// layoutAdvice names the nearest values that keep the rule reason broke.
func layoutAdvice(m Model, j Job, c Cluster, p Pins, reason string) string {
	get := func(v *int) int {
		if v == nil {
			return 1
		}
		return *v
	}
	switch {
	case strings.Contains(reason, "not the ") && strings.Contains(reason, "GPUs"):
		prod := get(p.TP) * get(p.PP) * get(p.CP)
		if c.GPUs%prod != 0 {
			return fmt.Sprintf("tp·pp·cp = %d does not divide the %d GPUs; choose degrees whose product divides %d, or ask for a multiple of %d GPUs", prod, c.GPUs, c.GPUs, prod)
		}
		return fmt.Sprintf("tp·pp·cp·dp must be the %d GPUs: leave dp out of --fix (it is the GPUs left over) or change the GPU count", c.GPUs)
	case strings.Contains(reason, "global batch") && strings.Contains(reason, "micro_batch·dp = "):
		k, _ := strconv.Atoi(reason[strings.LastIndex(reason, "= ")+2:])
		if k > 0 {
			lo, hi := j.GlobalBatch/k*k, (j.GlobalBatch/k+1)*k
			alt := ""
			if lo > 0 {
				alt = fmt.Sprintf("%d or ", lo)
			}
			return fmt.Sprintf("the global batch must be a multiple of micro_batch·dp = %d: use --global-batch %s%d, or a dp (and micro-batch) whose product divides %d", k, alt, hi, j.GlobalBatch)
		}
	case strings.Contains(reason, "heads are not divisible by tp"):
		return fmt.Sprintf("tp must divide the %d attention and %d KV heads: tp=%s", m.Heads, m.kvHeads(), strings.Join(divisorsUpTo(gcd(m.Heads, m.kvHeads()), c.GPUs), ","))
	case strings.Contains(reason, "experts are not divisible"):
		return fmt.Sprintf("ep must divide the %d experts: ep=%s", m.Experts, strings.Join(divisorsUpTo(m.Experts, c.GPUs), ","))
	}
	return "change the pins or the batch ('trainrun help fix' lists the rules)"
}

func divisorsUpTo(n, limit int) []string {
	var out []string
	for d := 1; d <= n && d <= limit; d++ {
		if n%d == 0 {
			out = append(out, strconv.Itoa(d))
		}
	}
	return out
}

func gpusWith(ok func(GPU) bool) []string {
	var out []string
	for _, n := range GPUNames() {
		if g, err := LookupGPU(n); err == nil && ok(g) {
			out = append(out, n)
		}
	}
	return out
}
