package run

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trainrun/trainrun/internal/slurm"
)

func lateRunner(log *bytes.Buffer, part string, vars map[string]string, from map[string]source) *runner {
	return &runner{cfg: Config{from: from}, env: &Deps{Stderr: log, Getenv: func(k string) string { return vars[k] }},
		alloc: &slurm.Allocation{JobID: "9", Partition: part}}
}

// A late-bound job takes the plan of the partition it landed in; one
// without a plan there, or without the variable, keeps TRAINRUN_PLAN.
func TestPartitionPlan(t *testing.T) {
	dir := t.TempDir()
	tmpl := filepath.Join(dir, "plan-%p-16gpus-1.json")
	if err := os.WriteFile(strings.ReplaceAll(tmpl, "%p", "ampere"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	vars := map[string]string{planByPartitionEnv: tmpl}
	if p, ok := lateRunner(&log, "ampere", vars, nil).partitionPlan(); !ok || p != filepath.Join(dir, "plan-ampere-16gpus-1.json") ||
		!strings.Contains(log.String(), "landed in partition ampere") {
		t.Errorf("ampere: %q %v, log %q", p, ok, log.String())
	}
	log.Reset()
	if _, ok := lateRunner(&log, "hopper", vars, nil).partitionPlan(); ok || !strings.Contains(log.String(), "partition hopper has no plan") {
		t.Errorf("hopper (no plan): ok %v, log %q", ok, log.String())
	}
	if _, ok := lateRunner(&log, "ampere", nil, nil).partitionPlan(); ok {
		t.Error("no TRAINRUN_PLAN_BY_PARTITION: used a plan")
	}
	if _, ok := lateRunner(&log, "../x", vars, nil).partitionPlan(); ok {
		t.Error("a partition with a slash: used a plan")
	}
}

// The lead submit sized the limit with is the controller's, unless the
// lead was chosen (a flag, the plugin's twin, a policy line).
func TestSubmittedLead(t *testing.T) {
	var log bytes.Buffer
	vars := map[string]string{submitLeadEnv: "42.5"}
	if d, ok := lateRunner(&log, "p", vars, nil).submittedLead(time.Hour); !ok || d != 42500*time.Millisecond {
		t.Errorf("default lead: %v %v, want 42.5 s", d, ok)
	}
	dflt := map[string]source{"ckpt-lead": {kind: fromPolicy, name: "CkptLead", where: "default"}}
	if _, ok := lateRunner(&log, "p", vars, dflt).submittedLead(time.Hour); !ok {
		t.Error("the policy's default lead: submit's not used")
	}
	for _, from := range []map[string]source{{"ckpt-lead": {kind: fromFlag}}, {"ckpt-lead": {kind: fromEnv}},
		{"ckpt-lead": {kind: fromPolicy, where: "site (trainrun.conf:1)"}}} {
		if _, ok := lateRunner(&log, "p", vars, from).submittedLead(time.Hour); ok {
			t.Errorf("lead from %+v: submit's used", from["ckpt-lead"])
		}
	}
	for _, v := range []string{"x", "-3", "0", "NaN", "1e12"} {
		if _, ok := lateRunner(&log, "p", map[string]string{submitLeadEnv: v}, nil).submittedLead(time.Hour); ok {
			t.Errorf("%s=%s accepted (limit 1h)", submitLeadEnv, v)
		}
	}
	// Above half a short limit: capped at half, never left to the default
	// lead (which on a one-minute limit would stop every run at once).
	if d, ok := lateRunner(&log, "p", map[string]string{submitLeadEnv: "40"}, nil).submittedLead(time.Minute); !ok || d != 30*time.Second {
		t.Errorf("40 s lead on a 1m limit: %v %v, want 30s", d, ok)
	}
}

// A step that sees the whole -p list takes scontrol's partition.
func TestPartitionPlanListed(t *testing.T) {
	dir := t.TempDir()
	tmpl := filepath.Join(dir, "plan-%p.json")
	if err := os.WriteFile(filepath.Join(dir, "plan-ampere.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	r := lateRunner(&log, "ampere,hopper", map[string]string{planByPartitionEnv: tmpl}, nil)
	if _, ok := r.partitionPlan(); ok {
		t.Error("a list without scontrol's partition: used a plan")
	}
	r.facts.job.Partition = "ampere"
	if p, ok := r.partitionPlan(); !ok || filepath.Base(p) != "plan-ampere.json" {
		t.Errorf("listed, scontrol ampere: %q %v; log %q", p, ok, log.String())
	}
}
