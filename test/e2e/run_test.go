//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trainrun/trainrun/test/harness"
)

// A plain job on all 4 nodes × 8 GPUs: every rank reports its environment.
func TestRunPlainJob(t *testing.T) {
	bin := trainrun(t)
	out := t.TempDir()
	script := fmt.Sprintf(`#!/bin/bash
#SBATCH --nodes=4 --ntasks-per-node=8 --gpus-per-node=8 --time=5
exec %s run --probe all --fix tp=4,pp=2 --global-batch 64 -- /bin/sh -c 'env > "$0/rank-$RANK.env"; echo "ARGS=$1 $2 $3 $4 $5" >> "$0/rank-$RANK.env"' %s {tp} {pp} {dp} {grad_accum} {ckpt_dir}
`, bin, out)
	state, exit, log, id := runJob(t, script, 90*time.Second)
	if state != "COMPLETED" || exit != 0 {
		t.Fatalf("job %d: %s exit %d\n%s", id, state, exit, log)
	}
	if !strings.Contains(log, "layout      tp=4 pp=2 vpp=1 cp=1 ep=1 dp=4") || !strings.Contains(log, "8 of 8 TP groups (size 4) inside one node") {
		t.Errorf("summary missing from the job log:\n%s", log)
	}
	nodes := cluster.Nodes()
	type slot struct {
		node string
		gpu  string
	}
	seen := map[slot]int{}
	rankNode := map[int]string{}
	var port string
	for r := 0; r < 32; r++ {
		e := readEnvFile(t, filepath.Join(out, fmt.Sprintf("rank-%d.env", r)))
		node := e["SLURMD_NODENAME"]
		rankNode[r] = node
		want := map[string]string{
			"RANK": strconv.Itoa(r), "WORLD_SIZE": "32", "LOCAL_WORLD_SIZE": "8", "LOCAL_RANK": strconv.Itoa(r % 8),
			"NODE_RANK": strconv.Itoa(r / 8), "GROUP_RANK": strconv.Itoa(r / 8), "MASTER_ADDR": "127.0.0.1",
			"TRAINRUN_TP": "4", "TRAINRUN_PP": "2", "TRAINRUN_DP": "4", "TRAINRUN_CP": "1", "TRAINRUN_EP": "1", "TRAINRUN_VPP": "1",
			"TRAINRUN_MICRO_BATCH": "1", "TRAINRUN_GRAD_ACCUM": "16", "TRAINRUN_CKPT_SIGNAL": "USR2", "TRAINRUN_RESTART_COUNT": "0",
			"TRAINRUN_RESUME_DIR": "", "TRAINRUN_NODE": node,
		}
		for k, v := range want {
			if e[k] != v {
				t.Errorf("rank %d: %s=%q, want %q", r, k, e[k], v)
			}
		}
		if port == "" {
			port = e["MASTER_PORT"]
		}
		if e["MASTER_PORT"] != port || port == "" {
			t.Errorf("rank %d: MASTER_PORT=%q, rank 0 has %q", r, e["MASTER_PORT"], port)
		}
		if node != nodes[r/8] {
			t.Errorf("rank %d runs on %s, want %s (block order)", r, node, nodes[r/8])
		}
		if !strings.HasSuffix(e["TRAINRUN_PLAN"], "/plan.json") || e["TRAINRUN_CKPT_DIR"] == "" {
			t.Errorf("rank %d: TRAINRUN_PLAN=%q TRAINRUN_CKPT_DIR=%q", r, e["TRAINRUN_PLAN"], e["TRAINRUN_CKPT_DIR"])
		}
		if got := e["ARGS"]; got != "4 2 4 16 "+e["TRAINRUN_CKPT_DIR"] {
			t.Errorf("rank %d: templates gave %q", r, got)
		}
		// The GPU this rank drives: device LOCAL_RANK of its CUDA_VISIBLE_DEVICES.
		cvd := strings.Split(e["CUDA_VISIBLE_DEVICES"], ",")
		lr, _ := strconv.Atoi(e["LOCAL_RANK"])
		if len(cvd) != 8 || lr >= len(cvd) {
			t.Errorf("rank %d: CUDA_VISIBLE_DEVICES=%q", r, e["CUDA_VISIBLE_DEVICES"])
			continue
		}
		if cvd[lr] != e["TRAINRUN_GPU"] {
			t.Errorf("rank %d: device %d is GPU %s, plan says %s", r, lr, cvd[lr], e["TRAINRUN_GPU"])
		}
		seen[slot{node, cvd[lr]}]++
	}
	for _, n := range nodes {
		for g := 0; g < 8; g++ {
			if c := seen[slot{n, strconv.Itoa(g)}]; c != 1 {
				t.Errorf("(%s, GPU %d) used by %d ranks, want 1", n, g, c)
			}
		}
	}
	if len(seen) != 32 {
		t.Errorf("%d distinct (node, GPU) pairs, want 32: %v", len(seen), seen)
	}
	for r := 0; r < 32; r += 4 { // TP groups are ranks 4k..4k+3
		for i := 1; i < 4; i++ {
			if rankNode[r+i] != rankNode[r] {
				t.Errorf("TP group %d..%d spans %s and %s", r, r+3, rankNode[r], rankNode[r+i])
			}
		}
	}
}

// trainerReport is what contrib/trainer/train_example.py writes per rank.
type trainerReport struct {
	Rank     int      `json:"rank"`
	Node     string   `json:"node"`
	GPU      int      `json:"gpu"`
	Problems []string `json:"problems"`
	Groups   map[string]struct {
		Ranks []int    `json:"ranks"`
		Nodes []string `json:"nodes"`
		OK    bool     `json:"all_reduce_ok"`
	} `json:"groups"`
	EndStep int    `json:"end_step"`
	SHA     string `json:"weights_sha256"`
}

// A real PyTorch gloo job with the example trainer: 2 nodes × 2 GPUs, tp=2.
func TestRunPyTorchJob(t *testing.T) {
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("no /usr/bin/python3")
	}
	requireTorch(t)
	bin := trainrun(t)
	out := t.TempDir()
	trainer := exampleTrainer()
	script := fmt.Sprintf(`#!/bin/bash
#SBATCH --nodes=2 --ntasks-per-node=2 --gpus-per-node=2 --time=5
export GLOO_SOCKET_IFNAME=lo
exec %s run --fix tp=2 -- /usr/bin/python3 %s --steps 6 --expect-tp {tp} --report %s --out %s/weights
`, bin, trainer, out, out)
	state, exit, log, id := runJob(t, script, 3*time.Minute)
	if state != "COMPLETED" || exit != 0 {
		t.Fatalf("job %d: %s exit %d\n%s", id, state, exit, log)
	}
	var shas []string
	for r := 0; r < 4; r++ {
		b, err := os.ReadFile(filepath.Join(out, fmt.Sprintf("rank-%d.json", r)))
		if err != nil {
			t.Fatalf("%v\n%s", err, log)
		}
		var rep trainerReport
		if err := json.Unmarshal(b, &rep); err != nil {
			t.Fatal(err)
		}
		if len(rep.Problems) > 0 {
			t.Errorf("rank %d: %v", r, rep.Problems)
		}
		for name, g := range rep.Groups {
			if !g.OK {
				t.Errorf("rank %d: all_reduce in the %s group %v failed", r, name, g.Ranks)
			}
		}
		if tp := rep.Groups["tp"]; len(tp.Nodes) != 1 || len(tp.Ranks) != 2 {
			t.Errorf("rank %d: TP group %v on nodes %v, want 2 ranks on one node", r, tp.Ranks, tp.Nodes)
		}
		if rep.EndStep != 6 {
			t.Errorf("rank %d ended at step %d", r, rep.EndStep)
		}
		shas = append(shas, rep.SHA)
	}
	sort.Strings(shas)
	if shas[0] != shas[3] {
		t.Errorf("ranks ended with different weights: %v", shas)
	}
}

// User errors end the job with the documented exit code and a message that
// says what to change.
func TestRunUserErrors(t *testing.T) {
	bin := trainrun(t)
	tests := []struct {
		name   string
		sbatch string // #SBATCH line
		args   string
		exit   int
		msg    string
	}{
		{name: "command not found", sbatch: "--nodes=1 --ntasks-per-node=2 --gpus-per-node=2", args: "--probe none --fix tp=2 -- no-such-trainer --x",
			exit: 127, msg: `command "no-such-trainer" not found in PATH=`},
		{name: "layout does not fit", sbatch: "--nodes=1 --ntasks-per-node=2 --gpus-per-node=2", args: "--probe none --fix tp=4 -- true",
			exit: 10, msg: "tp×pp×cp = 4 does not divide the 2 GPUs"}, // exit 10 (layout), not 3 (no-fit): issue 30
		{name: "no GPUs", sbatch: "--nodes=1 --ntasks-per-node=2", args: "--probe none --fix tp=2 -- true",
			exit: 4, msg: "the job holds no GPUs (partition low"},
		{name: "tasks differ from GPUs", sbatch: "--nodes=1 --ntasks-per-node=1 --gpus-per-node=2", args: "--probe none --fix tp=2 -- true",
			exit: 4, msg: "add '#SBATCH --ntasks-per-node=2'"},
		{name: "model does not fit", sbatch: "--nodes=1 --ntasks-per-node=2 --gpus-per-node=2", args: "--probe none --model llama3-70b --seq-len 8192 --global-batch 16 --gpu a100-40gb -- true",
			exit: 3, msg: "fits 2 x a100-40gb"},
		{name: "no GPU type for the planner", sbatch: "--nodes=1 --ntasks-per-node=2 --gpus-per-node=2", args: "--probe all --layers 4 --hidden 256 --heads 8 --vocab 1024 --seq-len 128 --global-batch 8 -- true",
			exit: 2, msg: "pass --gpu TYPE"},
		{name: "trainer fails", sbatch: "--nodes=2 --ntasks-per-node=1 --gpus-per-node=1", args: "--probe none --max-failures 0 --fix tp=1 -- /bin/sh -c 'exit $((RANK+2))'",
			exit: 5, msg: "failed first with exit"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			script := fmt.Sprintf("#!/bin/bash\n#SBATCH %s --time=2\n%s run %s\n", tc.sbatch, bin, tc.args)
			_, exit, log, id := runJob(t, script, 90*time.Second)
			if exit != tc.exit || !strings.Contains(log, tc.msg) {
				t.Errorf("job %d: exit %d, want %d with %q in the log:\n%s", id, exit, tc.exit, tc.msg, log)
			}
		})
	}
}

// scancel, or Ctrl-C (SIGINT) to trainrun in the foreground, stops every task
// and leaves no process behind.
func TestRunCancelLeavesNothing(t *testing.T) {
	for _, how := range []string{"scancel", "SIGINT to trainrun"} {
		t.Run(how, func(t *testing.T) { testCancel(t, how) })
	}
}

func testCancel(t *testing.T, how string) {
	bin := trainrun(t)
	marker := fmt.Sprintf("trainrun-e2e-cancel-%d", time.Now().UnixNano())
	started := filepath.Join(t.TempDir(), "started")
	script := fmt.Sprintf(`#!/bin/bash
#SBATCH --nodes=2 --ntasks-per-node=2 --gpus-per-node=2 --time=5
exec %s run --probe none --fix tp=2 -- /bin/sh -c 'touch %s.$RANK; while :; do sleep 1; done; : %s'
`, bin, started, marker)
	ctx := context.Background()
	id, err := cluster.SubmitBatch(ctx, script)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cluster.Run(context.Background(), "scancel", strconv.Itoa(id)) })
	allStarted := func() bool {
		for r := 0; r < 4; r++ {
			if _, err := os.Stat(fmt.Sprintf("%s.%d", started, r)); err != nil {
				return false
			}
		}
		return true
	}
	if err := harness.WaitFor(ctx, 60*time.Second, "the 4 tasks to start", allStarted); err != nil {
		t.Fatalf("%v:\n%s", err, cluster.JobOutput(id))
	}
	// The marker is in the tasks' shells, their shims, srun and the controller.
	if n := countProcs(marker); n < 4 {
		t.Errorf("%d processes with the marker before stopping, want at least the 4 tasks", n)
	}
	want := "CANCELLED"
	if how == "scancel" {
		if _, err := cluster.Run(ctx, "scancel", strconv.Itoa(id)); err != nil {
			t.Fatal(err)
		}
	} else {
		pid := controllerPID(marker)
		if pid == 0 {
			t.Fatal("no trainrun run process found")
		}
		if err := syscall.Kill(pid, syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		want = "FAILED" // trainrun exits 7 (stopped)
	}
	state, err := cluster.WaitJob(ctx, id, 60*time.Second, want)
	if err != nil {
		t.Fatal(err)
	}
	if info, _ := cluster.JobInfo(ctx, id); how != "scancel" && info["ExitCode"] != "7:0" {
		t.Errorf("%s: job %s with ExitCode %s, want 7:0 (stopped)\n%s", how, state, info["ExitCode"], cluster.JobOutput(id))
	}
	// Issue 30: scancel's SIGTERM ends an scontrol trainrun is running too;
	// that is no warning (it was "... signal: terminated").
	if log := cluster.JobOutput(id); strings.Contains(log, "signal: terminated") {
		t.Errorf("%s: a warning about a command scancel's SIGTERM ended:\n%s", how, log)
	}
	for i := 0; i < 50 && countProcs(marker) > 0; i++ {
		time.Sleep(200 * time.Millisecond)
	}
	if n := countProcs(marker); n != 0 {
		t.Errorf("%d processes left after %s (marker %s)", n, how, marker)
	}
	if n := countProcs(fmt.Sprintf("trainrun-%d/launch", id)); n != 0 {
		out, _ := exec.Command("ps", "-eo", "pid,ppid,args").Output()
		t.Errorf("%d shims left after %s:\n%s", n, how, out)
	}
}

// controllerPID finds the `trainrun run` process whose command line holds s.
func controllerPID(s string) int {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		args := strings.Split(string(b), "\x00")
		if err == nil && len(args) > 2 && args[1] == "run" && strings.Contains(string(b), s) {
			return pid
		}
	}
	return 0
}

// countProcs counts processes whose command line contains s (not this test).
func countProcs(s string) int {
	ents, _ := os.ReadDir("/proc")
	n := 0
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil || e.Name() == strconv.Itoa(os.Getpid()) {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(strings.ReplaceAll(string(b), "\x00", " "), s) {
			n++
		}
	}
	return n
}

// The planner inside the job: a tiny explicit model on 1 node × 4 fake GPUs
// with --gpu (the fake devices have no name); the summary shows the prediction.
func TestRunPlanned(t *testing.T) {
	bin := trainrun(t)
	out := t.TempDir()
	script := fmt.Sprintf(`#!/bin/bash
#SBATCH --nodes=1 --ntasks-per-node=4 --gpus-per-node=4 --time=5
exec %s run --layers 4 --hidden 256 --heads 8 --vocab 1024 --seq-len 128 --global-batch 16 --gpu h100-sxm --fix tp=2,pp=1 \
  -- /bin/sh -c 'echo "$TRAINRUN_TP $TRAINRUN_DP $TRAINRUN_GRAD_ACCUM $*" > "%s/rank-$RANK"' x {megatron_args}
`, bin, out)
	state, exit, log, id := runJob(t, script, 90*time.Second)
	if state != "COMPLETED" || exit != 0 {
		t.Fatalf("job %d: %s exit %d\n%s", id, state, exit, log)
	}
	if !strings.Contains(log, "predicted   step") || !strings.Contains(log, "layout      tp=2 pp=1") {
		t.Errorf("no prediction or layout in the summary:\n%s", log)
	}
	b, err := os.ReadFile(filepath.Join(out, "rank-3"))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(b); !strings.HasPrefix(got, "2 2 ") || !strings.Contains(got, "--tensor-model-parallel-size 2") {
		t.Errorf("rank 3 saw %q", got)
	}
}

// A trainer that crashes at start is requeued (--max-restarts 0: no restart
// inside the job first) until --max-failures runs in a row failed without
// progress, then the job stops with exit 8 and the reason.
func TestRunRequeueLoopBounded(t *testing.T) {
	bin := trainrun(t)
	script := fmt.Sprintf(`#!/bin/bash
#SBATCH --nodes=1 --ntasks-per-node=2 --gpus-per-node=2 --time=5 --requeue --open-mode=append
exec %s run --probe none --max-failures 2 --max-restarts 0 --fix tp=2 -- /bin/sh -c 'exit 3'
`, bin)
	state, exit, log, id := runJob(t, script, 3*time.Minute)
	info, _ := cluster.JobInfo(context.Background(), id)
	if state != "FAILED" || exit != 8 || info["Restarts"] != "1" {
		t.Errorf("job %d: %s exit %d Restarts=%s, want FAILED, exit 8 after 1 requeue:\n%s", id, state, exit, info["Restarts"], log)
	}
	for _, want := range []string{"(failure 1 of at most 2 in a row without progress); requeued", "2 run(s) in a row failed without progress"} {
		if !strings.Contains(log, want) {
			t.Errorf("job log lacks %q:\n%s", want, log)
		}
	}
}
