package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trainrun/trainrun/internal/slurm"
	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
	"github.com/trainrun/trainrun/wrapper/internal/run"
)

// fakeSched answers as the heterogeneous harness's Slurm did
// (internal/slurm/testdata/hetero-*: hopper's n1 half held by a 10-minute
// job, so Slurm starts a hopper request 10 minutes after the capture, an
// ampere one at once).
type fakeSched struct {
	t         *testing.T
	mu        sync.Mutex
	testOnly  []string
	submitted []string
	refuse    string // stderr of a refused submission
	jobs      string // scontrol show job -o (empty: no jobs)
	inFlight  int
	maxFlight int
}

func sdata(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "internal", "slurm", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// captureTime is when hetero-test-only.stderr says an idle partition starts.
var captureTime = time.Date(2026, 12, 1, 22, 40, 36, 0, time.UTC)

func (f *fakeSched) run(ctx context.Context, name string, args ...string) ([]byte, error) {
	out, _, err := f.runStderr(ctx, name, args...)
	return out, err
}

func (f *fakeSched) runStderr(_ context.Context, name string, args ...string) ([]byte, []byte, error) {
	line := strings.Join(append([]string{name}, args...), " ")
	fail := func(stderr string) ([]byte, []byte, error) {
		return nil, []byte(stderr), &slurm.Error{Args: append([]string{name}, args...), Err: errors.New("exit status 1"), Stderr: stderr}
	}
	switch {
	case line == "scontrol show partition -o":
		return []byte(sdata(f.t, "hetero-show-partition-o.txt")), nil, nil
	case line == "scontrol show job -o":
		if f.jobs == "" {
			return []byte("No jobs in the system\n"), nil, nil
		}
		return []byte(f.jobs), nil, nil
	case line == "scontrol -d show node -o":
		return []byte(sdata(f.t, "hetero-show-node-d-o.txt")), nil, nil
	case strings.HasPrefix(line, "sbatch --test-only "):
		f.mu.Lock()
		f.testOnly = append(f.testOnly, line)
		f.inFlight++
		f.maxFlight = max(f.maxFlight, f.inFlight)
		f.mu.Unlock()
		time.Sleep(time.Millisecond)
		f.mu.Lock()
		f.inFlight--
		f.mu.Unlock()
		switch {
		case strings.Contains(line, "--partition=hopper"):
			return nil, []byte(sdata(f.t, "hetero-test-only-busy.stderr")), nil
		case strings.Contains(line, "--partition=ampere"):
			return nil, []byte(sdata(f.t, "hetero-test-only.stderr")), nil
		}
		return fail(strings.TrimSpace(sdata(f.t, "hetero-test-only-bad.stderr")))
	case strings.HasPrefix(line, "sbatch --parsable "):
		f.mu.Lock()
		f.submitted = append(f.submitted, line)
		f.mu.Unlock()
		if f.refuse != "" {
			return fail(f.refuse)
		}
		return []byte("1234\n"), []byte("sbatch: warning: a warning\n"), nil
	}
	return fail("fakeSched: no answer for " + line)
}

func runSched(t *testing.T, f *fakeSched, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	old, oldStat := nowFunc, statScript
	nowFunc = func() time.Time { return captureTime }
	statScript = func(string) (os.FileInfo, error) { return nil, nil } // the scripts here are names only
	t.Cleanup(func() { nowFunc, statScript = old, oldStat })
	code, stdout, stderr = cli{slurm: slurm.Client{Run: f.run, RunStderr: f.runStderr, Location: time.UTC}}.run(args...)
	return stdout, stderr, code
}

func policyFile(t *testing.T, text string) string {
	p := filepath.Join(t.TempDir(), "trainrun.conf")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// ampere's a100 is ambiguous: the policy says 40 GB.
const ampere40 = "PartitionName=ampere GPUType=a100-40gb\n"

var job8b = []string{"--model", "llama3-8b", "--seq-len", "4096", "--global-batch", "64"}

func decodeSubmit(t *testing.T, out string) submitJSON {
	t.Helper()
	var s submitJSON
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return s
}

// hopper is held for 10 minutes: a short job goes to the idle ampere, a
// long one still waits for the faster hopper.
func TestSubmitDryRunChoosesByFinish(t *testing.T) {
	pol := policyFile(t, ampere40)
	for _, tc := range []struct {
		tokens, want string
	}{{"2e7", "ampere"}, {"2e10", "hopper"}} {
		f := &fakeSched{t: t}
		args := append([]string{"submit", "--dry-run", "--format", "json", "--policy", pol, "--tokens", tc.tokens, "--min-gpus", "8"}, job8b...)
		out, errOut, code := runSched(t, f, append(args, "--", "job.sh")...)
		if code != exitcode.OK {
			t.Fatalf("tokens %s: exit %d\n%s", tc.tokens, code, errOut)
		}
		s := decodeSubmit(t, out)
		if s.Chosen == nil || s.Chosen.Partition != tc.want || s.SubmittedJobID != "" || len(f.submitted) != 0 {
			t.Errorf("tokens %s: chose %+v (job %q, %d submitted), want %s\n%s", tc.tokens, s.Chosen, s.SubmittedJobID, len(f.submitted), tc.want, out)
		}
		// 8 and 16 GPUs on each partition, each asked of Slurm.
		if len(s.Candidates) != 4 || len(f.testOnly) != 4 {
			t.Errorf("tokens %s: %d candidates, %d --test-only calls, want 4 and 4", tc.tokens, len(s.Candidates), len(f.testOnly))
		}
		var h8, h16 float64 // hopper's GPU-seconds at 8 and 16
		for _, c := range s.Candidates {
			switch {
			case c.Partition == "hopper" && c.GPUs == 8:
				h8 = 8 * c.TrainS
			case c.Partition == "hopper" && c.GPUs == 16:
				h16 = 16 * c.TrainS
			}
		}
		for _, c := range s.Candidates {
			// hopper has one idle node (n1 is half held): sizing does not
			// grow into the held one (GrowFair) unless 16 GPUs take fewer
			// GPU-seconds than 8 (Frugal: then the larger size waits in the
			// queue and holds hopper for less), so 16 GPUs there get no
			// finish when they do not.
			grown := c.Partition == "hopper" && c.GPUs == 16 && h16 > h8
			if grown != strings.HasPrefix(c.Why, "sizing grows only into free nodes") {
				t.Errorf("tokens %s: %s×%d: why %q (hopper's GPU-seconds %.0f at 8, %.0f at 16)", tc.tokens, c.Partition, c.GPUs, c.Why, h8, h16)
			}
			if !c.Fits || c.Start == nil || (c.Finish == nil) != grown || c.Why == "" || c.TokensPerS <= 0 || c.TrainS <= 0 || c.Cost != nil {
				t.Errorf("tokens %s: candidate %+v", tc.tokens, c)
				continue
			}
			start, _ := time.Parse(time.RFC3339, *c.Start)
			if want := captureTime.Add(map[string]time.Duration{"hopper": 10 * time.Minute}[c.Partition]); !start.Equal(want) {
				t.Errorf("%s start %s, want %s (Slurm's)", c.Partition, *c.Start, want)
			}
		}
	}
}

// The request Slurm is asked, and the submission: partition, size, time,
// exclusive whole nodes, the user's sbatch flags passed through, and the
// chosen plan exported as TRAINRUN_PLAN, which trainrun run accepts for the
// allocation.
func TestSubmitSubmits(t *testing.T) {
	f := &fakeSched{t: t}
	dir := t.TempDir()
	args := append([]string{"submit", "--policy", policyFile(t, ampere40), "--tokens", "2e8", "--partition", "ampere", "--min-gpus", "16",
		"--account=proj", "--qos", "high", "--mail-type=END", "--job-name", "my job", "--exclusive", "--plan-dir", dir}, job8b...)
	out, errOut, code := runSched(t, f, append(args, "--", "job.sh", "arg 1")...)
	if code != exitcode.OK {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	if !strings.Contains(out, "Submitted batch job 1234") || !strings.Contains(out, "chosen: partition ampere, 2 node(s) × 8 GPUs") ||
		!strings.Contains(errOut, "sbatch: warning: a warning") {
		t.Errorf("stdout:\n%s\nstderr:\n%s", out, errOut)
	}
	if len(f.submitted) != 1 {
		t.Fatalf("submitted %q", f.submitted)
	}
	sub := f.submitted[0]
	for _, w := range []string{"sbatch --parsable --partition=ampere --nodes=2 --ntasks-per-node=8 --gpus-per-node=8 --exclusive --time=",
		" --account=proj --qos=high --mail-type=END --job-name my job --exclusive --export=ALL,TRAINRUN_PLAN=" + dir + "/plan-ampere-16gpus-",
		// The model beside the plan: run in the job renders its full flags.
		".json,TRAINRUN_MODEL=llama3-8b,TRAINRUN_BATCH=64x4096,",
		// The lead the limit was sized with: the job's own clock asks for the checkpoint then (issue 34).
		",TRAINRUN_SUBMIT_LEAD=", " job.sh arg 1"} {
		if !strings.Contains(sub, w) {
			t.Errorf("sbatch line %q lacks %q", sub, w)
		}
	}
	if strings.Contains(f.testOnly[0], "TRAINRUN_PLAN") || !strings.Contains(f.testOnly[0], "--account=proj") {
		t.Errorf("test-only request %q", f.testOnly[0])
	}
	_, after, _ := strings.Cut(sub, "TRAINRUN_PLAN=")
	path, _, _ := strings.Cut(after, ",")
	ev, err := run.ReadRunPlan(path, 16)
	if err != nil {
		t.Fatal(err)
	}
	s := decodeSubmit(t, mustRun(t, f, append(append([]string{"submit", "--dry-run", "--format", "json", "--policy", policyFile(t, ampere40), "--tokens", "2e8",
		"--partition", "ampere", "--min-gpus", "16"}, job8b...), "--", "job.sh")...))
	if ev.Layout.Config() != s.Chosen.Layout {
		t.Errorf("the plan file's layout %s, the chosen %s", ev.Layout.Config(), s.Chosen.Layout)
	}
}

func mustRun(t *testing.T, f *fakeSched, args ...string) string {
	t.Helper()
	out, errOut, code := runSched(t, f, args...)
	if code != exitcode.OK {
		t.Fatalf("%v: exit %d\n%s", args, code, errOut)
	}
	return out
}

// A small job is one partial node: --gpus-per-node=4, not exclusive.
func TestSubmitPartialNode(t *testing.T) {
	f := &fakeSched{t: t}
	args := append([]string{"submit", "--tokens", "1e8", "--partition", "hopper", "--gpus", "4", "--plan-dir", t.TempDir()}, job8b...)
	mustRun(t, f, append(args, "--", "job.sh")...)
	if len(f.submitted) != 1 || !strings.Contains(f.submitted[0], "--partition=hopper --nodes=1 --ntasks=4 --gpus-per-node=4 --time=") ||
		strings.Contains(f.submitted[0], "--exclusive") {
		t.Errorf("submitted %q", f.submitted)
	}
}

// sbatch's refusal is shown as sbatch printed it, and the exit says Slurm.
func TestSubmitSbatchRefuses(t *testing.T) {
	f := &fakeSched{t: t, refuse: "sbatch: error: Batch job submission failed: Invalid account or account/partition combination specified"}
	args := append([]string{"submit", "--tokens", "1e8", "--partition", "hopper", "--plan-dir", t.TempDir()}, job8b...)
	_, errOut, code := runSched(t, f, append(args, "--", "job.sh")...)
	if code != exitcode.Slurm || !strings.Contains(errOut, "\nsbatch: error: Batch job submission failed: Invalid account or account/partition combination specified\n") &&
		!strings.HasPrefix(errOut, "sbatch: error: Batch job submission failed") {
		t.Errorf("exit %d, stderr:\n%s", code, errOut)
	}
}

// a100 without GPUType: ampere is skipped with the key to set, or an error
// when named.
func TestSubmitAmbiguousGPU(t *testing.T) {
	f := &fakeSched{t: t}
	args := append([]string{"submit", "--dry-run", "--tokens", "1e8", "--min-gpus", "8"}, job8b...)
	out, errOut, code := runSched(t, f, append(args, "--", "job.sh")...)
	if code != exitcode.OK || !strings.Contains(errOut, "skipped: partition ampere: GRES type \"a100\" is ambiguous") ||
		!strings.Contains(errOut, "GPUType= on the policy's line 'PartitionName=ampere'") || strings.Contains(out, "ampere") {
		t.Errorf("exit %d\n%s\n%s", code, out, errOut)
	}
	// The note names the user's fix too; --dry-run shows the sbatch line (issue 30).
	if !strings.Contains(errOut, "give --gpu a100-80gb (or a100-40gb)") || !strings.Contains(out, "dry run: would submit  sbatch --partition=hopper ") ||
		!strings.Contains(out, " job.sh\n") || !strings.Contains(out, "--export=ALL,TRAINRUN_PLAN=") {
		t.Errorf("note or dry-run line:\n%s\n%s", out, errOut)
	}
	_, errOut, code = runSched(t, f, append(append(args, "--partition", "ampere,nosuch"), "--", "job.sh")...)
	if code != exitcode.Usage || !strings.Contains(errOut, "Slurm has no partition nosuch (it has: hopper, ampere)") {
		t.Errorf("exit %d\n%s", code, errOut)
	}
	_, errOut, code = runSched(t, f, append(append(args, "--partition", "ampere"), "--", "job.sh")...)
	if code != exitcode.Usage || !strings.Contains(errOut, "ambiguous") {
		t.Errorf("exit %d\n%s", code, errOut)
	}
}

// 70B on 8 GPUs fits only 80 GB cards: never the 40 GB ampere, even while
// hopper is busy; cost flips a choice when the policy prices it so.
func TestSubmitMemoryAndCost(t *testing.T) {
	f := &fakeSched{t: t}
	args := []string{"submit", "--dry-run", "--format", "json", "--model", "llama3-70b", "--seq-len", "4096", "--global-batch", "256",
		"--tokens", "1e8", "--max-gpus", "8", "--min-gpus", "8", "--policy", policyFile(t, ampere40), "--", "job.sh"}
	s := decodeSubmit(t, mustRun(t, f, args...))
	if s.Chosen == nil || s.Chosen.Partition != "hopper" {
		t.Fatalf("chose %+v", s.Chosen)
	}
	for _, c := range s.Candidates {
		if c.Partition == "ampere" && (c.Fits || !strings.Contains(c.Why, "does not fit")) {
			t.Errorf("ampere: %+v", c)
		}
	}
	// Both idle-ish and both fit (8B, 16 GPUs): finish picks hopper when
	// the job is long; a price 10× hopper's flips it to ampere.
	base := append([]string{"submit", "--dry-run", "--format", "json", "--tokens", "2e10", "--min-gpus", "16"}, job8b...)
	s = decodeSubmit(t, mustRun(t, f, append(append(base, "--policy", policyFile(t, ampere40)), "--", "job.sh")...))
	if s.Chosen.Partition != "hopper" {
		t.Fatalf("finish chose %s", s.Chosen.Partition)
	}
	priced := policyFile(t, "PartitionName=hopper GPUHourCost=20\nPartitionName=ampere GPUType=a100-40gb GPUHourCost=2\n")
	s = decodeSubmit(t, mustRun(t, f, append(append(base, "--policy", priced, "--objective", "cost"), "--", "job.sh")...))
	if s.Chosen.Partition != "ampere" {
		t.Errorf("cost chose %s", s.Chosen.Partition)
	}
	for _, c := range s.Candidates {
		if c.Cost == nil || *c.Cost <= 0 {
			t.Errorf("no cost: %+v", c)
		}
	}
	// Issue 30: --objective cost with no price anywhere is a usage error,
	// found before any sbatch --test-only.
	f.testOnly = nil
	_, errOut, code := runSched(t, f, append(append(base, "--policy", policyFile(t, ampere40), "--objective", "cost"), "--", "job.sh")...)
	if code != exitcode.Usage || !strings.Contains(errOut, "no GPUHourCost= for partition") || len(f.testOnly) != 0 {
		t.Errorf("unpriced cost: exit %d, %d test-only calls: %s", code, len(f.testOnly), errOut)
	}
}

func TestSubmitBoundsParallelTestOnly(t *testing.T) {
	f := &fakeSched{t: t}
	args := append([]string{"submit", "--dry-run", "--tokens", "1e8", "--policy", policyFile(t, ampere40), "--parallel", "2"}, job8b...)
	mustRun(t, f, append(args, "--", "job.sh")...)
	if f.maxFlight > 2 || len(f.testOnly) < 4 {
		t.Errorf("%d calls, at most %d at once; want at most 2", len(f.testOnly), f.maxFlight)
	}
}

func TestSubmitUsage(t *testing.T) {
	f := &fakeSched{t: t}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{append([]string{"submit"}, job8b...), "no script"},
		{append([]string{"submit", "--", "job.sh"}, job8b...), "no model"}, // the plan flags after -- are the script's
		{append(append([]string{"submit"}, job8b...), "--", "job.sh"), "--tokens: submit predicts"},
		{append(append([]string{"submit", "--tokens", "1e9", "--objective", "fast"}, job8b...), "--", "job.sh"), `--objective "fast"`},
		{append(append([]string{"submit", "--tokens", "1e9", "--format", "sbatch"}, job8b...), "--", "job.sh"), `--format "sbatch"`},
		{append(append([]string{"submit", "--tokens", "1e9", "--min-gpus", "9", "--max-gpus", "8"}, job8b...), "--", "job.sh"), "--min-gpus 9 --max-gpus 8"},
		{append(append([]string{"submit", "--tokens", "1e9", "stray"}, job8b...), "--", "job.sh"), `unexpected argument "stray"`},
	} {
		_, errOut, code := runSched(t, f, tc.args...)
		if code != exitcode.Usage || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %q", tc.args, code, errOut, tc.want)
		}
	}
}

func TestSplitSbatchArgs(t *testing.T) {
	var o submitOptions
	fs := newFlags("submit", "", &bytes.Buffer{})
	o.addFlags(fs, func(string) string { return "" })
	ours, pass, script, err := splitSbatchArgs(fs, strings.Fields("--model m --exclusive --tokens=1e9 --mail-user a@b --dry-run --constraint=ib -- job.sh --model x"))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(ours, strings.Fields("--model m --tokens=1e9 --dry-run")) ||
		!reflect.DeepEqual(pass, strings.Fields("--exclusive --mail-user a@b --constraint=ib")) ||
		!reflect.DeepEqual(script, strings.Fields("job.sh --model x")) {
		t.Errorf("ours %q pass %q script %q", ours, pass, script)
	}
}

func TestWithPlanExport(t *testing.T) {
	for _, tc := range []struct{ in, want []string }{
		{nil, []string{"--export=ALL,TRAINRUN_PLAN=/p.json"}},
		{[]string{"--export=ALL,X=1"}, []string{"--export=ALL,X=1,TRAINRUN_PLAN=/p.json"}},
		{[]string{"--export=NONE"}, []string{"--export=TRAINRUN_PLAN=/p.json"}},
	} {
		if got := withPlanExport(tc.in, "/p.json"); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("withPlanExport(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestPartitions(t *testing.T) {
	f := &fakeSched{t: t}
	out := mustRun(t, f, "partitions", "--free", "--policy", policyFile(t, ampere40+"PartitionName=hopper GPUHourCost=3\n"))
	for _, w := range []string{"hopper     UP     h100-sxm   8          1     1      0      0      12/16", "ampere     UP     a100-40gb  8          2     0      0      0      16/16",
		"nodes with idle GPUs:", "n1    hopper      h100       4/8   MIXED"} {
		if !strings.Contains(out, w) {
			t.Errorf("partitions lacks %q:\n%s", w, out)
		}
	}
	var pj partitionsJSON
	js := mustRun(t, f, append([]string{"partitions", "--format", "json", "--tokens", "1e9", "--policy", policyFile(t, ampere40)}, job8b...)...)
	if err := json.Unmarshal([]byte(js), &pj); err != nil {
		t.Fatal(err)
	}
	if len(pj.Partitions) != 2 || pj.Partitions[0].Fit == nil || !pj.Partitions[0].Fit.Fits || pj.Partitions[0].Fit.GPUs != 16 ||
		pj.Partitions[0].Fit.TokensPerSPerGPU <= pj.Partitions[1].Fit.TokensPerSPerGPU || pj.Partitions[0].Fit.Bound == "" {
		t.Errorf("partitions JSON:\n%s", js)
	}
	// Without a policy, ampere's a100 cannot be planned: the note says why.
	out = mustRun(t, f, "partitions")
	if !strings.Contains(out, "ampere     UP     ?") || !strings.Contains(out, "note: partition ampere: GRES type \"a100\" is ambiguous") {
		t.Errorf("partitions without a policy:\n%s", out)
	}
}

// Issue 30: a script that is not there is a usage error before Slurm is
// asked anything, not five rows of "Unable to open file" (exit 4).
func TestSubmitMissingScript(t *testing.T) {
	f := &fakeSched{t: t}
	args := append([]string{"submit", "--dry-run", "--tokens", "1e8", "--policy", policyFile(t, ampere40)}, job8b...)
	old := nowFunc
	nowFunc = func() time.Time { return captureTime }
	defer func() { nowFunc = old }()
	code, _, errOut := cli{slurm: slurm.Client{Run: f.run, RunStderr: f.runStderr, Location: time.UTC}}.run(append(args, "--", filepath.Join(t.TempDir(), "nonexistent.sh"))...)
	if code != exitcode.Usage || !strings.Contains(errOut, "nonexistent.sh: no such file or directory; sbatch reads it") || len(f.testOnly) != 0 {
		t.Errorf("exit %d, %d test-only calls: %s", code, len(f.testOnly), errOut)
	}
	code, _, errOut = cli{slurm: slurm.Client{Run: f.run, RunStderr: f.runStderr, Location: time.UTC}}.run(append(args, "--", t.TempDir())...)
	if code != exitcode.Usage || !strings.Contains(errOut, "is a directory") {
		t.Errorf("a directory: exit %d: %s", code, errOut)
	}
}

// A size range reaches the job (TRAINRUN_MIN_GPUS, TRAINRUN_MAX_GPUS: the
// whole-node sizes that fit, for a requeue to resize within); one size
// does not, so its requeues keep it.
func TestSubmitExportsSizeRange(t *testing.T) {
	for _, tc := range []struct {
		flags []string
		want  string // "" : no range exported
	}{
		{[]string{"--min-gpus", "8", "--max-gpus", "16"}, ",TRAINRUN_MIN_GPUS=8,TRAINRUN_MAX_GPUS=16"},
		{[]string{"--min-gpus", "8"}, ",TRAINRUN_MIN_GPUS=8,TRAINRUN_MAX_GPUS=16"}, // max: the partition's 2 nodes
		{[]string{"--gpus", "16"}, ""},
		{[]string{"--min-gpus", "16", "--max-gpus", "16"}, ""},
	} {
		f := &fakeSched{t: t}
		args := append(append([]string{"submit", "--policy", policyFile(t, ampere40), "--tokens", "2e8", "--partition", "ampere", "--plan-dir", t.TempDir()}, tc.flags...), job8b...)
		out, errOut, code := runSched(t, f, append(args, "--", "job.sh")...)
		if code != exitcode.OK || len(f.submitted) != 1 {
			t.Fatalf("%q: exit %d, submitted %q\n%s\n%s", tc.flags, code, f.submitted, out, errOut)
		}
		sub := f.submitted[0]
		if tc.want == "" && strings.Contains(sub, "TRAINRUN_MIN_GPUS") || tc.want != "" && !strings.Contains(sub, tc.want) {
			t.Errorf("%q: sbatch line %q, want %q", tc.flags, sub, cmp.Or(tc.want, "no TRAINRUN_MIN_GPUS"))
		}
	}
}
