//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// lawTrainer is a trainer without torch whose loss follows 2.5 + 2/sqrt(step)
// with 0.5% seeded noise, 1000 tokens a step; it saves a checkpoint every
// 10 steps on its own and stops when trainrun asks (the trainrun client).
const lawTrainer = `import os, random, sys, time
sys.path.insert(0, %q)
import trainrun_client
ck = trainrun_client.Checkpointer()
steps, sleep = int(sys.argv[1]), float(sys.argv[2])
rng = random.Random(7)
step = 0
while step < steps:
    asked = ck.should_save()
    if asked or (step > 0 and step %% 10 == 0):
        tag = "step-%%d" %% step
        p = os.path.join(ck.save_dir(tag), "rank-0.txt")
        with open(p, "w") as f:
            f.write(str(step))
        ck.mark_done(tag, [p])
        if asked and ck.stop:
            break
        ck.reset()
    step += 1
    loss = (2.5 + 2.0 / step ** 0.5) * (1 + 0.005 * rng.gauss(0, 1))
    ck.report_progress(step, tokens=step * 1000, min_interval=0, metrics={"loss": loss})
    time.sleep(sleep)
print("law_trainer: ended at step %%d of %%d" %% (step, steps))
`

// trainrun run --target-loss X --stop-if-off-track on the same law
// (2.5 + 2/sqrt(step), 2.62 at the 300-step budget, given as --train-steps:
// the budget in tokens comes from the 1000 tokens a step the trainer
// reports): a target of 2.3 stops the run with exit 12 before its budget,
// the forecast in its log, its metrics and trainrun forecast (which reads
// the budget the run recorded, no --tokens); a target of 2.8 runs to the end.
func TestRunStopIfOffTrack(t *testing.T) {
	t.Parallel()
	bin := trainrun(t)
	trainer := filepath.Join(t.TempDir(), "law_trainer.py")
	if err := os.WriteFile(trainer, []byte(fmt.Sprintf(lawTrainer, filepath.Join(repoRoot(), "contrib", "trainer"))), 0o644); err != nil {
		t.Fatal(err)
	}
	type result struct {
		state, out, ckpt, prom string
		code                   int
	}
	run := func(target string) result {
		ckpt, prom := filepath.Join(t.TempDir(), "ckpt"), filepath.Join(t.TempDir(), "trainrun.prom")
		script := fmt.Sprintf(`#!/bin/bash
#SBATCH --nodes=1 --ntasks-per-node=1 --gpus-per-node=1 --time=5
exec %s run --fix tp=1 --ckpt-dir %s --metrics-textfile %s --train-steps 300 --target-loss %s --stop-if-off-track -- /usr/bin/python3 %s 300 0.2
`, bin, ckpt, prom, target, trainer)
		state, code, out, _ := runJob(t, script, 3*time.Minute)
		b, _ := os.ReadFile(prom)
		return result{state, out, ckpt, string(b), code}
	}
	done := make(chan result)
	go func() { done <- run("2.8") }()
	off := run("2.3")
	on := <-done

	if off.code != 12 || !strings.Contains(off.out, "forecast: off-track") || strings.Contains(off.out, "ended at step 300 of 300") {
		t.Errorf("target 2.3: job %s exit %d, want exit 12 (off track) before step 300; log:\n%s", off.state, off.code, off.out)
	}
	onTrack := regexp.MustCompile(`(?m)^trainrun_on_track\{[^}]*\} ([01])$`)
	if m := onTrack.FindStringSubmatch(off.prom); m == nil || m[1] != "0" || !strings.Contains(off.prom, "trainrun_forecast_loss{") {
		t.Errorf("target 2.3: the metrics lack trainrun_on_track 0 and the forecast:\n%s", off.prom)
	}
	if on.state != "COMPLETED" || on.code != 0 || !strings.Contains(on.out, "ended at step 300 of 300") || strings.Contains(on.out, "forecast: off-track") {
		t.Errorf("target 2.8: job %s exit %d, want it to finish on track; log:\n%s", on.state, on.code, on.out)
	}
	if m := onTrack.FindStringSubmatch(on.prom); m == nil || m[1] != "1" {
		t.Errorf("target 2.8: the metrics lack trainrun_on_track 1:\n%s", on.prom)
	}
	out, err := cluster.Exec(cluster.Command(context.Background(), bin, "forecast", off.ckpt, "--target-loss", "2.3"))
	t.Logf("trainrun forecast on the stopped run (target 2.3):\n%s", out)
	if err != nil || !strings.Contains(out, "off-track") || !strings.Contains(out, "at 300k ") {
		t.Errorf("forecast: %v: want off-track at the recorded budget, 300 steps of 1000 tokens (300k)\n%s", err, out)
	}
	for _, line := range strings.Split(off.out, "\n") {
		if strings.Contains(line, "forecast: ") {
			t.Logf("off-track run: %s", line)
		}
	}
}
