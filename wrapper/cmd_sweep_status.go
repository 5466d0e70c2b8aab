package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/trainrun/trainrun/checkpoint"
	"github.com/trainrun/trainrun/internal/atomicfile"
	"github.com/trainrun/trainrun/internal/slurm"
	"github.com/trainrun/trainrun/wrapper/internal/array"
	"github.com/trainrun/trainrun/wrapper/internal/jobdir"
	"github.com/trainrun/trainrun/wrapper/internal/rungs"
	"github.com/trainrun/trainrun/wrapper/internal/sweep"
	"github.com/trainrun/trainrun/wrapper/obs"
)

// sweepStatusJSON is the contract's `trainrun sweep status --format json`.
type sweepStatusJSON struct {
	Trials []sweep.TrialStatus `json:"trials"`
	Best   *sweepBestJSON      `json:"best"`
	// Added by issue 30: which sweep and job array this is.
	Sweep, JobID, Dir string
}

type sweepBestJSON struct {
	Index  int                `json:"index"`
	Params map[string]string  `json:"params"`
	Metric map[string]float64 `json:"metric"`
}

func runSweepStatus(ctx context.Context, env *runEnv, args []string) error {
	fs := newFlags("sweep status", "sweep status DIR [--format table|json] [--metric NAME] [--maximize] [--svg FILE]", env.stdout)
	format := fs.String("format", "table", "table|json")
	metric := fs.String("metric", "", "rank the trials by this metric (default: the sweep's --metric)")
	maximize := fs.Bool("maximize", false, "the best trial has the highest metric (default: the sweep's choice, else the lowest)")
	svg := fs.String("svg", "", "also draw the metric against each swept parameter into this SVG file")
	pushgw := fs.String("pushgateway", env.getenv("TRAINRUN_PUSHGATEWAY"), "push trainrun_sweep_trials{sweep,state} to this Pushgateway (group job=trainrun_sweep, sweep=NAME; env TRAINRUN_PUSHGATEWAY)")
	textfile := fs.String("metrics-textfile", "", "write trainrun_sweep_trials{sweep,state} to this node_exporter textfile (.prom)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageErrorf("sweep status needs the sweep's directory (what 'trainrun sweep' printed as sweep dir), got %d arguments", fs.NArg())
	}
	if *format != "table" && *format != "json" {
		return usageErrorf("--format %q: accepted: table, json", *format)
	}
	m, err := array.ReadManifest(fs.Arg(0))
	if err != nil {
		return err
	}
	if *metric == "" {
		*metric = m.Metric
	}
	if !fs.Changed("maximize") {
		*maximize = m.Maximize
	}
	rows := sweepRows(ctx, env, m)
	best, ok := sweep.Best(rows, *metric, *maximize)
	if *svg != "" {
		if err := atomicfile.WriteFile(*svg, []byte(sweep.SVG(m.Name, m.Keys, rows, *metric)), 0o644); err != nil {
			return fmt.Errorf("--svg %s: %w", *svg, err)
		}
		fmt.Fprintf(env.stderr, "trainrun: sweep status: wrote %s (%s by parameter)\n", *svg, *metric)
	}
	if err := exportSweepMetrics(ctx, m.Name, sweep.Counts(rows), *pushgw, *textfile); err != nil {
		fmt.Fprintf(env.stderr, "trainrun: sweep status: warning: %v\n", err)
	}
	if *format == "json" {
		out := sweepStatusJSON{Trials: rows, Sweep: m.Name, JobID: m.JobID, Dir: m.Dir}
		if ok {
			out.Best = &sweepBestJSON{Index: best.Index, Params: best.Params, Metric: best.Metric}
		}
		enc := json.NewEncoder(env.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(jsonSafe(out))
	}
	printSweepStatus(env, m, rows, *metric, best, ok)
	return nil
}

// sweepRows reads every trial's state from the job array and its run's files.
func sweepRows(ctx context.Context, env *runEnv, m *array.Manifest) []sweep.TrialStatus {
	tasks := map[int]slurm.ArrayTask{}
	if m.JobID != "" {
		t, err := env.slurm.ArrayTasks(ctx, m.JobID)
		var se *slurm.Error
		switch {
		case err == nil:
			tasks = t
		case errors.As(err, &se) && strings.Contains(se.Stderr, "Invalid job id"):
			// aged out of slurmctld (MinJobAge): the run files say the rest
		default:
			fmt.Fprintf(env.stderr, "trainrun: sweep status: warning: the job array's states are unknown: %v\n", err)
		}
	}
	rows := make([]sweep.TrialStatus, 0, len(m.Trials))
	for _, t := range m.Trials {
		f := sweep.TrialFacts{}
		if a, ok := tasks[t.Index]; ok {
			f = sweep.TrialFacts{InSlurm: true, State: a.State, Reason: a.Reason, ExitCode: a.ExitCode, Restarts: a.Restarts}
		}
		runDir := jobdir.Run(m.Dir, t.Name)
		if st, err := checkpoint.Open(filepath.Join(runDir, jobdir.Checkpoints)); err == nil {
			_, f.Finished, _ = st.Finished()
		}
		if p, err := obs.ReadProgressFile(filepath.Join(runDir, jobdir.Launch, obs.ProgressFile)); err == nil || p.Step > 0 {
			f.Steps, f.Metrics = p.Step, p.Metrics
		}
		f.StoppedEarly = m.EarlyStop != "" && rungs.Stopped(m.Dir, t.Index)
		state, reason := sweep.StateOf(f)
		if m.JobID == "" {
			state, reason = sweep.Unknown, "not submitted"
		}
		metric := f.Metrics
		if metric == nil {
			metric = map[string]float64{}
		}
		row := sweep.TrialStatus{Index: t.Index, Params: t.Params, State: state, Reason: reason, Restarts: f.Restarts, Steps: f.Steps, Metric: metric}
		if m.JobID != "" {
			row.JobID = fmt.Sprintf("%s_%d", m.JobID, t.Index)
		}
		if state == sweep.Failed {
			row.Log = filepath.Join(m.Dir, "logs", fmt.Sprintf("trial-%d.out", t.Index))
			row.Error = trialError(row.Log)
		}
		rows = append(rows, row)
	}
	return rows
}

// jsonSafe replaces NaN and infinities (which JSON cannot hold) in the
// metrics with nil-free strings by round-tripping through any.
func jsonSafe(s sweepStatusJSON) any {
	fix := func(m map[string]float64) map[string]any {
		out := make(map[string]any, len(m))
		for k, v := range m {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				out[k] = strconv.FormatFloat(v, 'g', -1, 64)
			} else {
				out[k] = v
			}
		}
		return out
	}
	type row struct {
		sweep.TrialStatus
		Metric map[string]any `json:"metric"`
	}
	rows := make([]row, len(s.Trials))
	for i, t := range s.Trials {
		rows[i] = row{t, fix(t.Metric)}
	}
	out := map[string]any{"trials": rows, "best": nil, "sweep": s.Sweep, "job_id": s.JobID, "sweep_dir": s.Dir}
	if s.Best != nil {
		out["best"] = map[string]any{"index": s.Best.Index, "params": s.Best.Params, "metric": fix(s.Best.Metric)}
	}
	return out
}

func printSweepStatus(env *runEnv, m *array.Manifest, rows []sweep.TrialStatus, metric string, best sweep.TrialStatus, ok bool) {
	w := env.stdout
	c := sweep.Counts(rows)
	fmt.Fprintf(w, "sweep %s (job array %s): %d trials: %d finished, %d running, %d pending, %d preempted, %d requeued, %d failed\n",
		m.Name, cmp.Or(m.JobID, "not submitted"), len(rows), c[sweep.Finished], c[sweep.Running], c[sweep.Pending], c[sweep.Preempted], c[sweep.Requeued], c[sweep.Failed])
	fmt.Fprintf(w, "%-6s", "trial")
	for _, k := range m.Keys {
		fmt.Fprintf(w, " %-10s", k)
	}
	fmt.Fprintf(w, " %-10s %7s %-12s %s\n", "state", "steps", metric, "reason")
	for _, r := range rows {
		fmt.Fprintf(w, "%-6d", r.Index)
		for _, k := range m.Keys {
			fmt.Fprintf(w, " %-10s", r.Params[k])
		}
		v := "-"
		if x, has := r.Metric[metric]; has {
			v = strconv.FormatFloat(x, 'g', 6, 64)
		}
		fmt.Fprintf(w, " %-10s %7d %-12s %s\n", r.State, r.Steps, v, r.Reason)
		if r.Error != "" {
			fmt.Fprintf(w, "       %s\n", r.Error)
		}
		if r.Log != "" {
			fmt.Fprintf(w, "       log: %s\n", r.Log)
		}
	}
	if !ok {
		fmt.Fprintf(w, "best: none yet (no trial reported %q as a number)\n", metric)
		return
	}
	var ps []string
	for _, k := range m.Keys {
		ps = append(ps, k+"="+best.Params[k])
	}
	fmt.Fprintf(w, "best: trial %d (%s) %s %s\n", best.Index, strings.Join(ps, " "), metric, strconv.FormatFloat(best.Metric[metric], 'g', 6, 64))
}

// exportSweepMetrics pushes and writes trainrun_sweep_trials{state}.
func exportSweepMetrics(ctx context.Context, name string, counts map[string]int, pushgw, textfile string) error {
	if textfile != "" {
		if !strings.HasSuffix(textfile, ".prom") {
			return fmt.Errorf("--metrics-textfile %s: node_exporter reads only files ending in .prom", textfile)
		}
		if err := prometheus.WriteToTextfile(textfile, obs.SweepRegistry(name, counts)); err != nil {
			return fmt.Errorf("--metrics-textfile %s: %w", textfile, err)
		}
	}
	if pushgw != "" {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := obs.PushSweep(ctx, pushgw, name, counts, nil); err != nil {
			return fmt.Errorf("push to the Pushgateway: %s", obs.RedactURLs(err.Error()))
		}
	}
	return nil
}
