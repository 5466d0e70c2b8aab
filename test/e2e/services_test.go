//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/trainrun/trainrun/test/harness"
)

// TestPrometheusScrapesPushgateway: the harness's Pushgateway takes a pushed
// metric and its Prometheus scrapes it, both on loopback, as the observability
// tests will use them.
func TestPrometheusScrapesPushgateway(t *testing.T) {
	ctx := context.Background()
	pg, err := cluster.StartPushgateway(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Stop()
	body := "# TYPE trainrun_e2e_probe gauge\ntrainrun_e2e_probe 42\n"
	req, _ := http.NewRequest(http.MethodPut, pg.URL+"/metrics/job/e2e", strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("push to %s: %s", pg.URL, resp.Status)
	}

	prom, err := cluster.StartPrometheus(ctx, harness.PrometheusOptions{Targets: []string{pg.Addr}})
	if err != nil {
		t.Fatal(err)
	}
	defer prom.Stop()
	q := prom.URL + "/api/v1/query?query=" + url.QueryEscape(`trainrun_e2e_probe{exported_job="e2e"}`)
	var last string
	answered := func() bool {
		resp, err := http.Get(q)
		if err != nil {
			return false
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		last = string(b)
		var r struct {
			Data struct {
				Result []struct {
					Value [2]any `json:"value"`
				} `json:"result"`
			} `json:"data"`
		}
		return json.Unmarshal(b, &r) == nil && len(r.Data.Result) == 1 && fmt.Sprint(r.Data.Result[0].Value[1]) == "42"
	}
	if harness.WaitFor(ctx, 30*time.Second, "Prometheus to return the pushed value", answered) == nil {
		return
	}
	t.Fatalf("Prometheus at %s never returned the pushed value 42 for %s; last answer: %s (logs %s, %s)", prom.URL, q, last, prom.LogPath(), pg.LogPath())
}
