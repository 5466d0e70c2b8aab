//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// tuneTrainer is a synthetic trainer whose step time is a function of the
// layout the planner does not know: 0.12 s × (5 − PP) × TP, so that deep
// pipelines are fastest here while the planner ranks tp=1,pp=1 first for
// the tiny model. tp=2,pp=1 fails at once, as a candidate that runs out of
// memory would. It reports every step through the real trainrun_client.
const tuneTrainer = `import os, sys, time
sys.dont_write_bytecode = True
sys.path.insert(0, %q)
import trainrun_client
ck = trainrun_client.Checkpointer()
tp, pp = int(os.environ["TRAINRUN_TP"]), int(os.environ["TRAINRUN_PP"])
if (tp, pp) == (2, 1):
    sys.stderr.write("torch.OutOfMemoryError: CUDA out of memory (synthetic)\n")
    sys.exit(1)
step_s = 0.12 * (5 - pp) * tp
for step in range(1, int(sys.argv[1]) + 1):
    time.sleep(step_s)
    ck.report_progress(step, min_interval=0)
`

func hiddenStep(tp, pp int) float64 { return 0.12 * float64(5-pp) * float64(tp) }

// tuneRecord is the part of an observation the test reads.
type tuneRecord struct {
	Plan struct {
		Plan struct {
			TP int `json:"tp"`
			PP int `json:"pp"`
		} `json:"plan"`
	} `json:"plan"`
	Observed struct {
		StepS float64 `json:"step_s"`
		Steps int     `json:"steps"`
	} `json:"observed"`
	Tune *struct {
		Index  int    `json:"index"`
		Of     int    `json:"of"`
		Steps  int    `json:"steps"`
		Chosen bool   `json:"chosen"`
		Failed string `json:"failed"`
	} `json:"tune"`
}

// trainrun run --tune 4:10 on the local Slurm: the planner's four best
// layouts run as short steps of the job, the fastest measured one (not the
// planner's first) is trained, the overhead is printed and within the
// budget, every candidate is recorded (the failing one too), and a plan
// --calibration of the imported observations ranks the tuned layout first
// with a band that contains its measured step time.
func TestRunTune(t *testing.T) {
	bin := trainrun(t)
	tmp := t.TempDir()
	ckpt, cal := filepath.Join(tmp, "ckpt"), filepath.Join(tmp, "cal")
	trainer := filepath.Join(tmp, "tune_trainer.py")
	if err := os.WriteFile(trainer, []byte(fmt.Sprintf(tuneTrainer, filepath.Join(repoRoot(), "contrib", "trainer"))), 0o644); err != nil {
		t.Fatal(err)
	}
	job := "--layers 4 --hidden 256 --heads 8 --vocab 1024 --seq-len 128 --global-batch 16 --gpu h100-sxm"
	script := fmt.Sprintf(`#!/bin/bash
#SBATCH --nodes=1 --ntasks-per-node=4 --gpus-per-node=4 --time=15
exec %s run %s --tune 4:10 --tune-budget 4 --ckpt-dir %s -- /usr/bin/python3 %s 40
`, bin, job, ckpt, trainer)
	state, exit, log, id := runJob(t, script, 6*time.Minute)
	if state != "COMPLETED" || exit != 0 {
		t.Fatalf("job %d: %s exit %d\n%s", id, state, exit, log)
	}
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "tune:") || strings.Contains(l, "dropped:") || strings.Contains(l, " s (") {
			t.Log(l) // the figures the run printed
		}
	}
	recs := readTuneRecords(t, filepath.Join(ckpt, ".trainrun", "observations.jsonl"))
	var trials []tuneRecord
	var run *tuneRecord
	for i, r := range recs {
		if r.Tune != nil {
			trials = append(trials, r)
		} else {
			run = &recs[i]
		}
	}
	if len(trials) != 4 || run == nil {
		t.Fatalf("%d trial records and run record %v, want 4 and the run's own:\n%s", len(trials), run != nil, log)
	}
	// Every candidate recorded; the one that failed as failed; the fastest
	// measured (by the hidden function) chosen, and it is not the planner's first.
	best, chosen := -1, -1
	for i, tr := range trials {
		l := tr.Plan.Plan
		if tr.Tune.Index != i+1 || tr.Tune.Of != 4 || tr.Tune.Steps != 10 {
			t.Errorf("trial %d: %+v", i, *tr.Tune)
		}
		if (l.TP == 2 && l.PP == 1) != (tr.Tune.Failed != "") {
			t.Errorf("trial %d (tp=%d pp=%d): failed %q: only tp=2,pp=1 fails", i, l.TP, l.PP, tr.Tune.Failed)
		}
		if tr.Tune.Failed != "" {
			continue
		}
		if h := hiddenStep(l.TP, l.PP); tr.Observed.StepS < h || tr.Observed.StepS > h+0.5 || tr.Observed.Steps < 3 {
			t.Errorf("trial %d (tp=%d pp=%d): measured %.3f s over %d steps, the trainer sleeps %.2f s", i, l.TP, l.PP, tr.Observed.StepS, tr.Observed.Steps, h)
		}
		if best < 0 || hiddenStep(l.TP, l.PP) < hiddenStep(trials[best].Plan.Plan.TP, trials[best].Plan.Plan.PP) {
			best = i
		}
		if tr.Tune.Chosen {
			chosen = i
		}
	}
	if t.Failed() {
		b, _ := os.ReadFile(filepath.Join(ckpt, ".trainrun", "observations.jsonl"))
		t.Logf("observations:\n%s", b)
	}
	if best <= 0 || chosen != best {
		t.Fatalf("chosen trial %d, truly fastest %d (want it, and not the planner's first):\n%s", chosen, best, log)
	}
	w := trials[best].Plan.Plan
	if run.Plan.Plan.TP != w.TP || run.Plan.Plan.PP != w.PP {
		t.Errorf("the run trained tp=%d pp=%d, not the chosen tp=%d pp=%d", run.Plan.Plan.TP, run.Plan.Plan.PP, w.TP, w.PP)
	}
	if !strings.Contains(log, fmt.Sprintf("layout      tp=%d pp=%d", w.TP, w.PP)) || !strings.Contains(log, "tuned ") {
		t.Errorf("the summary does not show the tuned layout and the table:\n%s", log)
	}
	// The overhead: printed, within the budget.
	m := regexp.MustCompile(`tune: 4 of 4 candidate\(s\) ran in (\S+) of the 4m0s budget`).FindStringSubmatch(log)
	if m == nil {
		t.Fatalf("no overhead line:\n%s", log)
	}
	if d, err := time.ParseDuration(m[1]); err != nil || d > 4*time.Minute || d <= 0 {
		t.Errorf("overhead %q (%v): want within the 4m budget", m[1], err)
	}
	if !strings.Contains(log, "predicted") || !strings.Contains(log, "dropped: rank") {
		t.Errorf("no predicted-versus-measured table with the dropped candidate:\n%s", log)
	}

	// The observations, imported into a site calibration, make the planner
	// rank the tuned layout first with a band that holds its measured time.
	imp := exec.Command(bin, "calib", "import", "--calibration", cal, filepath.Join(ckpt, ".trainrun", "observations.jsonl"))
	if out, err := imp.CombinedOutput(); err != nil {
		t.Fatalf("calib import: %v\n%s", err, out)
	}
	args := append([]string{"plan", "--format", "json", "--gpus", "4", "--gpus-per-node", "4", "--calibration", cal}, strings.Fields(job)...)
	out, err := exec.Command(bin, args...).Output()
	if err != nil {
		t.Fatalf("trainrun plan --calibration: %v", err)
	}
	var pj struct {
		Plan struct {
			TP   int `json:"tp"`
			PP   int `json:"pp"`
			Time struct {
				Step  float64    `json:"step_s"`
				Range [2]float64 `json:"step_s_range"`
			} `json:"time"`
		} `json:"plan"`
	}
	if err := json.Unmarshal(out, &pj); err != nil {
		t.Fatal(err)
	}
	measured := trials[best].Observed.StepS
	if t.Failed() {
		b, _ := os.ReadFile(filepath.Join(ckpt, ".trainrun", "observations.jsonl"))
		t.Logf("observations:\n%s", b)
	}
	if p := pj.Plan; p.TP != w.TP || p.PP != w.PP || p.Time.Range[0] > measured || p.Time.Range[1] < measured {
		t.Errorf("calibrated plan: tp=%d pp=%d step %.3f s band %v; want tp=%d pp=%d with a band holding the measured %.3f s\n%s",
			p.TP, p.PP, p.Time.Step, p.Time.Range, w.TP, w.PP, measured, out)
	}
}

func readTuneRecords(t *testing.T, path string) []tuneRecord {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []tuneRecord
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var r tuneRecord
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("%s: %v: %q", path, err, l)
		}
		out = append(out, r)
	}
	return out
}
