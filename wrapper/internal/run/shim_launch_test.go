package run

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trainrun/trainrun/internal/slurm"
	"github.com/trainrun/trainrun/plan"
	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
	"github.com/trainrun/trainrun/wrapper/internal/launch"
	"github.com/trainrun/trainrun/wrapper/internal/shim"
)

// writeTestLaunch writes a launch directory for 2 nodes × 2 GPUs, tp=2.
func writeTestLaunch(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	a := &slurm.Allocation{JobID: "7", Nodes: []string{"n1", "n2"}, TasksPerNode: 2, GPUsPerNode: 2}
	l := plan.Layout{TP: 2, PP: 1, VPP: 1, CP: 1, EP: 1, DP: 2, MicroBatch: 1, GradAccum: 1, Recompute: "none"}
	slots, err := blockPlacement(a, l, map[string][]int{"n1": {0, 1}, "n2": {2, 3}})
	if err != nil {
		t.Fatal(err)
	}
	renv := runRankEnv(a, slots, envInputs{Layout: l, MasterAddr: "127.0.0.1", MasterPort: 29999, CkptSignal: "USR2", CkptDir: dir})
	if err := writeLaunchDir(dir, launch.Common{JobID: "7", World: 4, Signal: "USR2"}, slots, renv); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestExecTask(t *testing.T) {
	dir := writeTestLaunch(t)
	out := filepath.Join(t.TempDir(), "out")
	report := `echo "$RANK $LOCAL_RANK $WORLD_SIZE $NODE_RANK $CUDA_VISIBLE_DEVICES $TRAINRUN_TP $MASTER_PORT" > ` + out
	tests := []struct {
		name   string
		env    map[string]string
		argv   []string
		code   int
		want   string // file content
		stderr string
	}{
		{name: "rank 3 on n2 gets GPU 3 as device 1", env: map[string]string{"SLURM_PROCID": "3", "SLURMD_NODENAME": "n2", "CUDA_VISIBLE_DEVICES": "2,3", "SLURM_STEP_GPUS": "2,3"},
			argv: []string{"sh", "-c", report}, want: "3 1 4 1 2,3 2 29999\n"},
		{name: "cgroup-renumbered devices", env: map[string]string{"SLURM_PROCID": "2", "SLURMD_NODENAME": "n2", "CUDA_VISIBLE_DEVICES": "0,1", "SLURM_STEP_GPUS": "2,3"},
			argv: []string{"sh", "-c", report}, want: "2 0 4 1 0,1 2 29999\n"},
		{name: "exit code passes through", env: map[string]string{"SLURM_PROCID": "0", "SLURMD_NODENAME": "n1"}, argv: []string{"sh", "-c", "exit 3"}, code: 3, stderr: "rank 0 on n1 (GPU 0): sh exited with 3"},
		{name: "command not found", env: map[string]string{"SLURM_PROCID": "0", "SLURMD_NODENAME": "n1"}, argv: []string{"no-such-trainer-xyz"}, code: exitcode.NotFound, stderr: `command "no-such-trainer-xyz" not found in PATH=`},
		{name: "missing path", env: map[string]string{"SLURM_PROCID": "0", "SLURMD_NODENAME": "n1"}, argv: []string{"/no/such/python"}, code: exitcode.NotFound, stderr: `"/no/such/python" not found`},
		{name: "task on the wrong node", env: map[string]string{"SLURM_PROCID": "3", "SLURMD_NODENAME": "n1"}, argv: []string{"true"}, code: exitcode.Slurm, stderr: ""},
		{name: "GPU not held", env: map[string]string{"SLURM_PROCID": "3", "SLURMD_NODENAME": "n2", "CUDA_VISIBLE_DEVICES": "0,1", "SLURM_STEP_GPUS": "0,1"}, argv: []string{"true"}, code: exitcode.Slurm},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			os.Remove(out)
			var se bytes.Buffer
			vars := tc.env
			env := shim.Env{Getenv: func(k string) string { return vars[k] }, Stdout: io.Discard, Stderr: &se}
			err := shim.Run(context.Background(), env, append([]string{"--launch", dir, "--"}, tc.argv...))
			if got := exitcode.Of(err); err != nil && got != tc.code || err == nil && tc.code != 0 {
				t.Fatalf("exit %d (%v), want %d; stderr %s", got, err, tc.code, se.String())
			}
			if tc.stderr != "" && !strings.Contains(se.String(), tc.stderr) {
				t.Errorf("stderr %q does not contain %q", se.String(), tc.stderr)
			}
			if tc.want != "" {
				b, _ := os.ReadFile(out)
				if string(b) != tc.want {
					t.Errorf("task saw %q, want %q", b, tc.want)
				}
			}
		})
	}
}
