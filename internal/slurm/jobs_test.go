package slurm

import (
	"context"
	"strings"
	"testing"
	"time"
)

// Every job of `scontrol show job -o`, its comment whole (trainrun
// submit's mark has no space); an empty queue is no jobs.
func TestJobs(t *testing.T) {
	lines := strings.TrimSpace(readTestdata(t, "show-job-array-o.txt"))
	lines = strings.Replace(lines, "JobName=wrap", "JobName=wrap Comment=trainrun-submit:train_s=hopper:1200,ampere:3000", 1)
	c := Client{Location: time.UTC, Run: func(_ context.Context, name string, args ...string) ([]byte, error) {
		return []byte(lines + "\n"), nil
	}}
	jobs, err := c.Jobs(context.Background())
	if err != nil || len(jobs) != 3 {
		t.Fatalf("%d jobs, %v", len(jobs), err)
	}
	if jobs[0].Record["Comment"] != "trainrun-submit:train_s=hopper:1200,ampere:3000" || jobs[1].State != "RUNNING" {
		t.Errorf("comment %q, state %q", jobs[0].Record["Comment"], jobs[1].State)
	}
	c.Run = func(context.Context, string, ...string) ([]byte, error) {
		return []byte("No jobs in the system\n"), nil
	}
	if jobs, err := c.Jobs(context.Background()); err != nil || len(jobs) != 0 {
		t.Errorf("empty: %v %v", jobs, err)
	}
}
