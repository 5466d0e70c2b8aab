package plan

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func mustModel(t *testing.T, name string) Model {
	t.Helper()
	m, err := LookupModel(name)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// Without a calibration, or with one that holds nothing within reach of the
// job, every built-in model's plan is byte for byte what it was.
func TestNoCalibrationChangesNothing(t *testing.T) {
	far := mustModel(t, "llama3-8b")
	farC := ClusterOf(mustGPU(t, "a100-80gb"), 8)
	farJ := Job{SeqLen: 4096, GlobalBatch: 64, Precision: BF16, Stack: StackJAX}
	farObs := []Observation{{ID: "far", Inputs: InputsOf(far, farJ, farC, ""), Layout: Layout{TP: 1, PP: 1, DP: 8, MicroBatch: 1, Zero: 3}, StepS: 9}}
	for _, name := range ModelNames() {
		m := mustModel(t, name)
		for _, g := range []string{"h100-sxm", "a100-80gb"} {
			c := ClusterOf(mustGPU(t, g), 64)
			j := Job{SeqLen: 4096, GlobalBatch: 512, Precision: BF16}
			corr := Calibrate(farObs, m, j, c)
			if corr != nil {
				t.Fatalf("%s on %s: a jax observation on another GPU is within reach of a megatron-core job", name, g)
			}
			var a, b bytes.Buffer
			if err := RenderJSON(&a, Search(m, j, c, SearchOptions{})); err != nil {
				t.Fatal(err)
			}
			if err := RenderJSON(&b, Search(m, j, c, SearchOptions{Correction: corr})); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(a.Bytes(), b.Bytes()) {
				t.Errorf("%s on %s: the plan changed without a calibration", name, g)
			}
		}
	}
}

// One run measured 30 % slower than predicted moves the plan of the same job
// toward it, says so, and its band holds the measurement; a second, nearby
// job moves less far, and its band is wider than the measured layout's.
func TestCalibrationMovesPlan(t *testing.T) {
	m := mustModel(t, "llama3-8b")
	c := ClusterOf(mustGPU(t, "h100-sxm"), 16)
	j := Job{SeqLen: 8192, GlobalBatch: 128, Precision: BF16}
	base := Search(m, j, c, SearchOptions{})
	if base.Plan == nil {
		t.Fatal("no plan")
	}
	measured := 1.3 * base.Plan.Time.Step
	obs := []Observation{{ID: "job-1", Inputs: InputsOf(m, j, c, ""), Layout: base.Plan.Layout, StepS: measured, Steps: 40, Spread: 0.02}}
	corr := Calibrate(obs, m, j, c)
	if corr == nil {
		t.Fatal("the job's own observation is not within reach")
	}
	r := Search(m, j, c, SearchOptions{Correction: corr})
	p := r.Plan
	if p.Layout.Config() != base.Plan.Layout.Config() {
		t.Logf("the calibrated plan chose %s (was %s)", p.Layout.Config(), base.Plan.Layout.Config())
	}
	e := Evaluate(m, j, c, base.Plan.Layout)
	corr.Apply(&e, j, c)
	if math.Abs(e.Time.Step/measured-1) > 0.02 {
		t.Errorf("measured layout: calibrated step %.3f s, measured %.3f s", e.Time.Step, measured)
	}
	if e.Time.StepRange[0] > measured || e.Time.StepRange[1] < measured {
		t.Errorf("band %v does not hold the measured %.3f s", e.Time.StepRange, measured)
	}
	if e.Calibration == nil || e.Calibration.Nearest[0].ID != "job-1" || e.Calibration.Moved < 0.25 {
		t.Errorf("calibration note %+v: want job-1 named and the step moved ≈ +30%%", e.Calibration)
	}
	if last := e.Why[len(e.Why)-1]; !bytes.Contains([]byte(last), []byte("job-1")) {
		t.Errorf("why does not name the observation: %q", last)
	}
	// A bigger job on more GPUs: corrected by the factors only.
	j2 := Job{SeqLen: 8192, GlobalBatch: 256, Precision: BF16}
	c2 := ClusterOf(mustGPU(t, "h100-sxm"), 32)
	corr2 := Calibrate(obs, m, j2, c2)
	r0 := Search(m, j2, c2, SearchOptions{})
	r2 := Search(m, j2, c2, SearchOptions{Correction: corr2})
	moved := r2.Plan.Time.Step/Evaluate(m, j2, c2, r2.Plan.Layout).Time.Step - 1
	if moved < 0.1 || moved > 0.3 {
		t.Errorf("nearby job moved %+.1f%%, want between +10%% and +30%%", 100*moved)
	}
	w := func(e *Evaluation) float64 { return e.Time.StepRange[1] / e.Time.StepRange[0] }
	if w(r2.Plan) <= w(&e) {
		t.Errorf("nearby job's band %v is not wider than the measured layout's %v", r2.Plan.Time.StepRange, e.Time.StepRange)
	}
	// More evidence narrows the band.
	obs3 := append(obs, Observation{ID: "job-2", Inputs: InputsOf(m, j2, c2, ""), Layout: r0.Plan.Layout, StepS: 1.3 * r0.Plan.Time.Step, Steps: 40})
	e3 := Evaluate(m, j2, c2, Layout{TP: 2, PP: 1, DP: 16, MicroBatch: 1, SP: true, Zero: 1})
	Calibrate(obs3, m, j2, c2).Apply(&e3, j2, c2)
	e2 := Evaluate(m, j2, c2, Layout{TP: 2, PP: 1, DP: 16, MicroBatch: 1, SP: true, Zero: 1})
	corr2.Apply(&e2, j2, c2)
	if w(&e3) >= w(&e2) {
		t.Errorf("band with two observations %v is not narrower than with one %v", e3.Time.StepRange, e2.Time.StepRange)
	}
}

// Every built-in case's plan JSON is byte for byte what the planner printed
// before site calibrations existed (hashes taken at commit 0f57f20), both
// without a calibration and with one holding nothing near the job.
func TestNoCalibrationMatchesBefore(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "plans-before-calibration.sha256"))
	if err != nil {
		t.Fatal(err)
	}
	far := mustModel(t, "llama3-8b")
	farObs := []Observation{{ID: "far", Inputs: InputsOf(far, Job{SeqLen: 4096, GlobalBatch: 64, Precision: BF16, Stack: StackJAX}, ClusterOf(mustGPU(t, "a100-80gb"), 8), ""),
		Layout: Layout{TP: 1, PP: 1, DP: 8, MicroBatch: 1, Zero: 3}, StepS: 9}}
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) != 4 || strings.HasPrefix(line, "#") {
			continue
		}
		m := mustModel(t, f[0])
		gpus, _ := strconv.Atoi(f[2])
		c := ClusterOf(mustGPU(t, f[1]), gpus)
		j := Job{SeqLen: 4096, GlobalBatch: 1024, Precision: BF16}
		for _, so := range []SearchOptions{{}, {Calibration: farObs}} {
			var out bytes.Buffer
			if err := RenderJSON(&out, Search(m, j, c, so)); err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprintf("%x", sha256.Sum256(out.Bytes())); got != f[3] {
				t.Errorf("%s on %d %s (calibration %v): the plan differs from before", f[0], gpus, f[1], so.Calibration != nil)
			}
		}
		n++
	}
	if n < 200 {
		t.Fatalf("only %d cases compared", n)
	}
}
