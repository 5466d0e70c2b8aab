package checkpoint

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// The crash-consistency test runs the whole write path (a trainer saving in
// place or to node-local storage, two nodes' drains, commit, prune) in a
// child process (this test binary re-executed as TestHelperProcess) and
// SIGKILLs it: half the time at a random hook between two durable steps,
// half the time after a random delay. After every kill it opens the store
// afresh and checks the invariants; the next child restarts the work where it
// was cut.

var crashKills = flag.Int("crash-kills", 0, "kills in TestCrashConsistency (default 200; 30 with -short)")

const (
	crashWorld = 4 // ranks 0,1 on node a, 2,3 on node b
	crashFiles = 2 // files per rank
	crashNew   = 3 // new checkpoints per child run
)

var crashRetention = Retention{KeepLast: 2, KeepEvery: 200}

var crashCompress = CompressOptions{Workers: 2, MinBytes: 1, Chunk: 1500}

func TestCrashConsistency(t *testing.T) {
	kills := *crashKills
	if kills == 0 {
		kills = 200
		if testing.Short() {
			kills = 30
		}
	}
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("TRAINRUN_CRASH_SEED"); v != "" {
		seed, _ = strconv.ParseUint(v, 10, 64)
	}
	t.Logf("seed %d (rerun with TRAINRUN_CRASH_SEED=%d), %d kills", seed, seed, kills)
	rng := rand.New(rand.NewPCG(seed, 1))
	store, local := t.TempDir(), t.TempDir()
	seen := map[string]bool{} // committed at some check
	var maxSeen int64 = -1
	byHook, byTime := 0, 0
	for k := 0; k < kills; k++ {
		killAt := 0
		var delay time.Duration
		if k%2 == 0 {
			killAt = 1 + rng.IntN(100)
		} else {
			delay = time.Duration(rng.IntN(70_000)) * time.Microsecond
		}
		killed, out := runCrashChild(t, store, local, killAt, delay)
		if killed && killAt > 0 {
			byHook++
		} else if killed {
			byTime++
		}
		if err := checkCrashInvariants(store, seen, &maxSeen); err != nil {
			t.Fatalf("after kill %d (at hook %d / after %v): %v\nchild output:\n%s", k, killAt, delay, err, out)
		}
	}
	// A last, uninterrupted run completes whatever was cut short.
	killed, out := runCrashChild(t, store, local, 0, 0) // the child prints its output only on failure
	if killed {
		t.Fatalf("final run was killed:\n%s", out)
	}
	must(t, checkCrashInvariants(store, seen, &maxSeen))
	s, err := Open(store)
	must(t, err)
	list, err := s.List()
	must(t, err)
	for _, in := range list {
		if in.State != Committed {
			t.Errorf("after the final run %s is %s, want everything committed", in.Tag, in.State)
		}
		if in.Note != "" {
			t.Errorf("after the final run %s: %s (want every checkpoint sealed)", in.Tag, in.Note)
		}
	}
	compressed := 0
	for _, in := range list {
		if in.Stored < in.Bytes {
			compressed++
		}
	}
	if compressed == 0 {
		t.Errorf("no retained checkpoint is stored compressed: the background pass was not exercised")
	}
	r, err := s.Latest(t.Context(), Checksums)
	must(t, err)
	// The background pass leaves the newest raw; a drain in mode always
	// (every other drained checkpoint here) stores it compressed by design.
	st := r.Manifest.Step
	drainedCompressed := (st/10)%2 == 0 && (st/20)%2 == 1
	if r.Manifest.StoredBytes() != r.Manifest.Bytes && !drainedCompressed {
		t.Errorf("latest %s is stored compressed; the newest must stay raw unless its drain compressed it", r.Tag)
	}
	if r.Manifest.Step != maxSeen {
		t.Errorf("final latest %s, want step %d", r.Tag, maxSeen)
	}
	t.Logf("%d kills at durable steps, %d after random delays (the rest found the child done); reached %s with %d checkpoints kept",
		byHook, byTime, r.Tag, len(list))
	if byHook < kills/4 || byTime < kills/8 {
		t.Errorf("too few kills landed (%d at hooks, %d timed): the test exercised little", byHook, byTime)
	}
}

// runCrashChild runs one child; killed says whether SIGKILL ended it.
func runCrashChild(t *testing.T, store, local string, killAt int, delay time.Duration) (bool, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
	cmd.Env = append(os.Environ(), "TRAINRUN_CKPT_CRASH_HELPER=1", "CRASH_STORE="+store, "CRASH_LOCAL="+local,
		"CRASH_KILL_AT="+strconv.Itoa(killAt))
	var out safeBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	must(t, cmd.Start())
	if killAt == 0 && delay > 0 {
		timer := time.AfterFunc(delay, func() { cmd.Process.Signal(syscall.SIGKILL) })
		defer timer.Stop()
	}
	err := cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			return true, out.String()
		}
	}
	if err != nil {
		t.Fatalf("child failed (not killed): %v\n%s", err, out.String())
	}
	return false, out.String()
}

// checkCrashInvariants opens the store afresh and checks what a restarting
// job relies on.
func checkCrashInvariants(dir string, seen map[string]bool, maxSeen *int64) error {
	s, err := OpenWith(dir, Options{Workers: 2})
	if err != nil {
		return err
	}
	ms, bad, err := s.committed()
	if err != nil {
		return err
	}
	if len(bad) > 0 {
		return fmt.Errorf("unreadable manifests in %v", bad)
	}
	// Every committed checkpoint verifies and holds exactly what the trainer wrote.
	present := map[string]bool{}
	for _, m := range ms {
		present[m.Tag] = true
		if _, err := s.Verify(context.Background(), m.Tag, Checksums); err != nil {
			return fmt.Errorf("committed checkpoint does not verify: %w", err)
		}
		if err := checkContent(s.tagDir(m.Tag), m.Tag, crashWorld, crashFiles); err != nil {
			return err
		}
	}
	// No committed checkpoint is lost, except those the retention rule drops.
	for tag := range seen {
		if present[tag] {
			continue
		}
		all := append([]Manifest{{Tag: tag, Step: StepOf(tag)}}, ms...)
		sort.Slice(all, func(i, j int) bool { return olderManifest(all[i], all[j]) })
		if keepSet(all, crashRetention)[tag] {
			return fmt.Errorf("committed checkpoint %s is gone, and retention %+v would have kept it", tag, crashRetention)
		}
	}
	// The pointer names a committed checkpoint, never one in progress.
	p, err := s.pointer()
	if err != nil {
		return err
	}
	if p != "" && !present[p] {
		return fmt.Errorf(".trainrun/latest names %q, which is not committed", p)
	}
	r, err := s.Latest(context.Background(), Checksums)
	if len(seen) > 0 || len(ms) > 0 {
		if err != nil {
			return fmt.Errorf("Latest: %w", err)
		}
		if len(r.Skipped) > 0 {
			return fmt.Errorf("Latest skipped %v", r.Skipped)
		}
		if r.Manifest.Step < *maxSeen {
			return fmt.Errorf("Latest %s went back from step %d", r.Tag, *maxSeen)
		}
		*maxSeen = r.Manifest.Step
	}
	for _, m := range ms {
		seen[m.Tag] = true
	}
	return nil
}

// TestHelperProcess is the child of TestCrashConsistency: the write path of a
// job, resumed where the previous child died. It dies by SIGKILL at hook
// number CRASH_KILL_AT (0: never).
func TestHelperProcess(t *testing.T) {
	if os.Getenv("TRAINRUN_CKPT_CRASH_HELPER") != "1" {
		t.Skip("the child process of TestCrashConsistency")
	}
	killAt, _ := strconv.Atoi(os.Getenv("CRASH_KILL_AT"))
	local := os.Getenv("CRASH_LOCAL")
	s, err := OpenWith(os.Getenv("CRASH_STORE"), Options{ChunkBytes: 4096, Workers: 3})
	must(t, err)
	var n atomic.Int64 // the drain's workers pass hooks concurrently
	s.hook = func(string) {
		if n.Add(1) == int64(killAt) {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
	}
	trainerSaved := func() { s.step("trainer:rank-saved") }
	// Some in-place checkpoints are committed without hashing and sealed after.
	sd, err := OpenWith(s.Dir(), Options{ChunkBytes: 4096, Workers: 3, DeferHash: true})
	must(t, err)
	sd.hook = s.hook
	seal := func() {
		ms, _, err := s.committed()
		must(t, err)
		for _, m := range ms {
			if !m.Sealed() {
				if _, err := sd.Seal(context.Background(), m.Tag); err != nil {
					t.Fatal(err)
				}
			}
		}
	}

	// A new incarnation: finish complete checkpoints, drop incomplete ones.
	if _, err := s.Recover(t.Context(), crashWorld, false); err != nil {
		t.Fatal(err)
	}
	seal()
	// Resume the newest checkpoint anyone started, or start a new one.
	step := int64(0)
	for _, d := range []string{s.Dir(), s.stagingRoot(), filepath.Join(local, "a"), filepath.Join(local, "b")} {
		ents, _ := os.ReadDir(d)
		for _, e := range ents {
			if e.IsDir() && CheckTag(e.Name()) == nil {
				step = max(step, StepOf(e.Name()))
			}
		}
	}
	if step == 0 || exists(manifestPath(s.tagDir(tagOf(step)))) {
		step += 10
	}
	for made := 0; made < crashNew; made++ {
		tag := tagOf(step)
		if (step/10)%2 == 1 { // the trainer saves in place
			dir := s.tagDir(tag)
			for r := 0; r < crashWorld; r++ {
				if !exists(DoneMarkerPath(dir, r)) {
					saveRanks(t, dir, tag, []int{r}, crashFiles)
					trainerSaved()
				}
			}
		} else { // to node-local storage, then each node drains
			for node, ranks := range map[string][]int{"a": {0, 1}, "b": {2, 3}} {
				src := filepath.Join(local, node, tag)
				for _, r := range ranks {
					if !exists(DoneMarkerPath(src, r)) {
						saveRanks(t, src, tag, []int{r}, crashFiles)
						trainerSaved()
					}
				}
				// Every other drained checkpoint is compressed on the way.
				if err := s.SetCompressMode([]string{CompressNo, CompressAlways}[(step/20)%2]); err != nil {
					t.Fatal(err)
				}
				if _, err := Drain(context.Background(), src, s, tag, DrainOptions{Node: node, CompressMin: 1}); err != nil {
					t.Fatal(err)
				}
			}
		}
		committer := s
		if (step/10)%4 == 1 {
			committer = sd
		}
		if _, err := committer.Commit(t.Context(), tag, crashWorld); err != nil {
			t.Fatal(err)
		}
		seal()
		for _, node := range []string{"a", "b"} { // node-local copies are no longer needed
			os.RemoveAll(filepath.Join(local, node, tag))
		}
		if _, err := s.Prune(crashRetention); err != nil {
			t.Fatal(err)
		}
		// Retained older checkpoints are compressed (small codec chunks, so
		// that files have several), and now and then one is restored in
		// place, as a resume from it would.
		if _, err := s.CompressRetained(context.Background(), crashCompress); err != nil {
			t.Fatal(err)
		}
		if ms, _, _ := s.committed(); step%30 == 0 && len(ms) > 1 {
			if _, err := s.Restore(context.Background(), ms[0].Tag, "", 2); err != nil {
				t.Fatal(err)
			}
		}
		step += 10
	}
}

func tagOf(step int64) string { return fmt.Sprintf("step-%d", step) }
