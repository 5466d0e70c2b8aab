package shim

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/trainrun/trainrun/checkpoint"
	"github.com/trainrun/trainrun/checkpoint/checkpointtest"
	"github.com/trainrun/trainrun/internal/safefs/safefstest"
)

func TestExpandLocalDir(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"plain", "/dev/shm/ck", "/dev/shm/ck"},
		{"all", "/dev/shm/trainrun-%j/%n.%r", "/dev/shm/trainrun-77/gpu-a.2"},
		{"percent", "/x/100%%/%n", "/x/100%/gpu-a"},
		{"unknown kept", "/x/%q/%", "/x/%q/%"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := expandLocalDir(c.in, "gpu-a", "77", "2"); got != c.want {
				t.Errorf("expandLocalDir(%q) = %q, want %q", c.in, got, c.want)
			}
		})
	}
}

// saveLocal writes what one rank of the example trainer writes, in the local dir.
func saveLocal(t *testing.T, root, tag string, rank int, data string) {
	t.Helper()
	checkpointtest.SaveRank(t, filepath.Join(root, tag), rank, checkpointtest.File{Name: "rank" + strconv.Itoa(rank) + ".pt", Data: data})
}

// Two "nodes" of two ranks each save locally; each node's drainer carries its
// part into staging, the checkpoint becomes complete only when both did, and
// a commit puts all four ranks' files in the store. A stale tag from before
// the drainer started is removed; a save only some of the node's ranks
// finished is reported by finish, not drained.
func TestNodeDrainerTiered(t *testing.T) {
	dir := t.TempDir()
	store := filepath.Join(dir, "store")
	if err := os.MkdirAll(store, 0o755); err != nil {
		t.Fatal(err)
	}
	la, lb := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	saveLocal(t, la, "step-1", 0, "stale")
	old := time.Now().Add(-time.Hour)
	os.Chtimes(filepath.Join(la, "step-1"), old, old)
	var log bytes.Buffer
	da, err := startNodeDrainer(la, store, "a", []int{0, 1}, time.Now(), &log)
	if err != nil {
		t.Fatal(err)
	}
	db, err := startNodeDrainer(lb, store, "b", []int{2, 3}, time.Now(), &log)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(la, "step-1")); !os.IsNotExist(err) {
		t.Errorf("a stale local checkpoint of an earlier run survived the drainer's start: %v", err)
	}
	st, err := checkpoint.Open(store)
	if err != nil {
		t.Fatal(err)
	}
	saveLocal(t, la, "step-5", 0, "w0")
	saveLocal(t, la, "step-5", 1, "w1")
	saveLocal(t, lb, "step-5", 2, "w2")
	if left := da.finish(time.Second); len(left) != 0 {
		t.Fatalf("node a left %v undrained\n%s", left, log.String())
	}
	if ok, _ := st.Complete("step-5", 4); ok {
		t.Fatal("step-5 complete before node b's rank 3 saved")
	}
	if left := db.finish(300 * time.Millisecond); len(left) != 1 || left[0] != "step-5" {
		t.Fatalf("node b: undrained %v, want [step-5] (rank 3 never saved)", left)
	}
	// Rank 3 saves after all: a new drainer (the next pass) finishes the job.
	saveLocal(t, lb, "step-5", 3, "w3")
	db, _ = startNodeDrainer(lb, store, "b", []int{2, 3}, time.Now().Add(-time.Hour), &log)
	if left := db.finish(time.Second); len(left) != 0 {
		t.Fatalf("node b left %v\n%s", left, log.String())
	}
	if ok, err := st.Complete("step-5", 4); !ok || err != nil {
		t.Fatalf("step-5 not complete after both drains: %v", err)
	}
	if _, err := st.Commit("step-5", 4); err != nil {
		t.Fatal(err)
	}
	for r, want := range []string{"w0", "w1", "w2", "w3"} {
		b, err := os.ReadFile(filepath.Join(st.TagDir("step-5"), "rank"+string(rune('0'+r))+".pt"))
		if err != nil || string(b) != want {
			t.Errorf("rank %d in the store: %q %v, want %q", r, b, err, want)
		}
	}
	for _, l := range []string{la, lb} {
		if _, err := os.Stat(filepath.Join(l, "step-5")); !os.IsNotExist(err) {
			t.Errorf("the drained local copy in %s was not removed", l)
		}
	}
}

// Issue 12, finding 2: another local user pre-creates the predictable
// node-local directory (/dev/shm/trainrun-%j) and plants a checkpoint with
// every rank's marker. The drainer refuses the directory.
func TestSecPrecreatedLocalDirRefused(t *testing.T) {
	for _, how := range []string{"other uid", "world-writable", "symlink"} {
		t.Run(how, func(t *testing.T) {
			base := t.TempDir()
			store := filepath.Join(base, "store")
			os.Mkdir(store, 0o700)
			local := filepath.Join(base, "shm-trainrun-42")
			switch how {
			case "symlink":
				real := filepath.Join(base, "elsewhere")
				os.Mkdir(real, 0o700)
				os.Symlink(real, local)
			default:
				os.Mkdir(local, 0o700)
				os.Chmod(local, 0o777)
				if how == "other uid" {
					os.Chmod(local, 0o755)
					safefstest.AsNobody(t, local)
				}
			}
			var log bytes.Buffer
			d, err := startNodeDrainer(local, store, "n1", []int{0}, time.Now(), &log)
			if err == nil {
				d.finish(0)
				t.Fatalf("the drainer accepted a %s node-local directory", how)
			}
			if !strings.Contains(err.Error(), local) {
				t.Fatalf("error does not name the directory: %v", err)
			}
		})
	}
}
