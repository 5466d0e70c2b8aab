package main

import (
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/trainrun/trainrun/internal/slurm"
	"github.com/trainrun/trainrun/plan"
	"github.com/trainrun/trainrun/wrapper/internal/array"
	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
	"github.com/trainrun/trainrun/wrapper/internal/planflags"
	"github.com/trainrun/trainrun/wrapper/internal/submit"
)

// parseTimeLimit reads --time: a Go duration (30m, 1h30m) or Slurm's
// formats (MM, HH:MM:SS, D-HH:MM).
func parseTimeLimit(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		d, err = slurm.ParseDuration(s)
	}
	if err != nil || d <= 0 {
		return 0, usageErrorf("--time %q: want a positive limit such as 30m, 1h30m, 45 (minutes) or 1:30:00", s)
	}
	return d, nil
}

// planTime sets the trial's time limit: --time, or planned from the
// planner's step time and the trial's steps. With --proxy-scale it also
// prices the sweep against the full model. The trial is planned once.
func (o *sweepOptions) planTime(fs *pflag.FlagSet, s *array.Manifest) error {
	if o.proxyScale != 0 && !(o.proxyScale > 0 && o.proxyScale < 1) {
		return usageErrorf("--proxy-scale %g: want a factor between 0 and 1 (0.25 = a quarter of the width and depth)", o.proxyScale)
	}
	var step float64
	var j plan.Job
	var planErr error
	if o.timeLimit == "" || o.proxyScale > 0 {
		step, j, planErr = o.trialStep(fs, s, o.proxyScale)
	}
	if o.timeLimit != "" {
		d, err := parseTimeLimit(o.timeLimit)
		if err != nil {
			return err
		}
		s.TimeLimitS, s.TimeSource = int64(d/time.Second), "given"
	} else {
		if planErr != nil {
			code := exitcode.Usage
			if c := exitCodeOf(planErr); c == exitcode.NoFit || c == exitcode.Layout || c == exitcode.Capability {
				code = c // no trial could be planned: nothing is submitted, with the planner's cause
			}
			return withCode(code, fmt.Errorf("--time not given: give --time LIMIT, or the model and --steps N to plan it; planning it failed: %v", planErr))
		}
		train := plan.TrainSeconds(j, plan.Evaluation{Time: plan.Time{Step: step}})
		lead := o.plan.CkptLead
		if !fs.Changed("ckpt-lead") { // as trainrun run: at most a quarter of the limit
			lead = min(lead, max(time.Minute, time.Duration(train/4)*time.Second))
		}
		d := submit.TimeLimit(train, plan.SbatchOptions{Margin: o.plan.TimeMargin, Lead: lead})
		s.TimeLimitS = int64(d / time.Second)
		s.TimeSource = fmt.Sprintf("planned: %s at %.3g s/step = %s, +%.0f%% margin, +%s checkpoint lead",
			stepsOf(j), step, time.Duration(train)*time.Second, 100*o.plan.TimeMargin, lead)
		if o.proxyScale > 0 {
			s.TimeSource += fmt.Sprintf(", on the model scaled by %g", o.proxyScale)
		}
	}
	if o.proxyScale > 0 {
		if planErr != nil {
			return usageErrorf("--proxy-scale %g: %v", o.proxyScale, planErr)
		}
		o.priceProxy(fs, s, step, j)
	}
	return nil
}

func stepsOf(j plan.Job) string {
	return fmt.Sprintf("%.0f steps", math.Ceil(j.Tokens/float64(j.GlobalBatch*j.SeqLen)))
}

// trialStep plans one trial (scale 0: the model as given) on its GPUs and
// returns the planner's step time and the trial's job.
func (o *sweepOptions) trialStep(fs *pflag.FlagSet, s *array.Manifest, scale float64) (float64, plan.Job, error) {
	m, err := o.plan.model(fs)
	if err != nil {
		return 0, plan.Job{}, err
	}
	if scale > 0 {
		m = scaleModel(m, scale)
	}
	j, err := o.plan.Job()
	if err != nil {
		return 0, j, err
	}
	if o.plan.Tokens == "" {
		if o.steps <= 0 {
			return 0, j, fmt.Errorf("no trial length: give --steps N (or --tokens)")
		}
		j.Tokens = float64(o.steps) * float64(j.GlobalBatch) * float64(j.SeqLen)
	}
	if o.plan.GPU == "" {
		return 0, j, fmt.Errorf("no GPU type for the planner: give --gpu TYPE (%s)", strings.Join(plan.GPUNames(), " "))
	}
	g, err := plan.LookupGPU(o.plan.GPU)
	if err != nil {
		return 0, j, err
	}
	pins, err := planflags.ParseFix(o.plan.Fix)
	if err != nil {
		return 0, j, err
	}
	c := plan.ClusterFor(g, s.Nodes*s.GPUsPerNode, s.GPUsPerNode)
	if err := o.plan.loadCalibration(func(string) string { return "" }, "", io.Discard); err != nil {
		return 0, j, err
	}
	r := plan.Search(m, j, c, o.plan.SearchOptions(pins))
	if r.Plan == nil {
		return 0, j, withCode(planflags.NoFitCode(r), fmt.Errorf("%s does not fit on %d x %d %s: %s", m.Name, s.Nodes, s.GPUsPerNode, g.Name, plan.NoFit(m, j, c, o.plan.SearchOptions(pins), r)))
	}
	return r.Plan.Time.Step, j, nil
}

// priceProxy records the sweep's GPU-hours on the proxy (planned at
// proxyStep s/step for job j) and on the full model.
func (o *sweepOptions) priceProxy(fs *pflag.FlagSet, s *array.Manifest, proxyStep float64, j plan.Job) {
	gpus := float64(s.Nodes * s.GPUsPerNode * len(s.Trials))
	if pm, err := o.plan.model(fs); err == nil {
		s.Proxy = proxyShapeFlags(scaleModel(pm, o.proxyScale))
	}
	proxyH := plan.TrainSeconds(j, plan.Evaluation{Time: plan.Time{Step: proxyStep}}) * gpus / 3600
	s.Cost = fmt.Sprintf("sweep on the model scaled by %g: %.3g GPU-hours", o.proxyScale, proxyH)
	fsz, _, err := o.trialStep(fs, s, 0)
	if err != nil {
		s.Cost += fmt.Sprintf("; the full model: %v", err)
		return
	}
	fullH := plan.TrainSeconds(j, plan.Evaluation{Time: plan.Time{Step: fsz}}) * gpus / 3600
	s.Cost += fmt.Sprintf(", against %.3g GPU-hours on the full model (%.1f%%)", fullH, 100*proxyH/fullH)
}

// scaleModel is m scaled by f in width (heads, hence hidden, and the MLP)
// and depth (layers), keeping the head dimension and a valid GQA ratio.
func scaleModel(m plan.Model, f float64) plan.Model {
	sc := func(n, min int) int { return max(min, int(math.Round(float64(n)*f))) }
	hd := m.HeadDim
	if hd == 0 && m.Heads > 0 {
		hd = m.Hidden / m.Heads
	}
	m.Name = fmt.Sprintf("%s x%g", m.Name, f)
	m.Layers = sc(m.Layers, 1)
	m.DenseLayers = min(sc(m.DenseLayers, 0), m.Layers)
	heads := sc(m.Heads, 1)
	kv := m.KVHeads
	if kv == 0 {
		kv = m.Heads
	}
	kv = max(1, min(heads, int(math.Round(float64(kv)*f))))
	for heads%kv != 0 {
		kv--
	}
	m.Heads, m.KVHeads, m.HeadDim, m.Hidden = heads, kv, hd, heads*hd
	round64 := func(n int) int {
		if n == 0 {
			return 0
		}
		return max(64, int(math.Round(float64(n)*f/64))*64)
	}
	m.FFN, m.MoEFFN, m.SharedFFN = round64(m.FFN), round64(m.MoEFFN), round64(m.SharedFFN)
	m.QLoRA, m.KVLoRA = round64(m.QLoRA), round64(m.KVLoRA)
	return m
}

// proxyShapeFlags are the shape flags of the scaled model, for each trial's
// trainrun run (they override the preset's shape there) and, as
// TRAINRUN_PROXY_* in the script, for the trainer that builds it.
func proxyShapeFlags(m plan.Model) []string {
	f := []string{fmt.Sprintf("--layers=%d", m.Layers), fmt.Sprintf("--hidden=%d", m.Hidden), fmt.Sprintf("--heads=%d", m.Heads),
		fmt.Sprintf("--kv-heads=%d", m.KVHeads), fmt.Sprintf("--head-dim=%d", m.HeadDim)}
	if m.FFN > 0 {
		f = append(f, fmt.Sprintf("--ffn=%d", m.FFN))
	}
	if m.MoEFFN > 0 {
		f = append(f, fmt.Sprintf("--moe-ffn=%d", m.MoEFFN))
	}
	if m.DenseLayers > 0 {
		f = append(f, fmt.Sprintf("--dense-layers=%d", m.DenseLayers))
	}
	return f
}
