package main

import (
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/trainrun/trainrun/plan"
	"github.com/trainrun/trainrun/wrapper/internal/array"
	"github.com/trainrun/trainrun/wrapper/internal/planflags"
	"github.com/trainrun/trainrun/wrapper/internal/run"
)

// A sweep's mistakes are found before its job array is submitted (issue
// 30): a job array whose every trial fails with a usage error costs a
// queue wait and a look at N logs to learn what one check here says.

var placeholderRE = regexp.MustCompile(`\{([a-z_][a-z0-9_]*)\}`)

// checkSweepCommand refuses words before '--' (pflag keeps them: `--time
// 5 hours -- CMD` would run `hours CMD`), {placeholders} that are neither
// a swept key nor one of trainrun run's templates, and swept keys the
// command never uses (their trials would be identical) unless the trainer
// reads them from TRAINRUN_SWEEP_<KEY> (allowUnused).
func checkSweepCommand(fs *pflag.FlagSet, argv, keys []string, allowUnused bool) error {
	if n := fs.ArgsLenAtDash(); n > 0 {
		return usageErrorf("%q before '--' is not a flag or its value: the training command goes after '--' (a value with spaces needs quotes, e.g. --time '5:00:00')", strings.Join(argv[:n], " "))
	}
	known := append(append([]string{}, keys...), run.TemplateNames...)
	used := map[string]bool{}
	for _, a := range argv {
		for _, m := range placeholderRE.FindAllStringSubmatch(a, -1) {
			name := m[1]
			used[name] = true
			if !slices.Contains(known, name) {
				return usageErrorf("{%s} in the command is neither a swept key (%s) nor a trainrun run template (%s)%s",
					name, strings.Join(keys, ", "), strings.Join(run.TemplateNames, " "), didYouMean(name, known))
			}
		}
	}
	if allowUnused {
		return nil
	}
	for _, k := range keys {
		if !used[k] {
			return usageErrorf("the swept key %s appears nowhere in the command as {%s}: trials differing only in %s would run the same command; put {%s} in it, or pass --keys-in-env if the trainer reads TRAINRUN_SWEEP_%s",
				k, k, k, k, strings.ToUpper(k))
		}
	}
	return nil
}

// checkTrialsPlannable refuses a sweep whose trials' trainrun run could
// choose no layout: no model to plan, no --fix, no plan, none in the
// environment the job inherits; and a --fix that cannot be split over a
// trial's GPUs.
func (o *sweepOptions) checkTrialsPlannable(fs *pflag.FlagSet, getenv func(string) string, s *array.Manifest) error {
	has := o.plan.Model != "" || getenv("TRAINRUN_MODEL") != "" || getenv("TRAINRUN_PLAN") != ""
	for _, f := range planflags.ModelFlags {
		has = has || fs.Changed(f)
	}
	for _, a := range o.runArgs {
		has = has || strings.HasPrefix(a, "--plan") || strings.HasPrefix(a, "--model") || strings.HasPrefix(a, "--fix")
	}
	if o.plan.Fix != "" && o.plan.Model == "" && s.Nodes > 0 && s.GPUsPerNode > 0 {
		if _, err := planflags.FixedLayout(o.plan.Fix, s.Nodes*s.GPUsPerNode, o.plan.GlobalBatch); err != nil {
			return withCode(exitCodeOf(err), fmt.Errorf("no trial could start: %w (each trial has %d node(s) x %d GPUs)", err, s.Nodes, s.GPUsPerNode))
		}
		return nil
	}
	if !has && o.plan.Fix == "" {
		return usageErrorf("no trial could choose a layout: give the model (--model NAME with --seq-len and --global-batch) or pin the degrees (--fix tp=%d); each trial's trainrun run needs one", max(s.GPUsPerNode, 1))
	}
	if o.timeLimit != "" && o.plan.Model != "" && o.plan.GPU != "" && o.plan.SeqLen > 0 && o.plan.GlobalBatch > 0 && s.Nodes > 0 && s.GPUsPerNode > 0 {
		return o.planOneTrial(fs, s) // planTime plans it only without --time
	}
	return nil
}

// planOneTrial plans a trial on its GPUs: a sweep none of whose trials can
// be planned is refused with the planner's cause.
func (o *sweepOptions) planOneTrial(fs *pflag.FlagSet, s *array.Manifest) error {
	m, err := o.plan.model(fs)
	if err != nil {
		return err
	}
	j, err := o.plan.Job()
	if err != nil {
		return err
	}
	g, err := plan.LookupGPU(o.plan.GPU)
	if err != nil {
		return usageErrorf("--gpu: %v", err)
	}
	pins, err := planflags.ParseFix(o.plan.Fix)
	if err != nil {
		return err
	}
	c := plan.ClusterFor(g, s.Nodes*s.GPUsPerNode, s.GPUsPerNode)
	so := o.plan.SearchOptions(pins)
	if err := planflags.NoFitError(m, j, c, so, plan.Search(m, j, c, so)); err != nil {
		return withCode(exitCodeOf(err), fmt.Errorf("no trial could start (each has %d node(s) x %d %s): %w", s.Nodes, s.GPUsPerNode, g.Name, err))
	}
	return nil
}

// trialError is the last trainrun error line ("trainrun: ...", not a
// warning) of a trial's log, "" if none: what `sweep status` shows beside a
// failed trial instead of Slurm's "exit 2:0". Only the log's last 64 KiB
// are read.
func trialError(log string) string {
	f, err := os.Open(log)
	if err != nil {
		return ""
	}
	defer f.Close()
	const tail = 64 << 10
	if st, err := f.Stat(); err == nil && st.Size() > tail {
		_, _ = f.Seek(st.Size()-tail, io.SeekStart)
	}
	b, _ := io.ReadAll(io.LimitReader(f, tail))
	last := ""
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "trainrun: ") && !strings.Contains(l, ": warning: ") && !strings.HasPrefix(l, "trainrun: warning") {
			last = l
		}
	}
	return last
}
