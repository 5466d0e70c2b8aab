package obs

import (
	"fmt"
	"io"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// KindMigrate: the controller moved the job to another of its partitions
// (trainrun run --migrate, issue 34): it checkpointed, requeued the job into
// MigrateTo and the next incarnation resumes there with that partition's
// plan. MigrateFrom and MigrateTo name the partitions, Message the reason
// (the predicted finish staying and moved, and the move's cost).
const KindMigrate Kind = "migrate"

type migrateMetrics struct {
	migrations *prometheus.CounterVec
}

func (m *Metrics) registerMigrations(r both) {
	m.migrations = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "trainrun_migrations_total",
		Help: "Moves of the job to another of its partitions (--migrate): checkpointed and requeued into partition to, from partition from."}, []string{"from", "to"})
	r.MustRegister(m.migrations)
}

func (o *Observer) onMigrate(e *Event) {
	o.m.migrations.WithLabelValues(e.MigrateFrom, e.MigrateTo).Inc()
}

// Migration is one move of the report.
type Migration struct {
	Restart  int
	Time     time.Time
	From, To string
	Message  string
}

func (r *Report) addMigration(e Event, restart int) {
	r.Migrations = append(r.Migrations, Migration{Restart: restart, Time: e.Time, From: e.MigrateFrom, To: e.MigrateTo, Message: e.Message})
}

// writeMigrations prints the migration section of the text report.
func (r *Report) writeMigrations(w io.Writer) {
	if len(r.Migrations) == 0 {
		return
	}
	fmt.Fprintf(w, "\nmigrations: %d (--migrate)\n", len(r.Migrations))
	for _, m := range r.Migrations {
		fmt.Fprintf(w, "  restart %d, %s: %s -> %s: %s\n", m.Restart, m.Time.UTC().Format(time.RFC3339), m.From, m.To, m.Message)
	}
}
