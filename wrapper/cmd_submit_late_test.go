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
// TRAINRUN_PLAN_BY_PARTITION says, --time for the slower and no --time-min
// (Slurm could give the slower partition the faster's limit); --late-bind 0 binds to the chosen alone, as before.
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
	if strings.Contains(sub, "--time-min") || !strings.Contains(out, "late-bound: -p ") {
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
	plans, _ := filepath.Glob(filepath.Join(dir, "plan-*.json"))
	if len(plans) != 2 {
		t.Errorf("%d plan files, want 2: %q", len(plans), plans)
	}
	// The ledger names the job and both plans, for later submissions to
	// learn from its run (learn.go).
	led, err := os.ReadFile(filepath.Join(dir, submit.LedgerFile))
	if err != nil {
		t.Fatal(err)
	}
	var s submit.Submitted
	if err := json.Unmarshal(led, &s); err != nil || s.Job == "" || len(s.Plans) != 2 || s.Plans["hopper"].File == "" || s.Plans["ampere"].StepS <= 0 {
		t.Errorf("ledger %s: %+v (%v)", led, s, err)
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

// Learning from runs: a job submit sent that completed in Slurm's record
// twice as slow as predicted becomes an observation in --plan-dir, once;
// the next submission of the same job there predicts its measured time,
// and --learn=false the planner's own.
func TestSubmitLearnsFromRuns(t *testing.T) {
	dir := t.TempDir()
	pol := policyFile(t, ampere40)
	args := append([]string{"submit", "--format", "json", "--policy", pol, "--tokens", "2e8", "--partition", "ampere", "--gpus", "8", "--plan-dir", dir}, job8b...)
	f := &fakeSched{t: t}
	first := decodeSubmit(t, mustRun(t, f, append(args, "--", "job.sh")...))
	if first.Learned != nil || first.SubmittedJobID != "1234" {
		t.Fatalf("first submission: learned %+v, job %q", first.Learned, first.SubmittedJobID)
	}
	train := first.Candidates[0].TrainS
	var led submit.Submitted
	b, _ := os.ReadFile(filepath.Join(dir, submit.LedgerFile))
	if err := json.Unmarshal(b, &led); err != nil {
		t.Fatal(err)
	}
	p := led.Plans["ampere"]
	start := captureTime.Add(10 * time.Second)
	end := start.Add(time.Duration((2*p.StepsS + p.CkptS) * float64(time.Second)))
	ts := func(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05") }
	completed := "JobId=1234 JobName=job.sh UserId=alice(1000) Account=nlp JobState=COMPLETED Partition=ampere TimeLimit=10:00:00 SubmitTime=" + ts(captureTime) +
		" StartTime=" + ts(start) + " EndTime=" + ts(end) + " ExitCode=0:0 Restarts=0 NumNodes=1\n"
	// Another job's id reused (submitted long before the ledger's time): not this job's run.
	for _, tc := range []struct {
		name, jobs string
		want       int
	}{{"another job with the id", strings.Replace(completed, "SubmitTime="+ts(captureTime), "SubmitTime="+ts(captureTime.Add(-time.Hour)), 1), 0},
		{"failed", strings.Replace(completed, "ExitCode=0:0", "ExitCode=1:0", 1), 0},
		{"requeued", strings.Replace(completed, "Restarts=0", "Restarts=1", 1), 0},
		{"completed", completed, 1}, {"again", completed, 0}} {
		if tc.name != "again" { // a refusal marks the job in the ledger: each case starts from the first submission's line alone
			if err := os.WriteFile(filepath.Join(dir, submit.LedgerFile), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		f = &fakeSched{t: t, jobs: tc.jobs}
		dry := append(append([]string{}, args...), "--dry-run", "--", "job.sh")
		got := decodeSubmit(t, mustRun(t, f, dry...))
		n := 0
		if got.Learned != nil {
			n = len(got.Learned.Added)
		}
		if n != tc.want {
			t.Errorf("%s: learned from %d job(s), want %d: %+v", tc.name, n, tc.want, got.Learned)
		}
		if tc.want == 0 && tc.name != "again" && got.Learned == nil && got.Candidates[0].TrainS != train {
			t.Errorf("%s: train %.0f s, want the planner's %.0f s", tc.name, got.Candidates[0].TrainS, train)
		}
	}
	recs, _ := os.ReadFile(filepath.Join(dir, "observations.jsonl"))
	if n := strings.Count(string(recs), "\n"); n != 1 || !strings.Contains(string(recs), `"job":"1234"`) {
		t.Fatalf("observations.jsonl has %d record(s), want job 1234's alone:\n%s", n, recs)
	}
	got := decodeSubmit(t, mustRun(t, &fakeSched{t: t, jobs: completed}, append(append([]string{}, args...), "--dry-run", "--", "job.sh")...))
	want := 2*p.StepsS + p.CkptS
	if r := got.Candidates[0].TrainS / want; r < 0.97 || r > 1.03 || got.Learned == nil || got.Learned.Observations != 1 {
		t.Errorf("after learning: train %.0f s, want the measured %.0f s (planner's %.0f s); learned %+v", got.Candidates[0].TrainS, want, train, got.Learned)
	}
	off := decodeSubmit(t, mustRun(t, &fakeSched{t: t, jobs: completed}, append(append([]string{}, args...), "--learn=false", "--dry-run", "--", "job.sh")...))
	if off.Candidates[0].TrainS != train || off.Learned != nil {
		t.Errorf("--learn=false: train %.0f s, want the planner's %.0f s; learned %+v", off.Candidates[0].TrainS, train, off.Learned)
	}
}

func TestOnceEachReadsOnce(t *testing.T) {
	calls := map[string]int{}
	read := onceEach(func(j slurm.Job) (submit.Progress, bool) {
		calls[j.ID]++
		return submit.Progress{Tokens: float64(len(j.ID))}, j.ID != "9"
	})
	for i := 0; i < 3; i++ {
		if p, ok := read(slurm.Job{ID: "12"}); !ok || p.Tokens != 2 {
			t.Fatalf("job 12: %+v %v", p, ok)
		}
		if _, ok := read(slurm.Job{ID: "9"}); ok {
			t.Fatal("job 9: want the not-ok answer kept")
		}
	}
	if calls["12"] != 1 || calls["9"] != 1 {
		t.Fatalf("reads: %v, want one per job", calls)
	}
}
