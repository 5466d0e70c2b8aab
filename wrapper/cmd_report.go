package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
	"github.com/trainrun/trainrun/wrapper/internal/launch"
	"github.com/trainrun/trainrun/wrapper/obs"
)

func init() {
	register(&command{name: "report", short: "summarise a run across its incarnations (and draw its timeline)", run: runReport})
}

func runReport(ctx context.Context, env *runEnv, args []string) error {
	fs := newFlags("report", "report [--svg FILE] [--format table|json] JOBDIR", env.stdout)
	svg := fs.String("svg", "", "also draw the run's timeline (incarnations, checkpoints, interruptions, requeue waits, steps) into this SVG file")
	format := fs.String("format", "table", "table, or json (the report's data); text is table's old name, kept for one release")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageErrorf("report needs one job directory (the run's TRAINRUN_JOB_DIR, e.g. trainrun-1234), got %d arguments", fs.NArg())
	}
	*format = tableFormat(*format, "text")
	if *format != "text" && *format != "json" {
		return usageErrorf("--format %q: use table or json", *format)
	}
	if strings.HasSuffix(strings.ToLower(*svg), ".png") {
		return usageErrorf("--svg %s: trainrun writes SVG; write %s and convert it (Debian librsvg2-bin: rsvg-convert -o %s %s)",
			*svg, strings.TrimSuffix(*svg, filepath.Ext(*svg))+".svg", *svg, strings.TrimSuffix(*svg, filepath.Ext(*svg))+".svg")
	}
	dir := fs.Arg(0)
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return usageErrorf("job directory %s: not a directory", dir)
	}
	evs, skipped, err := obs.ReadEventsSkipped(dir)
	if err != nil {
		return err
	}
	if len(skipped) > 0 {
		fmt.Fprintf(env.stderr, "trainrun: report: warning: %s: skipped %d line(s) that are not events (first: line %d); the report leaves them out\n",
			filepath.Join(dir, obs.EventsFile), len(skipped), skipped[0])
	}
	if len(evs) == 0 {
		if _, err := os.Stat(filepath.Join(dir, "sweep.json")); err == nil { // issue 30: a sweep's directory
			return withCode(exitcode.Usage, fmt.Errorf("%s is a sweep's directory, not one job's: 'trainrun sweep status %s' shows its trials; 'trainrun report %s' one trial",
				dir, dir, filepath.Join(dir, "runs", "trial-0")))
		}
		return withCode(exitcode.Usage, fmt.Errorf("job directory %s: no %s: not a trainrun job directory, or its runs predate the event log", dir, obs.EventsFile))
	}
	rep := obs.BuildReport(evs)
	rep.Hangs = obs.ReadHangs(dir)
	if *format == "json" {
		b, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		env.stdout.Write(append(b, '\n'))
	} else {
		rep.WriteText(env.stdout)
	}
	if *svg != "" {
		var b bytes.Buffer
		if err := rep.WriteSVG(&b); err != nil {
			return err
		}
		if err := launch.WriteFileAtomic(*svg, b.Bytes(), 0o644); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return usageErrorf("--svg %s: directory %s does not exist", *svg, filepath.Dir(*svg))
			}
			return fmt.Errorf("--svg %s: %w", *svg, err)
		}
		if *format == "text" {
			fmt.Fprintf(env.stdout, "\ntimeline: %s\n", *svg)
		}
	}
	return nil
}
