package submit

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/trainrun/trainrun/checkpoint"
	"github.com/trainrun/trainrun/plan"
)

// An honest limit is the prediction widened by the plan's own band plus a
// lead from the save: the predicted one without measurements, the measured
// one with, the site's CkptLead when that is longer (the job uses it).
func TestHonestLimit(t *testing.T) {
	r := req70b(t)
	r.MinGPUs, r.MaxGPUs = 16, 16
	r.AutoMargin, r.AutoLead = true, true
	part := Partition{Name: "hopper", GPU: gpu(t, "h100"), GPUsPerNode: 8, Nodes: 2, Cost: -1}
	c := Candidates([]Partition{part}, r)[0]
	if !c.Fits {
		t.Fatal(c.Why)
	}
	band := Band(*c.Eval)
	if band <= 0 || band >= 0.5 || c.Margin != band {
		t.Errorf("margin %g, band %g: want the plan's band (0, 0.5)", c.Margin, band)
	}
	// 70B × 14 B over 2 nodes at 5 GB/s: 98 s a save, + a quarter.
	save := 70.55e9 * 14 / 2 / 5e9
	if got := c.Lead.Seconds(); math.Abs(got-save*1.25) > 0.02*save {
		t.Errorf("lead %.1f s, want about %.1f (the predicted save + 25 %%)", got, save*1.25)
	}
	want := TimeLimit(c.TrainS, plan.SbatchOptions{Margin: band, Lead: c.Lead})
	if c.TimeLimit != want || !strings.Contains(c.LimitWhy, "error band") || !strings.Contains(c.LimitWhy, "predicted save") {
		t.Errorf("limit %v (want %v), why %q", c.TimeLimit, want, c.LimitWhy)
	}
	// A short job (a sweep trial): the fixed 10-minute lead dominated its limit.
	short, fixed := r, r
	short.Job.Tokens, fixed.Job.Tokens = 2e7, 2e7
	fixed.AutoMargin, fixed.AutoLead = false, false
	if s, f := Candidates([]Partition{part}, short)[0], Candidates([]Partition{part}, fixed)[0]; s.TimeLimit >= f.TimeLimit-5*time.Minute {
		t.Errorf("short job: the honest limit %v is not well below 1.1× + 10 min's %v (train %.0f s)", s.TimeLimit, f.TimeLimit, s.TrainS)
	}

	r.MeasuredSave, r.MeasuredSaves = 20*time.Second, 3
	m := Candidates([]Partition{part}, r)[0]
	if m.Lead != 30*time.Second || !strings.Contains(m.LimitWhy, "3 measured saves") {
		t.Errorf("measured 20 s: lead %v (want 20 s + the 10 s floor), why %q", m.Lead, m.LimitWhy)
	}
	if m.CkptS >= c.CkptS {
		t.Errorf("the saves' overhead %g s with a measured 20 s save, %g s predicted", m.CkptS, c.CkptS)
	}

	part.CkptLead = 5 * time.Minute
	p := Candidates([]Partition{part}, r)[0]
	if p.Lead != 5*time.Minute || !strings.Contains(p.LimitWhy, "CkptLead") {
		t.Errorf("policy CkptLead 5m: lead %v, why %q", p.Lead, p.LimitWhy)
	}
}

func TestBand(t *testing.T) {
	e := plan.Evaluation{Time: plan.Time{Step: 2, StepRange: [2]float64{1.8, 2.3}}}
	if b := Band(e); math.Abs(b-0.15) > 1e-9 {
		t.Errorf("band %g, want 0.15", b)
	}
	if b := Band(plan.Evaluation{Time: plan.Time{Step: 2}}); b != 0 {
		t.Errorf("no range: band %g, want 0", b)
	}
}

// The longest of the last five measured saves; other events and nonsense
// are not saves.
func TestMeasuredSave(t *testing.T) {
	evs := []checkpoint.Event{{Type: "ckpt", CkptSeconds: 90}, {Type: "start"}}
	for _, s := range []float64{5, 7, math.NaN(), 6, -1, 8} {
		evs = append(evs, checkpoint.Event{Type: "ckpt", CkptSeconds: s})
	}
	m, n := MeasuredSave(evs)
	if m != 8*time.Second || n != 3 {
		t.Errorf("MeasuredSave = %v of %d, want 8 s of 3 (the 90 s save is older than the last five events)", m, n)
	}
	if m, n := MeasuredSave(nil); m != 0 || n != 0 {
		t.Errorf("none: %v %d", m, n)
	}
}

func TestReadSavesMissing(t *testing.T) {
	if _, err := ReadSaves(t.TempDir() + "/nope"); err == nil || !strings.Contains(err.Error(), "--ckpt-dir") {
		t.Errorf("err %v, want one naming --ckpt-dir", err)
	}
	evs, err := ReadSaves(t.TempDir())
	if err != nil || len(evs) != 0 {
		t.Errorf("empty store: %v, %v", evs, err)
	}
}
