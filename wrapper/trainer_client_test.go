package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// The trainer side of the handshake (contrib/trainer/trainrun_client.py) is
// tested with Python's own unittest; it needs only the standard library.
func TestTrainerClientPython(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed")
	}
	dir, _ := filepath.Abs(filepath.Join("..", "contrib", "trainer"))
	if _, err := os.Stat(filepath.Join(dir, "test_trainrun_client.py")); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, "-m", "unittest", "-v", "test_trainrun_client")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}
