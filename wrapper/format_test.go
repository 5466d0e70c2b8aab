package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
)

// One output convention (issue 30 point 8): --format table|json on every
// command that prints data; a table's old name (text, matrix, shell) stays
// an alias for one release and prints the same.
func TestFormatTableEverywhere(t *testing.T) {
	store := ckptFixture(t)
	c := cli{vars: map[string]string{"TRAINRUN_CKPT_DIR": store}}
	for _, tc := range []struct {
		args []string
		old  string
	}{
		{[]string{"topo", "--machine", "hgx-h100"}, "matrix"},
		{[]string{"env", "--machine", "hgx-h100", "--fix", "tp=8"}, "shell"},
		{[]string{"ckpt", "list"}, "text"},
	} {
		code, table, errOut := c.run(append(append([]string{}, tc.args...), "--format", "table")...)
		if code != exitcode.OK || table == "" {
			t.Errorf("%v --format table: exit %d %s", tc.args, code, errOut)
		}
		if _, old, _ := c.run(append(append([]string{}, tc.args...), "--format", tc.old)...); old != table {
			t.Errorf("%v: --format %s differs from --format table", tc.args, tc.old)
		}
		if _, def, _ := c.run(tc.args...); def != table {
			t.Errorf("%v: the default is not the table", tc.args)
		}
		code, js, errOut := c.run(append(append([]string{}, tc.args...), "--format", "json")...)
		if code != exitcode.OK || !json.Valid([]byte(js)) {
			t.Errorf("%v --format json: exit %d %s\n%s", tc.args, code, errOut, js)
		}
	}
	code, js, errOut := c.run("policy", "show", "--format", "json", "--partition", "preempt", "../contrib/trainrun.conf.example")
	var p struct {
		Settings []struct {
			Key, Value, From string
			May              string `json:"users_may_override"`
		} `json:"settings"`
	}
	if err := json.Unmarshal([]byte(js), &p); code != exitcode.OK || err != nil || len(p.Settings) < 20 {
		t.Fatalf("policy show --format json: exit %d %v %s\n%s", code, err, errOut, js)
	}
	for _, s := range p.Settings {
		if s.Key == "MaxRequeue" && (s.Value != "500" || !strings.Contains(s.From, "partition preempt")) {
			t.Errorf("MaxRequeue: %+v", s)
		}
	}
	for _, args := range [][]string{{"report", "--format", "yaml", "x"}, {"topo", "--format", "yaml"}, {"policy", "show", "--format", "yaml", "f"}} {
		if code, _, errOut := c.run(args...); code != exitcode.Usage || !strings.Contains(errOut, "table") {
			t.Errorf("%v: exit %d %q", args, code, errOut)
		}
	}
}

// submit prints a time limit as Slurm writes one, not in raw minutes, and
// its START and FINISH cells with their zone.
func TestSubmitTimesReadable(t *testing.T) {
	for d, want := range map[time.Duration]string{366038 * time.Minute: "254-04:38:00", 90 * time.Minute: "01:30:00", 0: "00:00:00"} {
		if got := slurmDuration(d); got != want {
			t.Errorf("slurmDuration(%v) = %s, want %s", d, got, want)
		}
	}
	if got := clock(time.Date(2026, 12, 3, 13, 1, 5, 0, time.UTC)); got != "2026-12-03T13:01:05Z" {
		t.Errorf("clock = %s", got)
	}
}
