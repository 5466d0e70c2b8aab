package planflags

import (
	"fmt"

	"github.com/trainrun/trainrun/plan"
	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
)

// --fix is read by plan.ParsePins for every command (`trainrun plan`, `env`
// and `run`), as the plugin reads --train-layout: one grammar, one list of
// keys (plan.PinKeys). These adapters only add the flag's name and the exit
// code.

// ParseFix reads --fix into the planner's pins (nil = search).
func ParseFix(s string) (plan.Pins, error) {
	p, err := plan.ParsePins(s)
	if err != nil {
		return p, usageErrorf("--fix %q: %v", s, err)
	}
	return p, nil
}

// FixedLayout is the layout --fix pins for `trainrun run` without a model:
// world GPUs, grad_accum from --global-batch (plan.Pins.Layout).
func FixedLayout(fix string, world, globalBatch int) (plan.Layout, error) {
	p, err := ParseFix(fix)
	if err != nil {
		return plan.Layout{}, err
	}
	l, err := p.Layout(world, globalBatch)
	if err != nil {
		return l, withCode(exitcode.Layout, fmt.Errorf("--fix %q: %w", fix, err))
	}
	return l, nil
}

// ParseDegrees is `trainrun env --fix`: the pins over the layout of --plan
// FILE when there is one (base), else the layout they state for world GPUs.
func ParseDegrees(s string, base plan.Layout, world int) (plan.Layout, error) {
	p, err := ParseFix(s)
	if err != nil {
		return base, err
	}
	if base != (plan.Layout{}) {
		return p.Apply(base), nil
	}
	l, err := p.Layout(world, 0)
	if err != nil {
		return l, usageErrorf("--fix %q: %v", s, err)
	}
	return l, nil
}
