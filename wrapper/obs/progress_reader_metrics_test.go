package obs

import (
	"os"
	"path/filepath"
	"testing"
)

// The loss history reads the metrics of each polled report from the reader.
func TestProgressReaderKeepsMetrics(t *testing.T) {
	p := filepath.Join(t.TempDir(), ProgressFile)
	r := NewProgressReader(p)
	os.WriteFile(p, []byte("5 500 1700000000\n{\"loss\": 2.5, \"lr\": 0.001}\n"), 0o644)
	if _, ok := r.Poll(); !ok || r.Metrics["loss"] != 2.5 || r.Metrics["lr"] != 0.001 {
		t.Fatalf("metrics %v, want loss 2.5 and lr 0.001", r.Metrics)
	}
	os.WriteFile(p, []byte("6 600 1700000001\n"), 0o644)
	if _, ok := r.Poll(); !ok || r.Metrics != nil {
		t.Fatalf("a report without metrics kept the previous ones: %v", r.Metrics)
	}
}
