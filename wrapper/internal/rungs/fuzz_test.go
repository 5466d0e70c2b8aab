package rungs

import (
	"math"
	"os"
	"path/filepath"
	"testing"
)

// FuzzValues: a trial's rung record (a file in the shared sweep directory,
// written by every trial's controller) reads without a panic; what Values
// returns is only the records it could parse, each a number.
func FuzzValues(f *testing.F) {
	f.Add([]byte("10 2.5\n"))
	f.Add([]byte("10 NaN"))
	f.Add([]byte("x y z"))
	f.Add([]byte("10 1e400"))
	f.Add([]byte("10 -Inf"))
	f.Fuzz(func(t *testing.T, b []byte) {
		dir := t.TempDir()
		if err := Record(dir, 0, 1, 10, 1.5); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(rungDir(dir, 0), "trial-2"), b, 0o644); err != nil {
			t.Fatal(err)
		}
		vs, err := Values(dir, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(vs) < 1 || len(vs) > 2 {
			t.Fatalf("%d values from two records", len(vs))
		}
		for _, v := range vs {
			if math.IsInf(v, 0) {
				t.Fatalf("an infinite metric %v read as a trial's value", v)
			}
		}
	})
}
