package slurm

import (
	"context"
	"slices"
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
