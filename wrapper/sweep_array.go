package main

import (
	"cmp"
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/trainrun/trainrun/wrapper/internal/array"
	"github.com/trainrun/trainrun/wrapper/internal/runname"

	"github.com/spf13/pflag"

	"github.com/trainrun/trainrun/internal/atomicfile"
	"github.com/trainrun/trainrun/internal/slurm"
	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
	"github.com/trainrun/trainrun/wrapper/internal/sweep"
)

// What `trainrun sweep` and `trainrun branches` share: both submit one job
// array of trainrun runs (trials, branches) described by a array.Manifest in
// their directory.

// addArrayFlags adds the flags both commands take: the plan flags, the size
// and time of each element of the array (unit "trial", units "trials"), and
// the array's name, partition and what is passed on to run and sbatch. Each
// command adds its directory flag and its own flags, and may reword a usage.
func (o *sweepOptions) addArrayFlags(fs *pflag.FlagSet, unit, units string) {
	o.plan.AddFlags(fs)
	for _, name := range []string{"top", "nodelist", "topology-conf", "gpus"} {
		fs.MarkHidden(name)
	}
	fs.Lookup("format").Usage = "table|json"
	fs.Lookup("gpus-per-node").Usage = "GPUs (and tasks) per node of each " + unit + " (default: all GPUs of a node of the partition, from scontrol show node)"
	fs.StringVar(&o.timeLimit, "time", "", "time limit of each "+unit+" (30m, 1h30m or Slurm's MM, HH:MM:SS, D-HH); default: planned, see below")
	fs.IntVar(&o.nodes, "nodes", 1, "nodes of each "+unit)
	fs.IntVar(&o.steps, "steps", 0, "optimizer steps each "+unit+" trains, for the planned time limit")
	fs.IntVar(&o.maxConc, "max-concurrent", 0, "run at most K "+units+" at once (sbatch --array=...%K; 0 = as many as Slurm starts)")
	fs.BoolVar(&o.dryRun, "dry-run", false, "print the "+units+", the sbatch command line and the script; submit nothing, write nothing")
	fs.StringVar(&o.name, "name", "", "the array's name (its job name; default: derived from the "+units+" and a hash)")
	fs.StringVar(&o.partition, "partition", "", "partition of the array (default: Slurm's)")
	fs.StringArrayVar(&o.runArgs, "run-arg", nil, "pass this flag on to each "+unit+"'s trainrun run, e.g. --run-arg=--max-requeue=3 (repeat)")
	fs.StringArrayVar(&o.sbatchArgs, "sbatch-arg", nil, "pass this flag on to sbatch, e.g. --sbatch-arg=--account=proj or --sbatch-arg=--exclusive (repeat)")
}

// newManifest checks the array's size flags and name and returns the
// manifest of an array of n elements in --sweep-dir / --branches-dir
// (default: dirPrefix + name), for the command cmd's messages.
func (o *sweepOptions) newManifest(cmd, name, dirPrefix string, keys, argv []string, n int) (*array.Manifest, error) {
	if o.maxConc < 0 {
		return nil, usageErrorf("--max-concurrent %d: want 0 (no limit) or more", o.maxConc)
	}
	if o.nodes <= 0 {
		return nil, usageErrorf("--nodes %d: want 1 or more", o.nodes)
	}
	if err := runname.Check(name); err != nil {
		return nil, usageErrorf("%s --name %q: want 1 to 64 letters, digits, '.', '_' or '-'", cmd, name)
	}
	dir, err := filepath.Abs(cmp.Or(o.dir, dirPrefix+name))
	if err != nil {
		return nil, err
	}
	es, hasES, err := sweep.ParseEarlyStop(o.earlyStop)
	if err != nil {
		return nil, usageErrorf("%v", err)
	}
	if err := o.forecastBudget(&es); err != nil {
		return nil, err
	}
	m := &array.Manifest{Name: name, Dir: dir, Created: time.Now().UTC(), Keys: keys, Metric: o.metric, Maximize: o.maximize,
		Command: argv, Array: sweep.ArraySpec(n, o.maxConc), Nodes: o.nodes, Steps: max(o.steps, 0)}
	if hasES {
		m.EarlyStop = es.String()
	}
	return m, nil
}

// sizeAndTime sets each element's GPUs per node, then its time limit.
func (o *sweepOptions) sizeAndTime(ctx context.Context, env *runEnv, fs *pflag.FlagSet, s *array.Manifest) error {
	if err := o.size(ctx, env, fs, s); err != nil {
		return err
	}
	return o.planTime(fs, s)
}

// submitArray submits the array (what: "sweep's", "branches'") and records
// its job id in the manifest.
func submitArray(ctx context.Context, env *runEnv, s *array.Manifest, req slurm.SbatchRequest, what string) error {
	var err error
	if s.JobID, err = env.slurm.Sbatch(ctx, req); err != nil {
		return withCode(exitcode.Slurm, fmt.Errorf("submit the %s job array: %w (the files are in %s)", what, err, s.Dir))
	}
	p := filepath.Join(s.Dir, array.ManifestFile)
	if err := atomicfile.WriteJSON(p, s, 0o644); err != nil {
		return fmt.Errorf("job array %s submitted, but recording its id in %s failed: %w", s.JobID, p, err)
	}
	return nil
}

// forecastBudget gives --early-stop forecast its budget, the steps each
// trial trains, from --steps when the flag's value does not name it; the
// rule fits a falling metric, so --maximize is refused.
func (o *sweepOptions) forecastBudget(es *sweep.EarlyStop) error {
	if !es.Forecast() {
		return nil
	}
	if o.maximize {
		return usageErrorf("--early-stop %s with --maximize: the forecast fits a metric that falls to a floor (a loss); use asha for a metric to maximize", o.earlyStop)
	}
	if es.Budget == 0 {
		es.Budget = int64(o.steps)
	}
	if es.Budget <= 0 {
		return usageErrorf("--early-stop %s needs the steps each trial trains, where the forecasts are compared: give --steps N (or forecast:P:MIN_STEPS:STEPS)", o.earlyStop)
	}
	return nil
}
