//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/trainrun/trainrun/checkpoint"
	"github.com/trainrun/trainrun/test/harness"
)

// TestSpankPlan: the plugin plans a step from --train-model and
// --train-batch (the harness's fake GPUs have no names: the policy's GPUType
// says what they are), every task gets the plan of `trainrun plan` for the
// same job and TRAINRUN_PLAN names a file holding its JSON; TRAINRUN_RESUME_DIR
// names the latest committed checkpoint of --train-ckpt's store, or is empty
// on a first start. On a cluster of its own, beside TestSpank.
func TestSpankPlan(t *testing.T) {
	t.Parallel()
	c := ownCluster(t)
	so, bin := buildPlugin(t), trainrun(t)
	ctx := context.Background()
	dir := t.TempDir()
	pol := filepath.Join(dir, "trainrun.conf")
	if err := os.WriteFile(pol, []byte("# the harness's GPUs are mknod'ed devices without names\nGPUType=h100-sxm\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(dir, "cache")
	// trainrun= is the helper that reads the store as the job's user for
	// TRAINRUN_RESUME_DIR (issue 12: slurmstepd does not read it as root)
	if err := c.SetPlugstack(ctx, []string{fmt.Sprintf("required %s policy=%s cache=%s trainrun=%s", so, pol, cache, bin)}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.SetPlugstack(context.Background(), nil); err != nil {
			t.Errorf("slurmd with the plugin loaded did not stop cleanly: %v", err)
		}
	})
	srun := func(t *testing.T, args ...string) (string, string, error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
		defer cancel()
		cmd := c.Command(ctx, "srun", append([]string{"--immediate=30"}, args...)...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		if err != nil {
			err = &harness.CmdError{Args: cmd.Args, Err: err, Stdout: stdout.String(), Stderr: stderr.String(), Logs: c.LogTail(20)}
		}
		return stdout.String(), stderr.String(), err
	}

	// What `trainrun plan` prints for the job the step is.
	planCmd := exec.Command(bin, "plan", "--model", "llama3-8b", "--gpu", "h100-sxm", "--gpus", "32", "--gpus-per-node", "8",
		"--seq-len", "4096", "--global-batch", "256", "--format", "json")
	wantJSON, err := planCmd.Output()
	if err != nil {
		t.Fatalf("trainrun plan: %v", err)
	}
	var want struct {
		Plan map[string]any `json:"plan"`
	}
	if err := json.Unmarshal(wantJSON, &want); err != nil || want.Plan == nil {
		t.Fatalf("trainrun plan: %v\n%s", err, wantJSON)
	}

	// The words of `trainrun plan --format megatron` for the same job, read
	// by bash: what every task's TRAINRUN_MEGATRON_ARGS must give a script.
	megOut, err := exec.Command(bin, "plan", "--model", "llama3-8b", "--gpu", "h100-sxm", "--gpus", "32", "--gpus-per-node", "8",
		"--seq-len", "4096", "--global-batch", "256", "--format", "megatron").Output()
	if err != nil {
		t.Fatalf("trainrun plan --format megatron: %v", err)
	}
	var megBody []string
	for _, l := range strings.Split(string(megOut), "\n") {
		if !strings.HasPrefix(l, "#") {
			megBody = append(megBody, l)
		}
	}
	shellWords := func(t *testing.T, script, v string) string {
		t.Helper()
		cmd := exec.Command("bash", "-c", script)
		cmd.Env = append(os.Environ(), "V="+v)
		b, err := cmd.Output()
		if err != nil {
			t.Fatalf("bash -c %q: %v", script, err)
		}
		return string(b)
	}
	wantMegatron := shellWords(t, "printf '%s\\0' "+strings.Join(megBody, "\n"), "")

	// A store with a committed checkpoint, made as the trainer and trainrun
	// run make one: files, done markers, Commit.
	committed := filepath.Join(dir, "ckpt-committed")
	empty := filepath.Join(dir, "ckpt-empty")
	for _, d := range []string{committed, empty} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	store, err := checkpoint.Open(committed)
	if err != nil {
		t.Fatal(err)
	}
	for _, tag := range []string{"step-100", "step-200"} {
		for r := 0; r < 2; r++ {
			if err := os.MkdirAll(filepath.Join(committed, tag), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(committed, tag, fmt.Sprintf("rank%d.pt", r)), []byte("weights "+tag), 0o644); err != nil {
				t.Fatal(err)
			}
			marker := checkpoint.DoneMarkerPath(filepath.Join(committed, tag), r)
			if err := os.MkdirAll(filepath.Dir(marker), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(marker, nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := store.Commit(t.Context(), tag, 2); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("options listed and --train-batch checked at submission", func(t *testing.T) {
		out, err := c.Run(ctx, "srun", "--help")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out, "--train-batch=GLOBALxSEQLEN") || !strings.Contains(out, "TRAINRUN_BATCH") {
			t.Errorf("srun --help lacks --train-batch=GLOBALxSEQLEN and its twin:\n%s", out)
		}
		_, stderr, err := srun(t, "-N1", "--train-batch=256", "true")
		if err == nil || !strings.Contains(stderr, "trainrun: submit: --train-batch=256: want GLOBALxSEQLEN") {
			t.Errorf("--train-batch=256: err %v, stderr:\n%s", err, stderr)
		}
		cmd := c.Command(ctx, "sbatch", "--wrap", "true")
		cmd.Env = append(cmd.Env, "TRAINRUN_BATCH=256x4k")
		if _, err := c.Exec(cmd); err == nil || !strings.Contains(err.Error(), `trainrun: submit: TRAINRUN_BATCH=256x4k: sequence length "4k" is not a positive whole number`) {
			t.Errorf("TRAINRUN_BATCH=256x4k: %v", err)
		}
	})

	for _, tc := range []struct {
		name, ckpt string
		resume     string // want TRAINRUN_RESUME_DIR (set)
	}{
		{"planned, resuming the committed checkpoint", committed, filepath.Join(committed, "step-200")},
		{"planned, first start on an empty store", empty, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "tasks")
			if err := os.MkdirAll(out, 0o755); err != nil {
				t.Fatal(err)
			}
			// Each task keeps its environment and a copy of the file
			// TRAINRUN_PLAN names (the job epilog removes the job's files).
			stdout, stderr, err := srun(t, "-N4", "--ntasks-per-node=8", "--gpus-per-node=8", "--train-model=llama3-8b", "--train-batch=256x4096",
				"--train-ckpt="+tc.ckpt, "bash", "-c", `env > `+out+`/$SLURM_PROCID.env && cp "$TRAINRUN_PLAN" `+out+`/$SLURM_PROCID.plan && [ "$SLURM_PROCID" != 0 ] || echo $SLURM_JOB_ID`)
			if err != nil {
				t.Fatal(err)
			}
			jobID, err := strconv.Atoi(strings.TrimSpace(stdout))
			if err != nil {
				t.Fatalf("job id %q; stderr:\n%s", stdout, stderr)
			}
			ranks := map[string]bool{}
			for procid := 0; procid < 32; procid++ {
				task := readEnvFile(t, filepath.Join(out, strconv.Itoa(procid)+".env"))
				ranks[task["RANK"]] = true
				for k, field := range map[string]string{"TRAINRUN_TP": "tp", "TRAINRUN_PP": "pp", "TRAINRUN_VPP": "vpp", "TRAINRUN_CP": "cp", "TRAINRUN_EP": "ep",
					"TRAINRUN_DP": "dp", "TRAINRUN_MICRO_BATCH": "micro_batch", "TRAINRUN_GRAD_ACCUM": "grad_accum", "TRAINRUN_RECOMPUTE": "recompute"} {
					if got := task[k]; got != fmt.Sprint(want.Plan[field]) {
						t.Errorf("task %d: %s=%q, trainrun plan's %s is %v", procid, k, got, field, want.Plan[field])
					}
				}
				if wantPath := filepath.Join(cache, fmt.Sprintf("job-%d", jobID), "plan-0.json"); task["TRAINRUN_PLAN"] != wantPath {
					t.Errorf("task %d: TRAINRUN_PLAN=%q, want %q", procid, task["TRAINRUN_PLAN"], wantPath)
				}
				got, err := os.ReadFile(filepath.Join(out, strconv.Itoa(procid)+".plan"))
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, wantJSON) {
					t.Errorf("task %d: the file TRAINRUN_PLAN names is not trainrun plan's JSON:\n%s\nwant\n%s", procid, got, wantJSON)
				}
				if got := shellWords(t, `eval "set -- $V"; printf '%s\0' "$@"`, task["TRAINRUN_MEGATRON_ARGS"]); got != wantMegatron || strings.Count(got, "\x00") < 10 {
					t.Errorf("task %d: TRAINRUN_MEGATRON_ARGS=%q is not trainrun plan --format megatron's words %q", procid, task["TRAINRUN_MEGATRON_ARGS"], wantMegatron)
				}
				if v, ok := task["TRAINRUN_RESUME_DIR"]; !ok || v != tc.resume {
					t.Errorf("task %d: TRAINRUN_RESUME_DIR=%q (set %v), want %q set", procid, v, ok, tc.resume)
				}
				if task["TRAINRUN_CKPT_DIR"] != tc.ckpt || task["TRAINRUN_BATCH"] != "256x4096" || task["TRAINRUN_MODEL"] != "llama3-8b" {
					t.Errorf("task %d: TRAINRUN_CKPT_DIR=%q TRAINRUN_BATCH=%q TRAINRUN_MODEL=%q", procid, task["TRAINRUN_CKPT_DIR"], task["TRAINRUN_BATCH"], task["TRAINRUN_MODEL"])
				}
			}
			if len(ranks) != 32 {
				t.Errorf("ranks are not 32 distinct ones: %v", ranks)
			}
			waitGone(t, filepath.Join(cache, fmt.Sprintf("job-%d", jobID)))
		})
	}

	t.Run("a model that does not fit fails the step with the planner's reason", func(t *testing.T) {
		_, stderr, err := srun(t, "-N1", "-n2", "--train-model=llama3.1-405b", "--train-batch=64x8192", "bash", "-c", `echo "rank=${RANK-none}"`)
		if err == nil {
			t.Fatalf("the step ran; want it failed. stderr:\n%s", stderr)
		}
		for _, w := range []string{"trainrun: step: plan for --train-model=llama3.1-405b --train-batch=64x8192 on the step's 2 tasks (h100-sxm, the policy's GPUType=h100-sxm", "no layout of llama3.1-405b fits 2 x h100-sxm"} {
			if !strings.Contains(stderr, w) {
				t.Errorf("stderr lacks %q:\n%s", w, stderr)
			}
		}
	})

	t.Run("#SBATCH --train-model --train-batch reach trainrun run", func(t *testing.T) {
		cal := filepath.Join(dir, "cal")
		id, err := c.SubmitBatch(ctx, "#!/bin/bash\n#SBATCH -N4 --ntasks-per-node=8 --gpus-per-node=8 --train-model=llama3-8b --train-batch=256x4096\n"+
			"#SBATCH --train-tune=3:8 --train-calibration="+cal+"\n"+
			"echo twins $TRAINRUN_MODEL $TRAINRUN_BATCH $TRAINRUN_TUNE $TRAINRUN_CALIBRATION\n"+
			bin+" run --dry-run --probe none --policy "+pol+" --job-dir "+filepath.Join(dir, "job")+" -- true\n")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.WaitJob(ctx, id, 90*time.Second, "COMPLETED"); err != nil {
			t.Fatalf("%v\n%s", err, c.JobOutput(id))
		}
		out := c.JobOutput(id)
		p := want.Plan
		layout := fmt.Sprintf("layout      tp=%v pp=%v vpp=%v cp=%v ep=%v dp=%v  micro_batch=%v grad_accum=%v recompute=%v", p["tp"], p["pp"], p["vpp"], p["cp"], p["ep"], p["dp"], p["micro_batch"], p["grad_accum"], p["recompute"])
		if !strings.Contains(out, "twins llama3-8b 256x4096 3:8 "+cal) || !strings.Contains(out, layout) || !strings.Contains(out, "the policy's GPUType") {
			t.Errorf("job output lacks the twins, %q or the GPU type's source:\n%s", layout, out)
		}
		// --train-tune reaches trainrun run: its dry run lists the candidates.
		if !strings.Contains(out, "tune: 3 candidate(s), 8 steps each") {
			t.Errorf("#SBATCH --train-tune=3:8 did not reach trainrun run:\n%s", out)
		}
	})
}
