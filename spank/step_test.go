package spank

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/trainrun/trainrun/plan"
	"github.com/trainrun/trainrun/plan/policy"
	"github.com/trainrun/trainrun/topo"
	"github.com/trainrun/trainrun/topo/snapshot"
)

// machine unpacks a captured machine and reads it as the plugin does.
func machine(t testing.TB, name string) (string, *topo.Node) {
	t.Helper()
	dir, cleanup, err := snapshot.UnpackTemp(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cleanup)
	n, _, err := NodeTopology("", dir)
	if err != nil {
		t.Fatal(err)
	}
	return dir, n
}

// goldenVars reads the KEY=VALUE lines `trainrun env` printed.
func goldenVars(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := sc.Text()
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		k, v, _ := strings.Cut(l, "=")
		if strings.HasPrefix(v, "'") { // shell-quoted
			v = strings.ReplaceAll(strings.Trim(v, "'"), `'\''`, "'")
		}
		out = append(out, k+"="+v)
	}
	return out
}

// TestSameAsTrainrunEnv: the plugin's computation for the task that gets
// rank 17 equals `trainrun env --rank 17` with the same settings, as pinned
// by the wrapper's golden file (hgx-h100, gpu[01-04], tp=8,pp=2, job 4242).
func TestSameAsTrainrunEnv(t *testing.T) {
	root, node := machine(t, "hgx-h100")
	c := &Config{Policy: policy.Default()}
	r, err := Resolve(c, "", map[string]string{"train-layout": "tp=8,pp=2"}, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	want := goldenVars(t, filepath.Join("..", "wrapper", "testdata", "env-hgx-h100-rank17.golden"))
	found := false
	for nodeID := 0; nodeID < 4; nodeID++ {
		tasks, _, err := ComputeStep(c, r, Step{JobID: 4242, NodeID: nodeID, NNodes: 4, LocalTasks: 8, TotalTasks: 32,
			Nodelist: "gpu[01-04]", NodeAddrs: []string{"10.0.0.11"}, Root: root}, node)
		if err != nil {
			t.Fatal(err)
		}
		for _, task := range tasks {
			if task.Rank != 17 {
				continue
			}
			found = true
			var got []string
			megatron := ""
			for _, kv := range task.Vars {
				if strings.HasPrefix(kv, "TRAINRUN_CKPT_") || strings.HasPrefix(kv, "TRAINRUN_RESTART_COUNT=") {
					continue // the plugin's own: the checkpoint handshake
				}
				if v, ok := strings.CutPrefix(kv, "TRAINRUN_MEGATRON_ARGS="); ok {
					megatron = v // the plugin's own (trainrun env prints no flags): checked below
					continue
				}
				got = append(got, kv)
			}
			// A layout pinned without a model: the layout's flags, as
			// `trainrun run --fix tp=8,pp=2` gives {megatron_args}
			// (wrapper/plugin_plan_test.go compares a planned step's with
			// `trainrun plan --format megatron`).
			l, err := r.Pins.Layout(32, r.Global)
			if err != nil {
				t.Fatal(err)
			}
			ml, err := MegatronLayout(l, 32)
			if err != nil {
				t.Fatal(err)
			}
			args, err := plan.MegatronLayoutArgs(ml, plan.Job{GlobalBatch: r.Global, Precision: r.Precision, Stack: r.Stack})
			if err != nil {
				t.Fatal(err)
			}
			if want := plan.ShellJoin(args); megatron != want || !strings.Contains(megatron, "--tensor-model-parallel-size 8 --pipeline-model-parallel-size 2") {
				t.Errorf("node %d: TRAINRUN_MEGATRON_ARGS=%q, want %q", nodeID, megatron, want)
			}
			if !slices.Equal(got, want) {
				t.Errorf("node %d: rank 17's variables differ from trainrun env's:\n got %q\nwant %q", nodeID, got, want)
			}
		}
	}
	if !found {
		t.Fatal("no task got rank 17")
	}
}

func TestComputeStep(t *testing.T) {
	root, node := machine(t, "hgx-h100")
	c := policyConfig(t, "NCCLForce=NCCL_IB_TIMEOUT=22\nNCCLDefault=NCCL_DEBUG=WARN\nPartitionName=quiet InjectEnv=no\n")
	step := Step{JobID: 7, StepID: 3, NodeID: 1, NNodes: 2, LocalTasks: 8, TotalTasks: 16, Nodelist: "gpu[1-2]",
		NodeAddrs: []string{"10.0.0.11"}, Root: root, User: "ann", JobName: "pretrain", Restart: 2,
		Getenv: func(k string) (string, bool) {
			if k == "NCCL_DEBUG" {
				return "INFO", true
			}
			return "", false
		}}
	get := func(vars []string, k string) (string, bool) {
		for _, kv := range vars {
			if kk, v, _ := strings.Cut(kv, "="); kk == k {
				return v, true
			}
		}
		return "", false
	}
	t.Run("policy and user", func(t *testing.T) {
		r, err := Resolve(c, "", map[string]string{"train-ckpt": "/ckpt/%u/%x/%j", "train-model": "llama3-8b"}, func(string) string { return "" })
		if err != nil {
			t.Fatal(err)
		}
		tasks, _, err := ComputeStep(c, r, step, node)
		if err != nil {
			t.Fatal(err)
		}
		if len(tasks) != 8 {
			t.Fatalf("%d tasks, want 8", len(tasks))
		}
		for lr, task := range tasks {
			for k, want := range map[string]string{
				"RANK": itoa(8 + lr), "LOCAL_RANK": itoa(lr), "WORLD_SIZE": "16", "NODE_RANK": "1", "MASTER_ADDR": "gpu1", "MASTER_PORT": "29206",
				"NCCL_IB_TIMEOUT": "22", "TRAINRUN_CKPT_DIR": "/ckpt/ann/pretrain/7", "TRAINRUN_MODEL": "llama3-8b",
				"TRAINRUN_RESTART_COUNT": "2", "TRAINRUN_CKPT_SIGNAL": "USR2", "TRAINRUN_CKPT_LEAD": "300",
			} {
				if got, _ := get(task.Vars, k); got != want {
					t.Errorf("local task %d: %s=%q, want %q", lr, k, got, want)
				}
			}
			if v, ok := get(task.Vars, "NCCL_DEBUG"); ok {
				t.Errorf("NCCL_DEBUG=%s injected over the user's INFO (a policy default only fills what is unset)", v)
			}
			if _, ok := get(task.Vars, "NCCL_IB_HCA"); !ok {
				t.Errorf("local task %d: no NCCL_IB_HCA on an InfiniBand node", lr)
			}
		}
	})
	t.Run("handoff dir", func(t *testing.T) {
		r, _ := Resolve(c, "", nil, func(string) string { return "" })
		for _, dir := range []string{"", "/run/trainrun/job-7/handoff"} {
			st := step
			st.HandoffDir = dir
			tasks, _, err := ComputeStep(c, r, st, node)
			if err != nil {
				t.Fatal(err)
			}
			for lr, task := range tasks {
				if got, ok := get(task.Vars, "TRAINRUN_HANDOFF_DIR"); got != dir || ok != (dir != "") {
					t.Errorf("HandoffDir %q: local task %d has TRAINRUN_HANDOFF_DIR=%q (set: %v)", dir, lr, got, ok)
				}
			}
		}
	})
	t.Run("nccl off", func(t *testing.T) {
		r, _ := Resolve(c, "", map[string]string{"train-nccl": "off"}, func(string) string { return "" })
		tasks, _, err := ComputeStep(c, r, step, node)
		if err != nil {
			t.Fatal(err)
		}
		for _, kv := range tasks[0].Vars {
			if k, _, _ := strings.Cut(kv, "="); !launcherKey(k) {
				t.Errorf("--train-nccl=off injected %s", kv)
			}
		}
		if _, ok := get(tasks[0].Vars, "RANK"); !ok {
			t.Error("--train-nccl=off dropped RANK")
		}
	})
	t.Run("InjectEnv=no and explain", func(t *testing.T) {
		r, _ := Resolve(c, "quiet", nil, func(string) string { return "" })
		tasks, notes, err := ComputeStep(c, r, step, node)
		if err != nil {
			t.Fatal(err)
		}
		if len(tasks[0].Vars) != 0 || !slices.ContainsFunc(notes, func(n string) bool { return strings.Contains(n, "InjectEnv=no") }) {
			t.Errorf("InjectEnv=no: vars %q, notes %q", tasks[0].Vars, notes)
		}
		r, _ = Resolve(c, "", map[string]string{"train-explain": "1"}, func(string) string { return "" })
		tasks, _, _ = ComputeStep(c, r, step, node)
		if len(tasks[3].Vars) != 0 || !strings.Contains(tasks[3].Explain, "dry run") || !strings.Contains(tasks[3].Explain, "\nRANK=11\n") {
			t.Errorf("explain: vars %q, text:\n%s", tasks[3].Vars, tasks[3].Explain)
		}
	})
	t.Run("errors", func(t *testing.T) {
		for _, tc := range []struct {
			name    string
			mod     func(*Step)
			layout  string
			wantErr string
		}{
			{"uneven tasks with a layout", func(s *Step) { s.TotalTasks = 15 }, "tp=1", "places the same number of tasks on every node"},
			{"layout does not divide", nil, "tp=3", "--train-layout=tp=3: tp×pp×cp = 3 does not divide the 16 GPUs"},
			{"layout too big", nil, "tp=8,dp=4", "uses 32 GPUs, but there are 16"},
			{"node list mismatch", func(s *Step) { s.Nodelist = "gpu[1-3]" }, "", "has 3 nodes; Slurm says 2"},
			{"bad node list", func(s *Step) { s.Nodelist = "gpu[1-" }, "", "step node list"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				st := step
				if tc.mod != nil {
					tc.mod(&st)
				}
				given := map[string]string{}
				if tc.layout != "" {
					given["train-layout"] = tc.layout
				}
				r, err := Resolve(c, "", given, func(string) string { return "" })
				if err != nil {
					t.Fatal(err)
				}
				_, _, err = ComputeStep(c, r, st, node)
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("err = %v, want %q", err, tc.wantErr)
				}
			})
		}
	})
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

// TestNodeTopologyCache: the second read comes from the cache and is the
// same node; the cache is keyed by boot id.
func TestNodeTopologyCache(t *testing.T) {
	root, _ := machine(t, "dgx-a100")
	if err := os.MkdirAll(filepath.Join(root, "proc/sys/kernel/random"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "proc/sys/kernel/random/boot_id"), []byte("1234-abcd\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	a, fromCache, err := NodeTopology(cache, root)
	if err != nil || fromCache {
		t.Fatalf("first read: fromCache=%v err=%v", fromCache, err)
	}
	if _, err := os.Stat(filepath.Join(cache, "node-1234-abcd.json")); err != nil {
		t.Fatal(err)
	}
	b, fromCache, err := NodeTopology(cache, root)
	if err != nil || !fromCache {
		t.Fatalf("second read: fromCache=%v err=%v", fromCache, err)
	}
	if !reflect.DeepEqual(a, b) {
		ja, _ := json.Marshal(a)
		jb, _ := json.Marshal(b)
		t.Errorf("cached node differs:\n%s\n%s", ja, jb)
	}
	// And the environment computed from either is the same.
	c := &Config{Policy: policy.Default()}
	r, _ := Resolve(c, "", nil, func(string) string { return "" })
	st := Step{JobID: 1, NNodes: 1, LocalTasks: 8, TotalTasks: 8, Nodelist: "a", NodeAddrs: []string{"10.1.1.1"}, Root: root}
	ta, _, err1 := ComputeStep(c, r, st, a)
	tb, _, err2 := ComputeStep(c, r, st, b)
	if err1 != nil || err2 != nil || !reflect.DeepEqual(ta, tb) {
		t.Errorf("env from discovery and from cache differ (%v, %v)", err1, err2)
	}
	if err := WriteStepEnv(cache, st, ta, nil); err != nil {
		t.Fatal(err)
	}
	if err := CleanJob(cache, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(JobDir(cache, 1)); !os.IsNotExist(err) {
		t.Errorf("job dir left after CleanJob: %v", err)
	}
	if _, err := os.Stat(filepath.Join(cache, "node-1234-abcd.json")); err != nil {
		t.Errorf("CleanJob removed the node cache: %v", err)
	}
}

// TestUnevenStep: a step trainrun cannot place (tasks differ between
// nodes) gets nothing and fails nothing when nothing was asked of trainrun
// (srun -n3 hostname under a required plugin), and fails with the reason
// when a layout or model was.
func TestUnevenStep(t *testing.T) {
	root, node := machine(t, "hgx-h100")
	c := &Config{Policy: policy.Default()}
	st := Step{JobID: 7, NodeID: 0, NNodes: 2, LocalTasks: 15, TotalTasks: 16, Nodelist: "n[1-2]", NodeAddrs: []string{"10.0.0.1"}, Root: root}
	r, _ := Resolve(c, "", nil, func(string) string { return "" })
	tasks, notes, err := ComputeStep(c, r, st, node)
	if err != nil || tasks != nil || len(notes) != 1 || !strings.Contains(notes[0], "16 tasks over 2 nodes with 15 here") || !strings.Contains(notes[0], "nothing injected") {
		t.Errorf("plain uneven step: tasks %v, notes %q, err %v; want none, one note, no error", tasks, notes, err)
	}
	for _, given := range []map[string]string{{"train-layout": "tp=2"}, {"train-model": "llama3-8b"}} {
		r, err := Resolve(c, "", given, func(string) string { return "" })
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := ComputeStep(c, r, st, node); err == nil || !strings.Contains(err.Error(), "use --ntasks-per-node") {
			t.Errorf("%v on an uneven step: err %v, want the reason", given, err)
		}
	}
}

// TestNodeAddrsCache: a node's name is resolved once per boot; a name that
// did not resolve is asked again only after the negative TTL; another boot
// asks again.
func TestNodeAddrsCache(t *testing.T) {
	root := t.TempDir()
	bootDir := filepath.Join(root, "proc/sys/kernel/random")
	if err := os.MkdirAll(bootDir, 0o755); err != nil {
		t.Fatal(err)
	}
	setBoot := func(id string) {
		if err := os.WriteFile(filepath.Join(bootDir, "boot_id"), []byte(id+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	setBoot("boot-1")
	cache := t.TempDir()
	calls := map[string]int{}
	answer := map[string][]string{"gpu01": {"10.0.0.11"}}
	resolve := func(h string) []string { calls[h]++; return answer[h] }
	t0 := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	for i := 0; i < 3; i++ {
		if got := NodeAddrs(cache, root, "gpu01", resolve, t0.Add(time.Duration(i)*time.Hour)); !slices.Equal(got, []string{"10.0.0.11"}) {
			t.Fatalf("gpu01: %q", got)
		}
	}
	if calls["gpu01"] != 1 {
		t.Errorf("gpu01 resolved %d times in one boot, want 1", calls["gpu01"])
	}
	NodeAddrs(cache, root, "gpu02", resolve, t0)
	NodeAddrs(cache, root, "gpu02", resolve, t0.Add(negativeAddrTTL-time.Second))
	if calls["gpu02"] != 1 {
		t.Errorf("unresolved gpu02 asked %d times within the negative TTL, want 1", calls["gpu02"])
	}
	answer["gpu02"] = []string{"10.0.0.12"}
	if got := NodeAddrs(cache, root, "gpu02", resolve, t0.Add(negativeAddrTTL+time.Second)); !slices.Equal(got, []string{"10.0.0.12"}) || calls["gpu02"] != 2 {
		t.Errorf("gpu02 after the TTL: %q after %d lookups, want 10.0.0.12 after 2", got, calls["gpu02"])
	}
	setBoot("boot-2")
	answer["gpu01"] = []string{"10.0.1.11"}
	if got := NodeAddrs(cache, root, "gpu01", resolve, t0); !slices.Equal(got, []string{"10.0.1.11"}) || calls["gpu01"] != 2 {
		t.Errorf("gpu01 after a reboot: %q after %d lookups, want the new address after 2", got, calls["gpu01"])
	}
	// A name that could escape the cache directory is resolved, not cached.
	NodeAddrs(cache, root, "../x", resolve, t0)
	NodeAddrs(cache, root, "../x", resolve, t0)
	if calls["../x"] != 2 {
		t.Errorf("odd name cached: %d lookups", calls["../x"])
	}
}
