package harness

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Service is a helper daemon started beside the cluster (Prometheus, the
// Pushgateway): on a free loopback port, under the cluster directory, and
// stopped with the cluster if not before.
type Service struct {
	Name string // e.g. "pushgateway-1"
	Addr string // 127.0.0.1:PORT
	URL  string // http://127.0.0.1:PORT
	d    *daemon
	c    *Cluster
}

// PrometheusOptions configure StartPrometheus.
type PrometheusOptions struct {
	// Targets are host:port endpoints scraped as job "trainrun" at /metrics.
	Targets []string
	// ScrapeInterval is also the rule evaluation interval (default 1 s).
	ScrapeInterval time.Duration
	// RuleFiles are alerting/recording rule files to load.
	RuleFiles []string
}

// StartPushgateway starts Debian's prometheus-pushgateway on a free loopback
// port and returns once it answers /-/ready.
func (c *Cluster) StartPushgateway(ctx context.Context) (*Service, error) {
	return c.startService(ctx, "pushgateway", "prometheus-pushgateway", func(addr, dir string) ([]string, error) {
		return []string{"--web.listen-address=" + addr, "--persistence.file=" + filepath.Join(dir, "pushgateway.data")}, nil
	})
}

// StartPrometheus starts Debian's prometheus on a free loopback port with a
// configuration scraping opts.Targets, and returns once it answers /-/ready.
func (c *Cluster) StartPrometheus(ctx context.Context, opts PrometheusOptions) (*Service, error) {
	if opts.ScrapeInterval == 0 {
		opts.ScrapeInterval = time.Second
	}
	return c.startService(ctx, "prometheus", "prometheus", func(addr, dir string) ([]string, error) {
		var b strings.Builder
		iv := opts.ScrapeInterval.String()
		fmt.Fprintf(&b, "global:\n  scrape_interval: %s\n  evaluation_interval: %s\n", iv, iv)
		if len(opts.RuleFiles) > 0 {
			b.WriteString("rule_files:\n")
			for _, f := range opts.RuleFiles {
				fmt.Fprintf(&b, "  - %q\n", f)
			}
		}
		b.WriteString("scrape_configs:\n  - job_name: trainrun\n    static_configs:\n      - targets: [")
		for i, t := range opts.Targets {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%q", t)
		}
		b.WriteString("]\n")
		conf := filepath.Join(dir, "prometheus.yml")
		if err := os.WriteFile(conf, []byte(b.String()), 0o644); err != nil {
			return nil, err
		}
		return []string{"--config.file=" + conf, "--storage.tsdb.path=" + filepath.Join(dir, "data"),
			"--web.listen-address=" + addr, "--log.level=warn"}, nil
	})
}

func (c *Cluster) startService(ctx context.Context, kind, bin string, args func(addr, dir string) ([]string, error)) (*Service, error) {
	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.jobSeq++
	name := fmt.Sprintf("%s-%d", kind, c.jobSeq)
	c.mu.Unlock()
	dir := filepath.Join(c.l.dir, "services", name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("harness: %w", err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	a, err := args(addr, dir)
	if err != nil {
		return nil, fmt.Errorf("harness: %s: %w", name, err)
	}
	d, err := c.startDaemon(name, bin, a, "")
	if err != nil {
		return nil, err
	}
	s := &Service{Name: name, Addr: addr, URL: "http://" + addr, d: d, c: c}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second}
	err = poll(ctx, 50*time.Millisecond, func() (bool, error) {
		if d.exited() {
			return false, fmt.Errorf("harness: %s exited during start: %s", name, d.exitStatus())
		}
		resp, err := client.Get(s.URL + "/-/ready")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	}, name+" to answer "+s.URL+"/-/ready")
	if err != nil {
		_ = s.Stop()
		return nil, fmt.Errorf("%w\n--- %s:\n%s", err, d.stderrPath, strings.Join(tailLines(d.stderrPath, 20), "\n"))
	}
	return s, nil
}

// Stop stops the service (SIGTERM, SIGKILL after 10 s) and waits for it.
func (s *Service) Stop() error {
	if s.d.exited() {
		return nil
	}
	_ = s.d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.d.done:
	case <-time.After(10 * time.Second):
		_ = s.d.cmd.Process.Kill()
		<-s.d.done
	}
	return nil
}

// LogPath is the file holding the service's stdout and stderr.
func (s *Service) LogPath() string { return s.d.stderrPath }
