package spank

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trainrun/trainrun/checkpoint"
)

// nobody is the job's user in these tests: a uid:gid other than the test's.
const nobody = 65534

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the plugin creates directories for, and runs drains as, another user")
	}
}

// sharedDir is a directory every user can enter (t.TempDir's parent is
// 0700), removed after the test.
func sharedDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "spank-epilog-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}

// prepareJobDir is PrepareJobDir, with the job's handoff file system
// unmounted when the test ends (t.TempDir cannot remove a mount point).
func prepareJobDir(t *testing.T, cache string, job, uid, gid uint32) (string, error) {
	t.Helper()
	t.Cleanup(func() { unmountHandoff(filepath.Join(JobDir(cache, job), HandoffDirName)) })
	return PrepareJobDir(cache, job, uid, gid)
}

func owner(t *testing.T, p string) (uid, gid uint32, mode os.FileMode) {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return st.Uid, st.Gid, fi.Mode()
}

func TestPrepareJobDir(t *testing.T) {
	needRoot(t)
	cache := filepath.Join(t.TempDir(), "cache")
	h, err := prepareJobDir(t, cache, 42, nobody, nobody)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(cache, "job-42", "handoff"); h != want {
		t.Fatalf("handoff dir %s, want %s", h, want)
	}
	if u, g, m := owner(t, filepath.Dir(h)); u != 0 || g != 0 || m != os.ModeDir|0o755 {
		t.Errorf("job dir: %d:%d %v, want root-owned drwxr-xr-x", u, g, m)
	}
	if u, g, m := owner(t, h); u != nobody || g != nobody || m != os.ModeDir|0o700 {
		t.Errorf("handoff dir: %d:%d %v, want %d:%d drwx------", u, g, m, nobody, nobody)
	}
	// Idempotent, and it repairs a mode the user changed.
	os.Chmod(h, 0o777)
	if h2, err := prepareJobDir(t, cache, 42, nobody, nobody); err != nil || h2 != h {
		t.Fatalf("second call: %q, %v", h2, err)
	}
	if _, _, m := owner(t, h); m != os.ModeDir|0o700 {
		t.Errorf("handoff dir mode %v after the second call, want drwx------", m)
	}

	// Symbolic links are refused, and their targets left alone.
	target := t.TempDir()
	unmountHandoff(h)
	os.RemoveAll(h)
	if err := os.Symlink(target, h); err != nil {
		t.Fatal(err)
	}
	if _, err := prepareJobDir(t, cache, 42, nobody, nobody); err == nil || !strings.Contains(err.Error(), h+" is a symbolic link, not a directory") {
		t.Errorf("handoff dir as a symlink: err = %v", err)
	}
	if u, _, _ := owner(t, target); u != 0 {
		t.Errorf("the symlink's target was chowned to %d", u)
	}
	if err := os.Symlink(target, filepath.Join(cache, "job-43")); err != nil {
		t.Fatal(err)
	}
	if _, err := prepareJobDir(t, cache, 43, nobody, nobody); err == nil || !strings.Contains(err.Error(), "job-43 is a symbolic link") {
		t.Errorf("job dir as a symlink: err = %v", err)
	}
	if _, err := os.Lstat(filepath.Join(target, "handoff")); err == nil {
		t.Error("a handoff dir was made through the symlink")
	}
	if _, err := prepareJobDir(t, cache, 44, UnknownID, nobody); err == nil {
		t.Error("no uid: no error")
	}
}

// fakeTrainrun writes a trainrun stand-in that records who ran it, with
// what arguments and stdin, then runs body (which prints the report).
func fakeTrainrun(t *testing.T, dir, body string) (bin, calls string) {
	t.Helper()
	calls = filepath.Join(dir, "calls")
	if err := os.Mkdir(calls, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(calls, 0o777)
	bin = filepath.Join(dir, "trainrun")
	script := fmt.Sprintf(`#!/bin/bash
out=%s/$$
{ echo "uid=$(id -u) gid=$(id -g) groups=$(id -G)"; printf '%%s\n' "$@"; } > $out.who
if read -r -t 5 line; then echo "stdin: data" >> $out.who; else echo "stdin: eof" >> $out.who; fi
%s
`, calls, body)
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, calls
}

func readCalls(t *testing.T, calls string) []string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(calls, "*.who"))
	var out []string
	for _, p := range m {
		b, _ := os.ReadFile(p)
		out = append(out, string(b))
	}
	return out
}

// putRecord writes a record into the user's handoff dir, as the job's
// shim does: the file is the user's (nobody's).
func putRecord(t *testing.T, hdir, name string, v any) string {
	t.Helper()
	var b []byte
	switch v := v.(type) {
	case string:
		b = []byte(v)
	default:
		b, _ = json.Marshal(v)
	}
	p := filepath.Join(hdir, name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	os.Lchown(p, nobody, nobody)
	return p
}

// The job epilog runs `trainrun ckpt drain` once for this node's record, as
// the job's user (uid, gid, supplementary groups), with stdin at EOF and the
// record's paths as --key=value arguments; logs one line saying what was
// drained; leaves another node's record (a cache two slurmd share) and the
// job dir for that node's epilog, and the last epilog removes the job dir.
func TestJobEpilog(t *testing.T) {
	needRoot(t)
	t.Setenv("SLURMD_NODENAME", "n1")
	dir := sharedDir(t)
	bin, calls := fakeTrainrun(t, dir, `echo '{"node":"n1","drained":[{"tag":"step-10","files":2,"bytes":4096,"seconds":0.2}],"left":["step-11"]}'`)
	cache := filepath.Join(dir, "cache")
	c := &Config{CacheDir: cache, Trainrun: bin, DrainTimeout: 20 * time.Second}
	hdir, err := prepareJobDir(t, cache, 7, nobody, nobody)
	if err != nil {
		t.Fatal(err)
	}
	rec := checkpoint.DrainHandoff{Version: 1, JobID: 7, Restart: 1, Node: "n1", LocalDir: "/dev/shm/ck/n1", CkptDir: "/lustre/ann/run1", Ranks: []int{0, 1}}
	putRecord(t, hdir, "drain-n1.json", rec)
	rec2 := rec
	rec2.Node, rec2.LocalDir = "n2", "/dev/shm/ck/n2"
	other := putRecord(t, hdir, "drain-n2.json", rec2)
	putRecord(t, hdir, ".tmp-drain-123", "{half")
	var lines []string
	logf := func(s string) { lines = append(lines, s) }
	if err := JobEpilog(c, 7, nobody, nobody, logf); err != nil {
		t.Fatalf("JobEpilog: %v\n%s", err, strings.Join(lines, "\n"))
	}
	got := readCalls(t, calls)
	if len(got) != 1 {
		t.Fatalf("trainrun ran %d times, want once (this node's record only): %q", len(got), got)
	}
	want := "uid=65534 gid=65534 groups=65534\nckpt\ndrain\n--json\n--ckpt-dir=/lustre/ann/run1\n--local=/dev/shm/ck/n1\n--node=n1\n--ranks=0,1\nstdin: eof\n" // the node's own ranks only (issue 12, finding 2)
	if got[0] != want {
		t.Errorf("trainrun ran as/with:\n%s\nwant:\n%s", got[0], want)
	}
	if len(lines) != 1 || !strings.Contains(lines[0], "trainrun: epilog: job 7: node n1: /dev/shm/ck/n1 into /lustre/ann/run1: drained step-10 (4096 bytes) in ") ||
		!strings.Contains(lines[0], "left in /dev/shm/ck/n1: step-11") {
		t.Errorf("log lines:\n%s", strings.Join(lines, "\n"))
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("node n2's record is gone (n2's epilog drains it): %v", err)
	}
	// n2's epilog: its record, then nothing left: the job dir goes.
	t.Setenv("SLURMD_NODENAME", "n2")
	lines = nil
	if err := JobEpilog(c, 7, nobody, nobody, logf); err != nil {
		t.Fatalf("JobEpilog on n2: %v", err)
	}
	if n := len(readCalls(t, calls)); n != 2 {
		t.Errorf("trainrun ran %d times after n2's epilog, want 2", n)
	}
	if _, err := os.Lstat(JobDir(cache, 7)); !os.IsNotExist(err) {
		t.Errorf("job dir after the last epilog: %v, want it removed", err)
	}
	// Slurm gave no ids: the handoff dir's owner is the job's user.
	hdir, _ = prepareJobDir(t, cache, 8, nobody, nobody)
	putRecord(t, hdir, "drain-n2.json", checkpoint.DrainHandoff{Version: 1, JobID: 8, Node: "n2", LocalDir: "/l", CkptDir: "/s"})
	if err := JobEpilog(c, 8, UnknownID, UnknownID, logf); err != nil {
		t.Fatal(err)
	}
	got = readCalls(t, calls)
	if len(got) != 3 || !slicesHasPrefix(got, "uid=65534 gid=65534 ") {
		t.Errorf("without ids from Slurm: %q", got)
	}
	if !strings.Contains(strings.Join(lines, "\n"), "note: Slurm gave the epilog no job uid/gid; drains run as 65534:65534, the owner of "+hdir) {
		t.Errorf("no note on the ids taken from the handoff dir:\n%s", strings.Join(lines, "\n"))
	}
}

func slicesHasPrefix(s []string, p string) bool {
	for _, x := range s {
		if !strings.HasPrefix(x, p) {
			return false
		}
	}
	return true
}

// A drain that hangs is killed at the plugin's bound, with its process
// group (a child it started too), and the epilog says what is left where.
func TestJobEpilogTimeout(t *testing.T) {
	needRoot(t)
	t.Setenv("SLURMD_NODENAME", "n1")
	dir := sharedDir(t)
	pidFile := filepath.Join(dir, "calls", "sleeper")
	bin, _ := fakeTrainrun(t, dir, "sleep 300 & echo $! > "+pidFile+"\nsleep 300")
	cache := filepath.Join(dir, "cache")
	c := &Config{CacheDir: cache, Trainrun: bin, DrainTimeout: time.Second}
	hdir, err := prepareJobDir(t, cache, 9, nobody, nobody)
	if err != nil {
		t.Fatal(err)
	}
	putRecord(t, hdir, "drain-n1.json", checkpoint.DrainHandoff{Version: 1, JobID: 9, Node: "n1", LocalDir: "/dev/shm/ck", CkptDir: "/store"})
	var lines []string
	t0 := time.Now()
	err = JobEpilog(c, 9, nobody, nobody, func(s string) { lines = append(lines, s) })
	took := time.Since(t0)
	if err == nil || !strings.Contains(err.Error(), "1 drain handoff(s) not finished") {
		t.Errorf("err = %v", err)
	}
	if took > 5*time.Second {
		t.Errorf("JobEpilog took %s with a 1 s bound", took)
	}
	if len(lines) != 1 || !strings.Contains(lines[0], "drain killed after 1s") || !strings.Contains(lines[0], "left in /dev/shm/ck") ||
		!strings.Contains(lines[0], "ckpt drain --json --ckpt-dir=/store --local=/dev/shm/ck --node=n1") {
		t.Errorf("log lines:\n%s", strings.Join(lines, "\n"))
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	deadline := time.Now().Add(3 * time.Second)
	for {
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil || strings.Contains(string(st), ") Z ") {
			break // gone, or a zombie: killed
		}
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("the drain's child %d survived the kill at the deadline", pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := os.Lstat(JobDir(cache, 9)); !os.IsNotExist(err) {
		t.Errorf("job dir not removed after a killed drain: %v", err)
	}
}

// Records the user wrote wrongly are rejected with a message naming the
// file and what is wrong, and nothing runs for them.
func TestJobEpilogBadRecords(t *testing.T) {
	needRoot(t)
	t.Setenv("SLURMD_NODENAME", "n1")
	dir := sharedDir(t)
	bin, calls := fakeTrainrun(t, dir, `echo '{"drained":[]}'`)
	cache := filepath.Join(dir, "cache")
	c := &Config{CacheDir: cache, Trainrun: bin, DrainTimeout: 20 * time.Second}
	good := checkpoint.DrainHandoff{Version: 1, JobID: 0, Node: "n1", LocalDir: "/dev/shm/ck", CkptDir: "/store"}
	secret := filepath.Join(dir, "secret.json")
	os.WriteFile(secret, []byte(`{"version":1,"node":"n1","local_dir":"/a","ckpt_dir":"/b"}`), 0o600)
	for i, tc := range []struct {
		name string
		put  func(hdir string, job uint32) string // returns the record's path
		want string
	}{
		{"relative path", func(h string, j uint32) string {
			r := good
			r.JobID, r.LocalDir = j, "dev/shm/ck"
			return putRecord(t, h, "drain-n1.json", r)
		}, `local_dir "dev/shm/ck": want a clean absolute path`},
		{"dotdot path", func(h string, j uint32) string {
			r := good
			r.JobID, r.CkptDir = j, "/store/../etc"
			return putRecord(t, h, "drain-n1.json", r)
		}, `ckpt_dir "/store/../etc": want a clean absolute path`},
		{"unknown version", func(h string, j uint32) string {
			r := good
			r.JobID, r.Version = j, 2
			return putRecord(t, h, "drain-n1.json", r)
		}, "version 2: this trainrun reads version 1 records"},
		{"not JSON", func(h string, j uint32) string { return putRecord(t, h, "drain-n1.json", "{not json") }, "is not a valid record"},
		{"other job", func(h string, j uint32) string {
			r := good
			r.JobID = j + 1000
			return putRecord(t, h, "drain-n1.json", r)
		}, fmt.Sprintf("is for job %d", 100+1000)},
		{"node mismatch", func(h string, j uint32) string {
			r := good
			r.JobID, r.Node = j, "n9"
			return putRecord(t, h, "drain-n1.json", r)
		}, `names node "n9", whose record is drain-n9.json`},
		{"symlink", func(h string, j uint32) string {
			p := filepath.Join(h, "drain-n1.json")
			if err := os.Symlink(secret, p); err != nil {
				t.Fatal(err)
			}
			return p
		}, "is a symbolic link"},
		{"fifo", func(h string, j uint32) string {
			p := filepath.Join(h, "drain-n1.json")
			if err := syscall.Mkfifo(p, 0o600); err != nil || os.Lchown(p, nobody, nobody) != nil {
				t.Fatal(err)
			}
			return p
		}, "is not a regular file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job := uint32(100 + i)
			if tc.name == "other job" {
				job = 100
			}
			hdir, err := prepareJobDir(t, cache, job, nobody, nobody)
			if err != nil {
				t.Fatal(err)
			}
			path := tc.put(hdir, job)
			var lines []string
			done := make(chan error, 1)
			go func() { done <- JobEpilog(c, job, nobody, nobody, func(s string) { lines = append(lines, s) }) }()
			select {
			case err = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("JobEpilog hangs on the record")
			}
			if err == nil {
				t.Errorf("no error for a bad record")
			}
			if len(lines) != 1 || !strings.Contains(lines[0], path) || !strings.Contains(lines[0], tc.want) || !strings.Contains(lines[0], "nothing drained") {
				t.Errorf("log lines, want one naming %s and %q:\n%s", path, tc.want, strings.Join(lines, "\n"))
			}
			if n := len(readCalls(t, calls)); n != 0 {
				t.Errorf("trainrun ran %d times for a bad record", n)
			}
			if b, err := os.ReadFile(secret); err != nil || len(b) == 0 {
				t.Errorf("the file a symlinked record pointed at was touched: %v", err)
			}
		})
	}
}

// An epilog uid that is not the handoff dir's owner (PrepareJobDir gave it
// to the step's S_JOB_UID) runs nothing: a wrong id from Slurm cannot make
// root (or anyone else) drain paths the user wrote.
func TestJobEpilogOwnerMismatch(t *testing.T) {
	needRoot(t)
	t.Setenv("SLURMD_NODENAME", "n1")
	dir := sharedDir(t)
	bin, calls := fakeTrainrun(t, dir, `echo '{"drained":[]}'`)
	cache := filepath.Join(dir, "cache")
	c := &Config{CacheDir: cache, Trainrun: bin, DrainTimeout: 5 * time.Second}
	hdir, _ := prepareJobDir(t, cache, 6, nobody, nobody)
	putRecord(t, hdir, "drain-n1.json", checkpoint.DrainHandoff{Version: 1, JobID: 6, Node: "n1", LocalDir: "/l", CkptDir: "/s"})
	var lines []string
	err := JobEpilog(c, 6, 0, 0, func(s string) { lines = append(lines, s) })
	if err == nil || len(lines) != 1 || !strings.Contains(lines[0], hdir+" is owned by uid 65534, not the job's user 0; nothing drained") {
		t.Errorf("err %v, lines:\n%s", err, strings.Join(lines, "\n"))
	}
	if n := len(readCalls(t, calls)); n != 0 {
		t.Errorf("trainrun ran %d times", n)
	}
}

// A trainrun= that is not there: the line says so and how to drain by hand.
func TestJobEpilogNoBinary(t *testing.T) {
	needRoot(t)
	t.Setenv("SLURMD_NODENAME", "n1")
	dir := sharedDir(t)
	cache := filepath.Join(dir, "cache")
	c := &Config{CacheDir: cache, Trainrun: "/no/such/trainrun", DrainTimeout: 5 * time.Second}
	hdir, _ := prepareJobDir(t, cache, 5, nobody, nobody)
	putRecord(t, hdir, "drain-n1.json", checkpoint.DrainHandoff{Version: 1, JobID: 5, Node: "n1", LocalDir: "/l", CkptDir: "/s"})
	var lines []string
	err := JobEpilog(c, 5, nobody, nobody, func(s string) { lines = append(lines, s) })
	if err == nil || len(lines) != 1 || !strings.Contains(lines[0], "running /no/such/trainrun as uid 65534 failed") ||
		!strings.Contains(lines[0], "/no/such/trainrun ckpt drain --json --ckpt-dir=/s --local=/l --node=n1") {
		t.Errorf("err %v, lines:\n%s", err, strings.Join(lines, "\n"))
	}
}
