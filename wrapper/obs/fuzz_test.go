package obs

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trainrun/trainrun/internal/safefs"
	"github.com/trainrun/trainrun/internal/units"
)

// Fuzz targets for the files a trainer or a job writes and trainrun parses
// (issue 12): the event log (events.jsonl, folded by `trainrun report`) and
// the progress file. Seeds run in plain `go test`; `make fuzz` runs each
// for a minute.

func eventSeeds() []string {
	now := time.Unix(1700000000, 0).UTC()
	line := func(e Event) string { b, _ := json.Marshal(e); return string(b) }
	start := line(Event{Kind: KindStart, Time: now, JobID: "7", Start: &Start{JobName: "j"}})
	end := line(Event{Kind: KindEnd, Time: now.Add(time.Hour), Cause: EndRequeued})
	return []string{
		start + "\n" + end + "\n",
		start + "\n" + `{"kind":"end"}` + "\n", // an event without a time
		`{"kind":"start"}` + "\n" + end + "\n",
		start + "\n" + `{"kind":"progress","step":1}` + "\n" + line(Event{Kind: KindProgress, Time: now.Add(time.Minute), Step: 5}) + "\n",
		start + "\n" + `{"kind":"ckpt_commit","time":"0001-01-01T00:00:00Z","ckpt":{"save":-9223372036854775808}}` + "\n",
		`{"kind":"start","time":"9999-12-31T23:59:59Z"}` + "\n" + `{"kind":"end","time":"0001-01-01T00:00:00Z"}` + "\n",
		"{half", "", "\n\n\n",
	}
}

// report folds and renders a log the way `trainrun report` does.
func report(t *testing.T, data []byte) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, EventsFile), data, 0o644); err != nil {
		t.Fatal(err)
	}
	evs, _ := ReadEvents(dir)
	r := BuildReport(evs)
	r.WriteText(io.Discard)
	if err := r.WriteSVG(io.Discard); err != nil {
		t.Fatal(err)
	}
}

func FuzzReadEvents(f *testing.F) {
	for _, s := range eventSeeds() {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) { report(t, data) })
}

// Issue 12 (low): `trainrun report` recursed until a fatal stack overflow on
// an event without a time (fmtDur of the saturated minimum duration). It
// crashes the test binary on the parent commit.
func TestSecReportEventWithoutTime(t *testing.T) {
	for _, s := range eventSeeds() {
		report(t, []byte(s))
	}
	if got := units.Duration(time.Duration(-1 << 63)); !strings.HasPrefix(got, "-") {
		t.Fatalf("units.Duration(min) = %q", got)
	}
}

// The worst event log: over the cap, it is refused having read at most the
// cap (64 MiB), not parsed; BenchmarkReportWorst prints the time and memory
// of one at the cap.
func TestSecEventLogCapped(t *testing.T) {
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, EventsFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(MaxEventsBytes + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := ReadEvents(dir); !errors.Is(err, safefs.ErrTooLarge) {
		t.Fatalf("an event log over %d bytes: %v", MaxEventsBytes, err)
	}
	os.Remove(filepath.Join(dir, EventsFile))
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, EventsFile)); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadEvents(dir); err == nil {
		t.Fatal("followed a link as the event log")
	}
}

func BenchmarkReportWorst(b *testing.B) {
	dir := b.TempDir()
	var sb strings.Builder
	for sb.Len() < MaxEventsBytes-64 {
		sb.WriteString(`{"kind":"progress","step":1}` + "\n") // no time: the saturated case
	}
	if err := os.WriteFile(filepath.Join(dir, EventsFile), []byte(sb.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		evs, _ := ReadEvents(dir)
		r := BuildReport(evs)
		r.WriteText(io.Discard)
		r.WriteSVG(io.Discard)
		b.ReportMetric(float64(len(evs)), "events")
	}
}

func FuzzParseProgress(f *testing.F) {
	for _, s := range []string{"120 491520 1700000000.5", "1 2", "-1 0 1", "1 1 NaN", "1 1 +Inf", "1 1 1e300", "9223372036854775807 9223372036854775807 1e18", "", strings.Repeat("9", 5000) + " 1 1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		step, tokens, at, ok := ParseProgress(line)
		if ok && (step < 0 || tokens < 0 || at.Unix() <= 0 || at.Unix() >= maxProgressUnix) {
			t.Fatalf("accepted %q as step %d tokens %d at %v", line, step, tokens, at)
		}
		p := filepath.Join(t.TempDir(), ProgressFile)
		if err := os.WriteFile(p, []byte(line), 0o644); err != nil {
			t.Fatal(err)
		}
		r := &ProgressReader{Path: p}
		if e, got := r.Poll(); got != ok || got && e.Step != step {
			t.Fatalf("Poll of %q = %+v %v, ParseProgress says %v", line, e, got, ok)
		}
	})
}

// FuzzParseProgressFile: the progress file the trainer writes (its step
// line and its metrics line). No panic; the step is what ParseProgress
// reads from the first line; the metrics are a subset of the JSON's keys,
// no more of them than the line has bytes.
func FuzzParseProgressFile(f *testing.F) {
	for _, s := range []string{"120 491520 1700000000.5\n{\"loss\": 2.5, \"lr\": \"nan\"}", "1 2 3", "1 2 1700000000\n{\"x\": \"inf\", \"y\": [1]}", "1 2 1700000000\nnot json", "\n\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParseProgressFile([]byte(s))
		first, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
		step, _, _, ok := ParseProgress(first)
		if !ok && err == nil || ok && p.Step != step {
			t.Fatalf("%q: step %d (%v), ParseProgress says %d %v", s, p.Step, err, step, ok)
		}
		// Each metric is one JSON member, at least 4 bytes ("":0).
		if len(p.Metrics) > len(s)/4 {
			t.Fatalf("%q: %d metrics", s, len(p.Metrics))
		}
	})
}
