package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"syscall"
	"testing"
)

func TestDiskCause(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{errors.New("other"), ""},
		{&fs.PathError{Op: "write", Path: "/x", Err: syscall.ENOSPC}, DiskFull},
		{fmt.Errorf("commit step-2: %w", &fs.PathError{Op: "write", Path: "/x", Err: syscall.EDQUOT}), DiskQuota},
		{fmt.Errorf("a: %w", fmt.Errorf("b: %w", syscall.EIO)), DiskIOError},
		{&fs.PathError{Op: "open", Path: "/x", Err: syscall.ENOENT}, ""},
	} {
		if got := DiskCause(c.err); got != c.want {
			t.Errorf("DiskCause(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}

func TestParseFailedMarker(t *testing.T) {
	for _, c := range []struct {
		name  string
		rank  int
		cause string
		ok    bool
	}{
		{"failed.3.disk-full", 3, DiskFull, true},
		{"failed.0.quota", 0, DiskQuota, true},
		{"failed.12.weird", 12, DiskIOError, true}, // an unknown cause still fails the save
		{"failed.12", 12, DiskIOError, true},
		{"failed.01.disk-full", 0, "", false}, // not canonical: never a second rank 1
		{"failed.-1.disk-full", 0, "", false},
		{"done.3", 0, "", false},
	} {
		r, cause, ok := parseFailedMarker(c.name)
		if ok != c.ok || ok && (r != c.rank || cause != c.cause) {
			t.Errorf("parseFailedMarker(%q) = %d %q %v, want %d %q %v", c.name, r, cause, ok, c.rank, c.cause, c.ok)
		}
	}
}

// markFailed does what the trainer client's save_failed does: remove the
// rank's partial files, then create its failed marker.
func markFailed(t *testing.T, dir string, rank int, cause string) {
	t.Helper()
	must(t, os.MkdirAll(ckptMeta(dir), 0o755))
	must(t, os.WriteFile(FailedMarkerPath(dir, rank, cause), nil, 0o644))
}

// A save that fails on one rank of three is discarded once every rank has
// marked it done or failed; the previous latest stays latest and verifies.
func TestDiscardFailedKeepsLatest(t *testing.T) {
	s := newStore(t)
	saveCkpt(t, s, "step-10", 3, 2)
	if _, _, err := s.CommitComplete(t.Context(), 3); err != nil {
		t.Fatal(err)
	}
	dir := s.tagDir("step-20")
	saveRanks(t, dir, "step-20", []int{0}, 2) // rank 0 saved; rank 1 fails; rank 2 still writes
	markFailed(t, dir, 1, DiskFull)
	got, err := s.DiscardFailed(3)
	must(t, err)
	if len(got) != 0 || !exists(dir) {
		t.Fatalf("discarded %v while rank 2 may still write into %s", got, dir)
	}
	saveRanks(t, dir, "step-20", []int{2}, 2)
	got, err = s.DiscardFailed(3)
	must(t, err)
	if len(got) != 1 || got[0].Tag != "step-20" || got[0].Cause != DiskFull || fmt.Sprint(got[0].Ranks) != "[1]" || got[0].Bytes == 0 {
		t.Fatalf("DiscardFailed = %+v, want step-20 disk-full rank 1 with its bytes", got)
	}
	if exists(dir) {
		t.Errorf("%s is still there: its bytes are what filled the disk", dir)
	}
	if tag, changed, err := s.CommitComplete(t.Context(), 3); err != nil || changed || tag != "step-10" {
		t.Errorf("CommitComplete after the discard = %q %v %v, want step-10 unchanged", tag, changed, err)
	}
	r, err := s.Latest(t.Context(), Checksums)
	if err != nil || r.Tag != "step-10" {
		t.Fatalf("Latest = %q %v, want step-10", r.Tag, err)
	}
	if _, err := s.Verify(t.Context(), "step-10", Checksums); err != nil {
		t.Errorf("step-10 no longer verifies: %v", err)
	}
	if ents, _ := os.ReadDir(s.trashRoot()); len(ents) != 0 {
		t.Errorf("the trash keeps %d entries: the space is not freed", len(ents))
	}
}

// A committed checkpoint with a stray failed marker is never discarded.
func TestDiscardFailedNeverCommitted(t *testing.T) {
	s := newStore(t)
	saveCkpt(t, s, "step-10", 2, 1)
	_, _, err := s.CommitComplete(t.Context(), 2)
	must(t, err)
	markFailed(t, s.tagDir("step-10"), 1, DiskFull)
	got, err := s.DiscardFailed(2)
	must(t, err)
	if len(got) != 0 || !exists(s.tagDir("step-10")) {
		t.Fatalf("discarded the committed step-10: %v", got)
	}
	if _, err := s.DiscardFailed(0); err == nil || !strings.Contains(err.Error(), "world size 0") {
		t.Errorf("DiscardFailed(0) = %v, want an error naming the world size", err)
	}
}

// The commit's own writes failing (manifest, pointer) on a full disk: the
// checkpoint is not committed, the previous latest stays and verifies, and a
// retry once space is back commits it.
func TestCommitDiskFaultKeepsLatest(t *testing.T) {
	for _, at := range []string{"commit:manifest", "pointer"} {
		for _, errno := range []syscall.Errno{syscall.ENOSPC, syscall.EDQUOT, syscall.EIO} {
			t.Run(at+"/"+errno.Error(), func(t *testing.T) {
				s := newStore(t)
				saveCkpt(t, s, "step-10", 2, 2)
				_, _, err := s.CommitComplete(t.Context(), 2)
				must(t, err)
				saveCkpt(t, s, "step-20", 2, 2)
				full := true
				s.fault = func(what string) error {
					if full && what == at {
						return errno
					}
					return nil
				}
				tag, changed, err := s.CommitComplete(t.Context(), 2)
				if err == nil || DiskCause(err) == "" {
					t.Fatalf("CommitComplete on a failing disk = %q %v %v, want a disk error", tag, changed, err)
				}
				if tag != "step-10" || changed {
					t.Errorf("CommitComplete = %q changed %v, want step-10 unchanged", tag, changed)
				}
				if p, _ := s.pointer(); p != "step-10" {
					t.Errorf("latest pointer %q, want step-10", p)
				}
				r, err := s.Latest(t.Context(), Checksums)
				if at == "commit:manifest" && (err != nil || r.Tag != "step-10") {
					// (with only the pointer write failing, step-20 is committed
					// and the pointer repaired by the next commit: Latest already
					// finds it by its manifest)
					t.Errorf("Latest = %q %v, want step-10", r.Tag, err)
				}
				if _, err := s.Verify(t.Context(), "step-10", Checksums); err != nil {
					t.Errorf("step-10 no longer verifies: %v", err)
				}
				if ents, _ := os.ReadDir(s.tagDir("step-20")); len(ents) == 0 {
					t.Fatal("step-20's files are gone: the retry has nothing to commit")
				}
				full = false
				if tag, changed, err := s.CommitComplete(t.Context(), 2); err != nil || tag != "step-20" || !changed {
					t.Errorf("retry = %q %v %v, want step-20 committed", tag, changed, err)
				}
				if _, err := s.Verify(t.Context(), "step-20", Checksums); err != nil {
					t.Errorf("step-20 after the retry: %v", err)
				}
			})
		}
	}
}

func TestMountOf(t *testing.T) {
	mi := []byte(`22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
30 22 0:26 / /scratch rw,nosuid - lustre 10.0.0.1@o2ib:/fs rw
31 30 0:27 / /scratch/ckpt\040dir rw - tmpfs tmpfs rw,size=8192k
32 22 0:28 / /scratchy rw - nfs4 srv:/x rw
`)
	for _, c := range []struct{ p, mount, typ string }{
		{"/home/u/ckpt", "/", "ext4"},
		{"/scratch/u", "/scratch", "lustre"},
		{"/scratch", "/scratch", "lustre"},
		{"/scratch/ckpt dir/run1", "/scratch/ckpt dir", "tmpfs"},
		{"/scratchy/a", "/scratchy", "nfs4"},
	} {
		if m, typ := mountOf(mi, c.p); m != c.mount || typ != c.typ {
			t.Errorf("mountOf(%s) = %s %s, want %s %s", c.p, m, typ, c.mount, c.typ)
		}
	}
}

func TestDiskMessage(t *testing.T) {
	dir := t.TempDir()
	msg := DiskMessage(dir, "step-20", DiskFull, "step-10")
	sp, err := SpaceOf(dir)
	must(t, err)
	for _, want := range []string{"checkpoint step-20 was not saved: file system " + sp.Mount + " (" + sp.FSType + ")", "free of", "is full",
		"the latest committed checkpoint stays step-10", "next save retries", "free space on " + sp.Mount} {
		if !strings.Contains(msg, want) {
			t.Errorf("message lacks %q:\n%s", want, msg)
		}
	}
	if sp.Total == 0 || sp.Mount == "" {
		t.Errorf("SpaceOf(%s) = %+v", dir, sp)
	}
	if m := DiskMessage(dir, "step-20", DiskQuota, ""); !strings.Contains(m, "quota") || !strings.Contains(m, "no committed checkpoint yet") {
		t.Errorf("quota message: %s", m)
	}
}

func TestHistoryFailedNodes(t *testing.T) {
	s := newStore(t)
	h := s.History()
	must(t, h.Append(Event{Type: "start", JobID: "7", Restart: 0}))
	must(t, h.Append(Event{Type: "end", JobID: "7", Restart: 0, Cause: CauseNodeFail,
		FailedNodes: []FailedNode{{Node: "n2", Cause: CauseNodeFail, Detail: "ranks 2-3 never reported an exit"}}}))
	incs, err := h.Load()
	must(t, err)
	if len(incs) != 1 || len(incs[0].FailedNodes) != 1 || incs[0].FailedNodes[0].Node != "n2" || incs[0].FailedNodes[0].Detail == "" {
		t.Fatalf("Load = %+v", incs)
	}
	if n := FailuresWithoutProgress([]Incarnation{{Cause: CauseDisk, Progress: -1}, {Cause: CauseHang, Progress: -1}}); n != 2 {
		t.Errorf("FailuresWithoutProgress of a disk and a hang failure = %d, want 2", n)
	}
}

// A failed save that DiscardFailed never saw answered by every rank (one
// crashed) is discarded by the next incarnation's Recover.
func TestRecoverDiscardsFailedSave(t *testing.T) {
	s := newStore(t)
	saveCkpt(t, s, "step-10", 2, 1)
	_, _, err := s.CommitComplete(t.Context(), 2)
	must(t, err)
	markFailed(t, s.tagDir("step-20"), 1, DiskQuota)
	rep, err := s.Recover(t.Context(), 2, false)
	must(t, err)
	if fmt.Sprint(rep.Discarded) != "[step-20]" || exists(s.tagDir("step-20")) {
		t.Errorf("Recover = %+v; step-20 still there: %v", rep, exists(s.tagDir("step-20")))
	}
	if r, err := s.Latest(t.Context(), Checksums); err != nil || r.Tag != "step-10" {
		t.Errorf("Latest = %q %v", r.Tag, err)
	}
}
