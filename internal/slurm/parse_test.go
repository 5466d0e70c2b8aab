package slurm

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestParseCounts(t *testing.T) {
	tests := []struct {
		in    string
		nodes int
		want  []int
		bad   string // part of the error
	}{
		{in: "8(x4)", nodes: 4, want: []int{8, 8, 8, 8}},
		{in: "2(x3),1", nodes: 4, want: []int{2, 2, 2, 1}},
		{in: "4", nodes: 1, want: []int{4}},
		{in: "8,8", nodes: 2, want: []int{8, 8}},
		{in: "8(x3)", nodes: 4, want: []int{8, 8, 8}}, // fewer is the caller's to judge
		{in: "8(x0)", nodes: 4, bad: "not N or N(xM)"},
		{in: "x", nodes: 4, bad: "not N or N(xM)"},
		{in: "8(y2)", nodes: 4, bad: "not N or N(xM)"},
		{in: "8(x5)", nodes: 4, bad: "more than the allocation's 4 node(s)"},
		{in: "8(x4),1", nodes: 4, bad: "more than"},
		// The security finding: a forged count must not allocate.
		{in: "8(x20000000)", nodes: 4, bad: "more than"},
		{in: "8(x9223372036854775807)", nodes: 4, bad: "more than"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseCounts(tc.in, tc.nodes)
			if tc.bad != "" {
				if err == nil || !strings.Contains(err.Error(), tc.bad) {
					t.Fatalf("got %v, %v; want an error with %q", got, err, tc.bad)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Errorf("got %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

// A forged count is refused before it allocates anything.
func TestParseCountsDoesNotAllocateForgedRepeat(t *testing.T) {
	allocs := testing.AllocsPerRun(10, func() { _, _ = ParseCounts("8(x20000000)", 4) })
	if allocs > 10 {
		t.Errorf("%v allocations for a refused count", allocs)
	}
}

func FuzzParseCounts(f *testing.F) {
	for _, s := range []string{"8(x4)", "2(x3),1", "8,8", "8(x20000000)", "(x)", "1(x1),", "0"} {
		f.Add(s, 4)
	}
	f.Fuzz(func(t *testing.T, s string, nodes int) {
		nodes = nodes % 5000
		got, err := ParseCounts(s, nodes)
		if err == nil && len(got) > max(nodes, 0) {
			t.Fatalf("%q gives %d counts for %d nodes", s, len(got), nodes)
		}
		for _, n := range got {
			if n < 0 {
				t.Fatalf("%q gives a negative count", s)
			}
		}
	})
}

func TestParseDuration(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		bad  bool
	}{
		{in: "UNLIMITED", want: 0},
		{in: "INFINITE", want: 0},
		{in: "30", want: 30 * time.Minute},
		{in: "5:30", want: 5*time.Minute + 30*time.Second},
		{in: "00:10:00", want: 10 * time.Minute}, // the captured job's TimeLimit
		{in: "01:02:03", want: time.Hour + 2*time.Minute + 3*time.Second},
		{in: "2-00:00:00", want: 48 * time.Hour},
		{in: "1-12", want: 36 * time.Hour},
		{in: "1-01:30", want: 25*time.Hour + 30*time.Minute},
		{in: "1:2:3:4", bad: true},
		{in: "1-1:2:3:4", bad: true},
		{in: "ten", bad: true},
		{in: "-5", bad: true},
		{in: "99999999999-00:00:00", bad: true},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseDuration(tc.in)
			if tc.bad != (err != nil) || got != tc.want {
				t.Errorf("ParseDuration(%q) = %v, %v; want %v (bad=%v)", tc.in, got, err, tc.want, tc.bad)
			}
		})
	}
}

func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"UNLIMITED", "30", "5:30", "00:10:00", "2-00:00:00", "1-12", "1:2:3:4", "-", "1-"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDuration(s)
		if err == nil && (d < 0 || d > time.Duration(maxDays)*24*time.Hour) {
			t.Fatalf("%q = %v: out of bounds", s, d)
		}
	})
}

func TestParseJobCaptured(t *testing.T) {
	loc := time.FixedZone("capture", 0)
	j, err := ParseJob(strings.TrimSpace(readTestdata(t, "show-job-o.txt")), loc)
	if err != nil {
		t.Fatal(err)
	}
	id := strings.TrimSpace(readTestdata(t, "jobid.txt"))
	if j.ID != id || j.Name != "run two.sh" || j.State != "RUNNING" || j.Partition != "low" || !j.Requeue || j.Restarts != 0 {
		t.Errorf("got %+v", j)
	}
	start, err := time.ParseInLocation("2006-01-02T15:04:05", j.Record["StartTime"], loc)
	if err != nil {
		t.Fatal(err)
	}
	if j.TimeLimit != 10*time.Minute || !j.EndTime.Equal(start.Add(10*time.Minute)) {
		t.Errorf("TimeLimit %v EndTime %v", j.TimeLimit, j.EndTime)
	}
	if j.Record["Comment"] != "two words  here" {
		t.Errorf("Comment %q", j.Record["Comment"])
	}
}

func TestParseJobErrors(t *testing.T) {
	for name, line := range map[string]string{
		"no job id":    strings.TrimSpace(readTestdata(t, "show-job-missing.stderr")),
		"bad end time": "JobId=1 EndTime=soon",
		"bad limit":    "JobId=1 TimeLimit=ten",
	} {
		if _, err := ParseJob(line, time.UTC); err == nil {
			t.Errorf("%s: want error", name)
		}
	}
	j, err := ParseJob("JobId=1 TimeLimit=UNLIMITED EndTime=Unknown Requeue=0", time.UTC)
	if err != nil || j.TimeLimit != 0 || !j.EndTime.IsZero() || j.Requeue {
		t.Errorf("unlimited: %+v %v", j, err)
	}
}

func FuzzParseJob(f *testing.F) {
	f.Add(strings.TrimSpace(readTestdata(f, "show-job-o.txt")))
	f.Add("JobId=1 TimeLimit=UNLIMITED EndTime=Unknown Requeue=0")
	f.Add("JobId=1 EndTime=2026-13-45T99:00:00")
	f.Fuzz(func(t *testing.T, line string) {
		j, err := ParseJob(line, time.UTC)
		if err == nil && (j.ID == "" || j.TimeLimit < 0) {
			t.Fatalf("%q: accepted %+v", line, j)
		}
	})
}

func TestParseLimitsCaptured(t *testing.T) {
	parts := ParseRecords(readTestdata(t, "show-partition-o.txt"))
	want := map[string]time.Duration{"low": 5 * time.Second, "high": 0}
	for _, p := range parts {
		line := ""
		for k, v := range p {
			line += k + "=" + v + " "
		}
		g, pre, err := ParsePartitionGrace(line)
		if err != nil || g != want[p["PartitionName"]] || !pre {
			t.Errorf("%s: GraceTime %v preemptable %v (%v)", p["PartitionName"], g, pre, err)
		}
	}
	if g, p, err := ParsePartitionGrace("PartitionName=x GraceTime=0 PreemptMode=OFF"); g != 0 || p || err != nil {
		t.Errorf("OFF partition = %s %t %v", g, p, err)
	}
	if g, _, err := ParsePartitionGrace("PartitionName=x"); g != -1 || err != nil {
		t.Errorf("no GraceTime = %s %v, want unknown", g, err)
	}
	cfg := readTestdata(t, "show-config.txt")
	if k, err := ParseKillWait(cfg); k != 5*time.Second || err != nil {
		t.Errorf("KillWait = %s %v, want the harness's 5s", k, err)
	}
	if m, err := ParseConfigSeconds(cfg, "MessageTimeout", maxMsgTimeout); m != 10*time.Second || err != nil {
		t.Errorf("MessageTimeout = %s %v, want the harness's 10s", m, err)
	}
	if k, err := ParseKillWait("JobRequeue = 1\n"); k != -1 || err != nil {
		t.Errorf("no KillWait = %s %v, want unknown", k, err)
	}
}

// Each Slurm seconds field at the edge of the width Slurm stores it in:
// the largest value reads as itself, one more is refused with a message
// naming the field and the value (issue 36: KillWait=10000000000 came out
// as -2415306h).
func TestParseSecondsBoundary(t *testing.T) {
	type parser func(v string) (time.Duration, error)
	grace := func(v string) (time.Duration, error) {
		g, _, err := ParsePartitionGrace("PartitionName=p GraceTime=" + v)
		return g, err
	}
	config := func(key string, max int64) parser {
		return func(v string) (time.Duration, error) { return ParseConfigSeconds(key+" = "+v+" sec\n", key, max) }
	}
	tests := []struct {
		name string
		p    parser
		max  int64
	}{
		{"KillWait", func(v string) (time.Duration, error) { return ParseKillWait("KillWait = " + v + " sec\n") }, 65535},
		{"MessageTimeout", config("MessageTimeout", maxMsgTimeout), 65535},
		{"GraceTime", grace, 4294967295},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if d, err := tc.p(strconv.FormatInt(tc.max, 10)); err != nil || d != time.Duration(tc.max)*time.Second {
				t.Errorf("%d: %v, %v; want %ds", tc.max, d, err, tc.max)
			}
			for _, v := range []string{strconv.FormatInt(tc.max+1, 10), "10000000000", "99999999999999999999999"} {
				d, err := tc.p(v)
				if d != -1 || err == nil || !strings.Contains(err.Error(), tc.name) || !strings.Contains(err.Error(), "past the") {
					t.Errorf("%s: %v, %v; want -1 and an error naming %s", v, d, err, tc.name)
				}
			}
			for _, v := range []string{"-3", "ten", "1e3"} {
				if d, err := tc.p(v); d != -1 || err == nil || !strings.Contains(err.Error(), "not a whole number") {
					t.Errorf("%s: %v, %v; want -1 and 'not a whole number'", v, d, err)
				}
			}
		})
	}
	if k, err := ParseKillWait("KillWait=10000000000"); k != -1 || err == nil {
		t.Errorf("the fuzzer's input: %v, %v", k, err)
	}
}

// A time limit Slurm can store but time.Duration cannot saturates at 100
// years; one past Slurm's own uint32 minutes is refused.
func TestParseDurationBoundary(t *testing.T) {
	cap := time.Duration(maxDays) * 24 * time.Hour
	for in, want := range map[string]time.Duration{
		"36500-00:00:00":   cap,
		"36499-23:59:59":   cap - time.Second,
		"36500-00:00:01":   cap, // saturates
		"4294967295":       cap, // Slurm's widest limit in minutes
		"2982616-00:00:00": cap, // 4294967040 minutes
		"52560000:0:0":     cap, // hours that overflowed Duration before
		"153722867:0":      cap, // minutes past 292 years
		"0:0:9223372036":   cap, // seconds just past Duration's range
	} {
		if got, err := ParseDuration(in); err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"4294967296", "2982617-00:00:00", "0:0:257698037761", "9223372036854775807", "99999999999999999999:00"} {
		if got, err := ParseDuration(in); err == nil {
			t.Errorf("ParseDuration(%q) = %v; want an error", in, got)
		} else if !strings.Contains(err.Error(), in[:min(len(in), 10)]) {
			t.Errorf("ParseDuration(%q): %v does not name the value", in, err)
		}
	}
	if _, err := ParseJob("JobId=1 TimeLimit=4294967296", time.UTC); err == nil || !strings.Contains(err.Error(), "TimeLimit") {
		t.Errorf("ParseJob past Slurm's limit: %v", err)
	}
	if _, err := ParsePartitions("PartitionName=p MaxTime=4294967296"); err == nil || !strings.Contains(err.Error(), "MaxTime") {
		t.Errorf("ParsePartitions past Slurm's limit: %v", err)
	}
}

func TestParseRestartsBoundary(t *testing.T) {
	if j, err := ParseJob("JobId=1 Restarts=65535", time.UTC); err != nil || j.Restarts != 65535 {
		t.Errorf("Restarts=65535: %+v %v", j.Restarts, err)
	}
	for _, v := range []string{"65536", "-1", "99999999999999999999", "many"} {
		if _, err := ParseJob("JobId=1 Restarts="+v, time.UTC); err == nil || !strings.Contains(err.Error(), "Restarts") {
			t.Errorf("Restarts=%s: %v", v, err)
		}
		if _, err := ParseArrayTasks("JobId=1 ArrayTaskId=1 Restarts=" + v); err == nil || !strings.Contains(err.Error(), "Restarts") {
			t.Errorf("array Restarts=%s: %v", v, err)
		}
	}
}

// KillWait, GraceTime and MessageTimeout are never negative unless
// unknown (-1), never past Slurm's widths, and an error always comes with
// the unknown -1.
func FuzzParseKillWait(f *testing.F) {
	f.Add(readTestdata(f, "show-config.txt"))
	f.Add("KillWait = -3 sec\n")
	f.Add("KillWait=10000000000")
	f.Add("PartitionName=p GraceTime=4294967296 PreemptMode=REQUEUE")
	f.Fuzz(func(t *testing.T, out string) {
		check := func(what string, d time.Duration, err error, max int64) {
			if d < -1 || d > time.Duration(max)*time.Second || err != nil && d != -1 {
				t.Fatalf("%s %v (%v)", what, d, err)
			}
		}
		k, err := ParseKillWait(out)
		check("KillWait", k, err, maxKillWaitSeconds)
		m, err := ParseConfigSeconds(out, "MessageTimeout", maxMsgTimeout)
		check("MessageTimeout", m, err, maxMsgTimeout)
		g, _, err := ParsePartitionGrace(out)
		check("GraceTime", g, err, maxGraceSeconds)
	})
}

func TestParseNodeAddrsCaptured(t *testing.T) {
	m := ParseNodeAddrs(readTestdata(t, "show-node-o.txt"))
	if len(m) != 4 || m["n1"] != "127.0.0.1" || m["n4"] != "127.0.0.1" {
		t.Errorf("got %v", m)
	}
	m = ParseNodeAddrs("NodeName=n1 NodeAddr=10.0.0.1\nNodeName=n2 NodeAddr=10.0.0.2 NodeHostName=n2\n")
	if m["n1"] != "10.0.0.1" || m["n2"] != "10.0.0.2" || len(m) != 2 {
		t.Errorf("got %v", m)
	}
}
