//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trainrun/trainrun/test/harness"
)

// freeLoopbackPort is a port free on 127.0.0.1 now.
func freeLoopbackPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// promQuery runs an instant query and returns the first sample's value.
func promQuery(t *testing.T, prom *harness.Service, q string) (float64, bool, string) {
	t.Helper()
	resp, err := http.Get(prom.URL + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		return 0, false, err.Error()
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var r struct {
		Data struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if json.Unmarshal(b, &r) != nil || len(r.Data.Result) == 0 {
		return 0, false, string(b)
	}
	s, _ := r.Data.Result[0].Value[1].(string)
	v, err := strconv.ParseFloat(s, 64)
	return v, err == nil, string(b)
}

// A job under `trainrun run` with the live endpoint, a real Pushgateway and
// a webhook: Prometheus scraped the endpoint while the job ran (with the
// shipped alert rules loaded), the Pushgateway holds the final state, the
// webhook got "finished", and `trainrun report --svg` draws the run.
func TestMetricsLiveEndpointPushgatewayWebhook(t *testing.T) {
	bin := trainrun(t)
	ctx := context.Background()
	pg, err := cluster.StartPushgateway(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Stop()
	port := freeLoopbackPort(t)
	rules, _ := filepath.Abs(filepath.Join(repoRoot(), "contrib", "monitoring", "trainrun-alerts.yml"))
	prom, err := cluster.StartPrometheus(ctx, harness.PrometheusOptions{Targets: []string{fmt.Sprintf("127.0.0.1:%d", port)}, RuleFiles: []string{rules}})
	if err != nil {
		t.Fatal(err)
	}
	defer prom.Stop()
	var hookMu sync.Mutex
	var hooks []map[string]any
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m map[string]any
		json.NewDecoder(r.Body).Decode(&m)
		hookMu.Lock()
		hooks = append(hooks, m)
		hookMu.Unlock()
	}))
	defer hook.Close()

	jobDir := filepath.Join(t.TempDir(), "job")
	// Rank 0 reports a step every 0.5 s for 8 s (the progress protocol);
	// the other rank just waits as long.
	trainer := `if [ "$RANK" = 0 ]; then i=0; while [ $i -lt 16 ]; do i=$((i+1)); ` +
		`printf "%d %d %s\n" $i $((i*1024)) "$(date +%s.%N)" > "$TRAINRUN_JOB_DIR/launch/progress.tmp" && ` +
		`mv "$TRAINRUN_JOB_DIR/launch/progress.tmp" "$TRAINRUN_JOB_DIR/launch/progress"; sleep 0.5; done; else sleep 8; fi`
	script := fmt.Sprintf(`#!/bin/bash
#SBATCH --nodes=1 --ntasks-per-node=2 --gpus-per-node=2 --time=5
exec %s run --probe none --job-dir %s --layers 4 --hidden 256 --heads 8 --vocab 1024 --seq-len 128 --global-batch 8 --gpu h100-sxm \
  --metrics-addr 127.0.0.1:%d --pushgateway %s --webhook %s --max-ckpt-age 1h -- /bin/sh -c '%s'
`, bin, jobDir, port, pg.URL, hook.URL, trainer)
	state, exit, log, id := runJob(t, script, 120*time.Second)
	if state != "COMPLETED" || exit != 0 {
		t.Fatalf("job %d: %s exit %d\n%s", id, state, exit, log)
	}
	if !strings.Contains(log, fmt.Sprintf("metrics on http://127.0.0.1:%d/metrics", port)) {
		t.Errorf("the job log does not announce the metrics endpoint:\n%s", log)
	}
	job := strconv.Itoa(id)

	// Prometheus scraped the live endpoint while the job ran.
	for _, q := range []struct{ query, what string }{
		{fmt.Sprintf(`max_over_time(trainrun_layout_info{job_id=%q,gpus="2",nodes="1",gpu_type="h100-sxm"}[10m])`, job), "the layout"},
		{fmt.Sprintf(`max_over_time(trainrun_trainer_step{job_id=%q}[10m])`, job), "the trainer's steps"},
		{fmt.Sprintf(`max_over_time(trainrun_step_time_observed_seconds{job_id=%q}[10m])`, job), "an observed step time"},
		{fmt.Sprintf(`max_over_time(trainrun_mfu_predicted_ratio{job_id=%q}[10m])`, job), "the predicted MFU"},
	} {
		v, ok, body := promQuery(t, prom, q.query)
		if !ok || v <= 0 {
			t.Errorf("Prometheus has no %s: %s\n%s", q.what, q.query, body)
		}
		if q.what == "the trainer's steps" && ok && v < 5 {
			t.Errorf("Prometheus saw step %g at most; rank 0 reported up to 16", v)
		}
		if q.what == "an observed step time" && ok && (v < 0.4 || v > 1.5) {
			t.Errorf("observed step time %g s; the trainer stepped every ~0.5 s (plus a date and mv)", v)
		}
	}

	// The Pushgateway holds the final state.
	resp, err := http.Get(pg.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	final := regexp.MustCompile(`(?m)^trainrun_state\{[^}]*job_id="` + job + `"[^}]*state="finished"[^}]*\} 1$`)
	if !final.Match(b) {
		var lines []string
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "trainrun_state") {
				lines = append(lines, l)
			}
		}
		t.Errorf("the Pushgateway does not hold state finished for job %s:\n%s", job, strings.Join(lines, "\n"))
	}
	if !regexp.MustCompile(`(?m)^trainrun_trainer_step\{[^}]*job_id="` + job + `"[^}]*\} 16$`).Match(b) {
		t.Errorf("the Pushgateway's final trainer step is not 16")
	}

	hookMu.Lock()
	var evs []string
	for _, h := range hooks {
		evs = append(evs, fmt.Sprint(h["event"]))
	}
	hookMu.Unlock()
	if strings.Join(evs, ",") != "finished" {
		t.Errorf("webhook events %v, want [finished]", evs)
	}

	// The report of the job directory, and its timeline.
	svg := filepath.Join(jobDir, "timeline.svg")
	out, err := exec.Command(bin, "report", "--svg", svg, jobDir).CombinedOutput()
	if err != nil {
		t.Fatalf("trainrun report: %v\n%s", err, out)
	}
	for _, want := range []string{"job " + job, "1 incarnation(s)", "finished", "predicted:", "observed while training"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if d := os.Getenv("TRAINRUN_E2E_ARTIFACTS"); d != "" {
		os.MkdirAll(d, 0o755)
		os.WriteFile(filepath.Join(d, "metrics-report.txt"), out, 0o644)
		if b, err := os.ReadFile(svg); err == nil {
			os.WriteFile(filepath.Join(d, "metrics-timeline.svg"), b, 0o644)
		}
	}
	t.Logf("trainrun report:\n%s", out)
}

// blackholeServer accepts connections and never answers: a Pushgateway or
// webhook that hangs.
func blackholeServer(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	return "http://" + ln.Addr().String()
}

var elapsedRe = regexp.MustCompile(`ELAPSED_MS (\d+)`)

// timedRun runs `trainrun run ... -- true` inside a job and returns how
// long trainrun took, measured by the batch script around it.
func timedRun(t *testing.T, flags string) (time.Duration, string) {
	bin := trainrun(t)
	jobDir := filepath.Join(t.TempDir(), "job")
	script := fmt.Sprintf(`#!/bin/bash
#SBATCH --nodes=1 --ntasks-per-node=1 --gpus-per-node=1 --time=5
s=$(date +%%s%%N)
%s run --probe none --fix tp=1 --job-dir %s %s -- true
rc=$?
e=$(date +%%s%%N)
echo "ELAPSED_MS $(( (e - s) / 1000000 ))"
exit $rc
`, bin, jobDir, flags)
	state, exit, log, id := runJob(t, script, 120*time.Second)
	if state != "COMPLETED" || exit != 0 {
		t.Fatalf("job %d: %s exit %d\n%s", id, state, exit, log)
	}
	m := elapsedRe.FindStringSubmatch(log)
	if m == nil {
		t.Fatalf("job %d printed no ELAPSED_MS:\n%s", id, log)
	}
	ms, _ := strconv.Atoi(m[1])
	return time.Duration(ms) * time.Millisecond, log
}

// A Pushgateway and a webhook that never answer delay the job's exit by
// the --notify-timeout bound, not more: trainrun's run time with them,
// against the same job without them. The margin is generous (a loaded
// 2-core machine); without the bound the exit would wait for 4 attempts of
// 3 s each plus backoff, at least 12 s.
func TestMetricsHungEndpointsDoNotDelayExit(t *testing.T) {
	const bound = 2 * time.Second
	base, _ := timedRun(t, "")
	hole := blackholeServer(t)
	hung, log := timedRun(t, fmt.Sprintf("--pushgateway %s --webhook %s/hook --notify-timeout %s", hole, hole, bound))
	extra := hung - base
	t.Logf("trainrun run: %s without endpoints, %s with a Pushgateway and a webhook that never answer (bound %s): +%s", base, hung, bound, extra)
	if extra > bound+4*time.Second {
		t.Errorf("the hung endpoints delayed the job by %s, more than the bound %s (+4 s margin)", extra, bound)
	}
	if extra < bound/2 {
		t.Errorf("the hung endpoints delayed the job by only %s: was the final push attempted at all?", extra)
	}
	if !strings.Contains(log, "abandoned so as not to delay the job") {
		t.Errorf("no warning that the calls were abandoned:\n%s", log)
	}
}

// A metrics port already taken on the batch node is a clear error at
// start (exit 2), before anything is launched.
func TestMetricsPortInUse(t *testing.T) {
	bin := trainrun(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	marker := filepath.Join(t.TempDir(), "launched")
	script := fmt.Sprintf(`#!/bin/bash
#SBATCH --nodes=1 --ntasks-per-node=1 --gpus-per-node=1 --time=2
exec %s run --probe none --fix tp=1 --job-dir %s --metrics-addr %s -- touch %s
`, bin, filepath.Join(t.TempDir(), "job"), ln.Addr(), marker)
	state, exit, log, id := runJob(t, script, 60*time.Second)
	if state != "FAILED" || exit != 2 {
		t.Errorf("job %d: %s exit %d, want FAILED exit 2\n%s", id, state, exit, log)
	}
	if want := fmt.Sprintf("metrics address %s is in use on this node", ln.Addr()); !strings.Contains(log, want) {
		t.Errorf("job log lacks %q:\n%s", want, log)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the training command ran although the metrics port was taken")
	}
}
