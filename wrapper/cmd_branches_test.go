package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trainrun/trainrun/checkpoint"
	"github.com/trainrun/trainrun/checkpoint/checkpointtest"
)

// committedCheckpoint makes STORE/step-5, committed, for --from.
func committedCheckpoint(t *testing.T) string {
	t.Helper()
	store := filepath.Join(t.TempDir(), "ck")
	tag := filepath.Join(store, "step-5")
	checkpointtest.SaveRank(t, tag, 0, checkpointtest.File{Name: "rank-0.pt", Data: "weights"})
	st, err := checkpoint.Open(store)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Commit(t.Context(), "step-5", 1); err != nil {
		t.Fatal(err)
	}
	return tag
}

func TestBranchesSubmitsArrayThenMergeAfterIt(t *testing.T) {
	from := committedCheckpoint(t)
	dir := filepath.Join(t.TempDir(), "br")
	f := &fakeSlurm{}
	env, out, errb := sweepEnv(f)
	code := dispatch(context.Background(), env, []string{"branches", "--from", from, "--data", "a=/d/a,b=/d/b", "--data", "c=/d/c,x", "--time", "5m",
		"--gpus-per-node", "1", "--branches-dir", dir, "--weights", "1,2,1", "--format", "json",
		"--merge", "python3 merge.py --weights {weights} --out {out} {branches}", "--", "python3", "t.py", "--data", "{data}", "--tag={branch}"})
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	var j branchesJSON
	if err := json.Unmarshal(out.Bytes(), &j); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if j.JobID != "77" || j.MergeJobID != "77" || len(j.Branches) != 3 || j.Branches[2].Data != "/d/c,x" || j.From != from {
		t.Errorf("json %+v", j)
	}
	if len(f.calls) != 2 || !strings.Contains(f.calls[0], "--array=0-2 ") || !strings.Contains(f.calls[1], "--dependency=afterok:77 ") ||
		!strings.HasSuffix(f.calls[1], filepath.Join(dir, "merge.sbatch")) {
		t.Errorf("sbatch calls %q", f.calls)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "branches.sbatch"))
	for _, want := range []string{"run --name branch-b --job-dir " + dir + " --init-from=" + from, "-- python3 t.py --data /d/b --tag=b ;;", "TRAINRUN_SWEEP_DATA=/d/b"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("branches.sbatch lacks %q:\n%s", want, b)
		}
	}
	m, _ := os.ReadFile(filepath.Join(dir, "merge.sbatch"))
	for _, want := range []string{"B2=$(", " ckpt latest --ckpt-dir " + filepath.Join(dir, "runs", "branch-c", "checkpoints") + ")",
		"run --name merge --job-dir " + dir + " --fix tp=1 -- python3 merge.py --weights 1,2,1 --out '{ckpt_dir}/merged' \"$B0\" \"$B1\" \"$B2\"\n"} {
		if !strings.Contains(string(m), want) {
			t.Errorf("merge.sbatch lacks %q:\n%s", want, m)
		}
	}
}

func TestBranchesRefusesBadInput(t *testing.T) {
	from := committedCheckpoint(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--data", "a=x"}, "--from not given"},
		{[]string{"--from", filepath.Join(filepath.Dir(from), "step-9"), "--data", "a=x"}, "--init-from"},
		{[]string{"--from", from, "--data", "x"}, "want NAME=SPEC"},
		{[]string{"--from", from, "--data", "a=x,a=y"}, `branch "a" given twice`},
		{[]string{"--from", from, "--data", "a=x,b=y", "--weights", "1"}, "1 weights for 2 branches"},
		{[]string{"--from", from, "--data", "a=x", "--merge", "m.py"}, "needs {branches}"},
	} {
		env, _, errb := sweepEnv(&fakeSlurm{})
		args := append(append([]string{"branches", "--time", "5m", "--gpus-per-node", "1", "--dry-run"}, tc.args...), "--", "x")
		if code := dispatch(context.Background(), env, args); code == 0 || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%v: exit %d %q, want an error with %q", tc.args, code, errb, tc.want)
		}
	}
}
