//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The example PyTorch trainer's real run (300 steps, its loss reported)
// leaves a loss history in its store, and trainrun forecast reads it:
// a verdict, and an SVG that renders (rsvg-convert, when installed).
func TestForecastExampleTrainer(t *testing.T) {
	requireTorch(t)
	t.Parallel()
	bin := trainrun(t)
	ckpt := filepath.Join(t.TempDir(), "ckpt")
	script := fmt.Sprintf(`#!/bin/bash
#SBATCH --nodes=1 --ntasks-per-node=1 --gpus-per-node=1 --time=5
export GLOO_SOCKET_IFNAME=lo
exec %s run --fix tp=1 --ckpt-dir %s -- /usr/bin/python3 %s --steps 300 --sleep 0.25 --report-loss --save-every 100
`, bin, ckpt, exampleTrainer())
	state, code, out, _ := runJob(t, script, 3*time.Minute)
	if state != "COMPLETED" || code != 0 {
		t.Fatalf("job ended %s exit %d:\n%s", state, code, out)
	}
	hist, err := os.ReadFile(filepath.Join(ckpt, ".trainrun", "metrics.jsonl"))
	if err != nil || strings.Count(string(hist), "\n") < 20 {
		t.Fatalf("loss history: %v, %d lines (want one a second for 75 s); job log:\n%s", err, strings.Count(string(hist), "\n"), out)
	}
	svg := filepath.Join(t.TempDir(), "forecast.svg")
	cmd := cluster.Command(context.Background(), bin, "forecast", ckpt, "--tokens", "600", "--target-loss", "0.05", "--svg", svg)
	fout, err := cluster.Exec(cmd)
	t.Logf("trainrun forecast on the example trainer's run:\n%s", fout)
	if err != nil || !strings.Contains(fout, "verdict") {
		t.Fatalf("forecast: %v\n%s", err, fout)
	}
	if _, err := os.Stat(svg); err != nil {
		t.Fatalf("no SVG: %v", err)
	}
	if rsvg, err := exec.LookPath("rsvg-convert"); err == nil {
		png := strings.TrimSuffix(svg, ".svg") + ".png"
		if b, err := exec.Command(rsvg, "-o", png, svg).CombinedOutput(); err != nil {
			t.Errorf("rsvg-convert: %v\n%s", err, b)
		}
		if keep := os.Getenv("TRAINRUN_FORECAST_PNG"); keep != "" { // to look at it
			b, _ := os.ReadFile(png)
			os.WriteFile(keep, b, 0o644)
		}
	}
}
