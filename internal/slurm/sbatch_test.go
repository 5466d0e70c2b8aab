package slurm

import (
	"context"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestSbatchArgv(t *testing.T) {
	r := SbatchRequest{Script: "/s/sweep.sbatch", JobName: "sweep-lr", Array: "0-5%2", Nodes: 1, NtasksPerNode: 2, GPUsPerNode: 2,
		Time: 90 * time.Second, Output: "/s/logs/trial-%a.out", Requeue: true, Dependency: "afterok:7"}
	want := []string{"--job-name=sweep-lr", "--array=0-5%2", "--dependency=afterok:7", "--nodes=1", "--ntasks-per-node=2",
		"--gpus-per-node=2", "--time=2", "--output=/s/logs/trial-%a.out", "--requeue", "--open-mode=append", "/s/sweep.sbatch"}
	if got := r.Argv(); !reflect.DeepEqual(got, want) {
		t.Errorf("Argv\n got %q\nwant %q", got, want)
	}
}

func TestSbatchSubmits(t *testing.T) {
	id, _ := os.ReadFile("testdata/sbatch-parsable-array.txt")
	c := &Canned{Out: map[string]string{"sbatch --parsable --array=0-3%2 /s/x.sbatch": string(id)}}
	got, err := Client{Run: c.Run}.Sbatch(context.Background(), SbatchRequest{Script: "/s/x.sbatch", Array: "0-3%2"})
	if err != nil || got != "1" {
		t.Fatalf("Sbatch = %q, %v", got, err)
	}
	if _, err := (Client{Run: c.Run}).Sbatch(context.Background(), SbatchRequest{Script: "/other"}); err == nil {
		t.Error("a failed sbatch returned no error")
	}
}

func TestParseSbatchID(t *testing.T) {
	for in, want := range map[string]string{"42\n": "42", "42;cluster1\n": "42", "sbatch: warning: x\n43\n": "43"} {
		if got, err := ParseSbatchID(in); err != nil || got != want {
			t.Errorf("ParseSbatchID(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseSbatchID("Submitted batch job 42\n"); err == nil || !strings.Contains(err.Error(), "not a job id") {
		t.Errorf("non-parsable output: %v", err)
	}
}

func TestParseArrayTasksCaptured(t *testing.T) {
	b, err := os.ReadFile("testdata/show-job-array-o.txt")
	if err != nil {
		t.Fatal(err)
	}
	m, err := ParseArrayTasks(string(b))
	if err != nil {
		t.Fatal(err)
	}
	if len(m) != 4 {
		t.Fatalf("%d elements, want 4: %+v", len(m), m)
	}
	if m[0].State != "RUNNING" || m[0].JobID != "2" || m[1].State != "RUNNING" || m[1].JobID != "3" {
		t.Errorf("started elements: %+v %+v", m[0], m[1])
	}
	for _, i := range []int{2, 3} {
		if m[i].State != "PENDING" || m[i].Reason != "JobArrayTaskLimit" || m[i].JobID != "" {
			t.Errorf("element %d of the pending rest: %+v", i, m[i])
		}
	}
}

func TestParseArrayIndices(t *testing.T) {
	for in, want := range map[string][]int{"2-3%2": {2, 3}, "5": {5}, "1,4-6": {1, 4, 5, 6}, "0-6:3": {0, 3, 6}} {
		if got, err := ParseArrayIndices(in); err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("ParseArrayIndices(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "a", "3-1", "0-4:0", "0-99999999"} {
		if _, err := ParseArrayIndices(bad); err == nil {
			t.Errorf("ParseArrayIndices(%q) accepted", bad)
		}
	}
}

// At Slurm's MaxArraySize: the widest array reads, one index more is
// refused, and an index near MaxInt (whose step once wrapped the loop
// into negative indices without end) is refused before the loop.
func TestParseArrayIndicesBoundary(t *testing.T) {
	if got, err := ParseArrayIndices("0-4000000:1000000"); err != nil || !reflect.DeepEqual(got, []int{0, 1000000, 2000000, 3000000, 4000000}) {
		t.Errorf("largest indices: %v, %v", got, err)
	}
	if got, err := ParseArrayIndices("0-4000000"); err != nil || len(got) != 4000001 {
		t.Errorf("widest array: %d indices, %v", len(got), err)
	}
	for _, bad := range []string{"4000001", "0-4000001", "0-2000000,2000000-4000000", "9223372036854775800-9223372036854775807:5", "99999999999999999999"} {
		if _, err := ParseArrayIndices(bad); err == nil {
			t.Errorf("ParseArrayIndices(%q) accepted", bad)
		}
	}
}

// Fuzzed sbatch and scontrol output: never a panic, indices within
// Slurm's bound and no more of them than the expression allows, a job id
// that is a number.
func FuzzParseSbatch(f *testing.F) {
	f.Add(readTestdata(f, "squeue-array.txt"))
	f.Add(readTestdata(f, "show-job-array-o.txt"))
	f.Add(readTestdata(f, "sbatch-parsable-array.txt"))
	f.Add("JobId=7 ArrayTaskId=0-10:3%2 Restarts=1\nJobId=8 ArrayTaskId=9223372036854775800-9223372036854775807:5")
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > 1<<12 {
			return
		}
		if id, err := ParseSbatchID(s); err == nil {
			if _, err := strconv.ParseUint(id, 10, 64); err != nil {
				t.Fatalf("job id %q from %q", id, s)
			}
		}
		if idx, err := ParseArrayIndices(s); err == nil {
			if len(idx) > maxArrayIndex+1 {
				t.Fatalf("%d indices", len(idx))
			}
			for _, i := range idx {
				if i < 0 || i > maxArrayIndex {
					t.Fatalf("index %d from %q", i, s)
				}
			}
		}
		if m, err := ParseArrayTasks(s); err == nil {
			for i, task := range m {
				if i < 0 || i > maxArrayIndex || task.Restarts < 0 || task.Restarts > maxRestarts {
					t.Fatalf("task %d %+v from %q", i, task, s)
				}
			}
		}
		for name, addr := range ParseNodeAddrs(s) {
			if !strings.Contains(s, name) || !strings.Contains(s, addr) {
				t.Fatalf("node %q at %q is not in %q", name, addr, s)
			}
		}
	})
}
