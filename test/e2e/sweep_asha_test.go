//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// ashaTrainer is a trainer without torch whose loss follows a known law,
// q + 2/sqrt(step) (q from the command line: the trial's quality), with the
// checkpoint handshake of the trainrun client.
const ashaTrainer = `import os, sys, time
sys.path.insert(0, %q)
import trainrun_client
ck = trainrun_client.Checkpointer()
q, steps, sleep = float(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
step = 0
while step < steps:
    if ck.should_save():
        tag = "step-%%d" %% step
        p = os.path.join(ck.save_dir(tag), "rank-0.txt")
        with open(p, "w") as f:
            f.write(str(step))
        ck.mark_done(tag, [p])
        if ck.stop:
            break
        ck.reset()
    step += 1
    ck.report_progress(step, tokens=step * 1000, min_interval=0, metrics={"loss": q + 2.0 / step ** 0.5})
    time.sleep(sleep)
print("asha_trainer: q %%s ended at step %%d of %%d" %% (q, step, steps))
`

// A 27-trial sweep with --early-stop asha:3:10 (rungs at steps 10, 30, 90):
// the best trial ASHA let finish is the true best (or within 1% of its final
// loss), and the trials ran at most 40% of the steps that running every
// trial to the end takes (steps as GPU time: each trial has one GPU).
func TestSweepASHA27(t *testing.T) {
	t.Parallel()
	sweep27(t, "ASHA", "asha:3:10")
}

// The same sweep with --early-stop forecast:0.05:20 (each trial judged from
// step 20 on, every 5 steps, by its forecast at step 90 against the best
// trial's): the same two bounds, and the figures to compare with ASHA's.
func TestSweepForecast27(t *testing.T) {
	t.Parallel()
	sweep27(t, "forecast", "forecast:0.05:20", "--steps", "90")
}

// sweep27 runs the 27-trial sweep of ashaTrainer with --early-stop rule
// (and the sweep flags extra), and checks and prints the best trial found
// against the true best and the steps run against running every trial to
// the end.
func sweep27(t *testing.T, name, rule string, extra ...string) {
	bin := trainrun(t)
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "sweep")
	trainer := filepath.Join(t.TempDir(), "asha_trainer.py")
	if err := os.WriteFile(trainer, []byte(fmt.Sprintf(ashaTrainer, filepath.Join(repoRoot(), "contrib", "trainer"))), 0o644); err != nil {
		t.Fatal(err)
	}
	const n, steps = 27, 90
	qs := make([]string, n)
	for i := range qs { // 2.00..2.52 in a fixed shuffle (i*10+13 mod 27): the best, 2.00, is trial 23
		qs[i] = strconv.FormatFloat(2+0.02*float64((i*10+13)%n), 'f', 2, 64)
	}
	start := time.Now()
	args := append([]string{"sweep", "--grid", "q=" + strings.Join(qs, ","), "--max-concurrent", "9", "--early-stop", rule,
		"--time", "5", "--gpus-per-node", "1", "--fix", "tp=1", "--sweep-dir", dir, "--format", "json"}, extra...)
	cmd := cluster.Command(ctx, bin, append(args, "--", "/usr/bin/python3", trainer, "{q}", strconv.Itoa(steps), "0.5")...)
	out, err := cluster.Exec(cmd)
	if err != nil {
		t.Fatal(err)
	}
	var sub struct {
		JobID string `json:"job_id"`
	}
	if err := json.Unmarshal([]byte(out), &sub); err != nil || sub.JobID == "" {
		t.Fatalf("sweep: %v\n%s", err, out)
	}
	t.Cleanup(func() { cluster.Run(context.Background(), "scancel", sub.JobID) })
	var st sweepStatus
	for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(time.Second) {
		if time.Now().After(deadline) {
			t.Fatalf("the sweep did not end in 5 minutes:\n%s", out)
		}
		out, err = cluster.Exec(cluster.Command(ctx, bin, "sweep", "status", dir, "--format", "json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			t.Fatalf("sweep status: %v\n%s", err, out)
		}
		ended := 0
		for _, tr := range st.Trials {
			switch tr.State {
			case "finished", "stopped-early":
				ended++
			case "failed":
				log, _ := os.ReadFile(filepath.Join(dir, "logs", fmt.Sprintf("trial-%d.out", tr.Index)))
				t.Fatalf("trial %d failed: %s\n%s", tr.Index, tr.Reason, log)
			}
		}
		if len(st.Trials) == n && ended == n {
			break
		}
	}
	wall := time.Since(start)
	trueBest := math.Inf(1)
	ashaBest, ran, finished, stopped := math.Inf(1), 0, 0, 0
	for _, tr := range st.Trials {
		q, _ := strconv.ParseFloat(tr.Params["q"], 64)
		trueBest = math.Min(trueBest, q+2/math.Sqrt(steps))
		ran += tr.Steps
		if tr.State == "finished" {
			finished++
			ashaBest = math.Min(ashaBest, tr.Metric["loss"])
		} else {
			stopped++
		}
	}
	frac := float64(ran) / float64(n*steps)
	gap := (ashaBest - trueBest) / trueBest
	t.Logf("%s (--early-stop %s) over 27 trials in %v: %d finished, %d stopped early; its best final loss %.4f, the true best %.4f (%.2f%% above); steps run %d of %d = %.0f%% of running every trial to the end",
		name, rule, wall.Round(time.Second), finished, stopped, ashaBest, trueBest, 100*gap, ran, n*steps, 100*frac)
	if gap > 0.01 {
		t.Errorf("%s's best %.4f is %.2f%% above the true best %.4f, want <= 1%%", name, ashaBest, 100*gap, trueBest)
	}
	if frac > 0.40 {
		t.Errorf("the sweep ran %.0f%% of the steps of running every trial to the end, want <= 40%%", 100*frac)
	}
}
