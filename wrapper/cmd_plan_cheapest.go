package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"
	"github.com/trainrun/trainrun/plan"
	"github.com/trainrun/trainrun/plan/policy"
	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
	"github.com/trainrun/trainrun/wrapper/internal/planflags"
	"github.com/trainrun/trainrun/wrapper/internal/submit"
)

// cheapestOptions are trainrun plan's --cheapest flags (issue 37): plan's
// own, not planOptions', so run, submit and sweep do not grow them.
type cheapestOptions struct {
	on        bool
	timeLimit string
	prices    string
	maxGPUs   int
	policy    *policy.Policy // --policy's file, when given: its partitions are the targets
	site      bool           // --site: the Slurm partitions are the targets
	// siteTargets are --site's partitions, read before planCheapest.
	siteTargets []plan.CheapestTarget
}

func (c *cheapestOptions) addFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&c.on, "cheapest", false, "across the GPU types (--gpu TYPE,TYPE to choose; default every known type), the fewest GPUs of each that fit the job, side by side with time and cost and the --finetune kind that makes each fit (full → lora:16 → qlora:16 when needed)")
	fs.StringVar(&c.timeLimit, "time-limit", "", "with --cheapest: the longest the whole run may take (hours, e.g. 24, or a duration such as 36h); needs --tokens")
	fs.StringVar(&c.prices, "gpu-hour-cost", "", "with --cheapest: price of one GPU-hour per type, TYPE=PRICE,... (e.g. l40s=1.0,h100-sxm=3.5); without one, types are ranked by GPU-hours")
	fs.IntVar(&c.maxGPUs, "max-gpus", 64, "with --cheapest: the largest GPU count tried per type")
	fs.BoolVar(&c.site, "site", false, "with --cheapest: compare this site's Slurm partitions (GPU type, GPUs per node and size as 'trainrun partitions' reads them, priced by the policy's GPUHourCost= or --gpu-hour-cost) instead of the GPU catalog")
}

// parseCheapestLimit reads hours ("24", "1.5") or a Go duration ("36h", "90m").
func parseCheapestLimit(s string) (float64, error) {
	if s == "" {
		return 0, nil
	}
	if h, err := strconv.ParseFloat(s, 64); err == nil && h > 0 && !math.IsInf(h, 0) {
		return h * 3600, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return d.Seconds(), nil
	}
	return 0, usageErrorf("--time-limit %q: give hours (24, 1.5) or a duration (36h, 90m), more than 0", s)
}

// parsePrices reads TYPE=PRICE,... with catalog GPU names.
func parsePrices(s string) (map[string]float64, error) {
	out := map[string]float64{}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		g, err := plan.LookupGPU(k)
		if !ok || err != nil {
			return nil, usageErrorf("--gpu-hour-cost %q: want TYPE=PRICE with a known GPU type (%s), e.g. l40s=1.2", kv, strings.Join(plan.GPUNames(), " "))
		}
		p, err := strconv.ParseFloat(v, 64)
		if err != nil || p < 0 || p > 1e9 || math.IsNaN(p) {
			return nil, usageErrorf("--gpu-hour-cost %s=%s: the price must be a number from 0 to 1e9", k, v)
		}
		out[g.Name] = p
	}
	return out, nil
}

// targets is what --cheapest compares: the site's partitions when a policy
// names their GPUType= (each priced by its GPUHourCost=, or --gpu-hour-cost
// for its type), else --gpu's types (counts ignored), else the whole catalog.
func (c *cheapestOptions) targets(list string, prices map[string]float64) ([]plan.CheapestTarget, error) {
	priced := func(g plan.GPU, part string) plan.CheapestTarget {
		t := plan.CheapestTarget{GPU: g, Partition: part}
		t.Price, t.Priced = prices[g.Name]
		return t
	}
	if c.policy != nil && strings.TrimSpace(list) == "" {
		var out []plan.CheapestTarget
		for _, p := range c.policy.Partitions() {
			st := c.policy.Effective(p)
			g, err := plan.LookupGPU(st.GPUType.Value)
			if st.GPUType.Value == "" || err != nil {
				continue // GPUType=auto: the policy does not say which GPUs it has
			}
			t := priced(g, p)
			if v := st.GPUHourCost.Value; v >= 0 && st.GPUHourCost.Source.Kind != policy.FromDefault {
				t.Price, t.Priced = v, true
			}
			out = append(out, t)
		}
		if len(out) > 0 {
			return out, nil
		}
	}
	var gpus []plan.GPU
	if strings.TrimSpace(list) == "" {
		gpus = plan.GPUCatalog()
	}
	for _, item := range strings.Split(list, ",") {
		if strings.TrimSpace(item) == "" {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimSpace(item), ":")
		g, err := plan.LookupGPU(name)
		if err != nil {
			return nil, withCode(exitcode.Usage, fmt.Errorf("--gpu: %w", err))
		}
		gpus = append(gpus, g)
	}
	var out []plan.CheapestTarget
	for _, g := range gpus {
		out = append(out, priced(g, ""))
	}
	return out, nil
}

// planCheapest runs trainrun plan --cheapest.
func planCheapest(env *runEnv, o *planOptions, c *cheapestOptions, m plan.Model, j plan.Job, so plan.SearchOptions) error {
	if o.Format != "table" && o.Format != "json" {
		return usageErrorf("--cheapest compares GPU types: --format table or json, not %s", o.Format)
	}
	limit, err := parseCheapestLimit(c.timeLimit)
	if err != nil {
		return err
	}
	if limit > 0 && j.Tokens <= 0 {
		return usageErrorf("--time-limit %s needs --tokens (the run's total tokens) to tell how long each option takes", c.timeLimit)
	}
	if c.maxGPUs < 1 || c.maxGPUs > 1<<20 {
		return usageErrorf("--max-gpus %d: give 1 or more (at most %d)", c.maxGPUs, 1<<20)
	}
	prices, err := parsePrices(c.prices)
	if err != nil {
		return err
	}
	targets, err := c.targets(o.GPU, prices)
	if err != nil {
		return err
	}
	if c.site {
		targets = c.siteTargets
	}
	opts := plan.Cheapest(m, j, targets, plan.CheapestOptions{Search: so, TimeLimit: limit, MaxGPUs: c.maxGPUs})
	if o.Format == "json" {
		err = writeCheapestJSON(env.stdout, m, j, limit, opts)
	} else {
		err = writeCheapestTable(env.stdout, m, j, limit, opts)
	}
	if err != nil {
		return err
	}
	if len(opts) == 0 || !opts[0].Fits {
		return withCode(exitcode.NoFit, errors.New("no GPU type fits the job within --max-gpus and the time limit: see each type's reason"))
	}
	return nil
}

func writeCheapestJSON(w io.Writer, m plan.Model, j plan.Job, limit float64, opts []plan.CheapestOption) error {
	out := struct {
		Model      string                `json:"model"`
		Finetune   string                `json:"finetune"`
		Tokens     float64               `json:"tokens,omitempty"`
		TimeLimitH float64               `json:"time_limit_h,omitempty"`
		Options    []plan.CheapestOption `json:"options"`
	}{m.Name, plan.FinetuneOf(j).String(), j.Tokens, limit / 3600, opts}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

func writeCheapestTable(w io.Writer, m plan.Model, j plan.Job, limit float64, opts []plan.CheapestOption) error {
	priced := false
	for _, op := range opts {
		priced = priced || op.PricePerGPUH > 0 || op.Cost > 0
	}
	head := fmt.Sprintf("cheapest GPUs for %s, seq %d, global batch %d, %s", m.Name, j.SeqLen, j.GlobalBatch, plan.FinetuneOf(j).Label())
	if j.Tokens > 0 {
		head += fmt.Sprintf(", %.3g tokens", j.Tokens)
	}
	if limit > 0 {
		head += fmt.Sprintf(", within %.1f h", limit/3600)
	}
	fmt.Fprintln(w, head)
	var short []string
	for _, op := range opts {
		if op.Fits {
			short = append(short, fmt.Sprintf("%d × %s, %s", op.GPUs, op.GPU, hoursWord(op)))
		}
	}
	if len(short) > 0 {
		fmt.Fprintf(w, "  %s\n\n", strings.Join(short, "; "))
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  type\tGPUs\tfinetune\ttokens/s\ttime\tGPU-h\tcost\tGiB/GPU\tlimits\n")
	for _, op := range opts {
		if op.Partition != "" {
			op.GPU = op.Partition + ":" + op.GPU
		}
		if !op.Fits {
			fmt.Fprintf(tw, "  %s\t-\t-\t-\t-\t-\t-\t-\t%s\n", op.GPU, op.Why)
			continue
		}
		c := "-" // no price for this type (--gpu-hour-cost, the policy's GPUHourCost=)
		if op.PricePerGPUH > 0 || op.Cost > 0 {
			c = fmt.Sprintf("%.2f", op.Cost)
		}
		gh := "-"
		if op.GPUHours > 0 {
			gh = fmt.Sprintf("%.1f", op.GPUHours)
		}
		fmt.Fprintf(tw, "  %s\t%d\t%s\t%.0f\t%s\t%s\t%s\t%.1f/%.0f\t%s\n", op.GPU, op.GPUs, op.Finetune, op.TokensPerS, hoursWord(op), gh, c, op.MemoryGiB, op.CapacityGiB, op.Limits)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if j.Tokens <= 0 {
		fmt.Fprintln(w, "  (no --tokens: time and GPU-hours need the run's total tokens; ranked by GPU-hours per billion tokens, cost per billion tokens)")
	}
	if !priced {
		fmt.Fprintln(w, "  (no prices: --gpu-hour-cost TYPE=PRICE,... or a policy's GPUHourCost= ranks by cost; ranked by GPU-hours)")
	}
	fmt.Fprintln(w, "  (each type's fewest GPUs that fit, within --time-limit when given)")
	return nil
}

func hoursWord(op plan.CheapestOption) string {
	if op.TrainHours <= 0 {
		return fmt.Sprintf("%.2f s/step", op.StepS)
	}
	return fmt.Sprintf("%.1f h", op.TrainHours)
}

// cheapest is runPlan's --cheapest branch: the pins and calibration as for
// one plan, then planCheapest.
func (o *planOptions) cheapest(ctx context.Context, env *runEnv, fs *pflag.FlagSet, c *cheapestOptions, m plan.Model, j plan.Job) error {
	if fs.Changed("gpus") {
		return usageErrorf("--cheapest chooses the GPU count per type: leave out --gpus (--max-gpus caps it)")
	}
	if f := fs.Lookup("policy"); f != nil && f.Value.String() != "" {
		pf, err := planflags.LoadPolicy(f.Value.String())
		if err != nil {
			return planflags.ReportPolicyErrors(env.stderr, f.Value.String(), err)
		}
		c.policy = pf
	}
	fix, err := planflags.ParseFix(o.Fix)
	if err != nil {
		return err
	}
	if err := o.loadCalibration(env.getenv, "", env.stderr); err != nil {
		return err
	}
	if c.site {
		if fs.Changed("gpu") {
			return usageErrorf("--site compares the Slurm partitions: leave out --gpu (or drop --site to compare GPU types)")
		}
		if c.siteTargets, err = siteTargets(ctx, env, c.policy, c.prices); err != nil {
			return err
		}
	}
	return planCheapest(env, o, c, m, j, o.SearchOptions(fix))
}

// siteTargets are plan --cheapest --site's places: every partition of this
// Slurm whose GPUs the planner knows and that is up (the others named on
// stderr, as submit does), with its GPUs per node and its size, priced by
// the policy's GPUHourCost= or else --gpu-hour-cost for its type.
func siteTargets(ctx context.Context, env *runEnv, pol *policy.Policy, priceList string) ([]plan.CheapestTarget, error) {
	prices, err := parsePrices(priceList)
	if err != nil {
		return nil, err
	}
	if pol == nil {
		if pol, err = policy.Parse(strings.NewReader(""), ""); err != nil {
			return nil, err
		}
	}
	infos, err := submit.LoadPartitions(ctx, env.slurm, pol, "", nil)
	if err != nil {
		return nil, withSlurmCode(err)
	}
	var out []plan.CheapestTarget
	for _, pi := range infos {
		p, ok := pi.ForChoice()
		switch {
		case !ok && pi.TypeErr != nil:
			fmt.Fprintf(env.stderr, "trainrun: plan --cheapest --site: left out: %v\n", pi.TypeErr)
			continue
		case !ok:
			fmt.Fprintf(env.stderr, "trainrun: plan --cheapest --site: left out: partition %s is %s\n", pi.Name, pi.State)
			continue
		}
		g := p.GPU
		g.GPUsPerNode = p.GPUsPerNode
		t := plan.CheapestTarget{GPU: g, Partition: p.Name, MaxGPUs: p.Nodes * p.GPUsPerNode}
		t.Price, t.Priced = prices[g.Name]
		if p.Cost >= 0 && pol.Effective(p.Name).GPUHourCost.Source.Kind != policy.FromDefault {
			t.Price, t.Priced = p.Cost, true
		}
		out = append(out, t)
	}
	if len(out) == 0 {
		return nil, withCode(exitcode.NoFit, errors.New("plan --cheapest --site: no partition of this Slurm has GPUs the planner knows and is up (see above)"))
	}
	return out, nil
}
