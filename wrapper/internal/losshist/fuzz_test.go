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

// FuzzReadBudget: any budget.json (the store is writable by the trainer)
// reads without a panic; a budget read is positive and finite, and In
// gives a positive finite value or none.
func FuzzReadBudget(f *testing.F) {
	f.Add([]byte(`{"tokens": 2e12, "from": "--tokens 2T"}`))
	f.Add([]byte(`{"steps": 1000}`))
	f.Add([]byte(`{"tokens": -1}`))
	f.Add([]byte(`{"tokens": 1e400}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		dir := t.TempDir()
		os.MkdirAll(filepath.Join(dir, ".trainrun"), 0o755)
		if err := os.WriteFile(BudgetPath(dir), b, 0o644); err != nil {
			t.Fatal(err)
		}
		bud, ok, err := ReadBudget(dir)
		if !ok {
			return
		}
		if err != nil || !(bud.Tokens >= 0) || math.IsInf(bud.Tokens, 0) || bud.Steps < 0 || bud.Tokens == 0 && bud.Steps == 0 {
			t.Fatalf("budget %+v read (%v)", bud, err)
		}
		for _, bySteps := range []bool{false, true} {
			if v, _, in := bud.In([]Entry{{Step: 10, Tokens: 4000}}, bySteps); in && (!(v > 0) || math.IsInf(v, 0)) {
				t.Fatalf("budget %+v in its unit: %v", bud, v)
			}
		}
	})
}
