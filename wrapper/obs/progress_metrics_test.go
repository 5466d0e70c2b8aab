package obs

import (
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestParseProgressFileMetrics(t *testing.T) {
	// written by contrib/trainer/trainrun_client.py report_progress(7, 10, metrics=...)
	p, err := ParseProgressFile([]byte("7 10 1764547200.500\n{\"div\":\"nan\",\"loss\":0.25,\"up\":\"inf\"}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if p.Step != 7 || p.Tokens != 10 || p.Metrics["loss"] != 0.25 || !math.IsNaN(p.Metrics["div"]) || !math.IsInf(p.Metrics["up"], 1) {
		t.Errorf("got %+v", p)
	}
	old, err := ParseProgressFile([]byte("3 0 1764547200.000\n"))
	if err != nil || old.Step != 3 || old.Metrics != nil {
		t.Errorf("a client without metrics: %+v %v", old, err)
	}
	for _, bad := range []string{"7 10 1764547200\n[1]\n", "7 10 1764547200\n{\"loss\":\"low\"}\n", "7 10 1764547200\n{\"loss\":true}\n"} {
		p, err := ParseProgressFile([]byte(bad))
		if err == nil || !strings.Contains(err.Error(), "metrics line") || p.Step != 7 {
			t.Errorf("%q: %+v %v, want a metrics error and step 7", bad, p, err)
		}
	}
	if _, err := ParseProgressFile([]byte("x\n")); err == nil {
		t.Error("a bad step line parsed")
	}
}

// The live reader still sees progress when the trainer adds metrics.
func TestProgressReaderWithMetricsLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), ProgressFile)
	r := NewProgressReader(path)
	now := time.Now().Unix()
	os.WriteFile(path, []byte(strings.Join([]string{itoa(5) + " 0 " + itoa(now), `{"loss":1.5}`, ""}, "\n")), 0o644)
	ev, ok := r.Poll()
	if !ok || ev.Step != 5 {
		t.Fatalf("Poll with a metrics line = %+v %v, want step 5", ev, ok)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
