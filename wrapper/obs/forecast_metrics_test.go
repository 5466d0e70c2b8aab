package obs

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestForecastMetricsAndWebhook(t *testing.T) {
	o, err := New(Config{JobDir: t.TempDir(), JobID: "9", Partition: "gpu"})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	o.Observe(Event{Kind: KindForecast, Forecast: &Forecast{Verdict: "too-early", Level: 0.8}})
	if n, _ := testutil.GatherAndCount(o.Metrics().Registry, "trainrun_on_track"); n != 0 {
		t.Fatalf("trainrun_on_track set while too early")
	}
	o.Observe(Event{Kind: KindForecast, Forecast: &Forecast{Verdict: "off-track", PReach: 0.05, Lo: 2.2, Mid: 2.3, Hi: 2.4, Level: 0.8}})
	want := `
# HELP trainrun_on_track 1 when the forecast says the run reaches --target-loss by its budget, 0 when it does not; absent while it is too early to say.
# TYPE trainrun_on_track gauge
trainrun_on_track{job_id="9",partition="gpu"} 0
`
	if err := testutil.GatherAndCompare(o.Metrics().Registry, strings.NewReader(want), "trainrun_on_track"); err != nil {
		t.Error(err)
	}
	if n, _ := testutil.GatherAndCount(o.Metrics().Registry, "trainrun_forecast_loss"); n != 3 {
		t.Errorf("trainrun_forecast_loss has %d series, want 3 quantiles", n)
	}
	if name, ok := webhookEvent(Event{Kind: KindForecast, Forecast: &Forecast{Verdict: "off-track", Changed: true}}); !ok || name != "off-track" {
		t.Errorf("a turned verdict: webhook %q %v", name, ok)
	}
	if _, ok := webhookEvent(Event{Kind: KindForecast, Forecast: &Forecast{Verdict: "off-track"}}); ok {
		t.Errorf("an unchanged verdict sent a webhook")
	}
}
