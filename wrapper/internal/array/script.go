package array

import (
	"fmt"
	"sort"
	"strings"

	"github.com/trainrun/trainrun/internal/shell"
	"github.com/trainrun/trainrun/wrapper/internal/sweep"
)

// Script is the job array's batch script: one case per trial, each
// exporting the trial's parameters and exec-ing its trainrun run (exec, so
// the batch shell's signals reach trainrun). It fills each trial's Argv.
func Script(exe string, s *Manifest, runFlags []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "#!/bin/bash\n# trainrun sweep %s: %d trials (%s), written by trainrun; the trials and their parameters are in sweep.json\n",
		s.Name, len(s.Trials), strings.Join(s.Keys, ", "))
	// Also on sbatch's command line; here so that each trial's trainrun run
	// sees it and does not warn that a requeue truncates its log.
	b.WriteString("#SBATCH --open-mode=append\n")
	b.WriteString("set -u\n")
	fmt.Fprintf(&b, "export TRAINRUN_SWEEP=%s TRAINRUN_SWEEP_DIR=%s TRAINRUN_SWEEP_TRIAL=\"${SLURM_ARRAY_TASK_ID:-}\"\n", shell.Quote(s.Name), shell.Quote(s.Dir))
	if s.EarlyStop != "" { // each trial's controller runs the early stop (internal/run/forecast.go)
		fmt.Fprintf(&b, "export TRAINRUN_EARLY_STOP=%s TRAINRUN_SWEEP_METRIC=%s TRAINRUN_SWEEP_MAXIMIZE=%t\n", s.EarlyStop, shell.Quote(s.Metric), s.Maximize)
	}
	if s.Steps > 0 { // each trial's run records its budget in its store (trainrun forecast, --target-loss)
		fmt.Fprintf(&b, "export TRAINRUN_TRAIN_STEPS=%d\n", s.Steps)
	}
	for _, f := range s.Proxy { // --layers=N -> TRAINRUN_PROXY_LAYERS=N
		k, v, _ := strings.Cut(strings.TrimPrefix(f, "--"), "=")
		fmt.Fprintf(&b, "export TRAINRUN_PROXY_%s=%s\n", strings.ToUpper(strings.ReplaceAll(k, "-", "_")), shell.Quote(v))
	}
	b.WriteString("case \"${SLURM_ARRAY_TASK_ID:-}\" in\n")
	for i := range s.Trials {
		t := &s.Trials[i]
		cmd, _ := sweep.Substitute(s.Command, t.Params)
		t.Argv = append(append([]string{exe, "run", "--name", t.Name, "--job-dir", s.Dir}, runFlags...), "--")
		t.Argv = append(t.Argv, cmd...)
		keys := make([]string, 0, len(t.Params))
		for k := range t.Params {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var exports []string
		for _, k := range keys {
			exports = append(exports, sweep.EnvName(k)+"="+shell.Quote(t.Params[k]))
		}
		fmt.Fprintf(&b, "%d)\n  export %s\n  exec %s ;;\n", t.Index, strings.Join(exports, " "), shell.Join(t.Argv))
	}
	b.WriteString("*)\n  echo \"trainrun sweep: no trial '${SLURM_ARRAY_TASK_ID:-}' in this sweep (run it as the job array sweep.sbatch was written for)\" >&2\n  exit 2 ;;\nesac\n")
	return b.String()
}
