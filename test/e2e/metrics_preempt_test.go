//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// A job preempted once (partition low, by a job on high): the webhook says
// preempted, requeued, finished in that order; the Pushgateway holds one
// preemption, one requeue, a grace margin within the partition's GraceTime
// and the finished state; the report names the preemption.
func TestMetricsPreemption(t *testing.T) {
	t.Parallel() // mostly waits on Slurm's clocks: a cluster of its own
	cluster := ownCluster(t)
	bin := trainrun(t)
	ctx := context.Background()
	pg, err := cluster.StartPushgateway(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Stop()
	var mu sync.Mutex
	var events []string
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m map[string]any
		json.NewDecoder(r.Body).Decode(&m)
		mu.Lock()
		events = append(events, fmt.Sprint(m["event"]))
		mu.Unlock()
	}))
	defer hook.Close()
	dir := t.TempDir()
	trainer := filepath.Join(dir, "trainer.sh")
	if err := os.WriteFile(trainer, []byte(shellTrainer), 0o755); err != nil {
		t.Fatal(err)
	}
	jobDir := filepath.Join(dir, "job")
	script := fmt.Sprintf(`#!/bin/bash
#SBATCH --nodes=1 --ntasks-per-node=1 --gpus-per-node=1 --time=10 --requeue --open-mode=append -p low
exec %s run --probe none --fix tp=1 --job-dir %s --pushgateway %s --webhook %s -- %s 60
`, bin, jobDir, pg.URL, hook.URL, trainer)
	id, err := cluster.SubmitBatch(ctx, script, "--nodelist=n2")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cluster.Run(context.Background(), "scancel", strconv.Itoa(id)) })
	preempt(t, cluster, id, "restart 0", 1, 8*time.Second, "n2")
	if _, err := cluster.WaitJob(ctx, id, 4*time.Minute, "COMPLETED"); err != nil {
		t.Fatalf("%v\n%s", err, cluster.JobOutput(id))
	}
	log := cluster.JobOutput(id)
	job := strconv.Itoa(id)
	mu.Lock()
	got := strings.Join(events, ",")
	mu.Unlock()
	if got != "preempted,requeued,finished" {
		t.Errorf("webhook events %q, want preempted,requeued,finished\n%s", got, log)
	}

	resp, err := http.Get(pg.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	value := func(name, labels string) (float64, bool) {
		m := regexp.MustCompile(`(?m)^` + name + `\{[^}]*` + labels + `[^}]*job_id="` + job + `"[^}]*\} (\S+)$`).FindSubmatch(b)
		if m == nil {
			return 0, false
		}
		v, err := strconv.ParseFloat(string(m[1]), 64)
		return v, err == nil
	}
	for _, c := range []struct {
		name, labels string
		want         float64
	}{
		{"trainrun_interruptions_total", `cause="preempted",`, 1},
		{"trainrun_requeues_total", "", 1},
		{"trainrun_restart_count", "", 1},
		{"trainrun_trainer_step", "", 60},
	} {
		if v, ok := value(c.name, c.labels); !ok || v != c.want {
			t.Errorf("Pushgateway: %s{%s} = %v (found %v), want %v", c.name, c.labels, v, ok, c.want)
		}
	}
	budget, okB := value("trainrun_grace_budget_seconds", "")
	margin, okM := value("trainrun_grace_margin_seconds", "")
	if !okB || !okM || budget <= 0 || margin <= 0 || margin > budget {
		t.Errorf("grace budget %v (%v), margin %v (%v): want 0 < margin <= budget (the checkpoint fit in GraceTime)", budget, okB, margin, okM)
	}
	if !regexp.MustCompile(`(?m)^trainrun_state\{[^}]*job_id="` + job + `"[^}]*state="finished"\} 1$`).Match(b) {
		t.Errorf("the Pushgateway does not hold state finished")
	}
	t.Logf("grace budget %gs, margin %gs", budget, margin)

	out, err := exec.Command(bin, "report", "--svg", filepath.Join(jobDir, "timeline.svg"), jobDir).CombinedOutput()
	if err != nil {
		t.Fatalf("trainrun report: %v\n%s", err, out)
	}
	for _, want := range []string{"2 incarnation(s)", "requeued after preempted", "finished"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	t.Logf("trainrun report:\n%s", out)
	if d := os.Getenv("TRAINRUN_E2E_ARTIFACTS"); d != "" {
		os.MkdirAll(d, 0o755)
		os.WriteFile(filepath.Join(d, "preempt-report.txt"), out, 0o644)
		if b, err := os.ReadFile(filepath.Join(jobDir, "timeline.svg")); err == nil {
			os.WriteFile(filepath.Join(d, "preempt-timeline.svg"), b, 0o644)
		}
		os.WriteFile(filepath.Join(d, "preempt-job.log"), []byte(log), 0o644)
	}
}
