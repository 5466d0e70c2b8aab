package monitoring

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/trainrun/trainrun/wrapper/obs"
)

var metricRe = regexp.MustCompile(`\btrainrun_[a-z_]+`)

// exported is every metric family trainrun exports, plus the series names
// a histogram adds.
func exported() map[string]bool {
	m := map[string]bool{}
	for _, n := range obs.NewMetrics("1", "p", time.Now).Names() {
		m[n] = true
		for _, s := range []string{"_bucket", "_sum", "_count"} {
			m[n+s] = true
		}
	}
	for _, n := range clusterMetrics() {
		m[n] = true
	}
	return m
}

// clusterMetrics are the metrics of commands, not of a job's run: the
// queue's (partitions --metrics-textfile) and a sweep's (sweep status),
// gathered from registries holding one of each series.
func clusterMetrics() []string {
	var out []string
	for _, reg := range []*prometheus.Registry{
		obs.QueueRegistry([]obs.QueueGroup{{User: "u", Account: "a", Marked: 1, MeanSlow: 1, MaxSlow: 1}}),
		obs.SweepRegistry("s", map[string]int{"running": 1}),
	} {
		mfs, err := reg.Gather()
		if err != nil {
			panic(err)
		}
		for _, mf := range mfs {
			out = append(out, mf.GetName())
		}
	}
	return out
}

func isHistogramSeries(n string, ex map[string]bool) bool {
	for _, s := range []string{"_bucket", "_sum", "_count"} {
		if strings.HasSuffix(n, s) && ex[strings.TrimSuffix(n, s)] {
			return true
		}
	}
	return false
}

// The README names every exported metric, and nothing else.
func TestReadmeListsEveryMetric(t *testing.T) {
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	ex := exported()
	inReadme := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "| `trainrun_") {
			inReadme[metricRe.FindString(line)] = true
		}
	}
	for _, n := range append(obs.NewMetrics("1", "p", time.Now).Names(), clusterMetrics()...) {
		if !inReadme[n] {
			t.Errorf("README.md's metric table lacks %s", n)
		}
	}
	for n := range inReadme {
		if !ex[n] {
			t.Errorf("README.md lists %s, which trainrun does not export", n)
		}
	}
}

// dashboardExprs returns every PromQL query of a Grafana dashboard.
func dashboardExprs(t *testing.T, path string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		UID    string `json:"uid"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Annotations struct {
			List []struct {
				Expr string `json:"expr"`
			} `json:"list"`
		} `json:"annotations"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if d.UID == "" || len(d.Panels) == 0 {
		t.Fatalf("%s: no uid or no panels", path)
	}
	var out []string
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("%s: panel %q has no query", path, p.Title)
		}
		for _, tg := range p.Targets {
			out = append(out, tg.Expr)
		}
	}
	for _, a := range d.Annotations.List {
		out = append(out, a.Expr)
	}
	return out
}

// Rules and dashboards use only metrics trainrun exports.
func TestRulesAndDashboardsUseExportedMetrics(t *testing.T) {
	ex := exported()
	files := []string{"trainrun-alerts.yml", "grafana-run.json", "grafana-partition.json"}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, n := range metricRe.FindAllString(string(b), -1) {
			if !ex[n] && !isHistogramSeries(n, ex) && !seen[n] {
				seen[n] = true
				t.Errorf("%s uses %s, which trainrun does not export", f, n)
			}
		}
	}
}

func promtool(t *testing.T) string {
	p, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not installed (Debian: apt-get install prometheus; test/deps.sh installs it)")
	}
	return p
}

func TestPromtoolCheckAndTestRules(t *testing.T) {
	p := promtool(t)
	for _, args := range [][]string{{"check", "rules", "trainrun-alerts.yml"}, {"test", "rules", "trainrun-alerts_test.yml"}} {
		out, err := exec.Command(p, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// Every dashboard query parses: each becomes a recording rule (Grafana's
// variables replaced by values) that promtool checks.
func TestDashboardQueriesParse(t *testing.T) {
	p := promtool(t)
	repl := strings.NewReplacer("$job_id", "1", "$partition", "p", "$__rate_interval", "5m", "${datasource}", "x")
	var b strings.Builder
	b.WriteString("groups:\n  - name: dashboards\n    rules:\n")
	n := 0
	for _, f := range []string{"grafana-run.json", "grafana-partition.json"} {
		for _, e := range dashboardExprs(t, f) {
			q, _ := json.Marshal(repl.Replace(e)) // a JSON string is a YAML string
			fmt.Fprintf(&b, "      - record: dashboard_query_%d\n        expr: %s\n", n, q)
			n++
		}
	}
	path := filepath.Join(t.TempDir(), "dashboards.yml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(p, "check", "rules", path).CombinedOutput(); err != nil {
		t.Errorf("dashboard queries do not parse: %v\n%s\n%s", err, out, b.String())
	}
}

// The alert names in the README table are the rules' names.
func TestReadmeNamesEveryAlert(t *testing.T) {
	rules, _ := os.ReadFile("trainrun-alerts.yml")
	readme, _ := os.ReadFile("README.md")
	var names []string
	for _, m := range regexp.MustCompile(`alert: (\w+)`).FindAllStringSubmatch(string(rules), -1) {
		names = append(names, m[1])
		if !strings.Contains(string(readme), "`"+m[1]+"`") {
			t.Errorf("README.md does not describe alert %s", m[1])
		}
	}
	sort.Strings(names)
	if len(names) != 7 {
		t.Errorf("alerts %v, want the five of issue 8 and the two of issue 21 (failed saves, failed nodes)", names)
	}
}
