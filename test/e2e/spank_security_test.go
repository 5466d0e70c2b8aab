//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trainrun/trainrun/checkpoint"
	"github.com/trainrun/trainrun/checkpoint/checkpointtest"
)

// TestSpankSecurity: issue 12 findings 1 and 4 against the real Slurm. A job
// of nobody, launched with a copy of slurm.conf whose plugstack lacks the
// plugin (so srun checks nothing and the TRAINRUN_* twins reach slurmstepd
// as they are), names a root-only config.json, a FIFO as the config and as
// the store's .trainrun/latest, and a job name "../alice". Each step ends
// (none blocks), with a clear trainrun: error or without the injection, and
// never shows the root-only file's contents or size or another user's store.
func TestSpankSecurity(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("su"); err != nil {
		t.Skipf("no su to run jobs as nobody: %v", err)
	}
	c := ownCluster(t)
	so, bin := buildPlugin(t), trainrun(t)
	ctx := context.Background()
	shared, err := os.MkdirTemp("", "trainrun-secroot-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(shared) })
	os.Chmod(shared, 0o755)
	// the helper the plugin runs as the user must be executable by nobody
	helper := filepath.Join(shared, "trainrun")
	if data, err := os.ReadFile(bin); err != nil {
		t.Fatal(err)
	} else if err := os.WriteFile(helper, data, 0o755); err != nil {
		t.Fatal(err)
	}
	ckpt := filepath.Join(shared, "ckpt")
	pol := filepath.Join(shared, "trainrun.conf")
	os.WriteFile(pol, []byte("CkptRoots="+ckpt+"\nCkptDir="+ckpt+"/%u/%x\nPartitionName=high CkptDir="+ckpt+"/high-%u\n"), 0o644)
	cache := filepath.Join(shared, "cache")
	if err := c.SetPlugstack(ctx, []string{fmt.Sprintf("required %s policy=%s cache=%s trainrun=%s resume_timeout=3s", so, pol, cache, helper)}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.SetPlugstack(context.Background(), nil); err != nil {
			t.Errorf("slurmd with the plugin loaded did not stop cleanly: %v", err)
		}
	})

	// srun's slurm.conf without the plugin
	conf, err := os.ReadFile(c.ConfPath())
	if err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(shared, "plugstack-empty.conf")
	os.WriteFile(empty, nil, 0o644)
	userConf := filepath.Join(shared, "slurm.conf")
	re := regexp.MustCompile(`(?m)^PlugStackConfig=.*$`)
	os.WriteFile(userConf, re.ReplaceAll(conf, []byte("PlugStackConfig="+empty)), 0o644)

	// a root-only config.json of 411 bytes with telling keys and values
	secret := filepath.Join(shared, "secret.json")
	body := `{"model_type": "llama", "root_password_hunter2": 4242424242}`
	os.WriteFile(secret, []byte(body+strings.Repeat(" ", 411-len(body))), 0o600)
	fifo := filepath.Join(shared, "model.fifo")
	if err := syscall.Mkfifo(fifo, 0o666); err != nil {
		t.Fatal(err)
	}
	// nobody's store for job name "run1", with .trainrun/latest a FIFO; and
	// alice's store, which a job name ../alice/run1 must not reach
	for _, d := range []string{filepath.Join(ckpt, "nobody", "run1"), filepath.Join(ckpt, "alice", "run1")} {
		mkStore(t, d)
	}
	latest := filepath.Join(ckpt, "nobody", "run1", ".trainrun", "latest")
	os.Remove(latest)
	if err := syscall.Mkfifo(latest, 0o666); err != nil {
		t.Fatal(err)
	}
	filepath.Walk(filepath.Join(ckpt, "nobody"), func(p string, _ os.FileInfo, _ error) error { return os.Lchown(p, 65534, 65534) })
	os.Chmod(filepath.Join(ckpt, "alice"), 0o700)

	asNobody := func(t *testing.T, env, args string) (string, time.Duration, error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		cmd := c.Command(ctx, "su", "-s", "/bin/sh", "nobody", "-c",
			"cd "+shared+" && env SLURM_CONF="+userConf+" "+env+" srun --immediate=30 -N1 -n1 -w n1 "+args+" 2>&1")
		t0 := time.Now()
		out, err := cmd.CombinedOutput()
		if ctx.Err() != nil {
			t.Fatalf("the step blocked: still running after 60 s\n%s", out)
		}
		return string(out), time.Since(t0), err
	}
	for _, tc := range []struct {
		name, env, args string
		want            []string // in the output
		not             []string // never in the output
	}{
		{"root-only config.json", "TRAINRUN_MODEL=" + secret, "printenv TRAINRUN_MODEL",
			[]string{"trainrun: ", "permission denied"}, []string{"hunter2", "4242424242", "411"}},
		{"FIFO as config.json", "TRAINRUN_MODEL=" + fifo, "printenv TRAINRUN_MODEL",
			[]string{"trainrun: ", "not a regular file"}, nil},
		{"FIFO as the store's latest", "", "-J run1 sh -c 'echo dir=$TRAINRUN_CKPT_DIR resume=${TRAINRUN_RESUME_DIR-unset}'",
			[]string{"dir=" + ckpt + "/nobody/run1 "}, []string{"alice"}},
		{"../ job name", "", "-J ../alice/run1 sh -c 'echo dir=$TRAINRUN_CKPT_DIR resume=$TRAINRUN_RESUME_DIR'",
			[]string{"trainrun: ", "%x"}, []string{"alice/run1/step-1", "dir=" + ckpt + "/alice"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, took, err := asNobody(t, tc.env, tc.args)
			t.Logf("%s: %v after %s:\n%s", tc.name, err, took.Round(time.Millisecond), out)
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q", w)
				}
			}
			// The FIFO as latest: unset (the helper timed out) or the user's
			// own verified checkpoint (a store reader that skips the FIFO);
			// either way the step went on.
			if tc.name == "FIFO as the store's latest" && !strings.Contains(out, "resume=unset") && !strings.Contains(out, "resume="+ckpt+"/nobody/run1/step-1\n") {
				t.Errorf("TRAINRUN_RESUME_DIR is neither unset nor nobody's step-1")
			}
			for _, n := range tc.not {
				if strings.Contains(out, n) {
					t.Errorf("output shows %q", n)
				}
			}
		})
	}

	// The partition selects the policy: a batch job in partition low that
	// sets SLURM_JOB_PARTITION=high for its step gets low's settings (the
	// job prolog recorded Slurm's partition).
	t.Run("partition from the environment", func(t *testing.T) {
		script := filepath.Join(shared, "part.sh")
		os.WriteFile(script, []byte("#!/bin/sh\nexport SLURM_JOB_PARTITION=high\nSLURM_CONF="+userConf+" srun -n1 -J run2 printenv TRAINRUN_CKPT_DIR\n"), 0o755)
		outDir := filepath.Join(shared, "out") // the job's output is nobody's to write
		os.Mkdir(outDir, 0o755)
		os.Chown(outDir, 65534, 65534)
		out := filepath.Join(outDir, "part.out")
		cmd := c.Command(ctx, "su", "-s", "/bin/sh", "nobody", "-c",
			"cd "+shared+" && SLURM_CONF="+c.ConfPath()+" sbatch --parsable -p low -N1 -w n1 -J run2 --output="+out+" "+script)
		id, err := c.Exec(cmd)
		if err != nil {
			t.Fatalf("sbatch as nobody: %v", err)
		}
		var job int
		fmt.Sscan(strings.TrimSpace(id), &job)
		t.Cleanup(func() { cancelJobsOn(t, c, job) })
		_, err = c.WaitJob(ctx, job, time.Minute, "COMPLETED")
		b, _ := os.ReadFile(out)
		t.Logf("job %d: %v\n%s", job, err, b)
		if strings.Contains(string(b), "high-nobody") || !strings.Contains(string(b), ckpt+"/nobody/run2") {
			t.Errorf("the step got %q; want low's CkptDir %s/nobody/run2", strings.TrimSpace(string(b)), ckpt)
		}
	})
}

// mkStore makes a store at dir with step-1 committed (world 1).
func mkStore(t *testing.T, dir string) {
	t.Helper()
	tag := filepath.Join(dir, "step-1")
	checkpointtest.SaveRank(t, tag, 0, checkpointtest.File{Name: "w.bin", Data: "weights"})
	s, err := checkpoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(t.Context(), "step-1", 1); err != nil {
		t.Fatal(err)
	}
}
