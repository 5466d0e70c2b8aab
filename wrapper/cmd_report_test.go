package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
)

func runReportCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	return cli{}.run(append([]string{"report"}, args...)...)
}

// testdata/report/job/events.jsonl is a four-incarnation run (time limit,
// preemption, a crash 7 minutes after a checkpoint, finish), written by the
// generator in its README; the text report and the SVG are golden files.
func TestReportGolden(t *testing.T) {
	svg := filepath.Join(t.TempDir(), "timeline.svg")
	code, out, errs := runReportCmd(t, "--svg", svg, filepath.Join("testdata", "report", "job"))
	if code != exitcode.OK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	checkGolden(t, "report/report.golden", strings.ReplaceAll(out, svg, "TIMELINE.svg"))
	b, err := os.ReadFile(svg)
	if err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "report/timeline.svg", string(b))
	for _, want := range []string{"requeued after time-limit", "requeued after preempted", "failed: step-failed", "lost  ",
		"requeue waits: 27s, 3m10s, 2m30s", "effective over the run: 2.89 s/step", "69% of predicted"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	// The SVG must be well-formed for a renderer, where one is installed.
	if rsvg, err := exec.LookPath("rsvg-convert"); err == nil {
		png := filepath.Join(t.TempDir(), "t.png")
		if b, err := exec.Command(rsvg, "-o", png, svg).CombinedOutput(); err != nil {
			t.Errorf("rsvg-convert: %v\n%s", err, b)
		}
	}
}

func TestReportErrors(t *testing.T) {
	empty := t.TempDir()
	sweepDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(sweepDir, "sweep.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"no job dir", nil, exitcode.Usage, "needs one job directory"},
		{"missing dir", []string{filepath.Join(empty, "nope")}, exitcode.Usage, "not a directory"},
		{"no event log", []string{empty}, exitcode.Usage, "no events.jsonl"},
		{"a sweep's directory", []string{sweepDir}, exitcode.Usage, "is a sweep's directory, not one job's: 'trainrun sweep status " + sweepDir}, // issue 30
		{"bad format", []string{"--format", "yaml", empty}, exitcode.Usage, "--format \"yaml\""},
		{"png asked", []string{"--svg", "t.png", empty}, exitcode.Usage, "rsvg-convert -o t.png t.svg"},
		{"svg into a missing directory", []string{"--svg", filepath.Join(empty, "no", "t.svg"), filepath.Join("testdata", "report", "job")}, exitcode.Usage, "does not exist"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errs := runReportCmd(t, tc.args...)
			if code != tc.code || !strings.Contains(errs, tc.msg) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, errs, tc.code, tc.msg)
			}
		})
	}
}

// report --format json keeps its fields and adds "summary" in the one
// output convention: snake_case, seconds as numbers, RFC 3339 times with a
// zone, the job id (issue 30 point 8).
func TestReportJSONSummary(t *testing.T) {
	code, out, errs := runReportCmd(t, "--format", "json", filepath.Join("testdata", "report", "job"))
	if code != exitcode.OK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var r struct {
		JobID        string
		Incarnations []json.RawMessage
		Summary      struct {
			JobID        string  `json:"job_id"`
			First        string  `json:"first"`
			RunningS     float64 `json:"running_s"`
			Incarnations []struct {
				JobID string  `json:"job_id"`
				Start string  `json:"start"`
				LostS float64 `json:"lost_s"`
				Ended string  `json:"ended"`
			} `json:"incarnations"`
		} `json:"summary"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	s := r.Summary
	if r.JobID == "" || s.JobID != r.JobID || len(s.Incarnations) != len(r.Incarnations) || len(s.Incarnations) == 0 || s.RunningS <= 0 {
		t.Fatalf("summary %+v", s)
	}
	for _, in := range s.Incarnations {
		ts, err := time.Parse(time.RFC3339Nano, in.Start)
		if err != nil || in.JobID != r.JobID || in.Ended == "" || in.LostS < 0 || in.LostS > 1e6 {
			t.Errorf("incarnation %+v (%v)", in, err)
		}
		if _, off := ts.Zone(); !strings.HasSuffix(in.Start, "Z") && off == 0 {
			t.Errorf("start %q has no zone", in.Start)
		}
	}
}

// Issue 30: a line of events.jsonl that is no event is left out with a
// warning that names it, not in silence.
func TestReportWarnsSkippedLines(t *testing.T) {
	dir := t.TempDir()
	b, err := os.ReadFile(filepath.Join("testdata", "report", "job", "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "events.jsonl"), append([]byte("garbage {\n"), b...), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runReportCmd(t, dir)
	if code != exitcode.OK || !strings.Contains(errs, "skipped 1 line(s) that are not events (first: line 1)") || out == "" {
		t.Errorf("exit %d, stderr %q", code, errs)
	}
	if _, _, errs := runReportCmd(t, filepath.Join("testdata", "report", "job")); strings.Contains(errs, "skipped") {
		t.Errorf("a clean log warned: %s", errs)
	}
}
