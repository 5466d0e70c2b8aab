package plan

import (
	"fmt"
	"math"
)

// The MoE layer's terms beyond its GEMMs (time.go: linearsTime times the
// grouped expert GEMMs per local expert, so an expert with few tokens runs
// memory-bound on the roofline: its weights are read once for m tokens, and
// below the GPU's ridge point, peak/HBM ≈ 295 FLOP/byte on H100, m tokens
// cannot keep the tensor cores busy; tileQ adds the padding of m to 128).
//
//   - Token dispatch and combine: one all-to-all over the EP group each, in
//     the forward and the backward (and the recomputed forward). Peers inside
//     the rank's NVLink domain are reached over NVLink, the others over the
//     network; the two proceed together, so the slower one sets the time.
//     A hierarchical dispatcher (Job.MoEDispatcher "flex": DeepEP, HybridEP;
//     DeepSeek-V3 report §3.2.2) sends a token once to each remote domain
//     holding one of its experts and fans it out there over NVLink: the
//     network carries the expected number of distinct remote domains a
//     token's TopK experts fall in, not TopK·(D−1)/D copies. Group-limited
//     routing (Model.RouterGroups, RouterGroupTopK: DeepSeek-V3's 8 groups,
//     4 kept) caps that further when the groups line up with the domains;
//     its large per-node messages run at flexNetEff of the NIC rate.
//   - Router load: the slowest EP rank sets the pace of the expert GEMMs and
//     of the all-to-all it receives. Dropless with balanced routing, a rank's
//     routed tokens vary like a multinomial count, and the busiest of EP ranks
//     is about 1 + √(2 ln EP / N) of the mean for N tokens per rank (the
//     expected maximum of EP normal variables); learned routing is worse,
//     which a site calibration measures. With a capacity factor
//     (Job.MoECapacity, token dropping, inputs padded to capacity) every
//     expert runs capacity = CF × the mean.
//   - Shared experts run as a dense MLP on every token (linearsTime).
//   - Multi-token prediction (Model.MTPLayers): on the last stage, one more
//     layer, a 2h→h projection, and the output layer and loss once more.
//   - With Job.MoEA2AOverlap (Megatron-Core --overlap-moe-expert-parallel-comm,
//     DeepSeek's DualPipe) the all-to-all of one micro-batch runs while
//     another's forward or backward computes: what exceeds the layer's
//     compute shows, plus the interference of overlapped communication
//     (tpInterfere, as for TP userbuffers).

// flexNetEff is a hierarchical dispatcher's share of the NIC rate: DeepEP's
// normal kernels on H800 with one CX7 400 Gb/s NIC (~50 GB/s) per GPU reach
// 43 GB/s of RDMA bottleneck bandwidth at EP 16 and 50-58 at EP 32-64 in the
// DeepSeek-V3 setting (deepseek-ai/DeepEP README, "Normal kernels with NVLink
// and RDMA forwarding"); the lowest, 43/50, is taken. NCCL's all-to-all of
// many small per-peer messages gets a2aNetEff.
const flexNetEff = 0.86

// moeLoad is the busiest EP rank's routed tokens over the mean.
func (x *shape) moeLoad() float64 {
	if cf := x.j.MoECapacity; cf > 0 {
		return math.Max(cf, 1)
	}
	if x.ep <= 1 {
		return 1
	}
	n := float64(x.m.TopK) * x.tokens * x.etp / x.t // routed tokens per rank
	if n <= 0 {
		return 1
	}
	return 1 + math.Sqrt(2*math.Log(x.ep)/n)
}

// a2aTime times one all-to-all in which every rank sends vol bytes to its
// n−1 peers (members stride ranks apart).
func (x *shape) a2aTime(vol, n, stride float64) float64 {
	if n <= 1 || vol <= 0 {
		return 0
	}
	l, k := x.groupLink(n, stride)
	if l.lat == nvlLatency {
		return vol/l.bw + l.lat
	}
	intra := vol * (k - 1) / (n - 1)
	inter := vol - intra
	eff := a2aNetEff
	if x.j.MoEDispatcher == "flex" {
		inter *= x.dedupShare(n / k)
		intra = vol // every copy takes an NVLink hop, at the source or after the network
		eff = flexNetEff
	}
	return math.Max(inter/(x.c.InterNode*eff), intra/x.nvlink().bw) + l.lat
}

// dedupShare is the share of the plain all-to-all's network copies a
// hierarchical dispatcher sends when the EP group spans d domains: the
// expected distinct remote domains among a token's TopK experts (drawn
// without replacement from E, E/d per domain; or its groups, when routing
// keeps RouterGroupTopK of RouterGroups groups that line up with domains)
// over TopK·(d−1)/d.
func (x *shape) dedupShare(d float64) float64 {
	m := &x.m
	k, e := float64(m.TopK), float64(m.Experts)
	if d <= 1 || k <= 0 {
		return 1
	}
	miss := missProb(e, e/d, k)
	if g, gk := float64(m.RouterGroups), float64(m.RouterGroupTopK); gk > 0 && g >= d && math.Mod(g, d) == 0 {
		miss = math.Max(miss, missProb(g, g/d, gk))
	}
	return math.Min((d-1)*(1-miss)/(k*(d-1)/d), 1)
}

// missProb is the chance that k draws without replacement from n items
// miss a given subset of s of them: C(n−s, k)/C(n, k).
func missProb(n, s, k float64) float64 {
	p := 1.0
	for i := 0.0; i < k; i++ {
		if n-i <= 0 {
			return 0
		}
		p *= math.Max(n-s-i, 0) / (n - i)
	}
	return p
}

// epShown is the EP time that shows of ep seconds beside a layer's compute.
func (x *shape) epShown(ep, compute float64) float64 {
	if !x.j.MoEA2AOverlap || ep <= 0 {
		return ep
	}
	return math.Max(ep-compute, 0) + tpInterfere*math.Min(ep, compute)
}

// mtpTime is the multi-token-prediction modules' time on the last stage for
// one micro-batch: each a transformer layer (MoE when the model is), the
// projection of [h; embedding] to h, and the output layer and loss again.
func (x *shape) mtpTime() stageT {
	m := &x.m
	var st stageT
	if m.MTPLayers <= 0 {
		return st
	}
	lt := x.layerTime(m.isMoE())
	h, V := float64(m.Hidden), float64(m.Vocab)
	pf, pb := x.k.linear(x.tokens, 2*h, h/x.t, x.fp8, x.j.LoRARank > 0)
	of, ob := x.k.linear(x.tokens, h, V/x.t, false, x.j.LoRARank > 0)
	ce := x.st.eltBytes * ceBytes * x.tokens * V / x.t / x.k.hbmE
	f := (pf + of) / x.st.eff
	b := (pb + ob) / x.st.eff
	n := float64(m.MTPLayers)
	st.compute = n * (lt.compute + f + b + ce/x.st.eff)
	st.recompute = n * lt.recompute
	st.tp, st.cp, st.ep = n*lt.tp, n*lt.cp, n*lt.ep
	st.fwd, st.bwd = n*(lt.fwd+f), n*(lt.bwd+b)
	return st
}

// moeWhy says how the EP all-to-all runs and what sets the experts' pace.
func (x *shape) moeWhy(e *Evaluation) string {
	if !x.m.isMoE() || x.l.EP <= 1 {
		return ""
	}
	l, k := x.groupLink(x.ep, x.epStride())
	where := "inside the NVLink domain"
	if l.lat != nvlLatency {
		where = fmt.Sprintf("%.0f of %.0f peers over the network", x.ep-k, x.ep-1)
		if x.j.MoEDispatcher == "flex" {
			where += fmt.Sprintf(", flex dispatch sends %.0f%% of their copies (one per remote domain)", 100*x.dedupShare(x.ep/k))
		}
	}
	s := fmt.Sprintf("EP=%d all-to-all %s: %.1f%% of the step", x.l.EP, where, pct(e.Time.EPComm, e.Time.Step))
	if x.j.MoEA2AOverlap {
		s += ", what shows beside the overlapped compute"
	}
	load := "dropless, balanced routing"
	if x.j.MoECapacity > 0 {
		load = fmt.Sprintf("capacity factor %.2g, padded", x.j.MoECapacity)
	}
	return s + fmt.Sprintf("; the busiest rank gets %.3g× the mean routed tokens (%s)", x.moeLoad(), load)
}
