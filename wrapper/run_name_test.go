package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDeriveRunName(t *testing.T) {
	a := deriveRunName([]string{"python3", "-u", "train_example.py", "--lr", "0.1"})
	if a != deriveRunName([]string{"python3", "-u", "train_example.py", "--lr", "0.1"}) {
		t.Fatal("the same command line got two names")
	}
	if !strings.HasPrefix(a, "train_example-") || len(a) != len("train_example-")+8 {
		t.Errorf("name %q: want train_example-<8 hex>", a)
	}
	b := deriveRunName([]string{"python3", "-u", "train_example.py", "--lr", "0.2"})
	if a == b {
		t.Errorf("different commands share the name %q", a)
	}
	for _, argv := range [][]string{{"/opt/x y/évil;rm -rf", "a"}, {"python", "-m", "torch.distributed.run"}, {"--"}} {
		n := deriveRunName(argv)
		if err := checkRunName(n); err != nil {
			t.Errorf("derived name %q of %q is not a valid --name: %v", n, argv, err)
		}
	}
	if n := deriveRunName([]string{"python", "-m", "pkg.mod"}); !strings.HasPrefix(n, "pkg.mod-") {
		t.Errorf("python -m pkg.mod: got %q", n)
	}
}

func TestCheckRunName(t *testing.T) {
	for _, bad := range []string{"", "../x", "a/b", ".hidden", strings.Repeat("a", 65), "sp ace"} {
		if err := checkRunName(bad); err == nil || !strings.Contains(err.Error(), "--name") {
			t.Errorf("checkRunName(%q) = %v, want an error naming --name", bad, err)
		}
	}
	if err := checkRunName("trial-3"); err != nil {
		t.Error(err)
	}
}

func TestRunDirOf(t *testing.T) {
	base := t.TempDir()
	// a named run: always runs/NAME, and base stays free
	if d, primary, err := runDirOf(base, "a", true, false); err != nil || primary || d != filepath.Join(base, "runs", "a") {
		t.Fatalf("named: %q %v %v", d, primary, err)
	}
	// the first unnamed run claims base
	if d, primary, err := runDirOf(base, "cmd1-aaaa", false, false); err != nil || !primary || d != base {
		t.Fatalf("first unnamed: %q %v %v", d, primary, err)
	}
	// and keeps it after a requeue
	if d, primary, err := runDirOf(base, "cmd1-aaaa", false, false); err != nil || !primary || d != base {
		t.Fatalf("same unnamed again: %q %v %v", d, primary, err)
	}
	// a different unnamed command gets its own directory
	if d, primary, err := runDirOf(base, "cmd2-bbbb", false, false); err != nil || primary || d != filepath.Join(base, "runs", "cmd2-bbbb") {
		t.Fatalf("second unnamed: %q %v %v", d, primary, err)
	}
	b, _ := os.ReadFile(filepath.Join(base, runNameFile))
	if string(b) != "cmd1-aaaa\n" {
		t.Errorf("run.name = %q", b)
	}
	// a dry run claims nothing
	dry := t.TempDir()
	if _, _, err := runDirOf(dry, "x", false, true); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dry, runNameFile)); err == nil {
		t.Error("a dry run wrote run.name")
	}
}

func TestAlreadyFinishedMsgSaysHowToStartAnother(t *testing.T) {
	m := alreadyFinishedMsg("trial-1", "42", 1, "2026-01-01T00:00:00Z", "step-10")
	for _, want := range []string{`run "trial-1" already finished`, "job 42", "step-10", "--name trial-1-2"} {
		if !strings.Contains(m, want) {
			t.Errorf("message %q lacks %q", m, want)
		}
	}
}
