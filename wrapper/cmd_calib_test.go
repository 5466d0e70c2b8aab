package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
)

var calibJob = []string{"--model", "llama3-8b", "--gpu", "h100-sxm", "--gpus", "16", "--seq-len", "8192", "--global-batch", "128"}

// planJSON runs trainrun plan --format json and decodes it.
func planJSON(t *testing.T, c cli, extra ...string) (map[string]any, string) {
	t.Helper()
	code, out, errOut := c.run(append(append([]string{"plan"}, calibJob...), append(extra, "--format", "json")...)...)
	if code != exitcode.OK {
		t.Fatalf("plan: exit %d: %s", code, errOut)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatal(err)
	}
	return m, out
}

func stepOf(p map[string]any) float64 {
	return p["plan"].(map[string]any)["time"].(map[string]any)["step_s"].(float64)
}

// A record written by hand from the plan JSON (as a user copies a measured
// figure) is imported, listed, and moves the next plan of the same job to
// the measurement, with the observation named; through TRAINRUN_CALIBRATION
// as through --calibration.
func TestCalibImportThenPlan(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cal")
	base, baseOut := planJSON(t, cli{})
	measured := 1.25 * stepOf(base)
	rec := map[string]any{"plan": json.RawMessage(baseOut), "observed": map[string]any{"step_s": measured, "steps": 40, "spread": 0.03}, "job": "4242"}
	b, _ := json.Marshal(rec)
	f := filepath.Join(t.TempDir(), "obs.jsonl")
	if err := os.WriteFile(f, append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := cli{}.run("calib", "import", "--calibration", dir, f)
	if code != exitcode.OK || !strings.Contains(out, "imported 1 observation") {
		t.Fatalf("import: exit %d: %s%s", code, out, errOut)
	}
	// Importing a run's store again does not count its observation twice.
	code, out, _ = cli{}.run("calib", "import", "--calibration", dir, f)
	if code != exitcode.OK || !strings.Contains(out, "imported 0 observation") || !strings.Contains(out, "1 already there") {
		t.Errorf("second import: exit %d: %s", code, out)
	}
	code, out, _ = cli{}.run("calib", "list", "--calibration", dir)
	if code != exitcode.OK || !strings.Contains(out, "4242") || !strings.Contains(out, "llama3-8b") {
		t.Errorf("list: exit %d:\n%s", code, out)
	}
	code, out, _ = cli{}.run("calib", "export", "--calibration", dir)
	if n := strings.Count(out, "\n"); code != exitcode.OK || n != 1 || !strings.Contains(out, `"step_s":`) {
		t.Errorf("export: exit %d, %d lines:\n%s", code, n, out)
	}
	if code, _, errOut := (cli{}).run("calib", "show", "--calibration", dir, "2"); code != exitcode.Usage || !strings.Contains(errOut, "from 1 to 1") {
		t.Errorf("show 2 of 1: exit %d: %s", code, errOut)
	}
	for _, c := range []struct {
		name string
		cli  cli
		args []string
	}{{"flag", cli{}, []string{"--calibration", dir}}, {"env", cli{vars: map[string]string{"TRAINRUN_CALIBRATION": dir}}, nil}} {
		got, _ := planJSON(t, c.cli, c.args...)
		p := got["plan"].(map[string]any)
		cal, ok := p["calibration"].(map[string]any)
		if !ok {
			t.Fatalf("%s: no calibration in the plan", c.name)
		}
		if s := stepOf(got); s < 0.97*measured || s > 1.03*measured {
			t.Errorf("%s: calibrated step %.3f s, measured %.3f s", c.name, s, measured)
		}
		if n := cal["nearest"].([]any)[0].(map[string]any)["id"].(string); !strings.HasPrefix(n, "4242") {
			t.Errorf("%s: nearest observation %q, want job 4242", c.name, n)
		}
	}
	// Without the calibration nothing changed.
	if _, again := planJSON(t, cli{}); again != baseOut {
		t.Error("plan without --calibration differs from before the import")
	}
}

func TestCalibImportRefusesBadRecords(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cal")
	f := filepath.Join(t.TempDir(), "bad.jsonl")
	os.WriteFile(f, []byte(`{"plan": {"plan": {"tp": 1, "pp": 1, "dp": 8, "micro_batch": 1}}, "observed": {"step_s": 2}}`+"\n"+`{"plan": {}, "observed": {"step_s": 0}}`+"\n"), 0o644)
	code, _, errOut := cli{}.run("calib", "import", "--calibration", dir, f)
	if code != exitcode.Usage || !strings.Contains(errOut, "bad.jsonl:2") || !strings.Contains(errOut, "step_s") {
		t.Errorf("exit %d: %s", code, errOut)
	}
	os.WriteFile(f, []byte(`{"plan": {"plan": {"tp": 1, "pp": 1, "dp": 8, "micro_batch": 1}}, "observed": {"step_s": 2}}`+"\n"), 0o644)
	code, _, errOut = cli{}.run("calib", "import", "--calibration", dir, f)
	if code != exitcode.Usage || !strings.Contains(errOut, `no "inputs"`) || !strings.Contains(errOut, "argv") {
		t.Errorf("record without inputs or argv: exit %d: %s", code, errOut)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("a refused import created %s", dir)
	}
	// A hand-written record with argv instead of inputs is accepted.
	argv, _ := json.Marshal(calibJob)
	os.WriteFile(f, []byte(`{"plan": {"plan": {"tp": 2, "pp": 1, "dp": 8, "micro_batch": 2, "sp": true, "zero": 1}}, "observed": {"step_s": 9}, "argv": `+string(argv)+`, "source": "a blog"}`+"\n"), 0o644)
	if code, out, errOut := (cli{}).run("calib", "import", "--calibration", dir, f); code != exitcode.OK {
		t.Errorf("argv record: exit %d: %s%s", code, out, errOut)
	}
}
