package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/trainrun/trainrun/checkpoint"
	"github.com/trainrun/trainrun/checkpoint/checkpointtest"
	"github.com/trainrun/trainrun/plan"
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
	if _, err := st.Commit(t.Context(), "step-5", 4); err != nil {
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

// tieredLaunch is writeTestLaunch with --ckpt-local-dir DIR/local/%n and a
// store: n1 holds ranks 0 and 1.
func tieredLaunch(t *testing.T) (launch, local, store string) {
	t.Helper()
	dir := t.TempDir()
	a := &allocation{JobID: "7", Nodes: []string{"n1", "n2"}, TasksPerNode: 2, GPUsPerNode: 2}
	l := plan.Layout{TP: 2, PP: 1, VPP: 1, CP: 1, EP: 1, DP: 2, MicroBatch: 1, GradAccum: 1, Recompute: "none"}
	slots, err := blockPlacement(a, l, map[string][]int{"n1": {0, 1}, "n2": {2, 3}})
	if err != nil {
		t.Fatal(err)
	}
	store = filepath.Join(dir, "store")
	if err := os.MkdirAll(store, 0o755); err != nil {
		t.Fatal(err)
	}
	renv := runRankEnv(a, slots, envInputs{Layout: l, MasterAddr: "127.0.0.1", MasterPort: 29999, CkptSignal: "USR2", CkptDir: store})
	launch = filepath.Join(dir, "launch")
	c := launchCommon{JobID: "7", World: 4, Signal: "USR2", LocalDir: filepath.Join(dir, "local", "%n"), CkptDir: store}
	if err := writeLaunchDir(launch, c, slots, renv); err != nil {
		t.Fatal(err)
	}
	return launch, filepath.Join(dir, "local", "n1"), store
}

// Local rank 0's shim leaves the epilog a drain record in
// TRAINRUN_HANDOFF_DIR while it runs (the trainer copies it), removes it
// once the node's saves are drained, and keeps it when a save is left
// (here rank 1 of n1 never marks step-6 done); without the variable it
// writes nothing.
func TestExecTaskDrainHandoff(t *testing.T) {
	defer func(w time.Duration) { drainFinishWait = w }(drainFinishWait)
	drainFinishWait = 300 * time.Millisecond
	for _, tc := range []struct {
		name    string
		handoff bool
		ranks   string // the ranks of n1 that mark the save done
		keep    bool   // the record stays after the shim exits
	}{
		{"drained: record removed", true, "0 1", false},
		{"left: record kept", true, "0", true},
		{"no TRAINRUN_HANDOFF_DIR", false, "0 1", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			launch, local, store := tieredLaunch(t)
			hdir := t.TempDir()
			seen := filepath.Join(t.TempDir(), "seen.json")
			rec := filepath.Join(hdir, "drain-n1.json")
			script := fmt.Sprintf(`cp %s %s 2>/dev/null
d="$TRAINRUN_CKPT_LOCAL_DIR/step-6"; mkdir -p "$d/.trainrun"; echo w > "$d/w.bin"
for r in %s; do touch "$d/.trainrun/done.$r"; done`, rec, seen, tc.ranks)
			vars := map[string]string{"SLURM_PROCID": "0", "SLURMD_NODENAME": "n1", "SLURM_RESTART_COUNT": "2"}
			if tc.handoff {
				vars["TRAINRUN_HANDOFF_DIR"] = hdir
			}
			env, _, se := cli{vars: vars}.env()
			if err := runExecTask(context.Background(), env, []string{"--launch", launch, "--", "sh", "-c", script}); err != nil {
				t.Fatalf("exec-task: %v\n%s", err, se.String())
			}
			b, err := os.ReadFile(seen)
			if !tc.handoff {
				if err == nil {
					t.Errorf("a record was written without TRAINRUN_HANDOFF_DIR: %s", b)
				}
				if ents, _ := os.ReadDir(hdir); len(ents) != 0 {
					t.Errorf("handoff dir holds %d entries", len(ents))
				}
				return
			}
			if err != nil {
				t.Fatalf("the trainer saw no record %s while the shim ran: %v\n%s", rec, err, se.String())
			}
			var got checkpoint.DrainHandoff
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatal(err)
			}
			want := checkpoint.DrainHandoff{Version: 1, JobID: 7, Restart: 2, Node: "n1", LocalDir: local, CkptDir: store, Ranks: []int{0, 1}}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("record %+v, want %+v", got, want)
			}
			if _, err := checkpoint.ReadHandoff(rec); tc.keep && err != nil {
				t.Errorf("record not kept with step-6 left undrained: %v\n%s", err, se.String())
			} else if !tc.keep && err == nil {
				t.Errorf("record kept although everything was drained\n%s", se.String())
			}
			if tc.keep && !strings.Contains(se.String(), "the job epilog drains what is marked done (record "+rec+")") {
				t.Errorf("stderr does not point at the epilog:\n%s", se.String())
			}
			if ents, _ := filepath.Glob(filepath.Join(hdir, ".tmp-*")); len(ents) != 0 {
				t.Errorf("temporary files left: %q", ents)
			}
		})
	}
}
