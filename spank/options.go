package spank

import (
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/trainrun/trainrun/plan"
	"github.com/trainrun/trainrun/plan/policy"
	"github.com/trainrun/trainrun/topo"
)

// Option is one --train-* option as srun, sbatch and salloc show it.
type Option struct {
	Name    string // without the leading "--"
	Arg     string // arginfo; "" for a flag
	Usage   string
	Env     string // the environment twin (slurmrestd and cli_filter cannot see SPANK options)
	Twin    string // what the twin holds, for --help
	HasArg  bool
	Example string // a valid value, for tests and messages
}

// Options is the table the C layer registers with spank_option_register in
// local, remote and allocator context, in this order (the index is the
// option's val).
var Options = []Option{
	{Name: "train-model", Arg: "NAME", HasArg: true, Env: "TRAINRUN_MODEL", Example: "llama3-8b",
		Usage: "model to train: a trainrun preset (trainrun plan --list-models) or an absolute path of a Hugging Face config.json; exported as TRAINRUN_MODEL"},
	{Name: "train-layout", Arg: "tp=N,pp=N,...", HasArg: true, Env: "TRAINRUN_LAYOUT", Example: "tp=2,pp=1",
		Usage: "parallel layout, as trainrun run --fix: tp pp vpp cp ep etp dp mbs grad_accum recompute zero sp offload (dp defaults to the tasks left over); sets RANK order and TRAINRUN_TP..."},
	{Name: "train-ckpt", Arg: "DIR", HasArg: true, Env: "TRAINRUN_CKPT_DIR", Example: "/tmp/ckpt/%u/%j",
		Usage: "checkpoint directory (absolute; %u user, %j job id, %x job name), within the site's CkptRoots; exported as TRAINRUN_CKPT_DIR"},
	{Name: "train-ckpt-signal", Arg: "SIG[@LEAD]", HasArg: true, Env: "TRAINRUN_CKPT_SIGNAL", Example: "USR2@5m",
		Usage: "signal that asks the trainer for a checkpoint, and how long before the time limit (e.g. USR2@10m); exported as TRAINRUN_CKPT_SIGNAL, TRAINRUN_CKPT_LEAD"},
	{Name: "train-nccl", Arg: "on|off", HasArg: true, Env: "TRAINRUN_NCCL", Example: "off",
		Usage: "off: inject only the torchrun and TRAINRUN_* variables, not the NCCL/CUDA ones; on: inject them even where the policy has InjectEnv=no (if it lets users override it)"},
	{Name: "train-explain", HasArg: false, Env: "TRAINRUN_EXPLAIN", Example: "",
		Usage: "dry run: every task prints the environment trainrun would set and why, and nothing is injected"},
	// Appended: the C layer and its copy of this table number options by
	// their index here, so new options go at the end.
	{Name: "train-batch", Arg: "GLOBALxSEQLEN", HasArg: true, Env: "TRAINRUN_BATCH", Example: "1024x8192",
		Usage: "global batch and sequence length, e.g. 1024x8192 (1024 sequences of 8192 tokens per step); with --train-model the plugin plans the layout (TRAINRUN_TP..., TRAINRUN_PLAN); exported as TRAINRUN_BATCH"},
	{Name: "train-stack", Arg: "STACK", HasArg: true, Env: "TRAINRUN_STACK", Example: "fsdp:compile",
		Usage: "training software the plan assumes: megatron-core, nemo, megatron-2022, fsdp[:eager|:compile], deepspeed[:zero1|:zero2|:zero3|:pipe], jax (default: the partition's Stack=)"},
	{Name: "train-precision", Arg: "bf16|fp16|fp8", HasArg: true, Env: "TRAINRUN_PRECISION", Example: "fp8",
		Usage: "matmul precision the plan assumes (default: the partition's Precision=)"},
	{Name: "train-finetune", Arg: "full|lora[:RANK[:TARGETS]]|qlora[:RANK]|prefix[:N]|prompt[:N]|ia3", HasArg: true, Env: "TRAINRUN_FINETUNE", Example: "lora:16",
		Usage: "training mode the plan assumes: full, LoRA adapters of RANK (default 16), QLoRA on a 4-bit base, prefix or prompt tuning of N virtual tokens, or IA3, on a frozen base (default: the partition's Finetune=)"},
	{Name: "train-calibration", Arg: "DIR", HasArg: true, Env: "TRAINRUN_CALIBRATION", Example: "/tmp/calibration",
		Usage: "site calibration directory (absolute) for the job's trainrun run: its observations correct the plan, and the run appends its own (default: the partition's Calibration=)"},
	{Name: "train-tune", Arg: "K[:STEPS]", HasArg: true, Env: "TRAINRUN_TUNE", Example: "4:10",
		Usage: "trainrun run first runs the planner's K best layouts STEPS steps each (default 10) inside the job and trains the fastest measured one; none: off (default: the partition's Tune=)"},
}

// OptionIndex returns the index of the option called name, or -1.
func OptionIndex(name string) int {
	name = strings.TrimPrefix(name, "--")
	for i, o := range Options {
		if o.Name == name {
			return i
		}
	}
	return -1
}

// Request is what the user asked for, from options and twins, checked
// against the policy of the partition.
type Request struct {
	Partition string
	Model     string        // preset name or config.json path; "" = none
	Global    int           // --train-batch: sequences per optimizer step; 0 = none
	SeqLen    int           // --train-batch: tokens per sequence
	Pins      plan.Pins     // --train-layout (plan.ParsePins, trainrun's --fix grammar)
	LayoutSet bool          // --train-layout given; unset = one data-parallel replica per task
	CkptDir   string        // unexpanded (%u %j %x); "" = none
	Signal    string        // "USR2"
	Lead      time.Duration // before the time limit
	Inject    bool          // any injection (the policy's InjectEnv, or --train-nccl=on)
	NCCL      bool          // the NCCL/CUDA variables too
	Explain   bool
	// What the plan assumes (--train-stack, --train-precision,
	// --train-finetune, else the partition's Stack=, Precision=, Finetune=).
	Stack     plan.Stack
	Precision plan.Precision
	LoRARank  int
	Finetune  plan.Finetune // the whole spec (LoRARank is its rank)
	// For the job's trainrun run, which gets them as their twins
	// (--train-calibration, --train-tune).
	Calibration string
	Tune        string
}

// Resolve combines the options given (name → value; flags "1"), their
// environment twins for those not given, and the policy of partition. Every
// error begins with the option or variable and its value.
func Resolve(c *Config, partition string, given map[string]string, getenv func(string) string) (*Request, error) {
	pol := c.Policy
	if pol == nil {
		pol = policy.Default()
	}
	s := pol.Effective(partition)
	r := &Request{Partition: partition, Signal: s.CkptSignal.Value, Lead: s.CkptLead.Value, CkptDir: s.CkptDir.Value,
		Inject: s.InjectEnv.Value, NCCL: true}
	var errs []error
	if err := r.planDefaults(s); err != nil {
		errs = append(errs, err)
	}
	for i, o := range Options {
		v, ok := given[o.Name]
		what := "--" + o.Name
		if !ok {
			if v = getenv(o.Env); v == "" {
				continue
			}
			what = o.Env
		}
		if err := apply(c, pol, &s, r, i, v); err != nil {
			errs = append(errs, fmt.Errorf("%s=%s: %w", what, v, err))
		}
	}
	return r, errors.Join(errs...)
}

// Validate checks one option's value as the option callback gets it, so a
// bad value is rejected at submission. The error names neither option nor
// value: the caller adds them.
func Validate(c *Config, partition string, idx int, value string) error {
	pol := c.Policy
	if pol == nil {
		pol = policy.Default()
	}
	s := pol.Effective(partition)
	r := &Request{Inject: s.InjectEnv.Value, NCCL: true}
	return apply(c, pol, &s, r, idx, value)
}

func apply(c *Config, pol *policy.Policy, s *policy.Settings, r *Request, idx int, v string) error {
	switch name := Options[idx].Name; name {
	case "train-model", "train-batch", "train-layout", "train-explain":
		return applyJob(c, r, name, v)
	default:
		return governed{pol: pol, s: s, part: s.Partition}.apply(r, name, v)
	}
}

// applyJob takes the options that describe the job itself: its model, batch,
// layout and whether to explain the plan. The site's policy has no say.
func applyJob(c *Config, r *Request, name, v string) error {
	switch name {
	case "train-model":
		if strings.HasPrefix(v, "/") {
			if _, err := readModelConfig(c, v); err != nil {
				return err
			}
			r.Model = v
			return nil
		}
		m, err := plan.LookupModel(v)
		if err != nil {
			return err
		}
		r.Model = orStr(m.Name, v)
	case "train-batch":
		g, l, err := plan.ParseBatch(v)
		if err != nil {
			return err
		}
		r.Global, r.SeqLen = g, l
	case "train-layout":
		p, err := plan.ParsePins(v)
		if err != nil {
			return err
		}
		r.Pins, r.LayoutSet = p, true
	case "train-explain":
		switch strings.ToLower(v) {
		case "", "1", "yes", "true", "on":
			r.Explain = true
		case "0", "no", "false", "off":
			r.Explain = false
		default:
			return fmt.Errorf("accepted: 1, yes, true, on (or 0, no, false, off)")
		}
	}
	return nil
}

// governed is the site's policy for the job's partition, which the options
// below it may override only where UserOverride lets them.
type governed struct {
	pol  *policy.Policy
	s    *policy.Settings
	part string
}

// mayNot is the error for an option the policy does not let users override.
func (g governed) mayNot(key string) error {
	partName := "site-wide"
	if g.part != "" {
		partName = "partition " + g.part + "'s"
	}
	return fmt.Errorf("%s policy (%s) does not let users override %s (UserOverride=%s); ask the site, or leave it out", partName, g.pol.File(), key, g.s.UserOverride.Value)
}

// apply takes the options the site's policy governs: the checkpoint
// directory and signal, the NCCL environment and the software planned for.
func (g governed) apply(r *Request, name, v string) error {
	switch name {
	case "train-ckpt":
		if !path.IsAbs(v) || strings.ContainsAny(v, "$\n") || strings.Contains("/"+v+"/", "/../") {
			return fmt.Errorf("want an absolute path without $ or .. (%%u user, %%j job id, %%x job name are expanded)")
		}
		dir := path.Clean(v)
		if dir != g.s.CkptDir.Value && !g.pol.MayOverride("CkptDir", g.part) {
			return g.mayNot("CkptDir")
		}
		if roots := g.s.CkptRoots.Value; len(roots) > 0 && !underRoot(dir, roots) {
			return fmt.Errorf("not under the site's CkptRoots=%s (%s); pick a directory under one of them", strings.Join(roots, ","), g.s.CkptRoots.Source)
		}
		r.CkptDir = dir
	case "train-ckpt-signal":
		sig, lead, hasLead := strings.Cut(v, "@")
		ps, err := policyValue("CkptSignal", sig)
		if err != nil {
			return err
		}
		if ps.CkptSignal.Value != g.s.CkptSignal.Value && !g.pol.MayOverride("CkptSignal", g.part) {
			return g.mayNot("CkptSignal")
		}
		r.Signal = ps.CkptSignal.Value
		if hasLead {
			pl, err := policyValue("CkptLead", lead)
			if err != nil {
				return err
			}
			if pl.CkptLead.Value != g.s.CkptLead.Value && !g.pol.MayOverride("CkptLead", g.part) {
				return g.mayNot("CkptLead")
			}
			r.Lead = pl.CkptLead.Value
		}
	case "train-nccl":
		switch strings.ToLower(v) {
		case "on":
			if !g.s.InjectEnv.Value && !g.pol.MayOverride("InjectEnv", g.part) {
				return g.mayNot("InjectEnv (it is no: the plugin only reports)")
			}
			r.Inject, r.NCCL = true, true
		case "off":
			r.NCCL = false
		default:
			return fmt.Errorf("accepted: on, off")
		}
	case "train-stack":
		st, err := plan.ParseStack(v)
		if err != nil {
			return err
		}
		if canon := stackName(st); canon != g.s.Stack.Value && !g.pol.MayOverride("Stack", g.part) {
			return g.mayNot("Stack")
		}
		r.Stack = st
	case "train-precision":
		p, err := plan.ParsePrecision(v)
		if err != nil {
			return err
		}
		if string(p) != g.s.Precision.Value && !g.pol.MayOverride("Precision", g.part) {
			return g.mayNot("Precision")
		}
		r.Precision = p
	case "train-finetune":
		ft, err := plan.ParseFinetuneSpec(v)
		if err != nil {
			return err
		}
		if def, _ := plan.ParseFinetuneSpec(g.s.Finetune.Value); ft.String() != def.String() && !g.pol.MayOverride("Finetune", g.part) {
			return g.mayNot("Finetune")
		}
		r.LoRARank, r.Finetune = ft.Rank, ft
	case "train-calibration":
		if err := policy.CheckCalibration(v); err != nil {
			return err
		}
		if v != g.s.Calibration.Value && !g.pol.MayOverride("Calibration", g.part) {
			return g.mayNot("Calibration")
		}
		r.Calibration = v
	case "train-tune":
		if err := policy.CheckTune(v); err != nil {
			return err
		}
		if !strings.EqualFold(v, orStr(g.s.Tune.Value, "none")) && !g.pol.MayOverride("Tune", g.part) {
			return g.mayNot("Tune")
		}
		r.Tune = v
	}
	return nil
}

// Batch is --train-batch written back in its canonical form ("1024x8192";
// "" = none), for TRAINRUN_BATCH and messages.
func (r *Request) Batch() string {
	if r.Global == 0 {
		return ""
	}
	return strconv.Itoa(r.Global) + "x" + strconv.Itoa(r.SeqLen)
}

func orStr(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

func underRoot(dir string, roots []string) bool {
	for _, r := range roots {
		if dir == r || strings.HasPrefix(dir, strings.TrimSuffix(r, "/")+"/") {
			return true
		}
	}
	return false
}

// policyValue parses one user value with the policy file's own parser, so
// a signal or duration means the same in an option as in trainrun.conf.
func policyValue(key, v string) (policy.Settings, error) {
	if v == "" || strings.ContainsAny(v, " \t\r\n#\\=") {
		k := findKey(key)
		return policy.Settings{}, fmt.Errorf("want %s", k.Format)
	}
	p, err := policy.Parse(strings.NewReader(key+"="+v+"\n"), "option")
	if err != nil {
		var ce *topo.ConfError
		if errors.As(err, &ce) {
			return policy.Settings{}, errors.New(ce.Msg)
		}
		return policy.Settings{}, err
	}
	return p.Effective(""), nil
}

func findKey(name string) policy.Key {
	for _, k := range policy.Keys() {
		if k.Name == name {
			return k
		}
	}
	return policy.Key{Name: name}
}

// planDefaults sets what the plan assumes from the partition's policy.
func (r *Request) planDefaults(s policy.Settings) error {
	var err error
	if r.Stack, err = plan.ParseStack(s.Stack.Value); err != nil {
		return fmt.Errorf("policy Stack=%s (%s): %w", s.Stack.Value, s.Stack.Source, err)
	}
	if r.Precision, err = plan.ParsePrecision(orStr(s.Precision.Value, "bf16")); err != nil {
		return fmt.Errorf("policy Precision=%s (%s): %w", s.Precision.Value, s.Precision.Source, err)
	}
	if s.Precision.Source.Kind == policy.FromDefault {
		r.Precision = "" // not chosen: the GPU's 16-bit format (plan.PrecisionFor: FP16 on V100)
	}
	if r.Finetune, err = plan.ParseFinetuneSpec(s.Finetune.Value); err != nil {
		return fmt.Errorf("policy Finetune=%s (%s): %w", s.Finetune.Value, s.Finetune.Source, err)
	}
	r.LoRARank = r.Finetune.Rank
	return nil
}

// stackName is a stack as the policy spells it.
func stackName(st plan.Stack) string {
	if st == plan.StackMegatronCore {
		return "megatron-core"
	}
	return string(st)
}
