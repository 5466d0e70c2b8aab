package harness

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestWaitOutput(t *testing.T) {
	c := &Cluster{l: layout{dir: t.TempDir()}}
	if err := os.MkdirAll(c.l.jobsDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	path := c.OutputPath(7)
	if filepath.Dir(path) != c.l.jobsDir() {
		t.Fatalf("output path %s outside the jobs directory", path)
	}
	go func() {
		time.Sleep(150 * time.Millisecond)
		os.WriteFile(path, []byte("restart 0\nall 2 ranks started\nrestart 1\n"), 0o644)
		time.Sleep(150 * time.Millisecond)
		os.WriteFile(path, []byte("restart 0\nall 2 ranks started\nrestart 1\nall 2 ranks started\n"), 0o644)
	}()
	ctx := context.Background()
	out, err := c.WaitOutput(ctx, 7, "restart 1", 5*time.Second)
	if err != nil || !strings.Contains(out, "restart 1") {
		t.Fatalf("WaitOutput: %q, %v", out, err)
	}
	out, err = c.WaitOutputFunc(ctx, 7, 5*time.Second, "restart 1 started", OutputAfter("restart 1", "all 2 ranks started"))
	if err != nil || strings.Count(out, "all 2 ranks started") != 2 {
		t.Fatalf("WaitOutputFunc(OutputAfter): %q, %v", out, err)
	}
	_, err = c.WaitOutput(ctx, 7, "training finished", 300*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), `job 7's output to show "training finished"`) ||
		!strings.Contains(err.Error(), "after 300ms") || !strings.Contains(err.Error(), path+" holds:\nrestart 0") {
		t.Errorf("timeout error: %v", err)
	}
}

func TestOutputAfter(t *testing.T) {
	ok := OutputAfter("restart 1", "started")
	for out, want := range map[string]bool{"": false, "restart 0 started": false, "restart 1": false, "restart 0 started restart 1 started": true, "restart 1 started restart 1": false} {
		if ok(out) != want {
			t.Errorf("OutputAfter(restart 1, started)(%q) = %v, want %v", out, !want, want)
		}
	}
}
