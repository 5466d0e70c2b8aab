//go:build e2e

package e2e

// Helpers the e2e tests share: the trainrun binary, running a job to its end,
// reading a task's environment, cancelling jobs, and waiting for a job's
// output, the job epilog or a job's processes (over harness.WaitOutput and
// harness.WaitFor, so that no test hand-rolls a deadline loop).

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trainrun/trainrun/test/harness"
)

// The trainrun binary the jobs run, built once into the cluster directory
// (the emulated nodes share this machine's file system).
var (
	trainrunOnce sync.Once
	trainrunBin  string
	trainrunErr  error
)

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

func trainrun(t testing.TB) string {
	t.Helper()
	trainrunOnce.Do(func() {
		trainrunBin = filepath.Join(cluster.Dir(), "bin", "trainrun")
		// trainrun and, next to it, the lean shim trainrun run uses,
		// built as the Makefile builds them (the shim without cgo).
		for _, b := range [][3]string{{trainrunBin, "./wrapper", ""}, {filepath.Join(filepath.Dir(trainrunBin), "trainrun-shim"), "./wrapper/internal/shim/trainrun-shim", "CGO_ENABLED=0"}} {
			cmd := exec.Command("go", "build", "-o", b[0], b[1])
			cmd.Dir = repoRoot()
			if b[2] != "" {
				cmd.Env = append(os.Environ(), b[2])
			}
			if out, err := cmd.CombinedOutput(); err != nil {
				trainrunErr = fmt.Errorf("go build %s: %v\n%s", b[1], err, out)
				return
			}
		}
	})
	if trainrunErr != nil {
		t.Fatal(trainrunErr)
	}
	return trainrunBin
}

// runJob submits a batch script and waits for it to end; it returns the
// final state, the exit code of the script and its output.
func runJob(t testing.TB, script string, timeout time.Duration, sbatchArgs ...string) (state string, exit int, output string, jobID int) {
	t.Helper()
	ctx := context.Background()
	id, err := cluster.SubmitBatch(ctx, script, sbatchArgs...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cluster.Run(context.Background(), "scancel", strconv.Itoa(id)) })
	state, _ = cluster.WaitJob(ctx, id, timeout, "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT")
	info, err := cluster.JobInfo(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	code, _, _ := strings.Cut(info["ExitCode"], ":")
	exit, _ = strconv.Atoi(code)
	return state, exit, cluster.JobOutput(id), id
}

func readEnvFile(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			m[k] = v
		}
	}
	return m
}

func cancelJobs(t *testing.T, ids ...int) {
	t.Helper()
	cancelJobsOn(t, cluster, ids...)
}

// cancelJobsOn kills the jobs on cluster c and waits until each has ended.
func cancelJobsOn(t *testing.T, c *harness.Cluster, ids ...int) {
	t.Helper()
	if len(ids) == 0 {
		return
	}
	args := []string{"--signal=KILL", "--full"}
	for _, id := range ids {
		args = append(args, strconv.Itoa(id))
	}
	ctx := context.Background()
	_, _ = c.Run(ctx, "scancel", args...)
	_, _ = c.Run(ctx, "scancel", args[2:]...)
	for _, id := range ids {
		if _, err := c.WaitJob(ctx, id, 30*time.Second, harness.FinalStates...); err != nil {
			t.Errorf("cancel job %d: %v", id, err)
		}
	}
}

// waitOutput waits (20 s) until the job's output on the default cluster
// contains s and returns it.
func waitOutput(t *testing.T, id int, s string) string {
	t.Helper()
	return waitLog(t, cluster, id, s, 20*time.Second)
}

// waitLog waits until the job's output on c contains want and returns it;
// it fails the test, quoting the output, after timeout.
func waitLog(t testing.TB, c *harness.Cluster, id int, want string, timeout time.Duration) string {
	t.Helper()
	out, err := c.WaitOutput(context.Background(), id, want, timeout)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// waitStarted waits until the run of the job after marker (its "restart N"
// line; the output of a requeued job is appended to) says all ranks started.
func waitStarted(t testing.TB, c *harness.Cluster, id int, marker string, ranks int, timeout time.Duration) string {
	t.Helper()
	started := fmt.Sprintf("all %d ranks started", ranks)
	out, err := c.WaitOutputFunc(context.Background(), id, timeout, fmt.Sprintf("%q after %q", started, marker), harness.OutputAfter(marker, started))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// waitGone waits for the job epilog to remove a per-job directory.
func waitGone(t *testing.T, path string) {
	t.Helper()
	gone := func() bool { _, err := os.Stat(path); return os.IsNotExist(err) }
	if err := harness.WaitFor(context.Background(), 20*time.Second, path+" to be removed", gone); err != nil {
		t.Errorf("%v: the job epilog did not clean it", err)
	}
}

// waitNoJobProcesses waits until no process has SLURM_JOB_ID=id in its
// environment and no slurmstepd serves the job.
func waitNoJobProcesses(t *testing.T, id int) {
	t.Helper()
	marker := []byte("SLURM_JOB_ID=" + strconv.Itoa(id) + "\x00")
	stepd := fmt.Sprintf("[%d.", id)
	var left []string
	gone := func() bool {
		left = nil
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == os.Getpid() {
				continue
			}
			env, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
			cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			stat, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
			if len(stat) > 0 && isZombie(string(stat)) {
				continue
			}
			if slices.Contains(strings.Split(string(env), "\x00"), strings.TrimSuffix(string(marker), "\x00")) || strings.Contains(string(cmdline), stepd) {
				left = append(left, fmt.Sprintf("%d %q", pid, strings.ReplaceAll(string(cmdline), "\x00", " ")))
			}
		}
		return len(left) == 0
	}
	if err := harness.WaitFor(context.Background(), 20*time.Second, fmt.Sprintf("job %d's processes to end", id), gone); err != nil {
		t.Errorf("%v; left:\n%s", err, strings.Join(left, "\n"))
	}
}

// rankReport is what contrib/trainer/train_example.py --report DIR
// writes for each rank: its environment and the steps it ran.
type rankReport struct {
	Env       map[string]string `json:"env"`
	StartStep int               `json:"start_step"`
	EndStep   int               `json:"end_step"`
}

// readRankReport reads rank r's report under dir/report.
func readRankReport(t *testing.T, dir string, r int) rankReport {
	t.Helper()
	var rep rankReport
	b, err := os.ReadFile(filepath.Join(dir, "report", fmt.Sprintf("rank-%d.json", r)))
	if err == nil {
		err = json.Unmarshal(b, &rep)
	}
	if err != nil {
		t.Fatalf("rank %d's report: %v", r, err)
	}
	return rep
}
