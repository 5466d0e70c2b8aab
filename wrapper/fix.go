package main

import (
	"fmt"

	"github.com/trainrun/trainrun/plan"
	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
)

// --fix is read by plan.ParsePins for every command (`trainrun plan`, `env`
// and `run`), as the plugin reads --train-layout: one grammar, one list of
// keys (plan.PinKeys). These adapters only add the flag's name and the exit
// code.

// parseFix reads --fix into the planner's pins (nil = search).
func parseFix(s string) (plan.Pins, error) {
	p, err := plan.ParsePins(s)
	if err != nil {
		return p, usageErrorf("--fix %q: %v", s, err)
	}
	return p, nil
}

// fixedLayout is the layout --fix pins for `trainrun run` without a model:
// world GPUs, grad_accum from --global-batch (plan.Pins.Layout).
func fixedLayout(fix string, world, globalBatch int) (plan.Layout, error) {
	p, err := parseFix(fix)
	if err != nil {
		return plan.Layout{}, err
	}
	l, err := p.Layout(world, globalBatch)
	if err != nil {
		return l, withCode(exitcode.Layout, fmt.Errorf("--fix %q: %w", fix, err))
	}
	return l, nil
}

// parseDegrees is `trainrun env --fix`: the pins over the layout of --plan
// FILE when there is one (base), else the layout they state for world GPUs.
func parseDegrees(s string, base plan.Layout, world int) (plan.Layout, error) {
	p, err := parseFix(s)
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
