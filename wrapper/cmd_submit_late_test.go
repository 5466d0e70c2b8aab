package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trainrun/trainrun/internal/slurm"
	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
	"github.com/trainrun/trainrun/wrapper/internal/run"
	"github.com/trainrun/trainrun/wrapper/internal/submit"
)

// Late binding: both partitions listed in one job, a plan for each where
// TRAINRUN_PLAN_BY_PARTITION says, --time for the slower, --time-min for
// the faster; --late-bind 0 binds to the chosen alone, as before.
func TestSubmitLateBinds(t *testing.T) {
	f := &fakeSched{t: t}
	dir := t.TempDir()
	args := append([]string{"submit", "--policy", policyFile(t, ampere40), "--tokens", "2e9", "--min-gpus", "16", "--max-gpus", "16",
		"--late-bind", "10", "--plan-dir", dir}, job8b...)
	out, errOut, code := runSched(t, f, append(args, "--", "job.sh")...)
	if code != exitcode.OK || len(f.submitted) != 1 {
		t.Fatalf("exit %d, submitted %q\n%s\n%s", code, f.submitted, out, errOut)
	}
	sub := f.submitted[0]
	if !strings.Contains(sub, "--partition=ampere,hopper ") && !strings.Contains(sub, "--partition=hopper,ampere ") {
		t.Errorf("sbatch line %q: want both partitions", sub)
	}
	if !strings.Contains(sub, "--time-min=") || !strings.Contains(out, "late-bound: -p ") {
		t.Errorf("sbatch line %q, stdout:\n%s", sub, out)
	}
	_, after, ok := strings.Cut(sub, "TRAINRUN_PLAN_BY_PARTITION=")
	if !ok {
		t.Fatalf("sbatch line %q exports no TRAINRUN_PLAN_BY_PARTITION", sub)
	}
	tmpl, _, _ := strings.Cut(after, " ")
	tmpl, _, _ = strings.Cut(tmpl, ",")
	layouts := map[string]string{}
	for _, p := range []string{"hopper", "ampere"} {
		path := strings.ReplaceAll(tmpl, "%p", p)
		if filepath.Dir(path) != dir {
			t.Errorf("plan %s outside --plan-dir %s", path, dir)
		}
		ev, err := run.ReadRunPlan(path, 16)
		if err != nil {
			t.Fatalf("partition %s: %v", p, err)
		}
		layouts[p] = ev.Layout.Config()
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("%d plan files, want 2", len(entries))
	}

	f = &fakeSched{t: t}
	args[len(args)-len(job8b)-3] = "0" // --late-bind 0
	mustRun(t, f, append(args, "--", "job.sh")...)
	if len(f.submitted) != 1 || strings.Contains(f.submitted[0], ",hopper") || strings.Contains(f.submitted[0], "ampere,") ||
		strings.Contains(f.submitted[0], "--time-min") || strings.Contains(f.submitted[0], "TRAINRUN_PLAN_BY_PARTITION") {
		t.Errorf("--late-bind 0: %q", f.submitted)
	}
}

// partitions --queue: each user and account's jobs, and the slowdown of
// the ones trainrun submitted.
func TestPartitionsQueue(t *testing.T) {
	at := func(d time.Duration) string { return captureTime.Add(d).Format("2006-01-02T15:04:05") }
	f := &fakeSched{t: t, jobs: "JobId=7 JobName=a UserId=alice(1000) Account=nlp JobState=RUNNING Partition=hopper TimeLimit=01:00:00 SubmitTime=" + at(-20*time.Minute) +
		" StartTime=" + at(-10*time.Minute) + " EndTime=" + at(50*time.Minute) + " NumNodes=2 Comment=trainrun-submit:train_s=hopper:1200\n" +
		"JobId=8 JobName=b UserId=bob(1001) Account=vision JobState=PENDING Partition=ampere TimeLimit=10 SubmitTime=" + at(-time.Minute) + " StartTime=Unknown EndTime=Unknown NumNodes=1\n"}
	out := mustRun(t, f, "partitions", "--queue")
	for _, w := range []string{"queue by user and account", "alice", "nlp", "1.50", "bob", "vision"} {
		if !strings.Contains(out, w) {
			t.Errorf("partitions --queue lacks %q:\n%s", w, out)
		}
	}
	var v struct {
		Queue []struct {
			User    string  `json:"user"`
			MaxSlow float64 `json:"max_slowdown"`
			Pending int     `json:"pending"`
		} `json:"queue"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, f, "partitions", "--queue", "--format", "json")), &v); err != nil || len(v.Queue) != 2 || v.Queue[0].User != "alice" || v.Queue[0].MaxSlow != 1.5 || v.Queue[1].Pending != 1 {
		t.Errorf("json queue %+v, %v", v.Queue, err)
	}
	if out := mustRun(t, f, "partitions"); strings.Contains(out, "queue by user") {
		t.Errorf("without --queue:\n%s", out)
	}
}

// partitions --metrics-textfile: the queue's per-user series for
// node_exporter (it implies --queue); a name node_exporter skips is refused.
func TestPartitionsQueueTextfile(t *testing.T) {
	at := func(d time.Duration) string { return captureTime.Add(d).Format("2006-01-02T15:04:05") }
	f := &fakeSched{t: t, jobs: "JobId=7 JobName=a UserId=alice(1000) Account=nlp JobState=RUNNING Partition=hopper TimeLimit=01:00:00 SubmitTime=" + at(-20*time.Minute) +
		" StartTime=" + at(-10*time.Minute) + " EndTime=" + at(50*time.Minute) + " NumNodes=2 Comment=trainrun-submit:train_s=hopper:1200\n" +
		"JobId=8 JobName=b UserId=bob(1001) Account=vision JobState=PENDING Partition=ampere TimeLimit=10 SubmitTime=" + at(-time.Minute) + " StartTime=Unknown EndTime=Unknown NumNodes=1\n"}
	file := filepath.Join(t.TempDir(), "trainrun-queue.prom")
	out := mustRun(t, f, "partitions", "--metrics-textfile", file)
	if !strings.Contains(out, "queue by user and account") {
		t.Errorf("--metrics-textfile did not imply --queue:\n%s", out)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{
		`trainrun_queue_jobs{account="nlp",state="running",user="alice"} 1`,
		`trainrun_queue_jobs{account="vision",state="pending",user="bob"} 1`,
		`trainrun_queue_slowdown_max_ratio{account="nlp",user="alice"} 1.5`,
		`trainrun_queue_trainrun_jobs{account="vision",user="bob"} 0`,
	} {
		if !strings.Contains(string(b), w) {
			t.Errorf("textfile lacks %s:\n%s", w, b)
		}
	}
	if strings.Contains(string(b), `slowdown_max_ratio{account="vision"`) {
		t.Errorf("bob has no trainrun job, so no slowdown:\n%s", b)
	}
	_, errOut, code := runSched(t, f, "partitions", "--metrics-textfile", filepath.Join(t.TempDir(), "queue.txt"))
	if code != exitcode.Usage || !strings.Contains(errOut, "ending in .prom") {
		t.Errorf("a .txt file: exit %d, %s", code, errOut)
	}
}

// A running job's trainer progress is read from its default job directory;
// none for a requeued job (its tokens predate its StartTime) or without a
// report. The mark carries the job's tokens.
func TestTrainerProgressAndMark(t *testing.T) {
	wd := t.TempDir()
	dir := filepath.Join(wd, "trainrun-7", "launch")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "progress"), []byte("40 1310720 1796421636\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	j := slurm.Job{ID: "7", Record: slurm.Record{"WorkDir": wd}}
	p, ok := trainerProgress(j)
	if !ok || p.Tokens != 1310720 || p.At.Unix() != 1796421636 {
		t.Errorf("progress %+v %v", p, ok)
	}
	j.Restarts = 1
	if _, ok := trainerProgress(j); ok {
		t.Error("a requeued job's progress was used")
	}
	if _, ok := trainerProgress(slurm.Job{ID: "8", Record: slurm.Record{"WorkDir": wd}}); ok {
		t.Error("progress without a file")
	}
	o := &submitOptions{tokens: 2e9}
	got := o.markArgs([]submit.Candidate{{Partition: "hopper", TrainS: 60}}, []int{0}, nil)
	if len(got) != 1 || got[0] != "--comment=trainrun-submit:train_s=hopper:60 tokens=2000000000" {
		t.Errorf("mark %q", got)
	}
}
