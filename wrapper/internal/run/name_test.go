package run

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trainrun/trainrun/checkpoint"
	"github.com/trainrun/trainrun/internal/slurm"
	"github.com/trainrun/trainrun/wrapper/internal/jobdir"
)

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
	b, _ := os.ReadFile(filepath.Join(base, jobdir.RunName))
	if string(b) != "cmd1-aaaa\n" {
		t.Errorf("run.name = %q", b)
	}
	// a dry run claims nothing
	dry := t.TempDir()
	if _, _, err := runDirOf(dry, "x", false, true); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dry, jobdir.RunName)); err == nil {
		t.Error("a dry run wrote run.name")
	}
}

func TestAlreadyFinishedMsgSaysHowToStartAnother(t *testing.T) {
	m := alreadyFinishedMsg("trial-1", "42", 1, "2026-01-01T00:00:00Z", "step-10", "/ckpt/run1")
	for _, want := range []string{`run "trial-1" already finished`, "job 42", "step-10", "--name trial-1-2", "--init-from /ckpt/run1/step-10 --ckpt-dir NEW_DIR"} {
		if !strings.Contains(m, want) {
			t.Errorf("message %q lacks %q", m, want)
		}
	}
}

// makeDirs: a second run of the job gets its own store even where the
// job's store came from TRAINRUN_CKPT_DIR, and a store that another,
// finished run left behind (an explicit --ckpt-dir) is refused, naming both.
func TestMakeDirsPerRunStores(t *testing.T) {
	base := t.TempDir()
	shared := filepath.Join(t.TempDir(), "ck")
	newRunner := func(name string, argv []string, ckptFlag bool) *runner {
		var log strings.Builder
		fs := testFlags(&log)
		var o Options
		o.AddFlags(fs, func(string) string { return "" })
		args := []string{"--job-dir", base}
		if name != "" {
			args = append(args, "--name", name)
		}
		if ckptFlag {
			args = append(args, "--ckpt-dir", shared)
		}
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		if !ckptFlag {
			o.ckptDir = shared // as TRAINRUN_CKPT_DIR or the policy's CkptDir would set it
		}
		return &runner{cfg: Config{Options: o, given: givenFlags(fs), argv: argv}, alloc: &slurm.Allocation{JobID: "5"}, env: &Deps{Stderr: &log}}
	}
	first := newRunner("", []string{"python3", "a.py"}, false)
	if done, err := first.makeDirs(); err != nil || done || first.dirs.jobDir != base || first.dirs.ckptDir != shared {
		t.Fatalf("first run: %v %v dirs %s %s", done, err, first.dirs.jobDir, first.dirs.ckptDir)
	}
	second := newRunner("eval", []string{"python3", "b.py"}, false)
	if done, err := second.makeDirs(); err != nil || done || second.dirs.jobDir != filepath.Join(base, "runs", "eval") || second.dirs.ckptDir != filepath.Join(shared, "runs", "eval") {
		t.Fatalf("second run: %v %v dirs %s %s", done, err, second.dirs.jobDir, second.dirs.ckptDir)
	}
	st, err := checkpoint.Open(shared)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.MarkFinished(checkpoint.Finished{JobID: "5", Run: first.dirs.runName}); err != nil {
		t.Fatal(err)
	}
	again := newRunner("", []string{"python3", "a.py"}, false)
	if done, err := again.makeDirs(); err != nil || !done {
		t.Errorf("the finished run again: done %v err %v", done, err)
	}
	other := newRunner("eval", []string{"python3", "b.py"}, true) // --ckpt-dir given: used as given
	_, err = other.makeDirs()
	if err == nil || !strings.Contains(err.Error(), `holds run "`+first.dirs.runName+`", which finished; this run is "eval"`) {
		t.Errorf("another run on a finished run's store: %v", err)
	}
}
