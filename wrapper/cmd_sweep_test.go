package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trainrun/trainrun/checkpoint"
	"github.com/trainrun/trainrun/internal/slurm"
	"github.com/trainrun/trainrun/wrapper/internal/array"
	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
)

// fakeSlurm answers sbatch with a job id and scontrol show job with out,
// recording every command line.
type fakeSlurm struct {
	calls    []string
	showJob  string
	nodesOut string
}

func (f *fakeSlurm) run(_ context.Context, name string, args ...string) ([]byte, error) {
	line := strings.Join(append([]string{name}, args...), " ")
	f.calls = append(f.calls, line)
	switch {
	case name == slurm.Sbatch:
		return []byte("77\n"), nil
	case strings.HasPrefix(line, "scontrol show job -o 77"):
		return []byte(f.showJob), nil
	case line == "scontrol -d show node -o" && f.nodesOut != "":
		return []byte(f.nodesOut), nil
	}
	return nil, &slurm.Error{Args: append([]string{name}, args...), Err: fmt.Errorf("exit status 1"), Stderr: "slurm_load_jobs error: Invalid job id specified"}
}

func sweepEnv(f *fakeSlurm) (*runEnv, *bytes.Buffer, *bytes.Buffer) {
	var out, errb bytes.Buffer
	return &runEnv{stdout: &out, stderr: &errb, stdin: strings.NewReader(""), getenv: func(string) string { return "" },
		slurm: slurm.Client{Run: f.run}}, &out, &errb
}

func TestSweepSubmitsOneArray(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sw")
	f := &fakeSlurm{}
	env, out, errb := sweepEnv(f)
	code := dispatch(context.Background(), env, []string{"sweep", "--grid", "lr=0.01,0.05,0.2", "--grid", "mom=0,0.9", "--max-concurrent", "2",
		"--time", "5m", "--gpus-per-node", "1", "--fix", "tp=1", "--sweep-dir", dir, "--format", "json", "--",
		"python3", "train.py", "--lr", "{lr}", "--momentum={mom}", "--tp", "{tp}"})
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	var j struct {
		Dir    string `json:"sweep_dir"`
		JobID  string `json:"job_id"`
		Trials []struct {
			Index  int               `json:"index"`
			Params map[string]string `json:"params"`
		} `json:"trials"`
	}
	if err := json.Unmarshal(out.Bytes(), &j); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if j.Dir != dir || j.JobID != "77" || len(j.Trials) != 6 || j.Trials[3].Params["lr"] != "0.05" || j.Trials[3].Params["mom"] != "0.9" {
		t.Errorf("json: %+v", j)
	}
	if len(f.calls) != 1 || !strings.HasPrefix(f.calls[0], "sbatch --parsable --job-name=sweep-") ||
		!strings.Contains(f.calls[0], " --array=0-5%2 ") || !strings.Contains(f.calls[0], "--nodes=1 --ntasks-per-node=1 --gpus-per-node=1 --time=5 ") ||
		!strings.Contains(f.calls[0], "--requeue --open-mode=append "+filepath.Join(dir, "sweep.sbatch")) {
		t.Errorf("sbatch call: %q", f.calls)
	}
	script, err := os.ReadFile(filepath.Join(dir, "sweep.sbatch"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"3)\n  export TRAINRUN_SWEEP_LR=0.05 TRAINRUN_SWEEP_MOM=0.9\n  exec ",
		" run --name trial-3 --job-dir " + dir + " --fix=tp=1 -- python3 train.py --lr 0.05 --momentum=0.9 --tp '{tp}' ;;",
		"export TRAINRUN_SWEEP=",
	} {
		if !strings.Contains(string(script), want) {
			t.Errorf("script lacks %q:\n%s", want, script)
		}
	}
	m, err := array.ReadManifest(dir)
	if err != nil || m.JobID != "77" || len(m.Trials) != 6 || m.TimeLimitS != 300 || m.TimeSource != "given" {
		t.Errorf("manifest %+v %v", m, err)
	}
	// the same sweep again is refused, naming the directory
	env2, _, errb2 := sweepEnv(f)
	if code := dispatch(context.Background(), env2, []string{"sweep", "--grid", "lr=1,2", "--time", "5m", "--gpus-per-node", "1", "--fix", "tp=1", "--sweep-dir", dir, "--", "x", "{lr}"}); code != exitcode.Usage ||
		!strings.Contains(errb2.String(), "already holds a sweep") {
		t.Errorf("second sweep into %s: exit %d %s", dir, code, errb2)
	}
}

func TestSweepDryRunWritesNothingAndSizesFromSlurm(t *testing.T) {
	nodes, err := os.ReadFile("../internal/slurm/testdata/show-node-o.txt")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeSlurm{nodesOut: string(nodes)}
	env, out, errb := sweepEnv(f)
	dir := filepath.Join(t.TempDir(), "sw")
	code := dispatch(context.Background(), env, []string{"sweep", "--random", "3", "--range", "lr=1e-4:1e-2:log", "--time", "20", "--fix", "tp=1",
		"--sweep-dir", dir, "--dry-run", "--", "python3", "t.py", "--lr={lr}"})
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	s := out.String()
	for _, want := range []string{"3 trials (lr)", "--array=0-2", "1 node(s) x 8 GPU(s)", "time limit 20m0s (given)", "dry run: would submit  sbatch --parsable", "--gpus-per-node=8", "#!/bin/bash"} {
		if !strings.Contains(s, want) {
			t.Errorf("dry run output lacks %q:\n%s", want, s)
		}
	}
	if _, err := os.Stat(dir); err == nil {
		t.Error("a dry run created the sweep dir")
	}
	for _, c := range f.calls {
		if strings.HasPrefix(c, "sbatch") {
			t.Errorf("a dry run ran %q", c)
		}
	}
}

func TestSweepPlansTheTimeLimit(t *testing.T) {
	env, out, errb := sweepEnv(&fakeSlurm{})
	args := []string{"sweep", "--grid", "lr=1e-4,3e-4", "--model", "llama3-8b", "--gpu", "h100-sxm", "--gpus-per-node", "8", "--seq-len", "4096",
		"--global-batch", "64", "--steps", "200", "--dry-run", "--proxy-scale", "0.25", "--", "python3", "t.py", "--lr", "{lr}"}
	if code := dispatch(context.Background(), env, args); code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	s := out.String()
	for _, want := range []string{"(planned: 200 steps at ", "on the model scaled by 0.25", "GPU-hours on the full model (", "export TRAINRUN_PROXY_LAYERS=8", " --layers=8 --hidden=1024 "} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	// without --time and without a model: a clear error that says what to give
	env2, _, errb2 := sweepEnv(&fakeSlurm{})
	if code := dispatch(context.Background(), env2, []string{"sweep", "--grid", "lr=1,2", "--gpus-per-node", "1", "--dry-run", "--", "x", "{lr}"}); code != exitcode.Usage ||
		!strings.Contains(errb2.String(), "--time not given") || !strings.Contains(errb2.String(), "give --time LIMIT") {
		t.Errorf("exit %d: %s", code, errb2)
	}
	// The fix comes first, before the planner's long list of presets (issue 30).
	if i, j := strings.Index(errb2.String(), "give --time LIMIT"), strings.Index(errb2.String(), "llama3-8b"); j >= 0 && i > j {
		t.Errorf("the fix comes after the preset list: %s", errb2)
	}
}

func TestSweepStatus(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sw")
	f := &fakeSlurm{}
	env, _, errb := sweepEnv(f)
	if code := dispatch(context.Background(), env, []string{"sweep", "--grid", "lr=0.1,0.2,0.3", "--time", "5m", "--gpus-per-node", "1", "--fix", "tp=1", "--sweep-dir", dir, "--", "x", "{lr}"}); code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	// trial 0 finished with loss 0.5, trial 1 finished with loss 0.25, trial 2 runs at step 4
	for i, p := range []string{"10 0 1764547200.0\n{\"loss\":0.5}\n", "10 0 1764547200.0\n{\"loss\":0.25}\n", "4 0 1764547200.0\n{\"loss\":0.9}\n"} {
		rd := filepath.Join(dir, "runs", fmt.Sprintf("trial-%d", i))
		os.MkdirAll(filepath.Join(rd, "launch"), 0o755)
		os.MkdirAll(filepath.Join(rd, "checkpoints"), 0o700)
		os.WriteFile(filepath.Join(rd, "launch", "progress"), []byte(p), 0o644)
		if i < 2 {
			st, _ := checkpoint.Open(filepath.Join(rd, "checkpoints"))
			if err := st.MarkFinished(checkpoint.Finished{JobID: "7", Time: time.Now()}); err != nil {
				t.Fatal(err)
			}
		}
	}
	f.showJob = "JobId=78 ArrayJobId=77 ArrayTaskId=0 JobState=COMPLETED Reason=None Restarts=0 ExitCode=0:0\n" +
		"JobId=79 ArrayJobId=77 ArrayTaskId=1 JobState=COMPLETED Reason=None Restarts=1 ExitCode=0:0\n" +
		"JobId=80 ArrayJobId=77 ArrayTaskId=2 JobState=RUNNING Reason=None Restarts=0 ExitCode=0:0\n"
	env, out, errb := sweepEnv(f)
	if code := dispatch(context.Background(), env, []string{"sweep", "status", dir, "--format", "json"}); code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	var j struct {
		Trials []struct {
			Index  int                `json:"index"`
			State  string             `json:"state"`
			Steps  int                `json:"steps"`
			Metric map[string]float64 `json:"metric"`
		} `json:"trials"`
		Best struct {
			Index  int                `json:"index"`
			Params map[string]string  `json:"params"`
			Metric map[string]float64 `json:"metric"`
		} `json:"best"`
	}
	if err := json.Unmarshal(out.Bytes(), &j); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(j.Trials) != 3 || j.Trials[0].State != "finished" || j.Trials[2].State != "running" || j.Trials[2].Steps != 4 || j.Trials[1].Metric["loss"] != 0.25 {
		t.Errorf("trials: %+v", j.Trials)
	}
	if j.Best.Index != 1 || j.Best.Params["lr"] != "0.2" || j.Best.Metric["loss"] != 0.25 {
		t.Errorf("best: %+v", j.Best)
	}
	// table, --maximize and --svg
	svg := filepath.Join(t.TempDir(), "s.svg")
	env, out, errb = sweepEnv(f)
	if code := dispatch(context.Background(), env, []string{"sweep", "status", dir, "--maximize", "--svg", svg}); code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	if !strings.Contains(out.String(), "best: trial 2 (lr=0.3) loss 0.9") || !strings.Contains(out.String(), "2 finished, 1 running") {
		t.Errorf("table:\n%s", out)
	}
	if b, err := os.ReadFile(svg); err != nil || strings.Count(string(b), "<circle") != 3 {
		t.Errorf("svg: %v\n%s", err, b)
	}
	if !strings.Contains(errb.String(), "wrote "+svg) { // issue 30: it said nothing
		t.Errorf("stderr does not say the SVG was written:\n%s", errb)
	}
	// once Slurm forgot the array, the files decide
	f.showJob = ""
	env, out, _ = sweepEnv(f)
	dispatch(context.Background(), env, []string{"sweep", "status", dir})
	if !strings.Contains(out.String(), "2 finished, 0 running") || !strings.Contains(out.String(), "no longer knows") {
		t.Errorf("after the array aged out:\n%s", out)
	}
}

// trainrun_sweep_trials{state}: the textfile a node_exporter reads, and the
// Pushgateway group job=trainrun_sweep, sweep=NAME.
func TestSweepStatusMetrics(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sw")
	f := &fakeSlurm{}
	env, _, errb := sweepEnv(f)
	if code := dispatch(context.Background(), env, []string{"sweep", "--name", "lrs", "--grid", "lr=0.1,0.2,0.3", "--time", "5m", "--gpus-per-node", "1", "--fix", "tp=1", "--sweep-dir", dir, "--", "x", "{lr}"}); code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	f.showJob = "JobId=78 ArrayJobId=77 ArrayTaskId=0 JobState=RUNNING Reason=None Restarts=0 ExitCode=0:0\n" +
		"JobId=77 ArrayJobId=77 ArrayTaskId=1-2%1 JobState=PENDING Reason=JobArrayTaskLimit Restarts=0 ExitCode=0:0\n"
	var pushed []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		pushed = append(pushed, r.Method+" "+r.URL.Path+" "+string(b))
	}))
	defer srv.Close()
	prom := filepath.Join(t.TempDir(), "sweep.prom")
	env, _, errb = sweepEnv(f)
	if code := dispatch(context.Background(), env, []string{"sweep", "status", dir, "--metrics-textfile", prom, "--pushgateway", srv.URL}); code != 0 || errb.Len() > 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	b, _ := os.ReadFile(prom)
	for _, want := range []string{`trainrun_sweep_trials{state="pending",sweep="lrs"} 2`, `trainrun_sweep_trials{state="running",sweep="lrs"} 1`, `trainrun_sweep_trials{state="finished",sweep="lrs"} 0`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("textfile lacks %q:\n%s", want, b)
		}
	}
	if len(pushed) != 1 || !strings.HasPrefix(pushed[0], "PUT /metrics/job/trainrun_sweep/sweep/lrs ") {
		t.Errorf("pushes: %q", pushed)
	}
}

// --early-stop forecast takes its budget from --steps (and the trials get
// it as TRAINRUN_TRAIN_STEPS); without one, or with --maximize, a usage
// error says what to give.
func TestSweepEarlyStopForecastBudget(t *testing.T) {
	base := []string{"sweep", "--grid", "lr=1,2", "--gpus-per-node", "1", "--time", "10", "--fix", "tp=1", "--dry-run"}
	env, out, errb := sweepEnv(&fakeSlurm{})
	if code := dispatch(context.Background(), env, append(base, "--early-stop", "forecast:0.05:20", "--steps", "90", "--", "x", "{lr}")); code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	for _, want := range []string{"TRAINRUN_EARLY_STOP=forecast:0.05:20:90 ", "export TRAINRUN_TRAIN_STEPS=90\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("script lacks %q:\n%s", want, out)
		}
	}
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--early-stop", "forecast"}, "give --steps N"},
		{[]string{"--early-stop", "forecast", "--steps", "90", "--maximize"}, "use asha"},
		{[]string{"--early-stop", "forecast:0.7"}, "in (0, 0.5)"},
	} {
		env, _, errb := sweepEnv(&fakeSlurm{})
		if code := dispatch(context.Background(), env, append(append(base, c.args...), "--", "x", "{lr}")); code != exitcode.Usage || !strings.Contains(errb.String(), c.msg) {
			t.Errorf("%v: exit %d %s, want usage and %q", c.args, code, errb, c.msg)
		}
	}
}
