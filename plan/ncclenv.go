package plan

import (
	"bufio"
	"bytes"
	"fmt"
	"hash/fnv"
	"sort"
	"strconv"
	"strings"

	"github.com/trainrun/trainrun/topo"
)

// The environment of one training process: torchrun's variables, the plan's
// TRAINRUN_* variables, and the NCCL settings that follow from the node's
// topology. Pure: every fact comes in through EnvInput.
//
// Who wins when several parties set a variable (NCCL's own order: the
// process environment beats NCCL_CONF_FILE / ~/.nccl.conf, which beat
// /etc/nccl.conf, all via setenv(…, 0) in src/misc/param.cc; a cloud net
// plugin such as aws-ofi-nccl also only fills what is unset):
//
//  1. the policy's forced value (an admin decision) — always;
//  2. the user's environment, then /etc/nccl.conf, then the cloud plugin:
//     trainrun keeps theirs and reports what it would have set, because
//     injecting an NCCL variable silently overrides the site file and the
//     plugin — unless the policy says trainrun's values win;
//  3. the policy's default for the variable;
//  4. trainrun's value computed from the topology.
//
// Variables NCCL documents as debugging-only (NCCL_ALGO, NCCL_PROTO,
// NCCL_P2P_LEVEL, NCCL_NET_GDR_LEVEL, NCCL_BUFFSIZE) are never computed here;
// they appear only when the policy forces or defaults them.

// EnvSource says who decided a variable's value.
type EnvSource string

const (
	SrcTrainrun      EnvSource = "trainrun"       // computed from topology, placement or plan
	SrcUser          EnvSource = "user"           // already in the user's environment
	SrcNCCLConf      EnvSource = "nccl.conf"      // the site's /etc/nccl.conf
	SrcPlugin        EnvSource = "plugin"         // a cloud net plugin sets it when unset
	SrcPolicyForce   EnvSource = "policy-force"   // the policy forces it
	SrcPolicyDefault EnvSource = "policy-default" // the policy's default
)

// EnvVar is one variable of a rank's environment.
type EnvVar struct {
	Key   string `json:"key"`
	Value string `json:"value"` // what the process ends up with; "" with Inject false = left unset
	// Inject is true when trainrun puts Key=Value into the environment.
	// False: someone else's value stands (Source says whose) or the variable
	// is deliberately left unset.
	Inject bool      `json:"inject"`
	Source EnvSource `json:"source"`
	Why    string    `json:"why"`
	// Proposed is trainrun's own value when another source's stands, or the
	// value another source had when trainrun's wins ("" when none).
	Proposed string `json:"proposed,omitempty"`
}

// NCCLPolicy is the part of the admin policy that shapes the environment.
type NCCLPolicy struct {
	Force        map[string]string // always set, over anyone
	Defaults     map[string]string // set unless the user, nccl.conf or a plugin sets it
	TrainrunWins bool              // trainrun's computed values override user, nccl.conf and plugins
	// Fabric names the compute fabric when sysfs cannot tell:
	// "infiniband", "roce", "efa", "tcp"; "" = decide from the node's ports.
	Fabric string
}

// EnvInput is everything one rank's environment depends on.
type EnvInput struct {
	Node      *topo.Node // this node's topology
	Placement *Placement // the job's placement
	Rank      int        // global rank
	Plan      Layout     // degrees, micro-batch, grad accumulation, recompute
	PlanPath  string     // path of the plan JSON (TRAINRUN_PLAN); "" = none written
	Stack     Stack      // the training software (MegatronEnv); "" = Megatron-Core

	MasterAddr string // torchrun MASTER_ADDR: the node of rank 0 as the others reach it
	MasterPort int
	// NodeAddrs are this node's addresses as Slurm knows it (NodeAddr, or
	// what its hostname resolves to): the interface holding one of them
	// carries bootstrap traffic.
	NodeAddrs []string

	UserEnv  map[string]string // the environment the task inherits
	NCCLConf map[string]string // /etc/nccl.conf as ParseNCCLConf read it; nil = absent
	Policy   NCCLPolicy

	// TopoFile is a generated NCCL topology XML for this node ("" = none);
	// it is used only where the node's own view is flat (NeedsTopoFile).
	TopoFile string
	// VirtualTopology: /var/run/nvidia-topologyd/virtualTopology.xml exists,
	// which NCCL loads by itself when NCCL_TOPO_FILE is unset.
	VirtualTopology bool
}

// Env is a rank's computed environment.
type Env struct {
	Vars  []EnvVar `json:"vars"`
	Notes []string `json:"notes,omitempty"` // warnings a person should read
}

// Get returns the value the process ends up with and whether it is set.
func (e *Env) Get(key string) (string, bool) {
	for _, v := range e.Vars {
		if v.Key == key {
			return v.Value, v.Inject || v.Source == SrcUser || v.Source == SrcNCCLConf || v.Source == SrcPlugin
		}
	}
	return "", false
}

// Var returns the entry for key, or nil.
func (e *Env) Var(key string) *EnvVar {
	for i := range e.Vars {
		if e.Vars[i].Key == key {
			return &e.Vars[i]
		}
	}
	return nil
}

// Injected is what trainrun puts into the process environment, in order.
func (e *Env) Injected() []EnvVar {
	var out []EnvVar
	for _, v := range e.Vars {
		if v.Inject {
			out = append(out, v)
		}
	}
	return out
}

// debugOnly are the variables NCCL's documentation (env.rst, "Debugging")
// says should not be set in production.
var debugOnly = map[string]bool{
	"NCCL_ALGO": true, "NCCL_PROTO": true, "NCCL_P2P_LEVEL": true, "NCCL_NET_GDR_LEVEL": true, "NCCL_BUFFSIZE": true,
}

// ManagedEnvKeys lists every variable RankEnv may decide, so a caller can
// pass the user's values for exactly these (policy keys included).
func ManagedEnvKeys(pol NCCLPolicy) []string {
	keys := []string{
		"MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "NODE_RANK", "GROUP_RANK",
		"TRAINRUN_TP", "TRAINRUN_PP", "TRAINRUN_VPP", "TRAINRUN_CP", "TRAINRUN_EP", "TRAINRUN_DP",
		"TRAINRUN_MICRO_BATCH", "TRAINRUN_GRAD_ACCUM", "TRAINRUN_RECOMPUTE", "TRAINRUN_PLAN",
		"CUDA_DEVICE_ORDER", "CUDA_VISIBLE_DEVICES", "NCCL_IB_HCA", "NCCL_IB_GID_INDEX", "NCCL_SOCKET_IFNAME",
		"NCCL_TOPO_FILE", "NCCL_NVLS_ENABLE", "NCCL_MNNVL_ENABLE", "TORCH_NCCL_ASYNC_ERROR_HANDLING", "NCCL_IB_DISABLE",
		"CUDA_DEVICE_MAX_CONNECTIONS",
	}
	seen := map[string]bool{}
	for _, k := range keys {
		seen[k] = true
	}
	var extra []string
	for _, m := range []map[string]string{pol.Force, pol.Defaults} {
		for k := range m {
			if !seen[k] {
				seen[k] = true
				extra = append(extra, k)
			}
		}
	}
	sort.Strings(extra)
	return append(keys, extra...)
}

// ParseNCCLConf reads an nccl.conf the way NCCL does (src/misc/param.cc
// setEnvFile): one KEY=VALUE per line, the key up to the first '=', the value
// the rest of the line; lines without '=' are skipped. Lines starting with
// '#' are comments here (NCCL would set a variable named "#KEY", which
// nothing reads). Keys are trimmed; NCCL does not trim, so a key with spaces
// is reported as an error rather than silently kept.
func ParseNCCLConf(data []byte) (map[string]string, error) {
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	line := 0
	for sc.Scan() {
		line++
		s := strings.TrimRight(sc.Text(), "\r")
		if strings.HasPrefix(strings.TrimSpace(s), "#") {
			continue
		}
		k, v, ok := strings.Cut(s, "=")
		if !ok {
			continue
		}
		if strings.TrimSpace(k) != k || k == "" {
			return nil, fmt.Errorf("nccl.conf line %d: key %q has spaces around it; NCCL would set a variable of that exact name: write KEY=VALUE", line, k)
		}
		out[k] = v
	}
	return out, sc.Err()
}

// RankEnv computes the environment of one rank.
func RankEnv(in EnvInput) (*Env, error) {
	p := in.Placement
	if p == nil {
		return nil, fmt.Errorf("env: no placement")
	}
	if in.Rank < 0 || in.Rank >= len(p.Ranks) {
		return nil, fmt.Errorf("env: rank %d outside 0..%d (world size %d); pass --rank between 0 and %d", in.Rank, len(p.Ranks)-1, len(p.Ranks), len(p.Ranks)-1)
	}
	rp := p.Ranks[in.Rank]
	localWorld := 0
	for _, r := range p.Ranks {
		if r.Node == rp.Node {
			localWorld++
		}
	}
	b := &envBuilder{in: in}

	// torchrun's variables: facts of the placement, always trainrun's.
	addr, port := in.MasterAddr, in.MasterPort
	if addr == "" {
		addr = p.Ranks[0].Node
	}
	for _, v := range LauncherVars(rp, len(p.Ranks), localWorld, addr, port, p.Ranks[0].Node) {
		b.launcher(v.Key, v.Value, v.Why, v.KeepUser)
	}

	// The plan: zero degrees and sizes count as 1, no recompute as "none".
	l := normLayout(in.Plan)
	l.MicroBatch, l.GradAccum, l.Recompute = max(l.MicroBatch, 1), max(l.GradAccum, 1), orDefault(l.Recompute, "none")
	for _, v := range PlanVars(l)[:ContractPlanVars] {
		b.launcher(v.Key, v.Value, v.Why, v.KeepUser)
	}
	for _, v := range MegatronEnv(l, in.Stack) {
		b.launcher(v.Key, v.Value, v.Why, v.KeepUser)
	}
	if in.PlanPath != "" {
		b.launcher("TRAINRUN_PLAN", in.PlanPath, "the plan JSON this layout comes from", false)
	}

	n := in.Node
	if n == nil {
		n = &topo.Node{}
		b.note("no node topology: NCCL variables that depend on it are left to NCCL's own detection")
	}

	// CUDA device numbering.
	b.nccl("CUDA_DEVICE_ORDER", CUDADeviceOrder, "CUDA numbers GPUs fastest-first by default; PCI bus order is the order nvidia-smi, NVML and this placement use, so LOCAL_RANK i means the same GPU to all of them")
	b.visibleDevices(p, rp)

	b.ibHCA(n)
	b.socketIfname(n)
	b.topoFile(n)
	b.nvls(n)
	b.mnnvl(n, p)
	b.nccl("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1", "PyTorch: on an NCCL error or timeout abort the communicator and end the process, so Slurm sees the failure and trainrun can requeue instead of the job hanging")

	// Policy-only variables (forced or defaulted, not computed).
	var extra []string
	for k := range in.Policy.Force {
		extra = append(extra, k)
	}
	for k := range in.Policy.Defaults {
		if _, f := in.Policy.Force[k]; !f {
			extra = append(extra, k)
		}
	}
	sort.Strings(extra)
	for _, k := range extra {
		if b.env.Var(k) != nil {
			continue
		}
		why := "set by the site policy"
		if debugOnly[k] {
			why += " (NCCL documents it as a debugging variable; trainrun sets it only because the policy asks)"
		}
		b.decide(k, "", why)
	}
	return &b.env, nil
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

type envBuilder struct {
	in  EnvInput
	env Env
}

func (b *envBuilder) note(s string) { b.env.Notes = append(b.env.Notes, s) }

// launcher sets a variable that describes this job; trainrun's value wins,
// but a different value in the user's environment is reported. keepUser
// keeps the user's value instead (MASTER_ADDR/PORT: a user may pick them).
func (b *envBuilder) launcher(k, v, why string, keepUser bool) {
	if f, ok := b.in.Policy.Force[k]; ok {
		b.env.Vars = append(b.env.Vars, EnvVar{Key: k, Value: f, Inject: true, Source: SrcPolicyForce, Why: why + "; forced by the site policy", Proposed: v})
		return
	}
	u, set := b.in.UserEnv[k]
	switch {
	case set && keepUser && u != "":
		b.env.Vars = append(b.env.Vars, EnvVar{Key: k, Value: u, Inject: false, Source: SrcUser, Why: why + "; the user's value is kept", Proposed: v})
	case set && u != v:
		b.env.Vars = append(b.env.Vars, EnvVar{Key: k, Value: v, Inject: true, Source: SrcTrainrun, Why: why + fmt.Sprintf("; replaces %q from the environment, which does not match this placement", u), Proposed: u})
	default:
		b.env.Vars = append(b.env.Vars, EnvVar{Key: k, Value: v, Inject: true, Source: SrcTrainrun, Why: why})
	}
}

// nccl records trainrun's value for a variable under the precedence rules.
func (b *envBuilder) nccl(k, v, why string) { b.decide(k, v, why) }

// leaveUnset records that trainrun deliberately sets nothing (v == "").
func (b *envBuilder) leaveUnset(k, why string) { b.decide(k, "", why) }

// decide applies the precedence order documented at the top of the file.
func (b *envBuilder) decide(k, mine, why string) {
	pol := b.in.Policy
	if f, ok := pol.Force[k]; ok {
		prev := ""
		if u, ok := b.in.UserEnv[k]; ok {
			prev = "user's " + u
		} else if c, ok := b.in.NCCLConf[k]; ok {
			prev = "nccl.conf's " + c
		}
		w := "forced by the site policy"
		if mine != "" && mine != f {
			w += fmt.Sprintf(" (trainrun would set %s: %s)", mine, why)
		} else if mine == f {
			w += " (and what trainrun computes: " + why + ")"
		}
		if prev != "" {
			w += "; overrides the " + prev
		}
		b.env.Vars = append(b.env.Vars, EnvVar{Key: k, Value: f, Inject: true, Source: SrcPolicyForce, Why: w, Proposed: mine})
		return
	}
	if d, ok := pol.Defaults[k]; ok && mine == "" {
		mine, why = d, "the site policy's default"
	} else if ok {
		why = fmt.Sprintf("the site policy's default (trainrun would set %s: %s)", mine, why)
		mine = d
	}
	other, src, otherSet := "", EnvSource(""), false
	if u, ok := b.in.UserEnv[k]; ok {
		other, src, otherSet = u, SrcUser, true
	} else if c, ok := b.in.NCCLConf[k]; ok {
		other, src, otherSet = c, SrcNCCLConf, true
	} else if pv, ok := pluginSets(b.in.Node, k); ok {
		other, src, otherSet = pv, SrcPlugin, true
	}
	if otherSet && !(pol.TrainrunWins && mine != "") {
		w := fmt.Sprintf("kept from %s", srcName(src))
		if mine != "" && mine != other {
			w += fmt.Sprintf("; trainrun would set %s (%s)", mine, why)
		} else if mine == other {
			w += "; the same as trainrun computes (" + why + ")"
		} else {
			w += "; trainrun sets nothing here: " + why
		}
		b.env.Vars = append(b.env.Vars, EnvVar{Key: k, Value: other, Inject: false, Source: src, Why: w, Proposed: mine})
		if mine != "" && mine != other && src != SrcPlugin {
			b.note(fmt.Sprintf("%s=%s from %s kept; trainrun computed %s", k, other, srcName(src), mine))
		}
		return
	}
	if mine == "" {
		b.env.Vars = append(b.env.Vars, EnvVar{Key: k, Inject: false, Source: SrcTrainrun, Why: why})
		return
	}
	v := EnvVar{Key: k, Value: mine, Inject: true, Source: SrcTrainrun, Why: why}
	if _, ok := pol.Defaults[k]; ok {
		v.Source = SrcPolicyDefault
	}
	if otherSet {
		v.Why += fmt.Sprintf("; overrides %q from %s because the policy says trainrun's values win", other, srcName(src))
		v.Proposed = other
	}
	b.env.Vars = append(b.env.Vars, v)
}

func srcName(s EnvSource) string {
	switch s {
	case SrcUser:
		return "the user's environment"
	case SrcNCCLConf:
		return "/etc/nccl.conf"
	case SrcPlugin:
		return "the cloud's NCCL net plugin"
	}
	return string(s)
}

// isEFA tells an AWS Elastic Fabric Adapter (vendor 0x1d0f) device.
func isEFA(d *topo.RDMADevice) bool {
	return d.Vendor == "0x1d0f" || strings.HasPrefix(d.Name, "efa")
}

func hasEFA(n *topo.Node) bool {
	if n == nil {
		return false
	}
	for i := range n.RDMA {
		if isEFA(&n.RDMA[i]) {
			return true
		}
	}
	return false
}

// pluginSets says which variables a cloud NCCL net plugin fills in itself
// when they are unset. aws-ofi-nccl (src/platform-aws.cpp, insert_envvar
// with overwrite=false) sets NCCL_TOPO_FILE to its own XML on p4d/p4de (and
// g5.48xl), and buffer/chunk sizes on p4d/p5/p6. Setting any of these first
// would silently replace the plugin's choice. The instance type is not in
// sysfs, so the value is named, not known.
func pluginSets(n *topo.Node, k string) (string, bool) {
	if !hasEFA(n) {
		return "", false
	}
	switch k {
	case "NCCL_TOPO_FILE", "NCCL_BUFFSIZE", "NCCL_P2P_NET_CHUNKSIZE", "NCCL_NVLS_CHUNKSIZE",
		"NCCL_NVLSTREE_MAX_CHUNKSIZE", "NCCL_NET_FORCE_FLUSH", "NCCL_NETDEVS_POLICY":
		return "(aws-ofi-nccl's per-instance value)", true
	}
	return "", false
}

// visibleDevices reorders CUDA_VISIBLE_DEVICES when the node's rails do not
// follow GPU order, so that a trainer calling torch.cuda.set_device(LOCAL_RANK)
// lands on the GPU placement meant.
func (b *envBuilder) visibleDevices(p *Placement, rp RankPlacement) {
	perm := map[int]int{} // local rank → GPU
	identity := true
	for _, r := range p.Ranks {
		if r.Node == rp.Node {
			perm[r.LocalRank] = r.GPU
			if r.GPU != r.LocalRank {
				identity = false
			}
		}
	}
	if identity {
		return
	}
	base := make([]string, len(perm))
	for i := range base {
		base[i] = strconv.Itoa(i)
	}
	if cur, ok := b.in.UserEnv["CUDA_VISIBLE_DEVICES"]; ok && cur != "" {
		parts := strings.Split(cur, ",")
		if len(parts) != len(perm) {
			b.note(fmt.Sprintf("CUDA_VISIBLE_DEVICES=%s lists %d GPUs for %d local ranks: not reordered; local rank i uses visible device i", cur, len(parts), len(perm)))
			return
		}
		base = parts
	}
	out := make([]string, len(perm))
	for lr := 0; lr < len(perm); lr++ {
		g, ok := perm[lr]
		if !ok || g >= len(base) {
			return
		}
		out[lr] = base[g]
	}
	v := strings.Join(out, ",")
	why := "reordered so that device LOCAL_RANK is the GPU nearest rail LOCAL_RANK's NIC (the node's NIC order differs from its GPU order)"
	if u, ok := b.in.UserEnv["CUDA_VISIBLE_DEVICES"]; ok {
		why += "; the same GPUs as Slurm's " + u + ", in rail order"
	}
	b.env.Vars = append(b.env.Vars, EnvVar{Key: "CUDA_VISIBLE_DEVICES", Value: v, Inject: true, Source: SrcTrainrun, Why: why, Proposed: b.in.UserEnv["CUDA_VISIBLE_DEVICES"]})
}

// fabricOf decides the compute fabric: the policy's word, else the link
// layer of the compute NICs' active ports (InfiniBand if any is).
func fabricOf(n *topo.Node, pol string) string {
	switch strings.ToLower(pol) {
	case "infiniband", "ib":
		return "infiniband"
	case "roce", "ethernet":
		return "roce"
	case "efa":
		return "efa"
	case "tcp":
		return "tcp"
	}
	if hasEFA(n) {
		return "efa"
	}
	ib, eth := false, false
	for i := range n.RDMA {
		d := &n.RDMA[i]
		if d.Role != topo.RoleCompute {
			continue
		}
		for _, pt := range d.Ports {
			if !pt.Active() {
				continue
			}
			if pt.LinkLayer == "InfiniBand" {
				ib = true
			} else if pt.LinkLayer == "Ethernet" {
				eth = true
			}
		}
	}
	switch {
	case ib:
		return "infiniband"
	case eth:
		return "roce"
	}
	return ""
}

// hcaPort is one port NCCL should use.
type hcaPort struct {
	dev  *topo.RDMADevice
	port topo.RDMAPort
}

// computePorts are the active compute-fabric ports, in PCI (rail) order.
func computePorts(n *topo.Node, fabric string) (use []hcaPort, skipped []string) {
	want := map[string]string{"infiniband": "InfiniBand", "roce": "Ethernet"}[fabric]
	devs := make([]*topo.RDMADevice, 0, len(n.RDMA))
	for i := range n.RDMA {
		devs = append(devs, &n.RDMA[i])
	}
	sort.SliceStable(devs, func(a, b int) bool { return devs[a].BusID < devs[b].BusID })
	for _, d := range devs {
		if d.Role != topo.RoleCompute {
			skipped = append(skipped, fmt.Sprintf("%s (%s: %s)", d.Name, d.Role, d.RoleReason))
			continue
		}
		for _, pt := range d.Ports {
			name := fmt.Sprintf("%s:%d", d.Name, pt.Number)
			switch {
			case !pt.Active():
				skipped = append(skipped, fmt.Sprintf("%s (port %s)", name, strings.ToLower(orDefault(pt.State, "state unknown"))))
			case want != "" && pt.LinkLayer != want:
				skipped = append(skipped, fmt.Sprintf("%s (%s port on a %s job)", name, pt.LinkLayer, want))
			default:
				use = append(use, hcaPort{d, pt})
			}
		}
	}
	return use, skipped
}

func (b *envBuilder) ibHCA(n *topo.Node) {
	const k = "NCCL_IB_HCA"
	fabric := fabricOf(n, b.in.Policy.Fabric)
	if fabric == "efa" {
		b.leaveUnset(k, "EFA node: NCCL talks to EFA through the aws-ofi-nccl plugin (libfabric), which picks the EFA devices nearest each GPU itself; NCCL_IB_HCA only filters NCCL's built-in verbs transport, which is not used here")
		return
	}
	if fabric == "tcp" {
		b.leaveUnset(k, "the site policy says this partition's fabric is TCP: no RDMA device is listed")
		b.nccl("NCCL_IB_DISABLE", "1", "the site policy says this partition's fabric is TCP (Fabric=tcp): NCCL must not pick up an RDMA device it finds, so its IB transport is disabled")
		return
	}
	if why := n.RDMAUndecided(); why != "" {
		b.leaveUnset(k, why)
		return
	}
	use, skipped := computePorts(n, fabric)
	if len(use) == 0 {
		why := "no active compute-fabric port on this node: nothing to list"
		if len(n.RDMA) == 0 {
			why = "no RDMA devices on this node: NCCL uses sockets"
		} else if len(skipped) > 0 {
			why += "; not used: " + strings.Join(skipped, ", ")
			b.note("no active compute-fabric port: NCCL would fall back to another NIC or to sockets; not used: " + strings.Join(skipped, ", "))
		}
		b.leaveUnset(k, why)
		return
	}
	names := make([]string, len(use))
	var prods []string
	seenProd := map[string]bool{}
	for i, u := range use {
		names[i] = fmt.Sprintf("%s:%d", u.dev.Name, u.port.Number)
		if p := orDefault(u.dev.Product, u.dev.PCIDevice); !seenProd[p] {
			seenProd[p] = true
			prods = append(prods, p)
		}
	}
	layer := use[0].port.LinkLayer
	why := fmt.Sprintf("the %d active %s ports of the compute NICs (%s), in PCI order; '=' makes NCCL match names exactly (without it mlx5_1 also selects mlx5_10..mlx5_19)",
		len(use), layer, strings.Join(prods, ", "))
	if len(skipped) > 0 {
		why += "; not used: " + strings.Join(skipped, ", ")
	}
	b.nccl(k, "="+strings.Join(names, ","), why)
	if v := b.env.Var(k); v != nil && !v.Inject && v.Value != "" {
		b.prefixCheck(n, v.Value)
	}
	if fabric == "roce" {
		b.gidIndex(use)
	} else {
		b.leaveUnset("NCCL_IB_GID_INDEX", "InfiniBand link layer: addressing is by LID, the GID index matters only on RoCE")
	}
}

// prefixCheck warns when a kept NCCL_IB_HCA without '=' selects more
// devices than it names: NCCL matches each entry as a prefix.
func (b *envBuilder) prefixCheck(n *topo.Node, val string) {
	list := strings.TrimPrefix(val, "^")
	if strings.HasPrefix(list, "=") {
		return
	}
	for _, e := range strings.Split(list, ",") {
		name, _, _ := strings.Cut(strings.TrimSpace(e), ":")
		var extra []string
		for _, d := range n.RDMA {
			if d.Name != name && name != "" && strings.HasPrefix(d.Name, name) {
				extra = append(extra, d.Name)
			}
		}
		if len(extra) > 0 {
			b.note(fmt.Sprintf("NCCL_IB_HCA=%s has no '=': NCCL matches prefixes, so %s also selects %s", val, name, strings.Join(extra, ", ")))
		}
	}
}

// gidIndex picks NCCL_IB_GID_INDEX on RoCE: the RoCE v2 GID carrying an
// IPv4-mapped address (sysfs gid_attrs/types/N = "RoCE v2" and gids/N =
// ::ffff:a.b.c.d). NCCL takes one index for all devices.
func (b *envBuilder) gidIndex(use []hcaPort) {
	const k = "NCCL_IB_GID_INDEX"
	idx := -1
	var detail []string
	for _, u := range use {
		if u.port.RoCEv2GIDIndex == nil {
			b.leaveUnset(k, fmt.Sprintf("%s:%d has no RoCE v2 GID with an IPv4 address (no IP on %s?): left to NCCL's own selection (≥ 2.21 picks RoCE v2 / AF_INET when unset)", u.dev.Name, u.port.Number, orDefault(u.port.NetDev, "its netdev")))
			return
		}
		if idx >= 0 && *u.port.RoCEv2GIDIndex != idx {
			b.leaveUnset(k, fmt.Sprintf("the RoCE v2 IPv4 GID sits at different indices on different ports (%s): one NCCL_IB_GID_INDEX cannot name them all; left to NCCL's own selection (≥ 2.21 picks RoCE v2 / AF_INET per device)", strings.Join(append(detail, fmt.Sprintf("%s:%d→%d", u.dev.Name, u.port.Number, *u.port.RoCEv2GIDIndex)), ", ")))
			return
		}
		idx = *u.port.RoCEv2GIDIndex
		detail = append(detail, fmt.Sprintf("%s:%d→%d", u.dev.Name, u.port.Number, idx))
	}
	ip := use[0].port.RoCEv2IPv4
	b.nccl(k, strconv.Itoa(idx), fmt.Sprintf("RoCE: GID %d is the RoCE v2 GID with an IPv4-mapped address on every compute port (e.g. %s:%d %s); v1 or link-local GIDs do not route across subnets",
		idx, use[0].dev.Name, use[0].port.Number, ip))
}

// socketIfname picks the bootstrap interface: the one holding the node's
// Slurm address, never lo or a container/VM bridge.
func (b *envBuilder) socketIfname(n *topo.Node) {
	const k = "NCCL_SOCKET_IFNAME"
	want := map[string]bool{}
	for _, a := range b.in.NodeAddrs {
		want[stripPrefix(a)] = true
	}
	for _, ni := range n.NetIfs {
		for _, a := range ni.IPv4 {
			if !want[stripPrefix(a)] {
				continue
			}
			if bad := badSocketIf(ni); bad != "" {
				b.note(fmt.Sprintf("the node's Slurm address %s is on %s (%s): not used for NCCL bootstrap", stripPrefix(a), ni.Name, bad))
				continue
			}
			b.nccl(k, "="+ni.Name, fmt.Sprintf("%s holds %s, the address Slurm reaches this node at, so the other nodes can reach NCCL's bootstrap socket there; '=' for an exact name", ni.Name, stripPrefix(a)))
			return
		}
	}
	// Addresses hidden (no fib_trie): the route table's subnet, else the
	// default route's interface, with topo's reason.
	if n.AddressesUnknown() {
		for _, a := range b.in.NodeAddrs {
			if name, how, ok := n.InterfaceFor(a); ok {
				b.nccl(k, "="+name, how+"; '=' for an exact name")
				return
			}
		}
	}
	// Fallback: the interfaces topo judges suitable, management first.
	var cands []topo.NetInterface
	for _, ni := range n.NetIfs {
		if ni.Socket && badSocketIf(ni) == "" {
			cands = append(cands, ni)
		}
	}
	sort.SliceStable(cands, func(i, j int) bool {
		return cands[i].Role == topo.RoleManagement && cands[j].Role != topo.RoleManagement
	})
	addrs := strings.Join(b.in.NodeAddrs, ",")
	if len(cands) == 0 {
		b.leaveUnset(k, fmt.Sprintf("no interface holds the node's address (%s) and none is an up, addressed, physical interface: left to NCCL (it skips lo and docker*)", orDefault(addrs, "unknown")))
		return
	}
	c := cands[0]
	b.nccl(k, "="+c.Name, fmt.Sprintf("no interface holds the node's Slurm address (%s); %s is up with %s and is not a container bridge", orDefault(addrs, "unknown"), c.Name, strings.Join(c.IPv4, ",")))
}

func stripPrefix(a string) string {
	a, _, _ = strings.Cut(strings.TrimSpace(a), "/")
	return a
}

func badSocketIf(ni topo.NetInterface) string {
	switch {
	case ni.Kind == topo.NetLoopback || ni.Name == "lo":
		return "loopback"
	case ni.OperState == "down":
		return "down"
	}
	for _, p := range []string{"docker", "virbr", "veth", "cni", "flannel", "cali", "br-", "podman", "lxcbr"} {
		if strings.HasPrefix(ni.Name, p) {
			return "a container or VM bridge"
		}
	}
	return ""
}

// NeedsTopoFile says whether NCCL's own view of the node is flat or wrong
// (a VM): no GPU shares a PCIe switch with a NIC, or NUMA affinity is
// missing, or NVLink peers are invisible.
func NeedsTopoFile(n *topo.Node) (bool, string) {
	if n == nil || len(n.GPUs) == 0 {
		return false, ""
	}
	var why []string
	near := false
	noNUMA := true
	hidden := false
	for _, g := range n.GPUs {
		if g.NearestPath != topo.PathUnknown && g.NearestPath <= topo.PathPXB {
			near = true
		}
		if g.NUMANode != nil {
			noNUMA = false
		}
		for _, l := range g.NVLinks {
			if strings.HasPrefix(l.RemoteBusID, "fffffff") {
				hidden = true
			}
		}
	}
	if !near && len(n.RDMA) > 0 {
		why = append(why, "no GPU shares a PCIe switch with a NIC")
	}
	if noNUMA {
		why = append(why, "no NUMA affinity (numa_node -1)")
	}
	if hidden {
		why = append(why, "NVSwitches invisible (NVLink remote fffffff:ff:ff.0)")
	}
	return len(why) > 0, strings.Join(why, "; ")
}

func (b *envBuilder) topoFile(n *topo.Node) {
	const k = "NCCL_TOPO_FILE"
	need, reason := NeedsTopoFile(n)
	switch {
	case !need:
		b.leaveUnset(k, "NCCL's own detection sees the real PCIe/NVLink topology here")
	case b.in.VirtualTopology:
		b.leaveUnset(k, "the node's view is flat ("+reason+") but /var/run/nvidia-topologyd/virtualTopology.xml exists, which NCCL loads by itself")
	case hasEFA(n):
		b.leaveUnset(k, "the node's view is flat ("+reason+"); aws-ofi-nccl sets its own topology file for this instance type when unset, and setting one here would replace it")
	case b.in.TopoFile == "":
		b.leaveUnset(k, "the node's view is flat ("+reason+") and no topology XML was generated: NCCL may pair GPUs with distant NICs")
		b.note("NCCL_TOPO_FILE: " + reason + "; supply the platform's topology XML")
	default:
		b.nccl(k, b.in.TopoFile, "the node's view is flat ("+reason+"): a topology XML generated from trainrun's model restores the GPU–NIC pairing")
	}
}

// nvSwitched: the GPUs reach each other through NVSwitches (visible as PCI
// functions, as NVLink remotes of type nvswitch, or hidden in a VM).
func nvSwitched(n *topo.Node) bool {
	if len(n.NVSwitches) > 0 {
		return true
	}
	for _, g := range n.GPUs {
		for _, l := range g.NVLinks {
			if l.RemoteType == "nvswitch" || strings.HasPrefix(l.RemoteBusID, "fffffff") {
				return true
			}
		}
	}
	return false
}

func minSM(n *topo.Node) int {
	m := 0
	for _, g := range n.GPUs {
		if g.SM > 0 && (m == 0 || g.SM < m) {
			m = g.SM
		}
	}
	return m
}

func (b *envBuilder) nvls(n *topo.Node) {
	const k = "NCCL_NVLS_ENABLE"
	sm := minSM(n)
	switch {
	case !nvSwitched(n):
		b.leaveUnset(k, "no NVSwitch on this node: NVLink SHARP needs one")
	case sm != 0 && sm < 90:
		b.leaveUnset(k, fmt.Sprintf("NVSwitch present but the GPUs are sm_%d: NVLink SHARP needs third-generation NVSwitch (Hopper or later)", sm))
	case sm == 0:
		b.leaveUnset(k, "NVSwitch present but the GPU generation is unknown: left to NCCL's detection")
	default:
		b.nccl(k, "1", fmt.Sprintf("NVSwitch with sm_%d GPUs: NVLink SHARP offloads intra-node all-reduce to the switches; 1 enables it where supported (NCCL's default 2 does the same on 2.29+; stated so an image-level 0 is visible)", sm))
	}
}

// mnnvl: every GPU registered with the fabric manager in one NVLink clique
// (NVL72) with a non-zero cluster UUID, and the job has more than one node of
// that clique.
func (b *envBuilder) mnnvl(n *topo.Node, p *Placement) {
	const k = "NCCL_MNNVL_ENABLE"
	clique := ""
	for _, g := range n.GPUs {
		f := g.Fabric
		if f == nil || f.State != "completed" || strings.Trim(strings.ReplaceAll(f.ClusterUUID, "-", ""), "0") == "" {
			b.leaveUnset(k, "no multi-node NVLink: the GPUs are not registered in an NVLink clique")
			return
		}
		c := fmt.Sprintf("%s.%d", f.ClusterUUID, f.CliqueID)
		if clique != "" && c != clique {
			b.leaveUnset(k, "the GPUs of this node report different NVLink cliques: left to NCCL")
			return
		}
		clique = c
	}
	if clique == "" {
		b.leaveUnset(k, "no GPUs")
		return
	}
	b.nccl(k, "1", fmt.Sprintf("the GPUs are in NVLink clique %s (NVL72-class rack): 1 makes NCCL use multi-node NVLink and fail loudly if the IMEX channels are missing, instead of falling back to the network silently", clique))
}

// MasterPort's range: MasterPortBase to MasterPortBase+MasterPortSpan-1,
// below Linux's default ephemeral range.
const MasterPortBase, MasterPortSpan = 20000, 10000

// MasterPort is the rendezvous port (MASTER_PORT) of a job: 20000 +
// FNV-1a(job id) mod 10000, so jobs sharing a node rarely collide. trainrun
// run, trainrun env and the plugin all use it, so their environments agree.
func MasterPort(jobID string) int {
	h := fnv.New32a()
	h.Write([]byte(jobID))
	return MasterPortBase + int(h.Sum32()%MasterPortSpan)
}
