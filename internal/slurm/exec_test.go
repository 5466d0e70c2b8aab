package slurm

import (
	"context"
	"strconv"
	"strings"
	"testing"
)

// Commands run under Background run niced, the others at the caller's
// priority.
func TestBackgroundNice(t *testing.T) {
	nice := func(ctx context.Context) int {
		t.Helper()
		// The renice follows the start: the command reads its own after a pause.
		out, err := Exec(ctx, "sh", "-c", "sleep 0.3; cut -d' ' -f19 /proc/$$/stat")
		if err != nil {
			t.Fatal(err)
		}
		n, err := strconv.Atoi(strings.TrimSpace(string(out)))
		if err != nil {
			t.Fatalf("niceness %q", out)
		}
		return n
	}
	base := nice(context.Background())
	if got, want := nice(Background(context.Background())), min(base+BackgroundNice, 19); got != want {
		t.Errorf("niceness under Background %d, want %d (the caller's %d + %d)", got, want, base, BackgroundNice)
	}
}
