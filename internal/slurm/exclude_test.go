package slurm

import (
	"context"
	"strings"
	"testing"
)

// ExcludeNodes reads the job's exclusions (the captured job has none:
// ExcNodeList=(null)) and sets the union.
func TestExcludeNodes(t *testing.T) {
	id := strings.TrimSpace(readTestdata(t, "jobid.txt"))
	job := readTestdata(t, "show-job-o.txt")
	fake := &Canned{Out: map[string]string{
		"scontrol show job -o " + id:                          job,
		"scontrol update jobid=" + id + " ExcNodeList=n[2-3]": "",
	}}
	all, err := Client{Run: fake.Run}.ExcludeNodes(context.Background(), id, []string{"n3", "n2"})
	if err != nil || all != "n[2-3]" {
		t.Fatalf("ExcludeNodes = %q %v; calls %v", all, err, fake.Calls)
	}
	// The job's own exclusions stay.
	withExc := strings.Replace(job, "ExcNodeList=(null)", "ExcNodeList=n[7-8]", 1)
	fake = &Canned{Out: map[string]string{
		"scontrol show job -o " + id:                            withExc,
		"scontrol update jobid=" + id + " ExcNodeList=n[2,7-8]": "",
	}}
	if all, err := (Client{Run: fake.Run}).ExcludeNodes(context.Background(), id, []string{"n2", "n8"}); err != nil || all != "n[2,7-8]" {
		t.Errorf("merged ExcludeNodes = %q %v; calls %v", all, err, fake.Calls)
	}
}

func TestMergeHostlists(t *testing.T) {
	if _, err := MergeHostlists("n[1-", nil); err == nil || !strings.Contains(err.Error(), "ExcNodeList") {
		t.Errorf("a bad ExcNodeList gave %v, want an error naming it", err)
	}
	if got, _ := MergeHostlists("", []string{"a1", "a1", "b"}); got != "a1,b" {
		t.Errorf("MergeHostlists = %q", got)
	}
}
