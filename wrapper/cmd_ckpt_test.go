package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/trainrun/trainrun/checkpoint"
	"github.com/trainrun/trainrun/checkpoint/checkpointtest"
	"github.com/trainrun/trainrun/internal/golden"
	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
)

var ckptT0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// ckptFixture builds a store: two committed checkpoints (world 2), one
// incomplete, one half-drained, and a native DCP one.
func ckptFixture(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	write := func(p, c string) {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s, err := checkpoint.OpenWith(dir, checkpoint.Options{Now: func() time.Time { return ckptT0 }})
	if err != nil {
		t.Fatal(err)
	}
	weights := func(r int) checkpointtest.File {
		return checkpointtest.File{Name: "rank" + strconv.Itoa(r) + ".pt", Data: strings.Repeat("w", 1500*(r+1))}
	}
	for _, tag := range []string{"step-100", "step-200"} {
		for r := range 2 {
			checkpointtest.SaveRank(t, s.TagDir(tag), r, weights(r))
		}
	}
	checkpointtest.SaveRank(t, s.TagDir("step-300"), 1, weights(1))
	checkpointtest.SaveRank(t, s.StagingDir("step-400"), 0, weights(0))
	write("dcp-50/.metadata", "m")
	write("dcp-50/__0_0.distcp", "d")
	for _, tag := range []string{"step-100", "step-200"} {
		if _, err := s.Commit(t.Context(), tag, 2); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{s.TagDir("step-300"), s.StagingDir("step-400"), s.TagDir("dcp-50")} {
		if err := os.Chtimes(p, ckptT0, ckptT0.Add(-30*time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func runCkptCmd(t *testing.T, dir string, args ...string) (int, string, string) {
	t.Helper()
	return cli{vars: map[string]string{"TRAINRUN_CKPT_DIR": dir}}.run(append([]string{"ckpt"}, args...)...)
}

func TestCkptList(t *testing.T) {
	ckptNow = func() time.Time { return ckptT0.Add(3 * time.Hour) }
	defer func() { ckptNow = time.Now }()
	dir := ckptFixture(t)
	code, out, errs := runCkptCmd(t, dir, "list", "--world-size", "2")
	if code != exitcode.OK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	golden.CheckString(t, filepath.Join("testdata", "ckpt_list.golden"), out)
}

func TestCkptCommands(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		args     []string
		damage   string // file to truncate first
		wantCode int
		wantOut  string // in stdout
		wantErr  string // in stderr
	}{
		{"verify ok", []string{"verify", "step-200"}, "", exitcode.OK, "step-200: ok, 2 files, 4.4 KiB, sizes and xxh64 match", ""},
		{"verify all", []string{"verify", "--all"}, "", exitcode.OK, "step-100: ok", ""},
		{"verify damaged", []string{"verify", "step-200"}, "step-200/rank1.pt", exitcode.Checkpoint, "step-200/rank1.pt: size 10 bytes, the manifest says 3000: the file changed after commit", "step-200 failed verification (see above); resume from an older checkpoint"},
		{"verify needs a tag", []string{"verify"}, "", exitcode.Usage, "", "exactly one TAG or --all"},
		{"verify uncommitted", []string{"verify", "step-300"}, "", exitcode.Checkpoint, "no manifest", "step-300 failed verification"},
		{"latest", []string{"latest"}, "", exitcode.OK, "/step-200\n", ""},
		{"latest tag", []string{"latest", "--tag"}, "", exitcode.OK, "step-200\n", ""},
		{"latest falls back", []string{"latest", "--tag"}, "step-200/rank0.pt", exitcode.OK, "step-100\n", "skipped a newer checkpoint"},
		{"prune dry run", []string{"prune", "--keep", "1", "--dry-run"}, "", exitcode.OK, "would delete step-100\n", ""},
		{"prune", []string{"prune", "--keep", "1"}, "", exitcode.OK, "deleted step-100\n", ""},
		{"prune keeps the resume point", []string{"prune", "--keep", "1"}, "step-200/rank0.pt", exitcode.OK, "nothing to prune", ""},
		{"prune keep 0", []string{"prune", "--keep", "0"}, "", exitcode.Usage, "", "keep at least 1"},
		{"request without a job", []string{"request", "--then", "requeue", "--reason", "maintenance"}, "", exitcode.Checkpoint, "", "no job has run on"},
		{"request queued", []string{"request", "--then", "requeue", "--queue"}, "", exitcode.OK, "checkpoint requested (then requeue)", "queued for the next job"},
		{"request bad then", []string{"request", "--then", "later"}, "", exitcode.Usage, "", "continue, stop, requeue"},
		{"unknown", []string{"frobnicate"}, "", exitcode.Usage, "", `unknown subcommand`},
		{"no subcommand", nil, "", exitcode.Usage, "Usage: trainrun ckpt", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := ckptFixture(t)
			if c.damage != "" {
				if err := os.Truncate(filepath.Join(dir, c.damage), 10); err != nil {
					t.Fatal(err)
				}
			}
			code, out, errs := runCkptCmd(t, dir, c.args...)
			if code != c.wantCode || !strings.Contains(out, c.wantOut) || !strings.Contains(errs, c.wantErr) {
				t.Fatalf("exit %d (want %d)\nstdout:\n%s\nstderr:\n%s\nwant stdout containing %q, stderr containing %q",
					code, c.wantCode, out, errs, c.wantOut, c.wantErr)
			}
		})
	}
}

func TestCkptLatestEmptyAndMissing(t *testing.T) {
	t.Parallel()
	code, _, errs := runCkptCmd(t, t.TempDir(), "latest")
	if code != exitcode.Checkpoint || !strings.Contains(errs, "no committed checkpoint in ") {
		t.Fatalf("empty store: exit %d, %s", code, errs)
	}
	code, _, errs = runCkptCmd(t, filepath.Join(t.TempDir(), "nope"), "list")
	if code != exitcode.Usage || !strings.Contains(errs, "mkdir -p") {
		t.Fatalf("missing store: exit %d, %s", code, errs)
	}
	code, _, errs = runCkptCmd(t, "", "list")
	if code != exitcode.Usage || !strings.Contains(errs, "TRAINRUN_CKPT_DIR") {
		t.Fatalf("no store: exit %d, %s", code, errs)
	}
}

func TestCkptRequestReachesTheController(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := checkpoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.History().Append(checkpoint.Event{Type: "start", JobID: "45", Time: ckptT0}); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := runCkptCmd(t, dir, "request", "--then", "stop"); code != exitcode.OK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	r, err := s.TakeRequest()
	if err != nil || r == nil || r.Then != "stop" {
		t.Fatalf("TakeRequest = %+v, %v", r, err)
	}
}

func TestCkptDrain(t *testing.T) {
	t.Parallel()
	dir, local := t.TempDir(), t.TempDir()
	for r, node := range []string{"a", "b"} {
		src := filepath.Join(local, node, "step-5")
		name := "rank" + strconv.Itoa(r) + ".pt"
		checkpointtest.SaveRank(t, src, r, checkpointtest.File{Name: name, Data: name})
		code, out, errs := runCkptCmd(t, dir, "drain", "--local", filepath.Join(local, node), "--node", node)
		if code != exitcode.OK || !strings.Contains(out, "drained step-5") {
			t.Fatalf("drain on %s: exit %d\n%s%s", node, code, out, errs)
		}
	}
	s, err := checkpoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if latest, _, err := s.CommitComplete(t.Context(), 2); err != nil || latest != "step-5" {
		t.Fatalf("CommitComplete = %q, %v", latest, err)
	}
	if code, _, errs := runCkptCmd(t, dir, "drain", "--node", "a"); code != exitcode.Usage || !strings.Contains(errs, "TRAINRUN_CKPT_LOCAL_DIR") {
		t.Fatalf("drain without --local: exit %d %s", code, errs)
	}
}

// The job epilog's pass: --json reports each drained tag with its files,
// bytes and time, and what is left in the local directory (a save no rank
// marked done); a drain that fails still prints the object, with the error.
func TestCkptDrainJSON(t *testing.T) {
	t.Parallel()
	dir, local := t.TempDir(), t.TempDir()
	done := filepath.Join(local, "step-7")
	checkpointtest.SaveRank(t, done, 3, checkpointtest.File{Name: "w.bin", Data: "0123456789"})
	os.MkdirAll(filepath.Join(local, "step-8"), 0o755) // being written when the job died
	code, out, errs := runCkptCmd(t, dir, "drain", "--json", "--local="+local, "--node=n2")
	if code != exitcode.OK {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	var rep checkpoint.DrainReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v: %q", err, out)
	}
	if len(rep.Drained) != 1 || rep.Drained[0].Tag != "step-7" || rep.Drained[0].Bytes != 10 || rep.Drained[0].Files != 1 ||
		!reflect.DeepEqual(rep.Left, []string{"step-8"}) || rep.Node != "n2" || rep.Local != local || rep.Error != "" {
		t.Errorf("report %+v", rep)
	}
	if _, err := os.Stat(done); !os.IsNotExist(err) {
		t.Errorf("the drained local copy %s is still there", done)
	}
	// A store that is not there: a non-zero exit, and the object says why.
	checkpointtest.MarkDone(t, filepath.Join(local, "step-9"), 3)
	code, out, _ = runCkptCmd(t, filepath.Join(dir, "no", "such"), "drain", "--json", "--local="+local, "--node=n2")
	rep = checkpoint.DrainReport{}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code == exitcode.OK || rep.Error == "" || !reflect.DeepEqual(rep.Left, []string{"step-8", "step-9"}) {
		t.Errorf("failed drain: exit %d, report %+v (%v) from %q", code, rep, err, out)
	}
}

// Issue 30: a request no job will read is refused with why (exit 9) and
// leaves no request file behind, unless --queue asks for it.
func TestCkptRequestNeedsAJob(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		events []checkpoint.Event
		finish bool
		code   int
		errs   string
	}{
		{"never ran", nil, false, exitcode.Checkpoint, "no job has run on"},
		{"running", []checkpoint.Event{{Type: "start", JobID: "45"}}, false, exitcode.OK, ""},
		{"ended", []checkpoint.Event{{Type: "start", JobID: "45"}, {Type: "end", JobID: "45", Cause: checkpoint.CauseCrash}}, false, exitcode.Checkpoint,
			"no job is running on"},
		{"requeued and running", []checkpoint.Event{{Type: "start", JobID: "45"}, {Type: "end", JobID: "45", Cause: checkpoint.CausePreempted},
			{Type: "start", JobID: "45", Restart: 1}}, false, exitcode.OK, ""},
		{"finished", []checkpoint.Event{{Type: "start", JobID: "45"}, {Type: "end", JobID: "45", Cause: checkpoint.CauseFinished}}, true, exitcode.Checkpoint,
			"--init-from"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			s, err := checkpoint.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range c.events {
				e.Time = ckptT0
				if err := s.History().Append(e); err != nil {
					t.Fatal(err)
				}
			}
			if c.finish {
				if err := s.MarkFinished(checkpoint.Finished{Time: ckptT0, JobID: "45", Tag: "step-100"}); err != nil {
					t.Fatal(err)
				}
			}
			code, _, errs := runCkptCmd(t, dir, "request")
			if code != c.code || !strings.Contains(errs, c.errs) {
				t.Fatalf("exit %d (want %d), stderr %q (want %q)", code, c.code, errs, c.errs)
			}
			r, err := s.TakeRequest()
			if err != nil || (r != nil) != (c.code == exitcode.OK) {
				t.Errorf("request file %+v, %v: want one only when the command succeeded", r, err)
			}
		})
	}
}

// Issue 30: a committed checkpoint whose content changed (same size) is not
// marked latest by `ckpt list`: the one `ckpt latest` and a job resume from
// is, and the failing one says why.
func TestCkptListMarksWhatAJobResumesFrom(t *testing.T) {
	t.Parallel()
	dir := ckptFixture(t)
	f, err := os.OpenFile(filepath.Join(dir, "step-200", "rank1.pt"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("X"), 7); err != nil {
		t.Fatal(err)
	}
	f.Close()
	code, out, errs := runCkptCmd(t, dir, "list", "--world-size", "2")
	if code != exitcode.OK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	row := func(tag string) string {
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, tag+" ") {
				return l
			}
		}
		return ""
	}
	if !strings.HasSuffix(row("step-200"), "FAILED") || !strings.HasSuffix(row("step-100"), "latest") ||
		!strings.Contains(out, "step-200: fails verification, a job resumes from step-100") {
		t.Errorf("list:\n%s", out)
	}
	// --sizes-only does not reread: the size is unchanged, step-200 stays latest.
	if _, out, _ = runCkptCmd(t, dir, "list", "--sizes-only", "--world-size", "2"); !strings.HasSuffix(row("step-200"), "latest") {
		t.Errorf("list --sizes-only:\n%s", out)
	}
	_, out, _ = runCkptCmd(t, dir, "list", "--format", "json")
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		switch r["tag"] {
		case "step-100":
			if r["resume"] != true {
				t.Errorf("step-100: %v", r)
			}
		case "step-200":
			if r["resume"] != false || r["latest"] != true || r["verify_error"] == nil {
				t.Errorf("step-200: %v", r)
			}
		}
	}
}

// Issue 30: a failed verify says the failure once (stdout), the error only
// sums up; a missing tag to restore is "no such checkpoint".
func TestCkptVerifySaysItOnce(t *testing.T) {
	t.Parallel()
	dir := ckptFixture(t)
	if err := os.Truncate(filepath.Join(dir, "step-200", "rank1.pt"), 10); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCkptCmd(t, dir, "verify", "--all")
	if code != exitcode.Checkpoint || strings.Count(out+errs, "size 10 bytes") != 1 || !strings.Contains(out, "step-100: ok") || !strings.Contains(errs, "step-200 failed verification") {
		t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
	code, _, errs = runCkptCmd(t, dir, "restore", "step-1", "--to", t.TempDir())
	if code != exitcode.Checkpoint || !strings.Contains(errs, "no such checkpoint") {
		t.Errorf("restore step-1: exit %d: %s", code, errs)
	}
}
