package obs

import (
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The textfile is read by a real node_exporter's textfile collector (Debian
// prometheus-node-exporter), when it is installed: no parse error, and the
// run's series come out with their labels.
func TestTextfileReadByNodeExporter(t *testing.T) {
	bin, err := exec.LookPath("prometheus-node-exporter")
	if err != nil {
		if bin, err = exec.LookPath("node_exporter"); err != nil {
			t.Skip("node_exporter not installed (Debian: prometheus-node-exporter; test/deps.sh installs it)")
		}
	}
	dir := t.TempDir()
	c := &clock{t: at(0)}
	o := newTestObserver(t, c, Config{Textfile: filepath.Join(dir, "trainrun-4242.prom")})
	o.Observe(Event{Kind: KindStart, Time: at(0), Start: testStart()})
	o.Observe(Event{Kind: KindCkptCommit, Time: at(60), Ckpt: &Ckpt{Tag: "step_30", Step: 30, Bytes: 1 << 30, CompleteAt: at(58), Commit: 2 * time.Second}})
	o.Observe(Event{Kind: KindInterrupt, Time: at(90), Cause: InterruptPreempted})

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(bin, "--collector.disable-defaults", "--collector.textfile", "--collector.textfile.directory="+dir, "--web.listen-address="+addr)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	var body string
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body = string(b)
		break
	}
	if body == "" {
		t.Fatalf("node_exporter did not answer on %s:\n%s", addr, stderr.String())
	}
	for _, want := range []string{
		`node_textfile_scrape_error 0`,
		`trainrun_state{job_id="4242",partition="batch",state="checkpointing"} 1`,
		`trainrun_interruptions_total{cause="preempted",job_id="4242",partition="batch"} 1`,
		`trainrun_checkpoint_size_bytes{job_id="4242",partition="batch"} 1.073741824e+09`,
		`trainrun_checkpoint_duration_seconds_count{job_id="4242",partition="batch",phase="commit"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("node_exporter's /metrics lacks %s", want)
		}
	}
	if t.Failed() {
		var lines []string
		for _, l := range strings.Split(body, "\n") {
			if strings.Contains(l, "trainrun_") || strings.Contains(l, "textfile") {
				lines = append(lines, l)
			}
		}
		t.Logf("node_exporter /metrics (trainrun and textfile lines):\n%s\n%s", strings.Join(lines, "\n"), stderr.String())
	}
}
