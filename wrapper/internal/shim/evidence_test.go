package shim

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// A rank that cannot answer (here: a process that does not catch the
// stack signal) still leaves its collective record, its process state and
// "no answer" in hangs/<n>/.
func TestEvidenceCollect(t *testing.T) {
	run := t.TempDir()
	t.Setenv("TMPDIR", t.TempDir())
	ev := newEvidence(filepath.Join(run, "launch"), "77", "0", 3, "n1", 2)
	if ev == nil {
		t.Fatal("newEvidence: nil")
	}
	defer ev.remove()
	if env := strings.Join(ev.env(), " "); !strings.Contains(env, "TRAINRUN_COLLECTIVE_LOG="+os.Getenv("TMPDIR")) || !strings.Contains(env, "TRAINRUN_STACK_FILE=") {
		t.Errorf("env = %s", env)
	}
	ring := make([]byte, 160*4)
	copy(ring, "trainrun-collectives 1 pid=1 rank=3 slots=3\n")
	copy(ring[160:], "2 2 enter all_reduce world:4 5.0 [1] int64 MAX\n")
	copy(ring[320:], "1 1 done barrier world:4 4.0 -\n")
	if err := os.WriteFile(ev.ring, ring, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Skip(err)
	}
	defer cmd.Process.Kill()
	var log bytes.Buffer
	ev.collect(cmd.Process, 4, Env{Getenv: os.Getenv, Stderr: &log})
	dir := filepath.Join(run, "hangs", "4")
	want := map[string][]string{
		"rank-3.collectives.txt": {"1 1 done barrier world:4", "2 2 enter all_reduce world:4 5.000 [1] int64 MAX"},
		"rank-3.proc.txt":        {"pid ", "state ", "wchan"},
		"rank-3.stack.txt":       {"no answer within"},
	}
	for name, subs := range want {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range subs {
			if !strings.Contains(string(b), s) {
				t.Errorf("%s lacks %q:\n%s", name, s, b)
			}
		}
	}
	if !strings.Contains(log.String(), "does not catch SIGURG") {
		t.Errorf("log: %s", log.String())
	}
	ev.remove()
	if _, err := os.Stat(ev.stack); !os.IsNotExist(err) {
		t.Errorf("the stack file outlives the task: %v", err)
	}
}

// A killed task's files are removed by the next task of the job on the
// node; a live shim's stay.
func TestEvidenceRemovesStale(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	dead := filepath.Join(tmp, "trainrun-77.0-rank1-999999999.stack")
	live := filepath.Join(tmp, "trainrun-77.0-rank2-"+strconv.Itoa(os.Getpid())+".collectives")
	other := filepath.Join(tmp, "trainrun-78.0-rank1-999999999.stack")
	for _, p := range []string{dead, live, other} {
		os.WriteFile(p, nil, 0o600)
	}
	ev := newEvidence(filepath.Join(t.TempDir(), "launch"), "77", "1", 0, "n1", 0)
	defer ev.remove()
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Error("a dead shim's file of the job stays")
	}
	for _, p := range []string{live, other} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
}
