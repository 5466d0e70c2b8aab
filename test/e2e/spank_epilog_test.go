//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trainrun/trainrun/checkpoint"
	"github.com/trainrun/trainrun/test/harness"
)

// shimKiller is a trainer that dies with its shim the way a SIGKILL after
// KillWait (or an OOM kill) takes it: it checks that its parent is the shim
// (trainrun exec-task) and, under the plugin, that the shim left its drain
// record; it freezes the shim (so its background drainer cannot run) and
// saves checkpoint step-10 into the node-local directory with the
// handshake's done.<RANK> marker (the shim: trainrun exec-task, or the lean
// trainrun-shim next to trainrun). Once both ranks saved, rank 0 SIGKILLs
// both shims in one kill(1) (every "node" is this machine): the first
// shim's death makes Slurm terminate the step, which sends SIGCONT, and a
// shim still alive then would drain. Only the job epilog can then carry the
// nodes' parts into the store.
const shimKiller = `#!/bin/bash
trap '' TERM
out=$1
parent=$(tr '\0' ' ' < /proc/$PPID/cmdline)
case "$parent" in
*" exec-task "*|*trainrun-shim" "*) ;;
*) echo "rank $RANK: parent $PPID is not the shim: $parent"; exit 3 ;;
esac
if [ -n "${TRAINRUN_HANDOFF_DIR:-}" ] && [ ! -f "$TRAINRUN_HANDOFF_DIR/drain-$SLURMD_NODENAME.json" ]; then
	echo "rank $RANK: no drain record in $TRAINRUN_HANDOFF_DIR"; exit 4
fi
kill -STOP $PPID
echo $PPID > "$out/shim.$RANK"
d="$TRAINRUN_CKPT_LOCAL_DIR/step-10"
mkdir -p "$d/.trainrun"
printf 'weights of rank %d\n' "$RANK" > "$d/rank$RANK.bin"
sync
touch "$d/.trainrun/done.$RANK"
echo "rank $RANK on $SLURMD_NODENAME: saved step-10 in $d, handoff '${TRAINRUN_HANDOFF_DIR:-}', shim $PPID frozen" > "$out/froze.$RANK"
for i in $(seq 300); do
	if [ "$RANK" = 0 ]; then
		if [ -f "$out/froze.0" ] && [ -f "$out/froze.1" ]; then
			kill -KILL $(cat "$out/shim.0") $(cat "$out/shim.1")
			exit 0
		fi
	elif ! kill -0 $PPID 2>/dev/null; then
		exit 0
	fi
	sleep 0.1
done
echo "rank $RANK: the other rank did not save within 30 s"
exit 5
`

// resumeReporter is the next incarnation's trainer: it prints where it
// resumes from and what it finds there.
const resumeReporter = `#!/bin/bash
echo "rank $RANK: RESUME=$TRAINRUN_RESUME_DIR"
cat "$TRAINRUN_RESUME_DIR/rank$RANK.bin"
`

// TestSpankEpilog: a tiered-checkpoint job whose shims die before draining
// a checkpoint every rank marked done. With the plugin, the job epilog on
// each node finishes the node's drain (as the job's user) into the store's
// staging, removes the local copies and CACHE/job-N, and the next
// incarnation resumes from that checkpoint. Without the plugin the same job
// leaves the checkpoint undrained: the part of the test that shows it can
// fail.
func TestSpankEpilog(t *testing.T) {
	t.Parallel()
	cluster := ownCluster(t)
	so, bin := buildPlugin(t), trainrun(t)
	ctx := context.Background()
	dir := t.TempDir()
	killer := filepath.Join(dir, "killer.sh")
	reporter := filepath.Join(dir, "resume.sh")
	for p, s := range map[string]string{killer: shimKiller, reporter: resumeReporter} {
		if err := os.WriteFile(p, []byte(s), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	submit := func(store, local, trainer, out string) int {
		t.Helper()
		id, err := cluster.SubmitBatch(ctx, fmt.Sprintf(`#!/bin/bash
#SBATCH --nodes=2 --ntasks-per-node=1 --gpus-per-node=1 --time=5 -p low --no-requeue
exec %s run --max-restarts 0 --ckpt-local-dir %s/%%n --ckpt-dir %s --fix tp=1 -- %s %s
`, bin, local, store, trainer, out), "--nodelist=n1,n2")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cancelJobsOn(t, cluster, id) })
		return id
	}
	// killedJob runs the shim-killing job to its end and checks that both
	// trainers saved and killed their shims.
	killedJob := func(name string) (id int, store, local string) {
		t.Helper()
		store, local = filepath.Join(dir, name, "store"), filepath.Join(dir, name, "local")
		out := filepath.Join(dir, name, "out")
		if err := os.MkdirAll(out, 0o755); err != nil {
			t.Fatal(err)
		}
		id = submit(store, local, killer, out)
		state, err := cluster.WaitJob(ctx, id, 3*time.Minute, harness.FinalStates...)
		if err != nil {
			t.Fatal(err)
		}
		log := cluster.JobOutput(id)
		for r := 0; r < 2; r++ {
			b, err := os.ReadFile(filepath.Join(out, fmt.Sprintf("froze.%d", r)))
			if err != nil {
				t.Fatalf("%s: rank %d did not save and kill its shim (job %d %s): %v\n%s", name, r, id, state, err, log)
			}
			t.Logf("%s: %s", name, strings.TrimSpace(string(b)))
		}
		t.Logf("%s: job %d ended %s", name, id, state)
		return id, store, local
	}
	stagedMarkers := func(store string) []string {
		m, _ := filepath.Glob(filepath.Join(store, ".trainrun", "staging", "step-10", ".trainrun", "done.*"))
		return m
	}

	// Without the plugin: nobody drains step-10.
	_, storeA, localA := killedJob("without-plugin")
	time.Sleep(3 * time.Second) // an epilog, were there one, runs within a second of the job's end
	for i, n := range []string{"n1", "n2"} {
		if _, err := os.Stat(checkpoint.DoneMarkerPath(filepath.Join(localA, n, "step-10"), i)); err != nil {
			t.Errorf("without the plugin, %s's local step-10 is gone: %v", n, err)
		}
	}
	if m := stagedMarkers(storeA); len(m) != 0 {
		t.Errorf("without the plugin, step-10 was drained into staging anyway (%q): the rest of this test proves nothing", m)
	}

	// The cache as a site has it (/run/trainrun): every user can reach the
	// job's handoff directory in it (t.TempDir's parent is root's, 0700).
	cacheRoot, err := os.MkdirTemp("", "trainrun-epilog-cache-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(cacheRoot) })
	t.Cleanup(func() { unmountHandoffs(t, cacheRoot) })
	os.Chmod(cacheRoot, 0o755)
	cache := filepath.Join(cacheRoot, "cache")
	if err := cluster.SetPlugstack(ctx, []string{fmt.Sprintf("required %s cache=%s trainrun=%s", so, cache, bin)}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cluster.SetPlugstack(context.Background(), nil); err != nil {
			t.Errorf("slurmd with the plugin loaded did not stop cleanly: %v", err)
		}
	})

	// With the plugin: each node's epilog drains its part.
	id, store, local := killedJob("with-plugin")
	jobDir := filepath.Join(cache, fmt.Sprintf("job-%d", id))
	gone := func() bool { _, err := os.Lstat(jobDir); return os.IsNotExist(err) }
	if err := harness.WaitFor(context.Background(), 30*time.Second, fmt.Sprintf("job %d's epilog to remove %s", id, jobDir), gone); err != nil {
		t.Fatalf("%v\n%s", err, cluster.LogTail(30))
	}
	for i, n := range []string{"n1", "n2"} {
		if ents, err := os.ReadDir(filepath.Join(local, n)); err != nil || len(ents) != 0 {
			t.Errorf("%s's local directory after the epilog: %d entries, %v; want it empty (drained copies removed)", n, len(ents), err)
		}
		if _, err := os.Stat(checkpoint.DoneMarkerPath(filepath.Join(store, ".trainrun", "staging", "step-10"), i)); err != nil {
			t.Errorf("rank %d's marker is not in the store's staging: %v", i, err)
		}
		if b, err := os.ReadFile(filepath.Join(store, ".trainrun", "staging", "step-10", fmt.Sprintf("rank%d.bin", i))); err != nil || string(b) != fmt.Sprintf("weights of rank %d\n", i) {
			t.Errorf("rank %d's file in staging: %q, %v", i, b, err)
		}
		logf := filepath.Join(cluster.Dir(), "log", "slurmd-"+n+".log")
		b, _ := os.ReadFile(logf)
		want := fmt.Sprintf("trainrun: epilog: job %d: node %s: %s into %s: drained step-10 (", id, n, filepath.Join(local, n), store)
		if !strings.Contains(string(b), want) {
			t.Errorf("%s lacks %q; its trainrun lines:\n%s", logf, want, grepLines(string(b), "trainrun"))
		} else {
			t.Logf("%s: %s", n, grepLines(string(b), want))
		}
		// Slurm 22.05 gives S_JOB_UID/S_JOB_GID in the epilog (job_script
		// context); without them the plugin says so (see spank_trainrun.c).
		if l := grepLines(string(b), "gave the epilog no job uid/gid"); l != "" {
			t.Errorf("%s: the epilog had no job uid/gid from Slurm: %s", logf, l)
		}
	}

	// A job of another user: the epilog drains as that user (the staged
	// file is the user's), which also shows that Slurm 22.05 gives the
	// epilog the job's uid (without it the plugin logs a note; with a wrong
	// one it drains nothing).
	t.Run("as the job's user", func(t *testing.T) {
		shared, err := os.MkdirTemp("", "trainrun-epilog-user-")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(shared)
		os.Chmod(shared, 0o777)
		script := filepath.Join(shared, "job.sh")
		os.WriteFile(script, []byte(`#!/bin/bash
srun bash -c 'set -e
d=`+shared+`/local/step-3
mkdir -p $d/.trainrun `+shared+`/store
echo "weights of nobody" > $d/w.bin
touch $d/.trainrun/done.0
printf "{\"version\":1,\"job_id\":%s,\"node\":\"%s\",\"local_dir\":\"%s\",\"ckpt_dir\":\"%s\",\"ranks\":[0]}" \
	$SLURM_JOB_ID $SLURMD_NODENAME `+shared+`/local `+shared+`/store > $TRAINRUN_HANDOFF_DIR/drain-$SLURMD_NODENAME.json
echo "record written as $(id -u)"'
`), 0o755)
		if _, err := exec.LookPath("su"); err != nil {
			t.Skipf("no su to submit a job as nobody: %v", err)
		}
		cmd := cluster.Command(ctx, "su", "-s", "/bin/sh", "nobody", "-c",
			"SLURM_CONF="+cluster.ConfPath()+" sbatch --parsable -N1 -w n1 --output="+shared+"/out.txt "+script)
		cmd.Dir = shared
		out, err := cluster.Exec(cmd)
		if err != nil {
			t.Fatalf("submitting a job as nobody: %v", err)
		}
		id, err := strconv.Atoi(strings.TrimSpace(out))
		if err != nil {
			t.Fatalf("sbatch as nobody: %q", out)
		}
		t.Cleanup(func() { cancelJobsOn(t, cluster, id) })
		_, err = cluster.WaitJob(ctx, id, time.Minute, "COMPLETED")
		b, _ := os.ReadFile(filepath.Join(shared, "out.txt"))
		if err != nil || !strings.Contains(string(b), "record written as 65534") {
			t.Fatalf("the job of nobody: %v\n%s", err, b)
		}
		jobDir := filepath.Join(cache, fmt.Sprintf("job-%d", id))
		for end := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			if _, err := os.Lstat(jobDir); os.IsNotExist(err) {
				break
			}
			if time.Now().After(end) {
				t.Fatalf("%s still there 30 s after the job ended", jobDir)
			}
		}
		staged := filepath.Join(shared, "store", ".trainrun", "staging", "step-3", "w.bin")
		fi, err := os.Stat(staged)
		if err != nil {
			b, _ := os.ReadFile(filepath.Join(cluster.Dir(), "log", "slurmd-n1.log"))
			t.Fatalf("the epilog did not drain the user's checkpoint: %v\n%s", err, grepLines(string(b), "trainrun"))
		}
		if uid := fi.Sys().(*syscall.Stat_t).Uid; uid != 65534 {
			t.Errorf("%s is owned by uid %d: the drain did not run as the job's user nobody (65534)", staged, uid)
		}
		if _, err := os.Stat(filepath.Join(shared, "local", "step-3")); !os.IsNotExist(err) {
			t.Errorf("the user's local copy is still there: %v", err)
		}
	})

	// The next incarnation on the same store resumes from step-10.
	out := filepath.Join(dir, "resume-out")
	os.MkdirAll(out, 0o755)
	next := submit(store, local, reporter, out)
	if _, err := cluster.WaitJob(ctx, next, 3*time.Minute, "COMPLETED"); err != nil {
		t.Fatalf("%v\n%s", err, cluster.JobOutput(next))
	}
	log := cluster.JobOutput(next)
	for r := 0; r < 2; r++ {
		for _, want := range []string{fmt.Sprintf("rank %d: RESUME=%s", r, filepath.Join(store, "step-10")), fmt.Sprintf("weights of rank %d", r)} {
			if !strings.Contains(log, want) {
				t.Errorf("the next incarnation's output lacks %q:\n%s", want, log)
			}
		}
	}
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
