package slurm

import (
	"context"
	"slices"
	"strings"
	"testing"
)

func TestSetPartition(t *testing.T) {
	var got []string
	c := Client{Run: func(_ context.Context, name string, args ...string) ([]byte, error) {
		got = append([]string{name}, args...)
		return nil, nil
	}}
	if err := c.SetPartition(context.Background(), "42", "hopper"); err != nil {
		t.Fatal(err)
	}
	if want := []string{"scontrol", "update", "jobid=42", "Partition=hopper"}; !slices.Equal(got, want) {
		t.Fatalf("ran %q, want %q", got, want)
	}
}

func TestIdleNodes(t *testing.T) {
	nodes := []Node{
		{Name: "n1", State: "IDLE", Partitions: []string{"hopper"}},
		{Name: "n2", State: "ALLOCATED", Partitions: []string{"hopper"}},
		{Name: "n3", State: "IDLE", Partitions: []string{"ampere"}},
		{Name: "n4", State: "IDLE", Partitions: []string{"ampere", "hopper"}, GresUsed: []Gres{{Name: "gpu", Count: 1}}},
		{Name: "n5", State: "IDLE+DRAIN", Partitions: []string{"hopper"}},
	}
	if got := IdleNodes(nodes, "hopper"); got != 1 {
		t.Fatalf("IdleNodes(hopper) = %d, want 1 (n1 only)", got)
	}
	if got := IdleNodes(nodes, "ampere"); got != 1 {
		t.Fatalf("IdleNodes(ampere) = %d, want 1 (n3)", got)
	}
}

func TestSetNodes(t *testing.T) {
	var got []string
	c := Client{Run: func(_ context.Context, name string, args ...string) ([]byte, error) {
		got = append([]string{name}, args...)
		return nil, nil
	}}
	if err := c.SetNodes(context.Background(), "42", 2, 16, 32); err != nil {
		t.Fatal(err)
	}
	if want := []string{"scontrol", "update", "jobid=42", "NumNodes=2-2", "NumTasks=16", "NumCPUs=32"}; !slices.Equal(got, want) {
		t.Fatalf("ran %q, want %q", got, want)
	}
	got = nil
	for _, bad := range [][3]int{{0, 1, 1}, {2, 1, 2}, {1, 8, 4}} {
		if err := c.SetNodes(context.Background(), "42", bad[0], bad[1], bad[2]); err == nil || !strings.Contains(err.Error(), "job 42") {
			t.Errorf("SetNodes(%v) = %v, want an error naming the job", bad, err)
		}
	}
	if got != nil {
		t.Errorf("a refused size ran %q", got)
	}
}
