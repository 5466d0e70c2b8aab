package slurm

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// capturedSlurm answers as the harness's Slurm did (testdata).
func capturedSlurm(t *testing.T) (*Canned, string) {
	id := strings.TrimSpace(readTestdata(t, "jobid.txt"))
	return &Canned{
		Out: map[string]string{
			"scontrol show job -o " + id:         readTestdata(t, "show-job-o.txt"),
			"scontrol show node -o n[1-4]":       readTestdata(t, "show-node-o.txt"),
			"scontrol show partition -o low":     strings.Split(readTestdata(t, "show-partition-o.txt"), "\n")[0],
			"scontrol show config":               readTestdata(t, "show-config.txt"),
			"scontrol show topology":             readTestdata(t, "show-topology-none.stdout"),
			"scontrol requeue " + id:             "",
			"scancel --signal=KILL " + id + ".0": "",
		},
		Fail: map[string]string{
			"scontrol show job -o 999999": strings.TrimSpace(readTestdata(t, "show-job-missing.stderr")),
			"scontrol requeue 999999":     strings.TrimSpace(readTestdata(t, "requeue-missing.stderr")),
		},
	}, id
}

func TestClientAgainstCapturedSlurm(t *testing.T) {
	fake, id := capturedSlurm(t)
	c := Client{Run: fake.Run, Location: time.UTC}
	ctx := context.Background()
	j, err := c.Job(ctx, id)
	if err != nil || j.ID != id || j.TimeLimit != 10*time.Minute || !j.Requeue || j.Name != "run two.sh" {
		t.Errorf("Job: %+v %v", j, err)
	}
	addrs, err := c.NodeAddrs(ctx, "n[1-4]")
	if err != nil || len(addrs) != 4 || addrs["n2"] != "127.0.0.1" {
		t.Errorf("NodeAddrs: %v %v", addrs, err)
	}
	lim, err := c.Limits(ctx, "low")
	if err != nil || lim != (Limits{GraceTime: 5 * time.Second, Preemptable: true, KillWait: 5 * time.Second}) {
		t.Errorf("Limits: %+v %v", lim, err)
	}
	if err := c.Requeue(ctx, id); err != nil {
		t.Errorf("Requeue: %v", err)
	}
	if err := c.KillStep(ctx, id, "0"); err != nil {
		t.Errorf("KillStep: %v", err)
	}
	// No topology plugin: scontrol exits 0 and prints nothing on stdout.
	if cl, err := c.Topology(ctx); err == nil && cl != nil && len(cl.Nodes()) != 0 {
		t.Errorf("Topology without a plugin: %v nodes", cl.Nodes())
	}
	want := []string{"scontrol show job -o " + id, "scontrol show node -o n[1-4]", "scontrol show partition -o low", "scontrol show config",
		"scontrol requeue " + id, "scancel --signal=KILL " + id + ".0", "scontrol show topology"}
	if strings.Join(fake.Calls, "\n") != strings.Join(want, "\n") {
		t.Errorf("calls:\n%s\nwant:\n%s", strings.Join(fake.Calls, "\n"), strings.Join(want, "\n"))
	}
}

// A failed command says which one, how it ended and what Slurm printed.
func TestClientErrors(t *testing.T) {
	fake, _ := capturedSlurm(t)
	c := Client{Run: fake.Run}
	ctx := context.Background()
	_, err := c.Job(ctx, "999999")
	var se *Error
	if !errors.As(err, &se) || err.Error() != "scontrol show job -o 999999: exit status 1: slurm_load_jobs error: Invalid job id specified" {
		t.Errorf("Job: %v", err)
	}
	if err := c.Requeue(ctx, "999999"); err == nil || !strings.Contains(err.Error(), "scontrol requeue 999999: exit status 1: Invalid job id specified for job 999999") {
		t.Errorf("Requeue: %v", err)
	}
	lim, err := c.Limits(ctx, "nosuch")
	if err == nil || !strings.Contains(err.Error(), "scontrol show partition -o nosuch") || lim.KillWait != 5*time.Second || lim.GraceTime != -1 {
		t.Errorf("Limits of a missing partition: %+v %v (KillWait should still be read)", lim, err)
	}
	if _, err := (Client{}).Job(ctx, "1"); err == nil {
		t.Error("a Client without a Runner ran something")
	}
}

// The timeout reaches the Runner as the context's deadline.
func TestClientTimeout(t *testing.T) {
	var left time.Duration
	run := func(ctx context.Context, name string, args ...string) ([]byte, error) {
		dl, _ := ctx.Deadline()
		left = time.Until(dl)
		return nil, errors.New("no")
	}
	Client{Run: run}.Requeue(context.Background(), "1")
	if left <= DefaultTimeout-5*time.Second || left > DefaultTimeout {
		t.Errorf("default deadline in %v, want about %v", left, DefaultTimeout)
	}
	Client{Run: run, Timeout: time.Second}.Requeue(context.Background(), "1")
	if left > time.Second {
		t.Errorf("deadline in %v, want at most 1s", left)
	}
}

// Exec reports a missing command as ErrNotFound, with the command line.
func TestExecNotFound(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := Exec(context.Background(), Scontrol, "show", "config")
	if !errors.Is(err, ErrNotFound) || !strings.HasPrefix(err.Error(), "scontrol show config: ") {
		t.Errorf("got %v", err)
	}
	if HaveSrun() {
		t.Error("HaveSrun with an empty PATH")
	}
}

// scontrol requeue killed by the requeue's own SIGTERM has requeued the
// job; any other failure is one.
func TestRequeueKilledByItsSIGTERM(t *testing.T) {
	for script, ok := range map[string]bool{"kill -TERM $$": true, "exit 1": false, "kill -KILL $$": false, "exit 0": true} {
		c := Client{Run: func(ctx context.Context, name string, args ...string) ([]byte, error) {
			return Exec(ctx, "sh", "-c", script) // the exit of scontrol, without Slurm
		}}
		if err := c.Requeue(t.Context(), "7"); (err == nil) != ok {
			t.Errorf("%s: %v, want ok=%v", script, err, ok)
		}
	}
}
