//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// tinyJob is a small model the planner evaluates for 4 ranks (tp=2 pinned).
const tinyJob = "--layers 4 --hidden 256 --heads 8 --vocab 1024 --seq-len 128 --global-batch 16 --gpu h100-sxm --fix tp=2,pp=1"

// observationLine is the part of an observation record the test checks.
type observationLine struct {
	Plan struct {
		Plan struct {
			TP        int    `json:"tp"`
			DP        int    `json:"dp"`
			MBS       int    `json:"micro_batch"`
			Zero      int    `json:"zero"`
			Recompute string `json:"recompute"`
			SP        bool   `json:"sp"`
		} `json:"plan"`
		Inputs struct {
			GPU  string `json:"gpu"`
			GPUs int    `json:"gpus"`
		} `json:"inputs"`
	} `json:"plan"`
	Observed struct {
		StepS  float64 `json:"step_s"`
		Steps  int     `json:"steps"`
		Spread float64 `json:"spread"`
	} `json:"observed"`
	Nodes int       `json:"nodes"`
	Job   string    `json:"job"`
	At    time.Time `json:"at"`
}

func readObservations(t *testing.T, path string) []observationLine {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []observationLine
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var o observationLine
		if err := json.Unmarshal([]byte(l), &o); err != nil {
			t.Fatalf("%s: %v: %q", path, err, l)
		}
		out = append(out, o)
	}
	return out
}

// The real PyTorch example trainer under trainrun run, planned from a model:
// the run appends its observation (median steady step time from
// report_progress) to the checkpoint store and the site calibration, and a
// later trainrun plan --calibration of the same job predicts the measured
// step time. A trainer that reports no progress writes none and says why once.
func TestRunRecordsObservation(t *testing.T) {
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("no /usr/bin/python3")
	}
	requireTorch(t)
	bin := trainrun(t)
	tmp := t.TempDir()
	ckpt, cal := filepath.Join(tmp, "ckpt"), filepath.Join(tmp, "cal")
	script := fmt.Sprintf(`#!/bin/bash
#SBATCH --nodes=1 --ntasks-per-node=4 --gpus-per-node=4 --time=5
export GLOO_SOCKET_IFNAME=lo
exec %s run %s --ckpt-dir %s --calibration %s -- /usr/bin/python3 %s --steps 14 --sleep 0.4
`, bin, tinyJob, ckpt, cal, exampleTrainer())
	state, exit, log, id := runJob(t, script, 3*time.Minute)
	if state != "COMPLETED" || exit != 0 {
		t.Fatalf("job %d: %s exit %d\n%s", id, state, exit, log)
	}
	if !strings.Contains(log, "observation: median step") {
		t.Errorf("the run did not say it recorded its observation:\n%s", log)
	}
	var measured float64
	var ran observationLine
	for _, p := range []string{filepath.Join(ckpt, ".trainrun", "observations.jsonl"), filepath.Join(cal, "observations.jsonl")} {
		obs := readObservations(t, p)
		if len(obs) != 1 {
			t.Fatalf("%s: %d records, want 1", p, len(obs))
		}
		o := obs[0]
		if o.Plan.Plan.TP != 2 || o.Plan.Plan.DP != 2 || o.Plan.Inputs.GPU != "h100-sxm" || o.Plan.Inputs.GPUs != 4 || o.Nodes != 1 {
			t.Errorf("%s: plan %+v, nodes %d: want tp=2 dp=2 on 4 h100-sxm, 1 node", p, o.Plan, o.Nodes)
		}
		// 0.4 s of sleep per step plus a gloo all-reduce: the trainer's own
		// timestamps, so the bound is loose only upward (a loaded machine).
		if o.Observed.StepS < 0.4 || o.Observed.StepS > 3 || o.Observed.Steps < 3 {
			t.Errorf("%s: observed %+v: want a median step of at least the 0.4 s sleep over ≥ 3 steps", p, o.Observed)
		}
		if !strings.HasPrefix(o.Job, fmt.Sprint(id)) || o.At.IsZero() {
			t.Errorf("%s: job %q at %v: want job %d and a time", p, o.Job, o.At, id)
		}
		measured, ran = o.Observed.StepS, o
	}
	// The next plan of the same job and layout predicts what was measured.
	rp := ran.Plan.Plan
	fix := fmt.Sprintf("tp=2,pp=1,mbs=%d,zero=%d,recompute=%s,sp=%t", rp.MBS, rp.Zero, rp.Recompute, rp.SP)
	job := strings.Replace(tinyJob, "--fix tp=2,pp=1", "--fix "+fix, 1)
	args := append([]string{"plan", "--format", "json", "--gpus", "4", "--gpus-per-node", "4", "--calibration", cal}, strings.Fields(job)...)
	out, err := exec.Command(bin, args...).Output()
	if err != nil {
		t.Fatalf("trainrun plan --calibration: %v", err)
	}
	var pj struct {
		Plan struct {
			Time struct {
				Step  float64    `json:"step_s"`
				Range [2]float64 `json:"step_s_range"`
			} `json:"time"`
			Calibration *struct {
				Measured bool `json:"measured_layout"`
			} `json:"calibration"`
		} `json:"plan"`
	}
	if err := json.Unmarshal(out, &pj); err != nil {
		t.Fatal(err)
	}
	tm := pj.Plan.Time
	if pj.Plan.Calibration == nil || !pj.Plan.Calibration.Measured || tm.Range[0] > measured || tm.Range[1] < measured || tm.Step < 0.9*measured || tm.Step > 1.1*measured {
		t.Errorf("calibrated plan: step %.3f s, band %v, calibration %+v; measured %.3f s", tm.Step, tm.Range, pj.Plan.Calibration, measured)
	}

	// No progress reported: no record, one line saying why.
	ckpt2 := filepath.Join(tmp, "ckpt2")
	script = fmt.Sprintf(`#!/bin/bash
#SBATCH --nodes=1 --ntasks-per-node=4 --gpus-per-node=4 --time=5
exec %s run %s --ckpt-dir %s -- /bin/sh -c 'sleep 1'
`, bin, tinyJob, ckpt2)
	state, exit, log, id = runJob(t, script, 2*time.Minute)
	if state != "COMPLETED" || exit != 0 {
		t.Fatalf("job %d: %s exit %d\n%s", id, state, exit, log)
	}
	if n := strings.Count(log, "no observation recorded: the trainer reported no progress"); n != 1 {
		t.Errorf("the reason was said %d times, want once:\n%s", n, log)
	}
	if _, err := os.Stat(filepath.Join(ckpt2, ".trainrun", "observations.jsonl")); !os.IsNotExist(err) {
		t.Errorf("a run without progress left an observations file: %v", err)
	}

	// A layout pinned without a model: the record is still written (the
	// trainer reported progress), says it has no inputs, and the log says
	// how to make it usable.
	ckpt3 := filepath.Join(tmp, "ckpt3")
	script = fmt.Sprintf(`#!/bin/bash
#SBATCH --nodes=1 --ntasks-per-node=4 --gpus-per-node=4 --time=5
export GLOO_SOCKET_IFNAME=lo
exec %s run --fix tp=2 --ckpt-dir %s -- /usr/bin/python3 %s --steps 10 --sleep 0.4
`, bin, ckpt3, exampleTrainer())
	state, exit, log, id = runJob(t, script, 3*time.Minute)
	if state != "COMPLETED" || exit != 0 {
		t.Fatalf("job %d: %s exit %d\n%s", id, state, exit, log)
	}
	obs := readObservations(t, filepath.Join(ckpt3, ".trainrun", "observations.jsonl"))
	if len(obs) != 1 || obs[0].Plan.Plan.TP != 2 || obs[0].Plan.Inputs.GPUs != 0 || obs[0].Observed.StepS < 0.4 {
		t.Errorf("pinned-layout run: %+v", obs)
	}
	if !strings.Contains(log, `no plan "inputs"`) || !strings.Contains(log, "argv") {
		t.Errorf("the log does not say the record lacks inputs:\n%s", log)
	}
}
