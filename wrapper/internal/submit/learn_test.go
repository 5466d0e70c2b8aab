package submit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trainrun/trainrun/internal/slurm"
)

// LearnRuns on a ledger a killed writer tore, a plan name that leaves the
// directory, and runs too far from their prediction to be the training:
// none is learned from, each says why, and the whole run is.
func TestLearnRunsRefuses(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	plan := `{"plan":{"layout":{}},"inputs":{}}`
	if err := os.WriteFile(filepath.Join(dir, "p.json"), []byte(plan), 0o644); err != nil {
		t.Fatal(err)
	}
	entry := func(id, file string) Submitted {
		return Submitted{Job: id, At: at, Plans: map[string]SubmittedPlan{"hopper": {File: file, StepS: 2, StepsS: 100, GPU: "h100-sxm", Nodes: 1}}}
	}
	for _, s := range []Submitted{entry("1", "p.json"), entry("2", "../p.json"), entry("3", "p.json"), entry("4", "p.json")} {
		if err := AppendSubmitted(dir, s); err != nil {
			t.Fatal(err)
		}
	}
	f, _ := os.OpenFile(filepath.Join(dir, LedgerFile), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"job":"5","at":"2026-12-07T10:00:00Z","pla`) // torn
	f.Close()
	ts := func(t time.Time) string { return t.Format("2006-01-02T15:04:05") }
	done := func(id string, run time.Duration) slurm.Job {
		st := at.Add(5 * time.Second)
		return slurm.Job{ID: id, State: "COMPLETED", Partition: "hopper", EndTime: st.Add(run),
			Record: slurm.Record{"ExitCode": "0:0", "SubmitTime": ts(at), "StartTime": ts(st)}}
	}
	jobs := []slurm.Job{done("1", 150*time.Second), done("2", 100*time.Second), done("3", 20*time.Second), done("4", 500*time.Second), done("5", 100*time.Second)}
	l, err := LearnRuns(dir, jobs, time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Added) != 1 || l.Added[0].Job != "1" || l.Added[0].Observed.StepS != 3 || l.Added[0].Observed.Steps != 50 {
		t.Errorf("added %+v, want job 1 alone at 3 s a step over 50 steps", l.Added)
	}
	why := strings.Join(l.Skipped, "\n")
	for _, w := range []string{"job 2: the ledger has no plan", "job 3: ran 20s, predicted 1m40s: more than 4× off", "job 4: ran 8m20s"} {
		if !strings.Contains(why, w) {
			t.Errorf("skipped:\n%s\nwant %q", why, w)
		}
	}
	if strings.Contains(why, "job 5") {
		t.Errorf("the torn line's job was read: %s", why)
	}
	// Again: job 1 is in the observations file, not written twice; the
	// skipped ones were said once and are marked in the ledger.
	if l, err := LearnRuns(dir, jobs, time.UTC); err != nil || len(l.Added) != 0 || len(l.Skipped) != 0 {
		t.Errorf("second pass: added %+v skipped %q %v", l.Added, l.Skipped, err)
	}
	ledger, err := readLedger(dir)
	if err != nil || !strings.Contains(ledger["3"].Skipped, "more than 4× off") || ledger["3"].Plans["hopper"].File != "p.json" || ledger["1"].Skipped != "" {
		t.Errorf("ledger after the passes: %+v %v", ledger, err)
	}
	// A directory others can write is refused: its records would steer the plans.
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := LearnRuns(dir, jobs, time.UTC); err == nil || !strings.Contains(err.Error(), "writable by group or others") {
		t.Errorf("a world-writable --plan-dir: %v", err)
	}
}
