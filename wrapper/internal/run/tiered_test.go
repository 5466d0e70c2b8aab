package run

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/trainrun/trainrun/checkpoint"
	"github.com/trainrun/trainrun/internal/slurm"
	"github.com/trainrun/trainrun/plan"
	"github.com/trainrun/trainrun/wrapper/internal/launch"
	"github.com/trainrun/trainrun/wrapper/internal/shim"
)

// tieredLaunch is writeTestLaunch with --ckpt-local-dir DIR/local/%n and a
// store: n1 holds ranks 0 and 1.
func tieredLaunch(t *testing.T) (launchDir, local, store string) {
	t.Helper()
	dir := t.TempDir()
	a := &slurm.Allocation{JobID: "7", Nodes: []string{"n1", "n2"}, TasksPerNode: 2, GPUsPerNode: 2}
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
	launchDir = filepath.Join(dir, "launch")
	c := launch.Common{JobID: "7", World: 4, Signal: "USR2", LocalDir: filepath.Join(dir, "local", "%n"), CkptDir: store}
	if err := writeLaunchDir(launchDir, c, slots, renv); err != nil {
		t.Fatal(err)
	}
	return launchDir, filepath.Join(dir, "local", "n1"), store
}

// Local rank 0's shim leaves the epilog a drain record in
// TRAINRUN_HANDOFF_DIR while it runs (the trainer copies it), removes it
// once the node's saves are drained, and keeps it when a save is left
// (here rank 1 of n1 never marks step-6 done); without the variable it
// writes nothing.
func TestExecTaskDrainHandoff(t *testing.T) {
	defer func(w time.Duration) { shim.DrainFinishWait = w }(shim.DrainFinishWait)
	shim.DrainFinishWait = 300 * time.Millisecond
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
			var se bytes.Buffer
			env := shim.Env{Getenv: func(k string) string { return vars[k] }, Stdout: io.Discard, Stderr: &se}
			if err := shim.Run(context.Background(), env, []string{"--launch", launch, "--", "sh", "-c", script}); err != nil {
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
