package slurm

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

// The heterogeneous harness (testdata/capture-hetero.sh): hopper = n[1-2]
// gpu:h100:8 with 4 of n1's GPUs held by a job, ampere = n[3-4] gpu:a100:8.
func TestParseCapturedHetero(t *testing.T) {
	ps, err := ParsePartitions(readTestdata(t, "hetero-show-partition-o.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 2 || ps[0].Name != "hopper" || ps[0].Nodes != "n[1-2]" || ps[0].TotalNodes != 2 || !ps[0].Default ||
		ps[0].MaxNodes != 0 || ps[0].MaxTime != 0 || ps[0].State != "UP" || ps[1].Name != "ampere" || ps[1].Default {
		t.Errorf("partitions: %+v", ps)
	}
	ns, err := ParseNodes(readTestdata(t, "hetero-show-node-d-o.txt"))
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		name, state, typ string
		gpus, used       int
		parts            []string
	}
	var got []row
	for _, n := range ns {
		c, typ := n.GPUs()
		got = append(got, row{n.Name, n.State, typ, c, n.GPUsUsed(), n.Partitions})
	}
	want := []row{
		{"n1", "MIXED", "h100", 8, 4, []string{"hopper"}},
		{"n2", "IDLE", "h100", 8, 0, []string{"hopper"}},
		{"n3", "IDLE", "a100", 8, 0, []string{"ampere"}},
		{"n4", "IDLE", "a100", 8, 0, []string{"ampere"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("nodes:\n got %+v\nwant %+v", got, want)
	}
	if ns[0].RealMemMB != 16384 || ns[0].Features != nil {
		t.Errorf("n1: RealMemory %d, features %v", ns[0].RealMemMB, ns[0].Features)
	}
	// The default harness's untyped GRES, without -d.
	ns, err = ParseNodes(readTestdata(t, "show-node-o.txt"))
	if err != nil || len(ns) != 4 {
		t.Fatal(ns, err)
	}
	if c, typ := ns[0].GPUs(); c != 8 || typ != "" || ns[0].GPUsUsed() != 0 {
		t.Errorf("untyped n1: %d %q used %d", c, typ, ns[0].GPUsUsed())
	}
}

func TestParseGres(t *testing.T) {
	cases := []struct {
		in   string
		want []Gres
		err  string
	}{
		{"gpu:h100:8(S:0-1)", []Gres{{"gpu", "h100", 8}}, ""},
		{"gpu:8(S:0-1)", []Gres{{"gpu", "", 8}}, ""},
		{"gpu:a100:4(IDX:0,2,4-5),nic:2", []Gres{{"gpu", "a100", 4}, {"nic", "", 2}}, ""},
		{"gpu:h100:0(IDX:N/A)", []Gres{{"gpu", "h100", 0}}, ""},
		{"gpu:h100:2,gpu:a100:6", []Gres{{"gpu", "h100", 2}, {"gpu", "a100", 6}}, ""},
		{"gpu:tesla", []Gres{{"gpu", "tesla", 1}}, ""},
		{"gpu", []Gres{{"gpu", "", 1}}, ""},
		{"(null)", nil, ""},
		{"", nil, ""},
		{"gpu:a:b:c", nil, "not NAME[:TYPE][:COUNT]"},
		{"gpu:h100:x", nil, "the count \"x\""},
		{"gpu:h100:99999999999", nil, "whole number up to"},
		{":8", nil, "not NAME"},
	}
	for _, tc := range cases {
		got, err := ParseGres(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseGres(%q) = %v, %v; want error with %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseGres(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}

func TestParseTestOnlyCaptured(t *testing.T) {
	e, err := ParseTestOnly(readTestdata(t, "hetero-test-only.stderr"), time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	want := Estimate{Start: time.Date(2026, 12, 1, 22, 40, 36, 0, time.UTC), CPUs: 64, Nodes: "n[3-4]", Partition: "ampere"}
	if e != want {
		t.Errorf("got %+v want %+v", e, want)
	}
	// hopper was partly held by a 10-minute job: Slurm says when it ends.
	e, err = ParseTestOnly(readTestdata(t, "hetero-test-only-busy.stderr"), time.UTC)
	if err != nil || e.Start.Sub(want.Start) != 10*time.Minute || e.Partition != "hopper" {
		t.Errorf("busy: %+v %v", e, err)
	}
	if _, err := ParseTestOnly(readTestdata(t, "hetero-test-only-bad.stderr"), nil); err == nil ||
		!strings.Contains(err.Error(), "invalid partition specified: nosuch") {
		t.Errorf("bad partition: %v", err)
	}
}

func TestClientTestOnlyAndSubmit(t *testing.T) {
	args := "-p ampere -N2 --ntasks-per-node=8 --gpus-per-node=8 --exclusive --time=30 job.sh"
	fake := &Canned{
		Out:  map[string]string{"sbatch --parsable -p ampere job.sh": readTestdata(t, "hetero-sbatch-parsable.txt")},
		Err:  map[string]string{"sbatch --test-only " + args: readTestdata(t, "hetero-test-only.stderr")},
		Fail: map[string]string{"sbatch --test-only -p ampere -N3 --time=5 job.sh": strings.TrimSpace(readTestdata(t, "hetero-test-only-toobig.stderr"))},
	}
	c := Client{Run: fake.Run, RunStderr: fake.RunStderr, Location: time.UTC}
	ctx := context.Background()
	e, err := c.TestOnly(ctx, strings.Fields(args)...)
	if err != nil || e.Partition != "ampere" || e.Nodes != "n[3-4]" {
		t.Errorf("TestOnly: %+v %v", e, err)
	}
	_, err = c.TestOnly(ctx, strings.Fields("-p ampere -N3 --time=5 job.sh")...)
	var se *Error
	if !errors.As(err, &se) || se.Stderr != "allocation failure: Requested node configuration is not available" {
		t.Errorf("TestOnly too big: %v (want sbatch's message as printed)", err)
	}
	id, _, err := c.Submit(ctx, "-p", "ampere", "job.sh")
	if err != nil || id != "1" {
		t.Errorf("Submit: %q %v", id, err)
	}
	if _, _, err := (Client{}).Submit(ctx, "x"); err == nil {
		t.Error("a Client without RunStderr submitted")
	}
}

func TestParsePartitionsErrors(t *testing.T) {
	for in, want := range map[string]string{
		"Nodes=n1 State=UP":                           "without PartitionName",
		"PartitionName=p TotalNodes=x":                "TotalNodes=\"x\"",
		"PartitionName=p MaxTime=soon":                "MaxTime=\"soon\"",
		"PartitionName=p MaxNodes=-3":                 "MaxNodes=\"-3\"",
		"PartitionName=p MaxNodes=UNLIMITED MaxTime=": "MaxTime=\"\"",
	} {
		if _, err := ParsePartitions(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParsePartitions(%q): %v, want %q", in, err, want)
		}
	}
	if _, err := ParseNodes("NodeName=n1 Gres=gpu:h100:many"); err == nil || !strings.Contains(err.Error(), "node n1: Gres") {
		t.Errorf("ParseNodes bad gres: %v", err)
	}
}

// Fuzzed scontrol and sbatch text never panics, and what parses is bounded
// by its input.
func FuzzParseSched(f *testing.F) {
	for _, name := range []string{"hetero-show-partition-o.txt", "hetero-show-node-d-o.txt", "hetero-test-only.stderr", "show-node-o.txt"} {
		f.Add(readTestdata(f, name))
	}
	f.Add("NodeName=n1 Gres=gpu:h100:8(IDX:0-3,5),gpu:a100:2 GresUsed=gpu:(((,")
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > 1<<16 {
			return
		}
		if ps, err := ParsePartitions(s); err == nil && len(ps) > strings.Count(s, "\n")+1 {
			t.Fatalf("%d partitions from %d lines", len(ps), strings.Count(s, "\n")+1)
		}
		ns, _ := ParseNodes(s)
		for _, n := range ns {
			if len(n.Gres) > len(s) || len(n.GresUsed) > len(s) {
				t.Fatalf("more GRES entries than bytes")
			}
			for _, g := range append(n.Gres, n.GresUsed...) {
				if g.Count < 0 || g.Count > maxGresCount {
					t.Fatalf("count %d", g.Count)
				}
			}
		}
		if gs, err := ParseGres(s); err == nil && len(gs) > len(s)+1 {
			t.Fatalf("%d GRES from %d bytes", len(gs), len(s))
		}
		if e, err := ParseTestOnly(s, time.UTC); err == nil && (e.CPUs < 0 || e.Partition == "" || e.Start.IsZero()) {
			t.Fatalf("estimate %+v", e)
		}
	})
}
