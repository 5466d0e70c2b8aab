package obs

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestMigrateMetricReportWebhook(t *testing.T) {
	o, err := New(Config{JobDir: t.TempDir(), JobID: "9", Partition: "ampere"})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	o.Observe(Event{Kind: KindMigrate, MigrateFrom: "ampere", MigrateTo: "hopper", Message: "moving from ampere to hopper"})
	want := `
# HELP trainrun_migrations_total Moves of the job to another of its partitions (--migrate): checkpointed and requeued into partition to, from partition from.
# TYPE trainrun_migrations_total counter
trainrun_migrations_total{from="ampere",job_id="9",partition="ampere",to="hopper"} 1
`
	if err := testutil.GatherAndCompare(o.Metrics().Registry, strings.NewReader(want), "trainrun_migrations_total"); err != nil {
		t.Error(err)
	}
	at := time.Date(2026, 12, 4, 23, 0, 0, 0, time.UTC)
	r := BuildReport([]Event{{Kind: KindStart, Time: at}, {Kind: KindMigrate, Time: at.Add(time.Minute), MigrateFrom: "ampere", MigrateTo: "hopper", Message: "181 steps left"}})
	if len(r.Migrations) != 1 || r.Migrations[0].From != "ampere" || r.Migrations[0].To != "hopper" {
		t.Fatalf("Migrations = %+v", r.Migrations)
	}
	var w bytes.Buffer
	r.WriteText(&w)
	if !strings.Contains(w.String(), "migrations: 1") || !strings.Contains(w.String(), "ampere -> hopper: 181 steps left") {
		t.Errorf("report:\n%s", w.String())
	}
	if name, ok := webhookEvent(Event{Kind: KindMigrate}); !ok || name != "migrated" {
		t.Errorf("webhookEvent(migrate) = %q, %v", name, ok)
	}
}
