package spank

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/trainrun/trainrun/checkpoint"
	"github.com/trainrun/trainrun/checkpoint/checkpointtest"
	"github.com/trainrun/trainrun/plan/policy"
)

// trainerSave does what a trainer does for one checkpoint: each rank writes
// its files into dir/tag/ and then its done marker.
func trainerSave(t testing.TB, dir, tag string, ranks ...int) {
	t.Helper()
	checkpointtest.SaveRanks(t, filepath.Join(dir, tag), tag, ranks...)
}

// committedStore is a store with step-100 and step-200 committed (world 2)
// and step-300 half written (rank 1 has not marked done).
func committedStore(t testing.TB) string {
	t.Helper()
	dir := makeStore(t, 2, "step-100", "step-200")
	trainerSave(t, dir, "step-300", 0)
	return dir
}

// makeStore makes a store whose checkpoints tags were saved by world ranks
// and committed, as the trainer and trainrun run do.
func makeStore(t testing.TB, world int, tags ...string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "ckpt")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	s, err := checkpoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	ranks := make([]int, world)
	for i := range ranks {
		ranks[i] = i
	}
	for _, tag := range tags {
		trainerSave(t, dir, tag, ranks...)
		if _, err := s.Commit(t.Context(), tag, world); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestResumeDir(t *testing.T) {
	tmp := t.TempDir()
	empty := filepath.Join(tmp, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(tmp, "a-file")
	if err := os.WriteFile(file, []byte("not a store"), 0o644); err != nil {
		t.Fatal(err)
	}
	committed := committedStore(t)
	// The newest committed checkpoint cannot be read (its manifest is
	// replaced by a directory: reading it fails with EISDIR, an I/O error
	// root gets too): step-100 is resumed from, with a note.
	brokenNewest := committedStore(t)
	breakManifest(t, filepath.Join(brokenNewest, "step-200"))
	// The only committed checkpoint cannot be read: unknown.
	brokenOnly := filepath.Join(tmp, "broken-only")
	if err := os.Mkdir(brokenOnly, 0o755); err != nil {
		t.Fatal(err)
	}
	trainerSave(t, brokenOnly, "step-7", 0)
	if s, err := checkpoint.Open(brokenOnly); err != nil {
		t.Fatal(err)
	} else if _, err := s.Commit(t.Context(), "step-7", 1); err != nil {
		t.Fatal(err)
	}
	breakManifest(t, filepath.Join(brokenOnly, "step-7"))

	for _, tc := range []struct {
		name, dir string
		want      string
		set       bool
		note      string // "" = no note
	}{
		{"missing store: first start", filepath.Join(tmp, "not-yet"), "", true, ""},
		{"empty store: first start", empty, "", true, ""},
		{"committed checkpoints: the newest, not the half-written one", committed, filepath.Join(committed, "step-200"), true, ""},
		{"newest unreadable: the one before, with a note", brokenNewest, filepath.Join(brokenNewest, "step-100"), true, "skipped a newer checkpoint that does not verify: "},
		{"only checkpoint unreadable: unset", brokenOnly, "", false, "TRAINRUN_RESUME_DIR not set: the checkpoint store " + brokenOnly + " cannot be read"},
		{"store is a file: unset", file, "", false, "TRAINRUN_RESUME_DIR not set: the checkpoint store " + file + " cannot be read"},
		{"a path element is a file: unset", filepath.Join(file, "ckpt"), "", false, "not a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, set, notes := ResumeDir(tc.dir)
			if got != tc.want || set != tc.set {
				t.Errorf("ResumeDir(%s) = %q, set %v; want %q, set %v (notes %q)", tc.dir, got, set, tc.want, tc.set, notes)
			}
			joined := strings.Join(notes, "\n")
			if tc.note == "" && len(notes) > 0 || tc.note != "" && !strings.Contains(joined, tc.note) {
				t.Errorf("notes %q; want one containing %q", notes, tc.note)
			}
		})
	}
	t.Run("permission denied: unset", func(t *testing.T) {
		locked := committedStore(t)
		if err := os.Chmod(locked, 0o700); err != nil {
			t.Fatal(err)
		}
		got, set, notes := resumeDirAsNobody(t, locked)
		if set || got != "" || !strings.Contains(strings.Join(notes, "\n"), "permission denied") {
			t.Errorf("a store the reader may not list: %q, set %v, notes %q; want unset with a note naming the error", got, set, notes)
		}
	})
}

// resumeDirAsNobody calls ResumeDir(dir) in a copy of the test binary run as
// an unprivileged user (root reads every directory whatever its mode), or
// directly when the test does not run as root.
func resumeDirAsNobody(t *testing.T, dir string) (string, bool, []string) {
	t.Helper()
	if os.Geteuid() != 0 {
		return ResumeDir(dir)
	}
	// Every directory down to dir must be searchable by the other user.
	for d := filepath.Dir(dir); d != "/"; d = filepath.Dir(d) {
		if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o001 == 0 {
			if err := os.Chmod(d, fi.Mode().Perm()|0o011); err != nil {
				t.Fatal(err)
			}
		}
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(filepath.Dir(dir), "spank.test")
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^TestResumeDirChild$")
	cmd.Env = append(os.Environ(), "TRAINRUN_TEST_RESUME_DIR="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the unprivileged child: %v\n%s", err, out)
	}
	var res struct {
		Value string
		Set   bool
		Notes []string
	}
	line := out
	if i := bytes.Index(out, []byte("RESULT ")); i >= 0 {
		line = out[i+len("RESULT "):]
		line = line[:bytes.IndexByte(line, '\n')]
	}
	if err := json.Unmarshal(line, &res); err != nil {
		t.Fatalf("child output %q: %v", out, err)
	}
	return res.Value, res.Set, res.Notes
}

// TestResumeDirChild is the unprivileged half of resumeDirAsNobody.
func TestResumeDirChild(t *testing.T) {
	dir := os.Getenv("TRAINRUN_TEST_RESUME_DIR")
	if dir == "" {
		t.Skip("run by resumeDirAsNobody only")
	}
	v, set, notes := ResumeDir(dir)
	b, _ := json.Marshal(map[string]any{"Value": v, "Set": set, "Notes": notes})
	fmt.Printf("RESULT %s\n", b)
}

// breakManifest makes a committed checkpoint's manifest unreadable.
func breakManifest(t *testing.T, tagDir string) {
	t.Helper()
	m := checkpoint.ManifestPath(tagDir)
	if _, err := os.Stat(m); err != nil {
		t.Fatalf("no manifest where the layout says: %v", err)
	}
	if err := os.Remove(m); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(m, 0o755); err != nil {
		t.Fatal(err)
	}
}

// ComputeStep gives every task TRAINRUN_RESUME_DIR from the store named by
// --train-ckpt (expanded), empty on a first start, and leaves it unset with a
// note when the store cannot be read.
func TestComputeStepResumeDir(t *testing.T) {
	root, node := machine(t, "hgx-h100")
	committed := committedStore(t)
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// %u expands to the user: the store of user "ann" is committed/ann.
	userStore := filepath.Join(filepath.Dir(committed), "by-user")
	if err := os.MkdirAll(userStore, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(committed, filepath.Join(userStore, "ann")); err != nil {
		t.Fatal(err)
	}
	c := &Config{Policy: policy.Default(), CacheDir: t.TempDir()}
	step := Step{JobID: 9, NodeID: 0, NNodes: 1, LocalTasks: 8, TotalTasks: 8, Nodelist: "gpu1", NodeAddrs: []string{"10.0.0.1"}, Root: root, User: "ann"}
	for _, tc := range []struct {
		name, ckpt string
		want       string // "unset" = not set
	}{
		{"committed", filepath.Join(userStore, "%u"), filepath.Join(userStore, "ann", "step-200")},
		{"first start", filepath.Join(t.TempDir(), "new", "%j"), ""},
		{"unreadable", file, "unset"},
		{"no --train-ckpt", "", "unset"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			given := map[string]string{}
			if tc.ckpt != "" {
				given["train-ckpt"] = tc.ckpt
			}
			r, err := Resolve(c, "", given, func(string) string { return "" })
			if err != nil {
				t.Fatal(err)
			}
			tasks, notes, err := ComputeStep(c, r, step, node)
			if err != nil {
				t.Fatal(err)
			}
			for i, task := range tasks {
				v, ok := lookup(task.Vars, "TRAINRUN_RESUME_DIR")
				if tc.want == "unset" && ok || tc.want != "unset" && (!ok || v != tc.want) {
					t.Errorf("task %d: TRAINRUN_RESUME_DIR=%q (set %v), want %q", i, v, ok, tc.want)
				}
			}
			noted := strings.Contains(strings.Join(notes, "\n"), "TRAINRUN_RESUME_DIR not set")
			if noted != (tc.name == "unreadable") {
				t.Errorf("notes %q", notes)
			}
		})
	}
}

func lookup(vars []string, key string) (string, bool) {
	for _, kv := range vars {
		if k, v, _ := strings.Cut(kv, "="); k == key {
			return v, true
		}
	}
	return "", false
}
