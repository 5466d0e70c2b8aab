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

// Commands run under WithoutEnv do not see the variables it names (the
// probe's srun and pyxis's PYXIS_CONTAINER_IMAGE); the others do.
func TestWithoutEnv(t *testing.T) {
	t.Setenv("PYXIS_CONTAINER_IMAGE", "nvcr.io#nvidia/pytorch:24.01-py3")
	t.Setenv("PYXIS_OTHER", "kept")
	show := func(ctx context.Context) string {
		out, err := Exec(ctx, "sh", "-c", `echo "$PYXIS_CONTAINER_IMAGE|$PYXIS_OTHER"`)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(out))
	}
	if got := show(context.Background()); got != "nvcr.io#nvidia/pytorch:24.01-py3|kept" {
		t.Errorf("plain: %q", got)
	}
	if got := show(WithoutEnv(context.Background(), "PYXIS_CONTAINER_")); got != "|kept" {
		t.Errorf("WithoutEnv: %q", got)
	}
}
