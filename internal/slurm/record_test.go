package slurm

import (
	"os"
	"strings"
	"testing"
)

func readTestdata(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestParseRecord(t *testing.T) {
	tests := []struct {
		name, line string
		want       map[string]string
		absent     []string
	}{
		{name: "plain", line: "JobId=1 JobState=RUNNING", want: map[string]string{"JobId": "1", "JobState": "RUNNING"}},
		{name: "values with spaces", line: "NodeName=n1 Reason=Not responding [slurm@2026-12-01T10:00:00] State=DOWN",
			want: map[string]string{"Reason": "Not responding [slurm@2026-12-01T10:00:00]", "State": "DOWN"}},
		{name: "double space kept", line: "Comment=two words  here  StdErr=/x", want: map[string]string{"Comment": "two words  here", "StdErr": "/x"}},
		{name: "empty value", line: "Power= TresPerNode=gres:gpu:8 ", want: map[string]string{"Power": "", "TresPerNode": "gres:gpu:8"}},
		{name: "value with =", line: "TRES=cpu=32,node=4 NumNodes=4", want: map[string]string{"TRES": "cpu=32,node=4", "NumNodes": "4"}},
		{name: "keys with : and /", line: "AllocNode:Sid=localhost:1 CPUs/Task=1 ReqB:S:C:T=0:0:*:*",
			want: map[string]string{"AllocNode:Sid": "localhost:1", "CPUs/Task": "1", "ReqB:S:C:T": "0:0:*:*"}},
		{name: "lower-case word is a value", line: "Command=/bin/run a=b X=1", want: map[string]string{"Command": "/bin/run a=b", "X": "1"}, absent: []string{"a"}},
		{name: "first key wins", line: "A=1 A=2", want: map[string]string{"A": "1"}},
		{name: "text before the first key", line: "slurm_load_jobs error: x=1 Y=2", want: map[string]string{"Y": "2"}, absent: []string{"x"}},
		{name: "reason with commas and brackets", line: "NodeName=n1 State=IDLE+DRAIN Reason=Low socket*core*thread count, Low CPUs [root@2026-11-29T13:02:10] Comment=(null)",
			want: map[string]string{"State": "IDLE+DRAIN", "Reason": "Low socket*core*thread count, Low CPUs [root@2026-11-29T13:02:10]", "Comment": "(null)"}},
		{name: "option in a command", line: "Command=/bin/x --a=b AllocTRES=cpu=1,gres/gpu=8",
			want: map[string]string{"Command": "/bin/x --a=b", "AllocTRES": "cpu=1,gres/gpu=8"}},
		{name: "tabs", line: "A=1\tB=two words", want: map[string]string{"A": "1", "B": "two words"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := ParseRecord(tc.line)
			for k, v := range tc.want {
				if g, ok := got[k]; !ok || g != v {
					t.Errorf("%s = %q (present %v), want %q; all: %q", k, g, ok, v, got)
				}
			}
			for _, k := range tc.absent {
				if _, ok := got[k]; ok {
					t.Errorf("%s present: %q", k, got)
				}
			}
		})
	}
}

// The captured job line: the job name and comment with spaces come back
// whole, and every field the harness's tests read is there.
func TestParseRecordCapturedJob(t *testing.T) {
	r := ParseRecord(readTestdata(t, "show-job-o.txt"))
	for k, want := range map[string]string{
		"JobName": "run two.sh", "Comment": "two words  here", "JobState": "RUNNING", "Requeue": "1",
		"Partition": "low", "NodeList": "n[1-4]", "TimeLimit": "00:10:00", "Power": "", "TresPerNode": "gres:gpu:8",
		"TRES": "cpu=32,node=4,billing=32", "AllocNode:Sid": "localhost:6046",
	} {
		if r[k] != want {
			t.Errorf("%s = %q, want %q", k, r[k], want)
		}
	}
	if len(r) < 60 {
		t.Errorf("%d fields, want the ~70 of a 22.05 job line: %q", len(r), r)
	}
}

func TestParseRecordsCapturedNodes(t *testing.T) {
	rs := ParseRecords(readTestdata(t, "show-node-o.txt"))
	if len(rs) != 4 {
		t.Fatalf("%d records, want 4", len(rs))
	}
	for i, r := range rs {
		if want := "n" + string(rune('1'+i)); r["NodeName"] != want {
			t.Errorf("record %d: NodeName %q, want %q", i, r["NodeName"], want)
		}
		if !strings.HasPrefix(r["OS"], "Linux ") || !strings.Contains(r["OS"], "#1 SMP") {
			t.Errorf("OS = %q, want the whole uname with its spaces", r["OS"])
		}
		if r["Partitions"] != "low,high" || r["Gres"] != "gpu:8(S:0-1)" {
			t.Errorf("node %s: %q", r["NodeName"], r)
		}
	}
}

// Every value is a piece of the line, and every key is a word of it: the
// parser invents nothing, whatever the input.
func FuzzParseRecord(f *testing.F) {
	for _, name := range []string{"show-job-o.txt", "show-node-o.txt", "show-partition-o.txt"} {
		for _, line := range strings.Split(readTestdata(f, name), "\n") {
			f.Add(line)
		}
	}
	f.Add("Comment=a  b=c  D= E")
	f.Fuzz(func(t *testing.T, line string) {
		r := ParseRecord(line)
		if len(r) > len(line)/2+1 {
			t.Fatalf("%d fields from %d bytes", len(r), len(line))
		}
		for k, v := range r {
			if !isKey(k) || !strings.Contains(line, k+"=") || !strings.Contains(line, v) {
				t.Fatalf("field %q=%q is not in %q", k, v, line)
			}
			if v != strings.TrimRight(v, " \t\r\n") {
				t.Fatalf("value %q keeps trailing space", v)
			}
		}
	})
}
