package slurm

import (
	"context"
	"fmt"
	"strings"
)

// Jobs runs `scontrol show job -o` for every job Slurm knows (running,
// pending, recently ended): one Job each, its Record holding every field
// (StartTime, NumNodes, Comment, UserId, Account, SubmitTime, ...).
func (c Client) Jobs(ctx context.Context) ([]Job, error) {
	out, err := c.query(ctx, Scontrol, "show", "job", "-o")
	if err != nil {
		return nil, err
	}
	var jobs []Job
	for _, line := range strings.Split(string(out), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "No jobs in the system") {
			continue
		}
		j, err := ParseJob(line, c.Location)
		if err != nil {
			return nil, fmt.Errorf("scontrol show job -o: %w", err)
		}
		jobs = append(jobs, j)
	}
	return jobs, nil
}
