//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trainrun/trainrun/test/harness"
)

// The SPANK plugin against the real Slurm: built fresh from this tree (the
// same command as `make spank`), loaded through plugstack.conf by srun,
// sbatch, slurmstepd, the epilog process and slurmd.

var (
	pluginOnce sync.Once
	pluginPath string
	pluginErr  error
)

// buildPlugin builds the plugin's two halves with `make spank` (the C
// spank_trainrun.so and, next to it, the Go libtrainrun-spank.so), once,
// into a directory that lives as long as the test binary, and returns the
// path of spank_trainrun.so.
func buildPlugin(t testing.TB) string {
	t.Helper()
	pluginOnce.Do(func() {
		dir, err := os.MkdirTemp("", "trainrun-spank-e2e-")
		if err == nil {
			err = os.Chmod(dir, 0o755) // sbatch of a job of another user loads it too
		}
		if err != nil {
			pluginErr = err
			return
		}
		so := filepath.Join(dir, "spank_trainrun.so")
		cmd := exec.Command("make", "-s", "spank", "SPANK="+so)
		cmd.Dir = repoRoot()
		if out, err := cmd.CombinedOutput(); err != nil {
			pluginErr = fmt.Errorf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, out)
			return
		}
		pluginPath = so
	})
	if pluginErr != nil {
		t.Fatal(pluginErr)
	}
	return pluginPath
}

// goHalf is the Go library buildPlugin put next to the plugin.
func goHalf(so string) string { return filepath.Join(filepath.Dir(so), "libtrainrun-spank.so") }

// spankPolicy is the site policy the tests load: a forced and a default
// NCCL variable, checkpoint roots, and a partition where users may
// override nothing.
const spankPolicy = `# trainrun.conf for the e2e tests
NCCLForce=NCCL_IB_TIMEOUT=22
NCCLDefault=NCCL_DEBUG=WARN
CkptRoots=/tmp,/scratch
PartitionName=high UserOverride=none
`

// run runs a client command with extra environment entries and returns
// stdout, stderr and the error (which holds both and the daemons' logs).
func (f *spankFixture) run(ctx context.Context, env []string, name string, args ...string) (string, string, error) {
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	cmd := f.cluster.Command(ctx, name, args...)
	cmd.Env = append(cmd.Env, env...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), stderr.String(), &harness.CmdError{Args: cmd.Args, Err: err, Stdout: stdout.String(), Stderr: stderr.String(), Logs: f.cluster.LogTail(20)}
	}
	return stdout.String(), stderr.String(), nil
}

// mustRun is run that fails the test on error.
func (f *spankFixture) mustRun(t *testing.T, env []string, name string, args ...string) string {
	t.Helper()
	out, _, err := f.run(context.Background(), env, name, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// wantRejected runs a command that must fail and checks its stderr.
func (f *spankFixture) wantRejected(t *testing.T, env []string, want []string, name string, args ...string) string {
	t.Helper()
	_, stderr, err := f.run(context.Background(), env, name, args...)
	if err == nil {
		t.Fatalf("%s %s succeeded; want it rejected", name, strings.Join(args, " "))
	}
	for _, w := range want {
		if !strings.Contains(stderr, w) {
			t.Errorf("%s %s: stderr lacks %q:\n%s", name, strings.Join(args, " "), w, stderr)
		}
	}
	return stderr
}

func (f *spankFixture) writePlugstack(t *testing.T, lines ...string) {
	t.Helper()
	if err := os.WriteFile(f.cluster.PlugstackPath(), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestSpank loads the plugin (required, with a policy) on a cluster of its
// own and restarts every slurmd with it, then runs each area below as a
// subtest over that fixture (-run 'TestSpank/explain' runs one; the areas
// that change plugstack.conf restore it). At the end it restores an empty
// plugstack.conf and restarts slurmd again, which checks that slurmd shuts
// down cleanly (exit 0 within 15 s of SIGTERM) with the plugin loaded.
func TestSpank(t *testing.T) {
	t.Parallel()
	f := newSpankFixture(t)
	for _, area := range []struct {
		name string
		test func(*testing.T)
	}{
		{"exports only plugin_ and slurm_spank_ symbols", f.exports},
		{"Go half loaded only where needed", f.goLoadedOnlyWhereNeeded},
		{"uneven step runs untouched", f.unevenStep},
		{"help lists the options", f.help},
		{"bad values are rejected at submission", f.badValues},
		{"option, twin and #SBATCH take effect", f.optionsTakeEffect},
		{"every task's environment equals trainrun env", f.envEqualsTrainrunEnv},
		{"same environment as trainrun run without the plugin", f.envEqualsTrainrunRun},
		{"consecutive multi-node steps", f.consecutiveSteps},
		{"preempted and requeued as without the plugin", f.preemptAndRequeue},
		{"slurmd restarts with the plugin loaded", f.slurmdRestart},
		{"broken policy", f.brokenPolicy},
		{"explain", f.explain},
	} {
		t.Run(area.name, area.test)
	}
}

// spankFixture is TestSpank's cluster with the plugin loaded: its own
// cluster, so that the plugin's minutes of steps and its preemption run
// beside the other long tests instead of after them.
type spankFixture struct {
	cluster *harness.Cluster
	so, bin string // the plugin (its C half) and trainrun
	dir     string // the test's directory
	pol     string // the site policy (spankPolicy) in dir
	cache   string // the plugin's cache= directory
	good    string // the plugstack.conf line the areas start from
}

func newSpankFixture(t *testing.T) *spankFixture {
	t.Helper()
	cluster := ownCluster(t)
	so, bin := buildPlugin(t), trainrun(t)
	dir := t.TempDir()
	t.Cleanup(func() { unmountHandoffs(t, dir) })
	f := &spankFixture{cluster: cluster, so: so, bin: bin, dir: dir, pol: filepath.Join(dir, "trainrun.conf"), cache: filepath.Join(dir, "cache")}
	if err := os.WriteFile(f.pol, []byte(spankPolicy), 0o644); err != nil {
		t.Fatal(err)
	}
	f.good = fmt.Sprintf("required %s policy=%s cache=%s", so, f.pol, f.cache)
	if err := cluster.SetPlugstack(context.Background(), []string{f.good}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cluster.SetPlugstack(context.Background(), nil); err != nil {
			t.Errorf("slurmd with the plugin loaded did not stop cleanly: %v", err)
		}
	})
	return f
}

// restore puts back the plugstack.conf the areas start from.
func (f *spankFixture) restore(t *testing.T) { f.writePlugstack(t, f.good) }

// cancelJobs kills the jobs on the fixture's cluster and waits for their end.
func (f *spankFixture) cancelJobs(t *testing.T, ids ...int) {
	t.Helper()
	cancelJobsOn(t, f.cluster, ids...)
}

func (f *spankFixture) exports(t *testing.T) {
	exports := func(lib string) []string {
		out, err := exec.Command("nm", "-D", "--defined-only", lib).Output()
		if err != nil {
			t.Skipf("nm: %v", err)
		}
		var syms []string
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			cols := strings.Fields(l)
			syms = append(syms, cols[len(cols)-1])
		}
		return syms
	}
	syms := exports(f.so)
	for _, name := range syms {
		if !strings.HasPrefix(name, "plugin_") && !strings.HasPrefix(name, "slurm_spank_") {
			t.Errorf("%s exports %s", f.so, name)
		}
	}
	for _, want := range []string{"plugin_name", "plugin_type", "plugin_version", "slurm_spank_init", "slurm_spank_init_post_opt", "slurm_spank_task_init", "slurm_spank_job_epilog"} {
		if !slices.Contains(syms, want) {
			t.Errorf("%s does not export %s: %q", f.so, want, syms)
		}
	}
	// The Go half exports its trgo_* calls and nothing of the runtime.
	gosyms := exports(goHalf(f.so))
	for _, name := range gosyms {
		if !strings.HasPrefix(name, "trgo_") {
			t.Errorf("%s exports %s", goHalf(f.so), name)
		}
	}
	if !slices.Contains(gosyms, "trgo_remote_post_opt") || !slices.Contains(gosyms, "trgo_bind") {
		t.Errorf("%s lacks trgo_remote_post_opt or trgo_bind: %q", goHalf(f.so), gosyms)
	}
	// The C half links no Go: it is small and has no Go runtime symbol.
	if fi, err := os.Stat(f.so); err != nil {
		t.Error(err)
	} else if fi.Size() > 1<<20 {
		t.Errorf("%s is %d bytes; want the small C library, with no Go runtime in it", f.so, fi.Size())
	}
}

// Go is loaded only where it is needed: never in slurmd (it loaded the
// plugin before daemonizing), not in an srun that uses no --train-*
// option once the config stamp is there, and in an srun that does.
func (f *spankFixture) goLoadedOnlyWhereNeeded(t *testing.T) {
	ctx := context.Background()
	// A step on every node, so that slurmstepd wrote the config stamp.
	f.mustRun(t, nil, "srun", "-N4", "true")
	if _, err := os.Stat(filepath.Join(f.cache, "config.ok")); err != nil {
		t.Fatalf("no config stamp after a step: %v", err)
	}
	pids, err := exec.Command("pgrep", "-f", "slurmd -D .*"+f.cluster.Dir()).Output()
	if err != nil {
		t.Fatalf("pgrep slurmd: %v", err)
	}
	n := 0
	for _, pid := range strings.Fields(string(pids)) {
		maps, err := os.ReadFile("/proc/" + pid + "/maps")
		if err != nil {
			continue
		}
		n++
		if !strings.Contains(string(maps), "spank_trainrun.so") {
			t.Errorf("slurmd %s has not loaded spank_trainrun.so: the test looks at the wrong process", pid)
		}
		if strings.Contains(string(maps), "libtrainrun-spank.so") {
			t.Errorf("slurmd %s has the Go half (libtrainrun-spank.so) mapped", pid)
		}
	}
	if n != len(f.cluster.Nodes()) {
		t.Errorf("found %d slurmd processes, want %d", n, len(f.cluster.Nodes()))
	}
	loaded := func(args ...string) bool {
		_, stderr, err := f.run(ctx, []string{"LD_DEBUG=files"}, "srun", args...)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Contains(stderr, "file="+goHalf(f.so)) && strings.Contains(stderr, "dynamically loaded by "+f.so)
	}
	if loaded("-N1", "true") {
		t.Errorf("srun -N1 true loaded the Go half")
	}
	if !loaded("-N1", "--train-nccl=off", "true") {
		t.Errorf("srun --train-nccl=off did not load the Go half (LD_DEBUG=files shows no dlopen of %s)", goHalf(f.so))
	}
}

// A step trainrun cannot place (3 tasks on 2 nodes) is not a training
// step: with nothing asked of trainrun it runs untouched, required
// plugin or not; asked for a layout, it fails with the reason.
func (f *spankFixture) unevenStep(t *testing.T) {
	out := f.mustRun(t, nil, "srun", "-N2", "-n3", "bash", "-c", `echo "rank=${RANK-none}"`)
	if strings.Count(out, "rank=none") != 3 {
		t.Errorf("srun -N2 -n3: want 3 tasks without injection, got:\n%s", out)
	}
	f.wantRejected(t, nil, []string{"trainrun places the same number of tasks on every node"}, "srun", "-N2", "-n3", "--train-layout=tp=1", "true")
}

func (f *spankFixture) help(t *testing.T) {
	for _, c := range []string{"srun", "sbatch", "salloc"} {
		out := f.mustRun(t, nil, c, "--help")
		for _, o := range []string{"train-model", "train-layout", "train-ckpt", "train-ckpt-signal", "train-nccl", "train-explain"} {
			if !strings.Contains(out, "--"+o) {
				t.Errorf("%s --help lacks --%s", c, o)
			}
		}
		for _, e := range []string{"TRAINRUN_MODEL", "TRAINRUN_LAYOUT", "TRAINRUN_CKPT_DIR", "TRAINRUN_CKPT_SIGNAL", "TRAINRUN_NCCL", "TRAINRUN_EXPLAIN"} {
			if !strings.Contains(out, e) {
				t.Errorf("%s --help does not name the twin %s", c, e)
			}
		}
	}
}

func (f *spankFixture) badValues(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  []string
		cmd  []string
		want []string
	}{
		{"srun option", nil, []string{"srun", "-N1", "--train-nccl=maybe", "true"}, []string{"trainrun: submit: --train-nccl=maybe: accepted: on, off"}},
		{"sbatch option", nil, []string{"sbatch", "--train-model=llama9", "--wrap", "true"}, []string{"trainrun: submit: --train-model=llama9: unknown model \"llama9\""}},
		{"salloc option", nil, []string{"salloc", "--train-ckpt=/home/x", "true"}, []string{"trainrun: submit: --train-ckpt=/home/x: not under the site's CkptRoots=/tmp,/scratch"}},
		{"env twin", []string{"TRAINRUN_CKPT_SIGNAL=KILL"}, []string{"srun", "-N1", "true"}, []string{"trainrun: submit: TRAINRUN_CKPT_SIGNAL=KILL", "SIGKILL cannot be caught"}},
		{"sbatch env twin", []string{"TRAINRUN_LAYOUT=tp=two"}, []string{"sbatch", "--wrap", "true"}, []string{`trainrun: submit: TRAINRUN_LAYOUT=tp=two: tp="two": want a positive integer`}},
		{"#SBATCH directive", nil, []string{"sbatch", filepath.Join(f.dir, "bad-directive.sh")}, []string{"trainrun: submit: --train-ckpt-signal=STOP"}},
		// The partition is known only on the node: the check there
		// fails the step's tasks (required) with the policy named.
		{"policy of the partition", nil, []string{"srun", "-p", harness.HighPartition, "-N1", "--train-ckpt-signal=TERM", "true"},
			[]string{"trainrun: step: --train-ckpt-signal=TERM: partition high's policy (" + f.pol + ") does not let users override CkptSignal"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(filepath.Join(f.dir, "bad-directive.sh"), []byte("#!/bin/bash\n#SBATCH --train-ckpt-signal=STOP\ntrue\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			f.wantRejected(t, tc.env, tc.want, tc.cmd[0], tc.cmd[1:]...)
		})
	}
}

func (f *spankFixture) optionsTakeEffect(t *testing.T) {
	ctx := context.Background()
	out := f.mustRun(t, nil, "srun", "-N1", "-n1", "--train-ckpt=/tmp/ck/%u/%j", "--train-ckpt-signal=TERM@2m", "--train-layout=tp=1",
		"bash", "-c", `echo "$SLURM_JOB_ID $TRAINRUN_CKPT_DIR $TRAINRUN_CKPT_SIGNAL $TRAINRUN_CKPT_LEAD"`)
	w := strings.Fields(out)
	if len(w) != 4 || w[1] != "/tmp/ck/root/"+w[0] || w[2] != "TERM" || w[3] != "120" {
		t.Errorf("srun options: task saw %q, want JOBID /tmp/ck/root/JOBID TERM 120", out)
	}
	// Twins whose effect differs from their own value.
	out = f.mustRun(t, []string{"TRAINRUN_LAYOUT=tp=2", "TRAINRUN_NCCL=off"}, "srun", "-N1", "-n2", "bash", "-c", `echo "$TRAINRUN_TP:$TRAINRUN_DP:${NCCL_IB_TIMEOUT-unset}"`)
	if strings.Fields(out)[0] != "2:1:unset" || strings.Fields(out)[1] != "2:1:unset" {
		t.Errorf("twins TRAINRUN_LAYOUT=tp=2 TRAINRUN_NCCL=off: tasks saw %q, want 2:1:unset twice", out)
	}
	out = f.mustRun(t, nil, "srun", "-N1", "-n2", "bash", "-c", `echo "$TRAINRUN_TP:${NCCL_IB_TIMEOUT-unset}"`)
	if strings.Fields(out)[0] != "1:22" {
		t.Errorf("defaults: task saw %q, want 1:22 (NCCLForce=NCCL_IB_TIMEOUT=22)", out)
	}
	// #SBATCH directives reach the batch script and every srun step in it.
	id, err := f.cluster.SubmitBatch(ctx, "#!/bin/bash\n#SBATCH -N2 --ntasks-per-node=2 --train-layout=tp=2,pp=2 --train-nccl=off --train-model=llama3-8b\n"+
		"echo script TRAINRUN_LAYOUT=$TRAINRUN_LAYOUT\n"+
		"srun bash -c 'echo task $RANK $TRAINRUN_TP $TRAINRUN_PP $TRAINRUN_DP ${NCCL_IB_TIMEOUT-unset} $TRAINRUN_MODEL'\n")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.cluster.WaitJob(ctx, id, 60*time.Second, "COMPLETED"); err != nil {
		t.Fatal(err)
	}
	out = f.cluster.JobOutput(id)
	var tasks []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "task ") {
			tasks = append(tasks, l)
		}
	}
	sort.Strings(tasks)
	want := []string{"task 0 2 2 1 unset llama3-8b", "task 1 2 2 1 unset llama3-8b", "task 2 2 2 1 unset llama3-8b", "task 3 2 2 1 unset llama3-8b"}
	if !slices.Equal(tasks, want) || !strings.Contains(out, "script TRAINRUN_LAYOUT=tp=2,pp=2") {
		t.Errorf("#SBATCH directives: output\n%s\nwant tasks %q", out, want)
	}
}

func (f *spankFixture) envEqualsTrainrunEnv(t *testing.T) {
	out := filepath.Join(f.dir, "envs")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	jobOut := f.mustRun(t, nil, "srun", "-N4", "--ntasks-per-node=8", "--gpus-per-node=8", "--train-layout=tp=4,pp=2",
		"bash", "-c", `env > `+out+`/$SLURM_PROCID.env; [ "$SLURM_PROCID" = 0 ] && echo $SLURM_JOB_ID; true`)
	jobID, err := strconv.Atoi(strings.TrimSpace(jobOut))
	if err != nil {
		t.Fatalf("job id: %q", jobOut)
	}
	ranks := map[int]bool{}
	for procid := 0; procid < 32; procid++ {
		task := readEnvFile(t, filepath.Join(out, strconv.Itoa(procid)+".env"))
		rank, err := strconv.Atoi(task["RANK"])
		if err != nil {
			t.Fatalf("task %d: RANK=%q", procid, task["RANK"])
		}
		ranks[rank] = true
		nodeRank, _ := strconv.Atoi(task["NODE_RANK"])
		if task["SLURMD_NODENAME"] != fmt.Sprintf("n%d", nodeRank+1) || task["LOCAL_RANK"] != task["SLURM_LOCALID"] {
			t.Errorf("task %d on %s local %s got NODE_RANK=%s LOCAL_RANK=%s", procid, task["SLURMD_NODENAME"], task["SLURM_LOCALID"], task["NODE_RANK"], task["LOCAL_RANK"])
		}
		cmd := exec.Command(f.bin, "env", "--rank", strconv.Itoa(rank), "--nodelist", "n[1-4]", "--gpus-per-node", "8",
			"--fix", "tp=4,pp=2", "--policy", f.pol, "--partition", harness.LowPartition,
			"--format", "json")
		// trainrun env derives MASTER_PORT from SLURM_JOB_ID as trainrun
		// run does; the cluster's environment (SLURM_CONF) lets it ask
		// scontrol for the topology, as inside the job.
		cmd.Env = append(f.cluster.Env(), "SLURM_JOB_ID="+strconv.Itoa(jobID))
		js, err := cmd.Output()
		if err != nil {
			t.Fatalf("trainrun env: %v", err)
		}
		var e struct {
			Vars []struct {
				Key, Value string
				Inject     bool
			}
		}
		if err := json.Unmarshal(js, &e); err != nil {
			t.Fatal(err)
		}
		injected := 0
		for _, v := range e.Vars {
			if !v.Inject {
				if got, ok := task[v.Key]; ok && v.Key != "CUDA_VISIBLE_DEVICES" {
					t.Errorf("rank %d: %s=%s in the task; trainrun env leaves it unset", rank, v.Key, got)
				}
				continue
			}
			injected++
			if got := task[v.Key]; got != v.Value {
				t.Errorf("rank %d: %s=%q in the task, trainrun env says %q", rank, v.Key, got, v.Value)
			}
		}
		if injected < 20 {
			t.Errorf("rank %d: trainrun env injects only %d variables", rank, injected)
		}
	}
	if len(ranks) != 32 {
		t.Errorf("ranks are not 0..31 once each: %v", ranks)
	}
	// The job's per-node files exist until the job epilog removes them.
	waitGone(t, filepath.Join(f.cache, fmt.Sprintf("job-%d", jobID)))
}

// The same settings through `trainrun run` without the plugin give every
// rank the same environment as the plugin does: the launcher and plan
// variables, the NCCL ones, and which node and local slot each rank is on.
func (f *spankFixture) envEqualsTrainrunRun(t *testing.T) {
	ctx := context.Background()
	defer f.restore(t)
	out := filepath.Join(f.dir, "same-as-run")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	dump := `env > ` + out + `/$0.$RANK.env`
	f.mustRun(t, nil, "srun", "-N4", "--ntasks-per-node=8", "--gpus-per-node=8", "--train-layout=tp=4,pp=2", "bash", "-c", dump, "plugin")
	f.writePlugstack(t, "")
	id, err := f.cluster.SubmitBatch(ctx, fmt.Sprintf("#!/bin/bash\nexec %s run --policy %s --fix tp=4,pp=2 -- bash -c '%s' run\n", f.bin, f.pol, dump),
		"-N4", "--ntasks-per-node=8", "--gpus-per-node=8", "-p", harness.LowPartition)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.cluster.WaitJob(ctx, id, 90*time.Second, "COMPLETED"); err != nil {
		t.Fatalf("%v\n%s", err, f.cluster.JobOutput(id))
	}
	// Per job, not per placement: the job's own id and directory. Two
	// differ by design and are checked apart: MASTER_ADDR is rank 0's
	// node name with the plugin (slurmstepd has no NodeAddr of other
	// nodes without asking slurmctld) and its NodeAddr through trainrun
	// run (scontrol show node); TRAINRUN_CKPT_LEAD is the policy's
	// CkptLead, which the plugin exports and trainrun run does not (its
	// own clock asks the trainer).
	jobOwn := map[string]bool{"MASTER_PORT": true, "TRAINRUN_PLAN": true, "TRAINRUN_JOB_DIR": true, "TRAINRUN_HANDOFF_DIR": true,
		"MASTER_ADDR": true, "TRAINRUN_CKPT_LEAD": true}
	rank0 := readEnvFile(t, filepath.Join(out, "plugin.0.env"))["SLURMD_NODENAME"]
	compared := 0
	for rank := 0; rank < 32; rank++ {
		withPlugin := readEnvFile(t, filepath.Join(out, fmt.Sprintf("plugin.%d.env", rank)))
		withRun := readEnvFile(t, filepath.Join(out, fmt.Sprintf("run.%d.env", rank)))
		keys := []string{"SLURMD_NODENAME"}
		for k := range withPlugin {
			if !jobOwn[k] && (strings.HasPrefix(k, "NCCL_") || strings.HasPrefix(k, "TORCH_NCCL_") || strings.HasPrefix(k, "TRAINRUN_") ||
				slices.Contains([]string{"MASTER_ADDR", "WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "NODE_RANK", "GROUP_RANK"}, k)) {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			compared++
			if withPlugin[k] != withRun[k] {
				t.Errorf("rank %d: %s=%q with the plugin, %q through trainrun run", rank, k, withPlugin[k], withRun[k])
			}
		}
		if withPlugin["MASTER_ADDR"] != rank0 || withRun["MASTER_ADDR"] != "127.0.0.1" {
			t.Errorf("rank %d: MASTER_ADDR=%q with the plugin (want rank 0's node %s), %q through trainrun run (want its NodeAddr 127.0.0.1)",
				rank, withPlugin["MASTER_ADDR"], rank0, withRun["MASTER_ADDR"])
		}
		for k, v := range withRun {
			if strings.HasPrefix(k, "NCCL_") && withPlugin[k] == "" {
				t.Errorf("rank %d: trainrun run sets %s=%s, the plugin does not", rank, k, v)
			}
		}
	}
	if compared < 32*15 {
		t.Errorf("only %d values compared over 32 ranks", compared)
	}
}

func (f *spankFixture) consecutiveSteps(t *testing.T) {
	ctx := context.Background()
	steps := 500 // the count; 0.16 s a step here (2 cores), TRAINRUN_E2E_SPANK_STEPS=N for another
	if s, err := strconv.Atoi(os.Getenv("TRAINRUN_E2E_SPANK_STEPS")); err == nil && s > 0 {
		steps = s
	}
	ranks := filepath.Join(f.dir, "steps.out")
	t0 := time.Now()
	id, err := f.cluster.SubmitBatch(ctx, fmt.Sprintf(`#!/bin/bash
#SBATCH -N4 --ntasks-per-node=2 --train-layout=tp=2
fail=0
for i in $(seq %d); do
	srun --overlap printenv RANK >> %s || fail=$((fail+1))
done
echo "steps failed: $fail"
`, steps, ranks))
	if err != nil {
		t.Fatal(err)
	}
	limit := time.Duration(steps)*3*time.Second + time.Minute
	if _, err := f.cluster.WaitJob(ctx, id, limit, "COMPLETED"); err != nil {
		t.Fatalf("after %v: %v", time.Since(t0).Round(time.Second), err)
	}
	took := time.Since(t0)
	out := f.cluster.JobOutput(id)
	if !strings.Contains(out, "steps failed: 0") {
		t.Errorf("job output:\n%s", out)
	}
	data, err := os.ReadFile(ranks)
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, r := range strings.Fields(string(data)) {
		count[r]++
	}
	for r := 0; r < 8; r++ {
		if count[strconv.Itoa(r)] != steps {
			t.Errorf("RANK=%d seen %d times in %d steps", r, count[strconv.Itoa(r)], steps)
		}
	}
	if len(count) != 8 {
		t.Errorf("ranks seen: %v", count)
	}
	t.Logf("%d consecutive 4-node, 8-task steps with the plugin: %v (%v a step)", steps, took.Round(time.Second), (took / time.Duration(steps)).Round(time.Millisecond))
	waitNoJobProcesses(t, id)
	waitGone(t, filepath.Join(f.cache, fmt.Sprintf("job-%d", id)))
	// One topology per boot, discovered once and read by every later step.
	if m, _ := filepath.Glob(filepath.Join(f.cache, "node-*.json")); len(m) != 1 {
		t.Errorf("node topology cache: %q, want one node-BOOTID.json", m)
	}
}

// Preemption and requeue with the plugin loaded behave as without it:
// the same job (a step under srun; the batch shell ignores SIGTERM so
// that the job stays until GraceTime ends and is requeued) is preempted
// by a high-partition job, requeued once and restarted, in both runs;
// with the plugin the restarted step's tasks get TRAINRUN_RESTART_COUNT=1.
func (f *spankFixture) preemptAndRequeue(t *testing.T) {
	ctx := context.Background()
	defer f.restore(t)
	scenario := func(t *testing.T) (restarts, out string) {
		var ids []int
		defer func() { f.cancelJobs(t, ids...) }()
		low, err := f.cluster.SubmitBatch(ctx, "#!/bin/bash\ntrap '' TERM\n"+
			"srun --ntasks-per-node=1 bash -c 'echo start restart=${TRAINRUN_RESTART_COUNT-none} rank=${RANK-none}; exec sleep 300'\nsleep 300\n",
			"-p", harness.LowPartition, "-N4", "--gpus-per-node=8", "--requeue", "--open-mode=append", "-J", "spank-low")
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, low)
		waitStarts := func(n int) {
			started := func(out string) bool { return strings.Count(out, "start restart=") >= n }
			if _, err := f.cluster.WaitOutputFunc(ctx, low, 60*time.Second, fmt.Sprintf("%d task starts", n), started); err != nil {
				t.Fatal(err)
			}
		}
		waitStarts(4) // every task runs before the preemption
		high, err := f.cluster.SubmitBatch(ctx, "#!/bin/bash\nsleep 300\n", "-p", harness.HighPartition, "-N1", "--gpus-per-node=8", "-J", "spank-high")
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, high)
		if _, err := f.cluster.WaitJob(ctx, high, 60*time.Second, "RUNNING"); err != nil {
			t.Fatal(err)
		}
		info, err := f.cluster.JobInfo(ctx, low)
		if err != nil {
			t.Fatal(err)
		}
		f.cancelJobs(t, high)
		if _, err := f.cluster.WaitJob(ctx, low, 90*time.Second, "RUNNING"); err != nil {
			t.Fatal(err)
		}
		waitStarts(8)
		out = f.cluster.JobOutput(low)
		f.cancelJobs(t, low)
		waitNoJobProcesses(t, low)
		return info["Restarts"], out
	}
	starts := func(out string) []string {
		var l []string
		for _, line := range strings.Split(out, "\n") {
			if strings.HasPrefix(line, "start ") {
				l = append(l, line)
			}
		}
		sort.Strings(l)
		return l
	}
	f.writePlugstack(t, "")
	r0, out0 := scenario(t)
	f.restore(t)
	r1, out1 := scenario(t)
	if r0 != "1" || r1 != r0 {
		t.Errorf("Restarts after preemption: %s without the plugin, %s with it; want 1 both", r0, r1)
	}
	if strings.Contains(out0, "DUE TO PREEMPTION") != strings.Contains(out1, "DUE TO PREEMPTION") {
		t.Errorf("preemption reported differently:\nwithout:\n%s\nwith:\n%s", out0, out1)
	}
	want0 := []string{"start restart=none rank=none", "start restart=none rank=none", "start restart=none rank=none", "start restart=none rank=none",
		"start restart=none rank=none", "start restart=none rank=none", "start restart=none rank=none", "start restart=none rank=none"}
	want1 := []string{"start restart=0 rank=0", "start restart=0 rank=1", "start restart=0 rank=2", "start restart=0 rank=3",
		"start restart=1 rank=0", "start restart=1 rank=1", "start restart=1 rank=2", "start restart=1 rank=3"}
	if got := starts(out0); !slices.Equal(got, want0) {
		t.Errorf("without the plugin: starts %q, want %q; output:\n%s", got, want0, out0)
	}
	if got := starts(out1); !slices.Equal(got, want1) {
		t.Errorf("with the plugin: starts %q, want %q; output:\n%s", got, want1, out1)
	}
}

func (f *spankFixture) slurmdRestart(t *testing.T) {
	ctx := context.Background()
	n := f.cluster.Nodes()[0]
	if err := f.cluster.RestartSlurmd(ctx, n); err != nil {
		t.Fatal(err)
	}
	out := f.mustRun(t, nil, "srun", "-w", n, "-n1", "printenv", "RANK")
	if strings.TrimSpace(out) != "0" {
		t.Errorf("after restart: RANK=%q", out)
	}
}

func (f *spankFixture) brokenPolicy(t *testing.T) {
	ctx := context.Background()
	bad := filepath.Join(f.dir, "broken.conf")
	if err := os.WriteFile(bad, []byte("CkptSignal=USR2\nCkptLeed=5m\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	defer f.restore(t)
	named := bad + ":2: CkptLeed: unknown key"

	f.writePlugstack(t, fmt.Sprintf("optional %s policy=%s cache=%s", f.so, bad, f.cache))
	stdout, stderr, err := f.run(ctx, nil, "srun", "-N2", "--ntasks-per-node=2", "bash", "-c", `echo "rank=${RANK-none}"`)
	if err != nil {
		t.Fatalf("optional: the job failed: %v", err)
	}
	if c := strings.Count(stdout, "rank=none"); c != 4 {
		t.Errorf("optional: want 4 tasks without injection, got:\n%s", stdout)
	}
	var lines []string
	for _, l := range strings.Split(stderr, "\n") {
		if strings.Contains(l, "trainrun:") {
			lines = append(lines, l)
		}
	}
	// One line from srun (submission) and one from the step (node 0's
	// first task), not one per task or node.
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "srun: error: trainrun: config: policy: ") || !strings.Contains(lines[0], named) ||
		!strings.Contains(lines[1], "slurmstepd") || !strings.Contains(lines[1], named) {
		t.Errorf("optional: want 2 lines (srun, step) naming %q; stderr:\n%s", named, stderr)
	}
	id, err := f.cluster.SubmitBatch(ctx, "#!/bin/bash\nsrun -n1 bash -c 'echo rank=${RANK-none}'\n")
	if err != nil {
		t.Fatalf("optional: sbatch: %v", err)
	}
	if _, err := f.cluster.WaitJob(ctx, id, 60*time.Second, "COMPLETED"); err != nil {
		t.Fatal(err)
	}

	f.writePlugstack(t, fmt.Sprintf("required %s policy=%s cache=%s", f.so, bad, f.cache))
	f.wantRejected(t, nil, []string{"srun: error: trainrun: config: policy: ", named}, "srun", "-N1", "true")
	f.wantRejected(t, nil, []string{"sbatch: error: trainrun: config: policy: ", named}, "sbatch", "--wrap", "true")
	f.wantRejected(t, nil, []string{"unknown key \"polcy\""}, "sh", "-c", "echo 'required "+f.so+" polcy=/x' > "+f.cluster.PlugstackPath()+" && srun -N1 true")
}

func (f *spankFixture) explain(t *testing.T) {
	ctx := context.Background()
	stdout, stderr, err := f.run(ctx, nil, "srun", "-N1", "-n1", "--train-explain", "bash", "-c", `echo "rank=${RANK-none}"`)
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(stdout) != "rank=none" || !strings.Contains(stderr, "trainrun: explain: dry run, nothing injected") ||
		!strings.Contains(stderr, "\nRANK=0\n") || !strings.Contains(stderr, "# NCCL_IB_TIMEOUT (policy-force)") {
		t.Errorf("explain: stdout %q, stderr:\n%s", stdout, stderr)
	}
}

// BenchmarkSpankSrunTrue times `srun -N1 true` without and with the plugin
// in plugstack.conf, alternating, and reports both and their ratio.
// srun and slurmstepd read plugstack.conf at every launch, so switching
// the file between runs is enough.
func BenchmarkSpankSrunTrue(b *testing.B) {
	so := buildPlugin(b)
	dir := b.TempDir()
	with := fmt.Sprintf("required %s cache=%s\n", so, filepath.Join(dir, "cache"))
	defer os.WriteFile(cluster.PlugstackPath(), nil, 0o644)
	ctx := context.Background()
	var none, plug time.Duration
	srun := func(conf string) time.Duration {
		if err := os.WriteFile(cluster.PlugstackPath(), []byte(conf), 0o644); err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		if _, err := cluster.Run(ctx, "srun", "-N1", "-n1", "true"); err != nil {
			b.Fatal(err)
		}
		return time.Since(t0)
	}
	srun(with) // warm the page cache and the node topology cache
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%2 == 0 {
			none += srun("")
			plug += srun(with)
		} else {
			plug += srun(with)
			none += srun("")
		}
	}
	b.ReportMetric(float64(none.Milliseconds())/float64(b.N), "ms/srun-without")
	b.ReportMetric(float64(plug.Milliseconds())/float64(b.N), "ms/srun-with")
	b.ReportMetric(float64(plug)/float64(none), "ratio")
}
