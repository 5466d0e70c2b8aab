package plan

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// The layout grammar: one key=value list, read by ParsePins for
// `trainrun plan --fix`, `trainrun env --fix`, `trainrun run --fix` and the
// plugin's --train-layout, so that a key one of them accepts is accepted by all.

// PinKeys are the keys ParsePins accepts, in the order Pins.String writes them.
// mbs is also read as micro_batch, grad_accum as grad-accum. etp is the
// expert layers' tensor-parallel size (Megatron-Core
// --expert-tensor-parallel-size; left out, it is tp).
const PinKeys = "tp pp vpp cp ep etp dp mbs grad_accum recompute zero sp offload"

// MaxLayoutGPUs caps every degree and every product of degrees a layout
// states: 2^20 GPUs is ten times the largest training cluster built, and it
// keeps tp·pp·cp·ep·dp far from overflowing an int (tp=8,pp=2^61+1 used to
// wrap to 8 and panic in placement).
const MaxLayoutGPUs = 1 << 20

// MaxMicroBatch and MaxGradAccum cap the batch keys: 2^16 sequences per
// micro-batch or micro-batches per step is far beyond any recipe, and their
// product with dp stays inside an int.
const (
	MaxMicroBatch = 1 << 16
	MaxGradAccum  = 1 << 20
)

// ParsePins reads a layout written as "tp=8,pp=2,dp=4,recompute=selective"
// into pins (a key left out is nil: searched by the planner, defaulted by
// Pins.Layout). An empty string pins nothing. Each key may appear once; keys
// are case-insensitive; the error names the item, the value and what is
// accepted.
func ParsePins(s string) (Pins, error) {
	var p Pins
	seen := map[string]string{}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		k, v, ok := strings.Cut(item, "=")
		k, v = strings.ToLower(strings.TrimSpace(k)), strings.TrimSpace(v)
		if !ok || k == "" || v == "" {
			return Pins{}, fmt.Errorf("%q is not key=value (e.g. tp=8,pp=4; keys: %s)", item, PinKeys)
		}
		k = canonicalPinKey(k)
		if prev, dup := seen[k]; dup {
			return Pins{}, fmt.Errorf("%s given twice (%s and %s); give each key once", k, prev, item)
		}
		seen[k] = item
		if err := p.set(k, v); err != nil {
			return Pins{}, err
		}
	}
	return p, nil
}

func canonicalPinKey(k string) string {
	switch k {
	case "micro_batch", "micro-batch":
		return "mbs"
	case "grad-accum":
		return "grad_accum"
	}
	return k
}

// set applies one canonical key.
func (p *Pins) set(k, v string) error {
	degree := func(dst **int, limit int) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return fmt.Errorf("%s=%q: want a positive integer", k, v)
		}
		if n > limit {
			return fmt.Errorf("%s=%s: larger than %d, the most a layout may state", k, v, limit)
		}
		*dst = &n
		return nil
	}
	oneOf := func(dst **string, accepted ...string) error {
		for _, a := range accepted {
			if v == a {
				*dst = &a
				return nil
			}
		}
		return fmt.Errorf("%s=%q: accepted: %s", k, v, strings.Join(accepted, ", "))
	}
	switch k {
	case "tp":
		return degree(&p.TP, MaxLayoutGPUs)
	case "pp":
		return degree(&p.PP, MaxLayoutGPUs)
	case "vpp":
		return degree(&p.VPP, MaxLayoutGPUs)
	case "cp":
		return degree(&p.CP, MaxLayoutGPUs)
	case "ep":
		return degree(&p.EP, MaxLayoutGPUs)
	case "etp":
		return degree(&p.ETP, MaxLayoutGPUs)
	case "dp":
		return degree(&p.DP, MaxLayoutGPUs)
	case "mbs":
		return degree(&p.MicroBatch, MaxMicroBatch)
	case "grad_accum":
		return degree(&p.GradAccum, MaxGradAccum)
	case "recompute":
		return oneOf(&p.Recompute, "none", "selective", "full")
	case "offload":
		return oneOf(&p.Offload, "none", "optimizer", "params", "nvme")
	case "zero":
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 3 {
			return fmt.Errorf("zero=%q: accepted: 0, 1, 2, 3", v)
		}
		p.Zero = &n
	case "sp":
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("sp=%q: accepted: true, false", v)
		}
		p.SP = &b
	default:
		return fmt.Errorf("unknown key %q; accepted: %s", k, PinKeys)
	}
	return nil
}

// IsZero reports whether nothing is pinned.
func (p Pins) IsZero() bool { return p.String() == "" }

// String writes the pins back as ParsePins reads them, keys in PinKeys order.
func (p Pins) String() string {
	var parts []string
	num := func(k string, v *int) {
		if v != nil {
			parts = append(parts, k+"="+strconv.Itoa(*v))
		}
	}
	str := func(k string, v *string) {
		if v != nil {
			parts = append(parts, k+"="+*v)
		}
	}
	num("tp", p.TP)
	num("pp", p.PP)
	num("vpp", p.VPP)
	num("cp", p.CP)
	num("ep", p.EP)
	num("etp", p.ETP)
	num("dp", p.DP)
	num("mbs", p.MicroBatch)
	num("grad_accum", p.GradAccum)
	str("recompute", p.Recompute)
	num("zero", p.Zero)
	if p.SP != nil {
		parts = append(parts, "sp="+strconv.FormatBool(*p.SP))
	}
	str("offload", p.Offload)
	return strings.Join(parts, ",")
}

// Apply returns l with every pinned value of p written over it.
func (p Pins) Apply(l Layout) Layout {
	setInt := func(dst *int, v *int) {
		if v != nil {
			*dst = *v
		}
	}
	setInt(&l.TP, p.TP)
	setInt(&l.PP, p.PP)
	setInt(&l.VPP, p.VPP)
	setInt(&l.CP, p.CP)
	setInt(&l.EP, p.EP)
	setInt(&l.ETP, p.ETP)
	setInt(&l.DP, p.DP)
	setInt(&l.MicroBatch, p.MicroBatch)
	setInt(&l.GradAccum, p.GradAccum)
	setInt(&l.Zero, p.Zero)
	if p.Recompute != nil {
		l.Recompute = *p.Recompute
	}
	if p.Offload != nil {
		l.Offload = *p.Offload
	}
	if p.SP != nil {
		l.SP = *p.SP
	}
	return l
}

// Layout is the layout the pins state for world GPUs (one process per GPU),
// unevaluated: a degree left out is 1 (etp: 0, meaning tp), mbs 1, recompute and offload "none",
// zero 0; dp, when not pinned, is what tp·pp·cp leaves of world. With ep > 1,
// dp may also be given per expert group (tp·pp·cp·ep·dp = world, as
// Megatron's --expert-model-parallel-size counts it); it is returned as the
// data-parallel degree of the whole job. grad_accum comes from globalBatch
// (sequences per step; 0 = not given) and must agree with a pinned one.
func (p Pins) Layout(world, globalBatch int) (Layout, error) {
	l := p.Apply(Layout{TP: 1, PP: 1, VPP: 1, CP: 1, EP: 1, MicroBatch: 1, Recompute: "none", Offload: "none"})
	if world < 1 {
		return l, fmt.Errorf("%d GPUs: a layout needs at least one", world)
	}
	model, err := checkedProduct("tp×pp×cp", l.TP, l.PP, l.CP)
	if err != nil {
		return l, err
	}
	if p.DP == nil {
		if world%model != 0 {
			return l, fmt.Errorf("tp×pp×cp = %d does not divide the %d GPUs; choose degrees whose product divides %d, or ask for a multiple of %d GPUs",
				model, world, world, model)
		}
		l.DP = world / model
	}
	n, err := checkedProduct("tp×pp×cp×dp", model, l.DP)
	if err != nil {
		return l, err
	}
	if n != world {
		withEP, err := checkedProduct("tp×pp×cp×ep×dp", n, l.EP)
		if err != nil || l.EP == 1 || withEP != world {
			return l, fmt.Errorf("tp=%d pp=%d cp=%d dp=%d uses %d GPUs, but there are %d (one process per GPU); drop dp= to derive it, or change the degrees",
				l.TP, l.PP, l.CP, l.DP, n, world)
		}
		l.DP *= l.EP // dp was per expert group
	}
	if err := checkExpertDegrees(l); err != nil {
		return l, err
	}
	ga := 1
	if globalBatch > 0 {
		per := l.MicroBatch * l.DP // ≤ 2^16·2^20: no overflow
		if globalBatch%per != 0 {
			return l, fmt.Errorf("global batch %d is not a multiple of micro_batch×dp = %d×%d = %d", globalBatch, l.MicroBatch, l.DP, per)
		}
		ga = globalBatch / per
		if p.GradAccum != nil && *p.GradAccum != ga {
			return l, fmt.Errorf("grad_accum=%d, but global batch %d over micro_batch×dp = %d gives %d: leave grad_accum out (the batch decides it) or change the batch",
				*p.GradAccum, globalBatch, per, ga)
		}
	} else if p.GradAccum != nil {
		ga = *p.GradAccum
	}
	l.GradAccum = ga
	return l, nil
}

// checkExpertDegrees holds ep (and etp, when given) to Megatron-Core's
// rules: without etp the expert-parallel ranks come from the data-parallel
// ones (ep divides dp×cp); with etp (MoE parallel folding) etp divides tp
// and ep×etp divides tp×dp×cp.
func checkExpertDegrees(l Layout) error {
	if l.ETP == 0 {
		if (l.DP*l.CP)%l.EP != 0 {
			return fmt.Errorf("ep=%d must divide dp×cp = %d (Megatron takes expert-parallel ranks from the data-parallel ones)", l.EP, l.DP*l.CP)
		}
		return nil
	}
	if l.TP%l.ETP != 0 {
		return fmt.Errorf("etp=%d must divide tp=%d (the expert layers' tensor-parallel groups lie inside the dense layers' ones)", l.ETP, l.TP)
	}
	if (l.TP*l.DP*l.CP)%(l.EP*l.ETP) != 0 {
		return fmt.Errorf("ep×etp = %d×%d must divide tp×dp×cp = %d (Megatron-Core MoE parallel folding)", l.EP, l.ETP, l.TP*l.DP*l.CP)
	}
	return nil
}

// errTooMany is wrapped by the products of degrees that pass MaxLayoutGPUs.
var errTooMany = errors.New("more GPUs than a layout may use")

// checkedProduct multiplies degrees, each already ≥ 1, failing as soon as the
// product passes MaxLayoutGPUs (so it can never overflow).
func checkedProduct(what string, vs ...int) (int, error) {
	n := 1
	for _, v := range vs {
		if v < 1 {
			return 0, fmt.Errorf("%s of %v: every degree must be at least 1", what, vs)
		}
		if v > MaxLayoutGPUs || n > MaxLayoutGPUs/v {
			return 0, fmt.Errorf("%s of %v: %w (at most %d)", what, vs, errTooMany, MaxLayoutGPUs)
		}
		n *= v
	}
	return n, nil
}
