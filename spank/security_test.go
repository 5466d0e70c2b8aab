package spank

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trainrun/trainrun/checkpoint"
	"github.com/trainrun/trainrun/plan"
	"github.com/trainrun/trainrun/plan/policy"
)

// TestMain lets this test binary stand in for trainrun as the helper the
// plugin starts as the job's user (trainrun __resume-dir DIR).
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == ResumeHelperArg {
		os.Exit(ResumeHelperMain(os.Args[2:], os.Stdout))
	}
	if len(os.Args) > 2 && os.Args[1] == worstArg {
		os.Exit(worstChild(os.Args[2]))
	}
	os.Exit(m.Run())
}

var nobodyCred = &Cred{UID: nobody, GID: nobody}

// worldDir is a directory every user may search (t.TempDir is 0700), with a
// copy of this test binary in it as the resume helper.
func worldDir(t *testing.T) (dir, helper string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the attacks are on root's credentials")
	}
	dir, err := os.MkdirTemp("", "trainrun-secroot-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	helper = filepath.Join(dir, "trainrun")
	if err := os.WriteFile(helper, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir, helper
}

func write(t *testing.T, path, data string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

// within fails the test when f has not returned after d: a step that blocks.
func within(t *testing.T, d time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s: still blocked after %s", what, d)
	}
}

// Issue 12 finding 1, the model: a job of nobody names a root-only 0600
// config.json, a FIFO, a 512 MiB file, a symbolic link to the root-only file
// (TRAINRUN_MODEL, the twin that reaches slurmstepd). Each gets a clear error
// that quotes nothing of the file; nothing blocks or allocates the file.
func TestModelConfigReadAsUser(t *testing.T) {
	dir, _ := worldDir(t)
	secret := filepath.Join(dir, "secret.json")
	write(t, secret, `{"model_type": "llama", "root_password_hunter2": 424242}`, 0o600)
	fifo := filepath.Join(dir, "fifo.json")
	if err := syscall.Mkfifo(fifo, 0o666); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.json")
	if f, err := os.Create(big); err != nil {
		t.Fatal(err)
	} else {
		f.Truncate(512 << 20)
		f.Close()
		os.Chmod(big, 0o644)
	}
	link := filepath.Join(dir, "link.json")
	if err := os.Symlink(secret, link); err != nil {
		t.Fatal(err)
	}
	// the user's own config, through a link as in the Hugging Face cache
	good := filepath.Join(dir, "good.json")
	cfg, err := os.ReadFile("../plan/testdata/hf/llama3-70b.json")
	if err != nil {
		t.Fatal(err)
	}
	write(t, good, string(cfg), 0o644)
	goodLink := filepath.Join(dir, "good-link.json")
	if err := os.Symlink(good, goodLink); err != nil {
		t.Fatal(err)
	}
	c := &Config{Policy: policy.Default(), As: nobodyCred}
	for _, tc := range []struct{ path, want string }{
		{secret, "permission denied"},
		{link, "permission denied"},
		{fifo, "not a regular file"},
		{big, "larger than"},
		{goodLink, ""},
	} {
		var err error
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		within(t, 5*time.Second, tc.path, func() {
			_, err = Resolve(c, "", nil, func(k string) string {
				if k == "TRAINRUN_MODEL" {
					return tc.path
				}
				return ""
			})
		})
		runtime.ReadMemStats(&after)
		if grew := after.TotalAlloc - before.TotalAlloc; grew > 16<<20 {
			t.Errorf("%s: reading it allocated %d MiB", tc.path, grew>>20)
		}
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: the user's own config through a link: %v", tc.path, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v; want an error saying %q", tc.path, err, tc.want)
		}
		if err != nil && (strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "424242")) {
			t.Errorf("%s: the error quotes the root-only file: %v", tc.path, err)
		}
	}
}

// Issue 12 finding 1, the store: .trainrun/latest a FIFO (the step blocked),
// and a manifest entry ../../private/key (notes told the size of any file
// on the node). As nobody, through the helper: no block, no size.
func TestResumeStoreReadAsUser(t *testing.T) {
	dir, helper := worldDir(t)
	// a root-only file of 411 bytes
	priv := filepath.Join(dir, "private")
	if err := os.Mkdir(priv, 0o700); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(priv, "key"), strings.Repeat("k", 411), 0o600)

	oracle := filepath.Join(dir, "oracle")
	oracleStore := mkUserStore(t, oracle)
	mpath := checkpoint.ManifestPath(filepath.Join(oracle, "step-1"))
	var m map[string]any
	b, err := os.ReadFile(mpath)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	m["files"] = append(m["files"].([]any), map[string]any{"path": "../../private/key", "size": 1})
	b, _ = json.Marshal(m)
	write(t, mpath, string(b), 0o644)
	os.Remove(oracleStore.PointerPath()) // so the manifest is checked

	fifoStore := filepath.Join(dir, "fifo")
	latest := mkUserStore(t, fifoStore).PointerPath()
	os.Remove(latest)
	if err := syscall.Mkfifo(latest, 0o666); err != nil {
		t.Fatal(err)
	}

	for _, store := range []string{oracle, fifoStore} {
		var v string
		var ok bool
		var notes []string
		within(t, 8*time.Second, store, func() { v, ok, notes = ResumeDirAs(helper, nobodyCred, store, 3*time.Second) })
		joined := strings.Join(notes, "\n")
		if strings.Contains(joined, "411") {
			t.Errorf("%s: the notes tell the root-only file's size: %q", store, joined)
		}
		if v != "" && v != filepath.Join(store, "step-1") {
			t.Errorf("%s: TRAINRUN_RESUME_DIR=%q", store, v)
		}
		t.Logf("%s: value %q ok %v notes %q", filepath.Base(store), v, ok, notes)
	}
	// and the step: ComputeStep with the job's credentials uses the helper
	root, node := machine(t, "hgx-h100")
	c := &Config{Policy: policy.Default(), CacheDir: t.TempDir(), As: nobodyCred, Trainrun: helper, ResumeTimeout: 2 * time.Second}
	r, err := Resolve(c, "", map[string]string{"train-ckpt": fifoStore}, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	st := Step{JobID: 9, NNodes: 1, LocalTasks: 8, TotalTasks: 8, Nodelist: "gpu1", NodeAddrs: []string{"10.0.0.1"}, Root: root, User: "nobody"}
	within(t, 8*time.Second, "ComputeStep with a FIFO as latest", func() {
		tasks, notes, err := ComputeStep(c, r, st, node)
		if err != nil {
			t.Error(err)
			return
		}
		if v, set := lookup(tasks[0].Vars, "TRAINRUN_RESUME_DIR"); set && v != filepath.Join(fifoStore, "step-1") {
			t.Errorf("TRAINRUN_RESUME_DIR=%q (notes %q)", v, notes)
		}
	})
}

// mkUserStore makes a store owned by nobody with step-1 committed (world 1).
func mkUserStore(t *testing.T, dir string) *checkpoint.Store {
	t.Helper()
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	trainerSave(t, dir, "step-1", 0)
	s, err := checkpoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(t.Context(), "step-1", 1); err != nil {
		t.Fatal(err)
	}
	filepath.Walk(dir, func(p string, _ os.FileInfo, _ error) error { return os.Lchown(p, 65534, 65534) })
	return s
}

// Issue 12 finding 4 in the step: %x from a job name "../alice/ckpt" never
// becomes another user's store; the step fails with a message naming %x.
func TestCkptDirJobNameEscape(t *testing.T) {
	root, node := machine(t, "hgx-h100")
	base := t.TempDir()
	c := &Config{Policy: policy.Default(), CacheDir: t.TempDir()}
	r, err := Resolve(c, "", map[string]string{"train-ckpt": base + "/%u/%x"}, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"../alice/ckpt", "..", "a/b"} {
		st := Step{JobID: 9, NNodes: 1, LocalTasks: 8, TotalTasks: 8, Nodelist: "gpu1", NodeAddrs: []string{"10.0.0.1"}, Root: root, User: "bob", JobName: name}
		tasks, _, err := ComputeStep(c, r, st, node)
		if err == nil {
			v, _ := lookup(tasks[0].Vars, "TRAINRUN_CKPT_DIR")
			t.Errorf("job name %q: TRAINRUN_CKPT_DIR=%s; want an error", name, v)
		} else if !strings.Contains(err.Error(), "%x") {
			t.Errorf("job name %q: %v; want the error to name %%x", name, err)
		}
	}
}

// The cache= directory is root's and not writable by others, or refused;
// what root writes there is not world-readable; a per-job file is the job
// user's.
func TestCacheDirAndFileModes(t *testing.T) {
	dir, _ := worldDir(t)
	open := filepath.Join(dir, "open")
	os.Mkdir(open, 0o777)
	os.Chmod(open, 0o777)
	theirs := filepath.Join(dir, "theirs")
	os.Mkdir(theirs, 0o755)
	os.Chown(theirs, 65534, 65534)
	for _, d := range []string{open, theirs} {
		if err := CheckCacheDir(d); err == nil {
			t.Errorf("cache directory %s accepted", d)
		}
		if _, err := PrepareJobDir(d, 7, 65534, 65534); err == nil {
			t.Errorf("PrepareJobDir in %s accepted", d)
		}
	}
	cache := filepath.Join(dir, "cache")
	if err := CheckCacheDir(cache); err != nil {
		t.Errorf("a missing cache directory: %v", err)
	}
	if _, err := prepareJobDir(t, cache, 7, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	p, err := WritePlan(cache, Step{JobID: 7, StepID: 0}, []byte("{}"), nobodyCred)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteStepEnv(cache, Step{JobID: 7}, []TaskEnv{{Vars: []string{"A=1"}}}, nobodyCred); err != nil {
		t.Fatal(err)
	}
	NodeAddrs(cache, "", "gpu01", func(string) []string { return []string{"10.0.0.1"} }, time.Now())
	files, _ := filepath.Glob(filepath.Join(cache, "*", "*"))
	top, _ := filepath.Glob(filepath.Join(cache, "addr-*"))
	for _, f := range append(append(files, top...), p) {
		fi, err := os.Lstat(f)
		if err != nil || fi.IsDir() {
			continue
		}
		if fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s has mode %04o: readable by others", f, fi.Mode().Perm())
		}
		if st := fi.Sys().(*syscall.Stat_t); strings.Contains(f, "job-7") && st.Uid != 65534 {
			t.Errorf("%s owned by %d, want the job's user", f, st.Uid)
		}
	}
	// address cache files: a hash of the name, not the name, and bounded
	for i := 0; i < 2*maxAddrFiles; i++ {
		NodeAddrs(cache, "", fmt.Sprintf("evil-%d", i), func(string) []string { return nil }, time.Now())
	}
	if n, _ := filepath.Glob(filepath.Join(cache, "addr-*")); len(n) > maxAddrFiles {
		t.Errorf("%d address cache files, want at most %d", len(n), maxAddrFiles)
	}
	if n, _ := filepath.Glob(filepath.Join(cache, "*evil*")); len(n) > 0 {
		t.Errorf("a user-chosen host name in a root-written file name: %v", n)
	}
}

// The epilog removes what is not a record of this job's nodes (a bogus
// record once kept a user-owned directory in /run forever), refuses a
// handoff directory of more than maxHandoffEntries entries and removes it,
// and with no node name bounds all records together by drain_timeout.
func TestJobEpilogBounds(t *testing.T) {
	needRoot(t)
	dir := sharedDir(t)
	bin, _ := fakeTrainrun(t, dir, "sleep 300")
	cache := filepath.Join(dir, "cache")
	c := &Config{CacheDir: cache, Trainrun: bin, DrainTimeout: time.Second}

	t.Run("bogus records", func(t *testing.T) {
		t.Setenv("SLURMD_NODENAME", "n1")
		t.Setenv("SLURM_JOB_NODELIST", "n[1-2]")
		hdir, err := prepareJobDir(t, cache, 21, nobody, nobody)
		if err != nil {
			t.Fatal(err)
		}
		putRecord(t, hdir, "drain-bogus.json", checkpoint.DrainHandoff{Version: 1, JobID: 21, Node: "bogus", LocalDir: "/l", CkptDir: "/s"})
		putRecord(t, hdir, "junk", "x")
		JobEpilog(c, 21, nobody, nobody, nil)
		if _, err := os.Stat(JobDir(cache, 21)); !os.IsNotExist(err) {
			t.Errorf("the job directory is still there: %v", err)
		}
	})
	t.Run("too many entries", func(t *testing.T) {
		t.Setenv("SLURMD_NODENAME", "n1")
		hdir, err := prepareJobDir(t, cache, 22, nobody, nobody)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i <= maxHandoffEntries; i++ {
			os.WriteFile(filepath.Join(hdir, fmt.Sprintf("f%d", i)), nil, 0o600)
		}
		var lines []string
		err = JobEpilog(c, 22, nobody, nobody, func(s string) { lines = append(lines, s) })
		if err == nil || !strings.Contains(strings.Join(lines, "\n"), "more than 1024 entries") {
			t.Errorf("err %v, lines %q", err, lines)
		}
		if _, err := os.Stat(JobDir(cache, 22)); !os.IsNotExist(err) {
			t.Errorf("the job directory is still there: %v", err)
		}
	})
	t.Run("no node name: one bound for all", func(t *testing.T) {
		t.Setenv("SLURMD_NODENAME", "")
		hdir, err := prepareJobDir(t, cache, 23, nobody, nobody)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []string{"n1", "n2", "n3", "n4"} {
			putRecord(t, hdir, "drain-"+n+".json", checkpoint.DrainHandoff{Version: 1, JobID: 23, Node: n, LocalDir: "/l/" + n, CkptDir: "/s"})
		}
		var lines []string
		t0 := time.Now()
		JobEpilog(c, 23, nobody, nobody, func(s string) { lines = append(lines, s) })
		// four hung drains with a 1 s bound: about 1 s, not 4 (nor 4 × 5 min)
		if took := time.Since(t0); took > 3500*time.Millisecond {
			t.Errorf("4 records took %s with drain_timeout=1s", took)
		}
		if !strings.Contains(strings.Join(lines, "\n"), "bound of 1s for all records is spent") {
			t.Errorf("lines %q", lines)
		}
	})
}

// JobPartition trusts only root's record in root's job directory.
func TestJobPartition(t *testing.T) {
	dir, _ := worldDir(t)
	cache := filepath.Join(dir, "cache")
	if _, ok := JobPartition(cache, 31); ok {
		t.Error("a partition without a record")
	}
	if _, err := prepareJobDir(t, cache, 31, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	rec := filepath.Join(JobDir(cache, 31), "partition")
	write(t, rec, "low\n", 0o644)
	if p, ok := JobPartition(cache, 31); !ok || p != "low" {
		t.Errorf("JobPartition = %q, %v; want low", p, ok)
	}
	os.Lchown(rec, nobody, nobody) // a record the user could have written
	if p, ok := JobPartition(cache, 31); ok {
		t.Errorf("a user-owned record trusted: %q", p)
	}
	os.Remove(rec)
	os.Symlink(filepath.Join(dir, "elsewhere"), rec)
	write(t, filepath.Join(dir, "elsewhere"), "high", 0o644)
	if p, ok := JobPartition(cache, 31); ok {
		t.Errorf("a symbolic link trusted: %q", p)
	}
}

// MegatronLayout's products cannot wrap: 2^16·2^16·2^16·2^16 = 2^64 ≡ 0.
func TestMegatronLayoutOverflow(t *testing.T) {
	big := 1 << 16
	if _, err := MegatronLayout(plan.Layout{TP: big, CP: big, DP: big, PP: big}, 0); err == nil {
		t.Error("a layout whose product wraps to 0 matched a world of 0")
	}
	if l, err := MegatronLayout(plan.Layout{TP: 8, PP: 2, DP: 4, EP: 2}, 128); err != nil || l.DP != 8 {
		t.Errorf("dp per expert group: %+v, %v", l, err)
	}
}
