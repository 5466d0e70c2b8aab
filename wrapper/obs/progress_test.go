package obs

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestParseProgress(t *testing.T) {
	for _, tc := range []struct {
		name, line   string
		ok           bool
		step, tokens int64
		at           time.Time
	}{
		{"integer time", "120 491520 1764417600", true, 120, 491520, time.Unix(1764417600, 0)},
		{"fractional time", "7 0 1764417600.25\n", true, 7, 0, time.Unix(1764417600, 250000000)},
		{"two fields", "120 1764417600", false, 0, 0, time.Time{}},
		{"negative step", "-1 0 1764417600", false, 0, 0, time.Time{}},
		{"float step", "1.5 0 1764417600", false, 0, 0, time.Time{}},
		{"empty", "", false, 0, 0, time.Time{}},
		{"zero time", "1 0 0", false, 0, 0, time.Time{}},
		{"NaN time", "1 0 NaN", false, 0, 0, time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			step, tokens, at, ok := ParseProgress(tc.line)
			if ok != tc.ok || step != tc.step || tokens != tc.tokens || !at.Equal(tc.at) {
				t.Errorf("ParseProgress(%q) = %d %d %v %v, want %d %d %v %v", tc.line, step, tokens, at, ok, tc.step, tc.tokens, tc.at, tc.ok)
			}
		})
	}
}

func TestProgressReaderReportsNewLinesOnly(t *testing.T) {
	p := &ProgressReader{Path: filepath.Join(t.TempDir(), ProgressFile)}
	if _, ok := p.Poll(); ok {
		t.Fatal("event from a missing file")
	}
	os.WriteFile(p.Path, []byte("5 100 1764417600\n"), 0o644)
	e, ok := p.Poll()
	if !ok || e.Kind != KindProgress || e.Step != 5 || e.Tokens != 100 {
		t.Fatalf("first poll: %+v %v", e, ok)
	}
	if _, ok := p.Poll(); ok {
		t.Error("the same line reported twice")
	}
	os.WriteFile(p.Path, []byte("6 120 1764417601\n"), 0o644)
	if e, ok := p.Poll(); !ok || e.Step != 6 {
		t.Errorf("second line: %+v %v", e, ok)
	}
}

// A line left by the previous incarnation is not this one's progress.
func TestProgressReaderIgnoresTheLastIncarnationsLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), ProgressFile)
	os.WriteFile(path, []byte("57 233472 1764417600\n"), 0o644)
	p := NewProgressReader(path)
	if e, ok := p.Poll(); ok {
		t.Fatalf("stale line reported: %+v", e)
	}
	os.WriteFile(path, []byte("58 237568 1764417700\n"), 0o644)
	if e, ok := p.Poll(); !ok || e.Step != 58 {
		t.Errorf("new line: %+v %v", e, ok)
	}
}
