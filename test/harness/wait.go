package harness

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// WaitOutput waits until the job's output (OutputPath) contains want and
// returns the output. After timeout, or when ctx ends, the error says what
// was awaited and quotes the output as it then was.
func (c *Cluster) WaitOutput(ctx context.Context, jobID int, want string, timeout time.Duration) (string, error) {
	return c.WaitOutputFunc(ctx, jobID, timeout, fmt.Sprintf("%q", want), func(out string) bool { return strings.Contains(out, want) })
}

// WaitOutputFunc waits until ok holds for the job's output and returns the
// output; what names the condition in the error (see OutputAfter for the
// usual "restart N, then all ranks started").
func (c *Cluster) WaitOutputFunc(ctx context.Context, jobID int, timeout time.Duration, what string, ok func(out string) bool) (string, error) {
	var out string
	err := WaitFor(ctx, timeout, fmt.Sprintf("job %d's output to show %s", jobID, what), func() bool {
		out = c.JobOutput(jobID)
		return ok(out)
	})
	if err != nil {
		return out, fmt.Errorf("%w; %s holds:\n%s", err, c.OutputPath(jobID), clip(out, 4000))
	}
	return out, nil
}

// OutputAfter is a WaitOutputFunc condition: want appears after the last
// occurrence of marker (e.g. "all 2 ranks started" after "restart 1", for a
// job whose output every requeue appends to).
func OutputAfter(marker, want string) func(string) bool {
	return func(out string) bool {
		at := strings.LastIndex(out, marker)
		return at >= 0 && strings.Contains(out[at:], want)
	}
}

// WaitFor polls cond every 100 ms until it holds; after timeout, or when ctx
// ends, the error names what and how long it waited.
func WaitFor(ctx context.Context, timeout time.Duration, what string, cond func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := poll(ctx, 100*time.Millisecond, func() (bool, error) { return cond(), nil }, what)
	if err != nil {
		return fmt.Errorf("%w (after %v)", err, timeout)
	}
	return nil
}
