package main

import (
	"context"
	"fmt"
	"os"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/trainrun/trainrun/internal/calib"
	"github.com/trainrun/trainrun/internal/safefs"
	"github.com/trainrun/trainrun/plan"
	"github.com/trainrun/trainrun/wrapper/internal/planflags"
)

func init() {
	register(&command{name: "calib", short: "a site calibration: import, list, show and export the observations the planner learns from", run: runCalib})
}

const calibUsage = "calib import|list|show|export --calibration DIR [FILE...|N]"

// runCalib: `trainrun calib import --calibration DIR FILE...` appends the
// records of FILEs (JSON lines, or a JSON array; a run's
// <ckpt-dir>/.trainrun/observations.jsonl, or records written by hand from
// a published figure) to DIR/observations.jsonl after checking each;
// `list` prints one line per record, `show N` one record, `export` all of
// them as JSON lines.
func runCalib(ctx context.Context, env *runEnv, args []string) error {
	fs := newFlags("calib", calibUsage, env.stdout)
	dir := fs.String("calibration", env.getenv("TRAINRUN_CALIBRATION"), "site calibration directory (env TRAINRUN_CALIBRATION)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return usageErrorf("trainrun %s: give a subcommand", calibUsage)
	}
	if *dir == "" {
		return usageErrorf("calib %s: no calibration directory: give --calibration DIR or set TRAINRUN_CALIBRATION", fs.Arg(0))
	}
	sub, rest := fs.Arg(0), fs.Args()[1:]
	switch sub {
	case "import":
		return calibImport(env, *dir, rest)
	case "list", "show", "export":
	default:
		return usageErrorf("calib %q: accepted subcommands import, list, show, export", sub)
	}
	recs, bad, err := calib.Load(calib.SitePath(*dir))
	if err != nil {
		return err
	}
	for _, b := range bad {
		fmt.Fprintf(env.stderr, "trainrun: calib: skipped %v\n", b)
	}
	switch sub {
	case "export":
		return calibExport(env.stdout, recs)
	case "show":
		if len(rest) != 1 {
			return usageErrorf("calib show N: give the record's number from 'trainrun calib list'")
		}
		var n int
		if _, err := fmt.Sscan(rest[0], &n); err != nil || n < 1 || n > len(recs) {
			return usageErrorf("calib show %q: give a record number from 1 to %d ('trainrun calib list')", rest[0], len(recs))
		}
		return calibExport(env.stdout, recs[n-1:n])
	}
	return calibList(env, *dir, recs)
}

func calibImport(env *runEnv, dir string, files []string) error {
	if len(files) == 0 {
		return usageErrorf("calib import: give the files of records to import (JSON lines or a JSON array)")
	}
	var all []calib.Record
	for _, f := range files {
		b, err := safefs.ReadFile(f, 256<<20)
		if err != nil {
			return usageErrorf("calib import: %s: %v", f, err)
		}
		recs, bad := calib.Parse(b, f)
		if len(bad) > 0 {
			return usageErrorf("calib import: %v (nothing was imported; fix or remove the record)", bad[0])
		}
		for i, r := range recs {
			if _, err := planflags.ObservationOf(r, fmt.Sprintf("%s: record %d", f, i+1)); err != nil {
				return usageErrorf("calib import: %v (nothing was imported)", err)
			}
		}
		all = append(all, recs...)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("calib import: --calibration %s: %w", dir, err)
	}
	// A record already there (the same run's store imported twice) is not
	// counted twice: evidence would double.
	have, _, err := calib.Load(calib.SitePath(dir))
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, r := range have {
		seen[r.Key()] = true
	}
	n, dup := 0, 0
	now := time.Now().UTC()
	for _, r := range all {
		if r.At.IsZero() {
			r.At = now
		}
		k := r.Key()
		if seen[k] {
			dup++
			continue
		}
		seen[k] = true
		if err := calib.Append(calib.SitePath(dir), r); err != nil {
			return err
		}
		n++
	}
	fmt.Fprintf(env.stdout, "imported %d observation(s) into %s", n, calib.SitePath(dir))
	if dup > 0 {
		fmt.Fprintf(env.stdout, "; %d already there, skipped", dup)
	}
	fmt.Fprintln(env.stdout)
	return nil
}

func calibList(env *runEnv, dir string, recs []calib.Record) error {
	tw := tabwriter.NewWriter(env.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tat\tjob\tmodel\tgpu\tgpus\tstack\tlayout\tmeasured step s\tsteps\tpredicted step s")
	idx := make([]int, len(recs))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return recs[idx[a]].At.Before(recs[idx[b]].At) })
	for _, i := range idx {
		r := recs[i]
		model, gpu, gpus, stack, layout, pred := "?", r.GPU, 0, r.Stack, "?", "?"
		if o, err := planflags.ObservationOf(r, fmt.Sprint(i+1)); err == nil {
			model, gpu, gpus, stack, layout = o.Inputs.Model.Name, o.Inputs.GPU, o.Inputs.GPUs, o.Inputs.Stack, o.Layout.Config()
		}
		if pr, err := plan.ParsePlanJSON(r.Plan); err == nil && pr.Step > 0 {
			pred = fmt.Sprintf("%.3f", pr.Step)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%.3f\t%d\t%s\n", i+1, r.At.UTC().Format("2006-01-02T15:04Z"), r.Job, model, gpu, gpus, stack, layout,
			r.Observed.StepS, r.Observed.Steps, pred)
	}
	if len(recs) == 0 {
		fmt.Fprintf(env.stderr, "trainrun: calib: %s holds no observations yet\n", calib.SitePath(dir))
	}
	return tw.Flush()
}
