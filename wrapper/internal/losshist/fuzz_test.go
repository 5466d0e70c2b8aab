package losshist

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/trainrun/trainrun/internal/forecast"
)

// FuzzRead: any metrics.jsonl (the store is writable by the trainer, and a
// killed writer tears lines) reads without a panic into steps in strictly
// rising order, and the forecast over its points ends with a result or an
// error, never a panic or a NaN band.
func FuzzRead(f *testing.F) {
	f.Add([]byte(`{"step":1,"tokens":100,"metrics":{"loss":3.1}}` + "\n" + `{"step":2,"tokens":200,"metrics":{"loss":2.9}}` + "\n"))
	f.Add([]byte(`{"step":5,"metrics":{"loss":1}}` + "\n" + `{"step":3,"metrics":{"loss":2}}` + "\n" + `{"step":-1}` + "\n{torn"))
	f.Add([]byte(`{"step":1,"tokens":-5,"metrics":{"loss":1e308}}` + "\n" + `{"step":2,"tokens":9223372036854775807,"metrics":{"loss":-0}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		p := filepath.Join(t.TempDir(), File)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		es, _ := Read(p)
		for i := 1; i < len(es); i++ {
			if es[i].Step <= es[i-1].Step {
				t.Fatalf("steps %d then %d: not rising", es[i-1].Step, es[i].Step)
			}
		}
		pts, _ := Points(es, "loss")
		if len(pts) > 60 {
			pts = pts[:60] // the fit's cost, not its correctness, grows with the count
		}
		r, err := forecast.Forecast(pts, forecast.Options{Budget: 1e12, Target: 2, Seed: 1})
		if err == nil && r.Verdict != forecast.TooEarly && (math.IsNaN(r.Loss.Mid) || math.IsNaN(r.Loss.Lo) || math.IsNaN(r.Loss.Hi)) {
			t.Fatalf("verdict %s with a NaN band %+v", r.Verdict, r.Loss)
		}
	})
}
