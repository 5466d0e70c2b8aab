package shim

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/trainrun/trainrun/internal/failclass"
)

func TestOOMKills(t *testing.T) {
	root := t.TempDir()
	old := cgroupRoot
	cgroupRoot = root
	t.Cleanup(func() { cgroupRoot = old })
	write := func(path, text string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(root, "system.slice/slurmstepd.scope/job_7/step_0/memory.events"), "low 0\nhigh 0\nmax 3\noom 1\noom_kill 2\noom_group_kill 0\n")
	write(filepath.Join(root, "memory/slurm/uid_0/job_8/memory.oom_control"), "oom_kill_disable 0\nunder_oom 0\noom_kill 5\n")
	v2 := filepath.Join(root, "v2.cgroup")
	write(v2, "0::/system.slice/slurmstepd.scope/job_7/step_0\n")
	v1 := filepath.Join(root, "v1.cgroup")
	write(v1, "12:pids:/slurm/uid_0/job_8\n11:memory:/slurm/uid_0/job_8\n")
	none := filepath.Join(root, "none.cgroup")
	write(none, "0::/gone\n")
	for file, want := range map[string]int64{v2: 2, v1: 5, none: -1, filepath.Join(root, "missing"): -1} {
		if got := oomKills(file); got != want {
			t.Errorf("oomKills(%s) = %d, want %d", filepath.Base(file), got, want)
		}
	}
}

// The shim's watch classifies from what the trainer wrote to stderr.
func TestFailureWatchClassifies(t *testing.T) {
	w := &failureWatch{tail: failclass.NewTail(), oom0: -1}
	w.tail.Write([]byte("Traceback (most recent call last):\n  File \"t.py\", line 3\nValueError: warmup 0\n"))
	if got := w.classify(1); got.Class != failclass.User || got.Evidence != "ValueError: warmup 0" {
		t.Errorf("classify = %+v", got)
	}
	if got := w.classify(0); got.Class != "" {
		t.Errorf("exit 0 classified %+v", got)
	}
}
