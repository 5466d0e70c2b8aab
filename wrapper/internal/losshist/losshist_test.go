package losshist

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestRestartReplacesRedoneSteps(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, File)
	w := Open(p)
	for s := int64(1); s <= 10; s++ {
		if err := w.Append(Entry{Step: s, Tokens: s * 100, Metrics: map[string]float64{"loss": 10 - float64(s)/10}}); err != nil {
			t.Fatal(err)
		}
	}
	// a requeue resumes from the checkpoint at step 6 and redoes 7..12
	w = Open(p)
	for s := int64(7); s <= 12; s++ {
		w.Append(Entry{Step: s, Tokens: s * 100, Metrics: map[string]float64{"loss": 5}})
	}
	es, err := Read(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 12 {
		t.Fatalf("%d entries, want 12 (steps 1-12 once each): %+v", len(es), es)
	}
	for i, e := range es {
		if e.Step != int64(i+1) {
			t.Fatalf("entry %d is step %d", i, e.Step)
		}
		if e.Step >= 7 && e.Metrics["loss"] != 5 {
			t.Errorf("step %d kept the superseded report (loss %v)", e.Step, e.Metrics["loss"])
		}
	}
}

func TestBoundedByCompaction(t *testing.T) {
	p := filepath.Join(t.TempDir(), File)
	w := Open(p)
	w.max = 100
	for s := int64(1); s <= 1000; s++ {
		if err := w.Append(Entry{Step: s, Tokens: s, Metrics: map[string]float64{"loss": 1}}); err != nil {
			t.Fatal(err)
		}
	}
	es, _ := Read(p)
	if len(es) > 100 || len(es) < 50 {
		t.Fatalf("%d entries after 1000 appends with a bound of 100", len(es))
	}
	if es[0].Step != 1 || es[len(es)-1].Step != 1000 {
		t.Errorf("compaction lost the ends: first %d last %d", es[0].Step, es[len(es)-1].Step)
	}
	for i := len(es) - 25; i < len(es); i++ {
		if es[i].Step != es[i-1].Step+1 {
			t.Fatalf("recent steps thinned: %d then %d", es[i-1].Step, es[i].Step)
		}
	}
}

func TestTornLineAndNonFinite(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, File)
	os.WriteFile(p, []byte(`{"step":1,"tokens":10,"metrics":{"loss":3}}`+"\n"+`{"step":2,"tok`), 0o644)
	r := &Recorder{ckptDir: dir, w: Open(p)}
	r.Record(3, 30, time.Unix(1, 0), map[string]float64{"loss": 2, "gnorm": nanValue()})
	es, err := Read(p)
	if err != nil || len(es) != 2 || es[1].Step != 3 {
		t.Fatalf("got %+v, %v; want steps 1 and 3 (the torn line skipped)", es, err)
	}
	if _, ok := es[1].Metrics["gnorm"]; ok {
		t.Errorf("a NaN metric was kept")
	}
	if pts, bySteps := Points(es, ""); len(pts) != 2 || pts[1].Loss != 2 || bySteps {
		t.Errorf("points %+v (by steps %v)", pts, bySteps)
	}
	noTokens := []Entry{{Step: 4, Metrics: map[string]float64{"loss": 1}}, {Step: 8, Metrics: map[string]float64{"loss": 0.9}}}
	if pts, bySteps := Points(noTokens, "loss"); !bySteps || pts[1].Tokens != 8 {
		t.Errorf("without tokens: %+v (by steps %v), want steps for tokens", pts, bySteps)
	}
}

func nanValue() float64 { var z float64; return z / z }

// The history starts before the store's first commit makes .trainrun.
func TestRecorderMakesMetaDir(t *testing.T) {
	dir := t.TempDir()
	r := NewRecorder(dir, func(err error) { t.Fatal(err) })
	r.Record(1, 10, time.Unix(1, 0), map[string]float64{"loss": 3})
	if es, err := Read(Path(dir)); err != nil || len(es) != 1 {
		t.Fatalf("history %+v, %v", es, err)
	}
	var warned error
	NewRecorder(filepath.Join(dir, "missing"), func(err error) { warned = err }).Record(1, 10, time.Unix(1, 0), map[string]float64{"loss": 3})
	if warned == nil {
		t.Error("a missing store was not reported")
	}
}
