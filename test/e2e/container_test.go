//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// podmanImage makes what the container tests run in, offline (no registry
// is reachable here): a root file system of a few empty directories and
// symbolic links in dir, to which each run bind-mounts the host's /usr
// read-only (Debian's python3 and torch live there) with the two /etc
// entries the dynamic linker and BLAS need. It is honest to say what this
// is: the host's userland seen through a container's mount, PID-host and
// network-host namespaces, not an image from a registry. It returns the
// root file system (podman --rootfs, which trainrun uses for an absolute
// path), the mounts to add and a containers.conf for this machine: runc
// (crun refuses its hybrid cgroups) and rlimits podman may set here.
// The test is skipped, saying why, where podman is missing or cannot run.
func podmanImage(t testing.TB, dir string) (rootfs, mounts, conf string) {
	t.Helper()
	if _, err := exec.LookPath("podman"); err != nil {
		t.Skip("podman is not installed ('make deps' installs it)")
	}
	if os.Getuid() != 0 {
		t.Skip("rootful podman needs root")
	}
	rootfs = filepath.Join(dir, "rootfs")
	for _, d := range []string{"usr", "etc", "tmp", "proc", "sys", "dev"} {
		if err := os.MkdirAll(filepath.Join(rootfs, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, l := range []string{"bin", "sbin", "lib", "lib64"} {
		if target, err := os.Readlink("/" + l); err == nil {
			os.Symlink(target, filepath.Join(rootfs, l))
		}
	}
	conf = filepath.Join(dir, "containers.conf")
	text := "[containers]\ndefault_ulimits = [\"nofile=4096:4096\", \"nproc=1000:1000\"]\n[engine]\nruntime = \"runc\"\n"
	if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	mounts = "/usr:/usr:ro,/etc/alternatives:/etc/alternatives:ro,/etc/ld.so.cache:/etc/ld.so.cache:ro"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "podman", "run", "--rm", "--network=host", "-v", "/usr:/usr:ro", "--rootfs", rootfs, "/usr/bin/true")
	cmd.Env = append(os.Environ(), "CONTAINERS_CONF="+conf)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Skipf("podman cannot run a container here: %v\n%s", err, out)
	}
	return rootfs, mounts, conf
}

// containerJob is a batch script that runs the example trainer under
// trainrun run in the podman container (name picks its files in dir);
// pre runs before it in the script, wrap before the trainer inside.
func containerJob(bin, dir, name, rootfs, mounts, conf, flags, pre, wrap, trainerArgs string) string {
	return fmt.Sprintf(`#!/bin/bash
#SBATCH --nodes=2 --ntasks-per-node=1 --gpus-per-node=1 --time=10 --requeue --open-mode=append -p low
export GLOO_SOCKET_IFNAME=lo CONTAINERS_CONF=%s
%s
exec %s run --fix tp=1 --container-runtime podman --container-image %s --container-mounts %s,%s:%s:ro,%s:%s %s -- %s/usr/bin/python3 %s %s --out %s/%s.weights
`, conf, pre, bin, rootfs, mounts, repoRoot(), repoRoot(), dir, dir, flags, wrap, exampleTrainer(), trainerArgs, dir, name)
}

// The acceptance of issue 33 with podman: the example trainer in a
// container under trainrun run, preempted once, checkpointed, requeued and
// resumed with weights bit-identical to an uninterrupted containerised
// run; the variables inside (TRAINRUN_*, NCCL_*, torchrun's) equal those
// trainrun computes (its --dry-run's rank 0, printed in the same job).
func TestContainerPodmanPreemptResume(t *testing.T) {
	t.Parallel()
	cluster := ownCluster(t)
	bin := trainrun(t)
	dir := t.TempDir()
	requireTorch(t)
	rootfs, mounts, conf := podmanImage(t, dir)
	args := "--steps 60 --sleep 0.4"
	dry := fmt.Sprintf("%s run --dry-run --fix tp=1 --container-runtime podman --container-image %s -- /usr/bin/python3 %s", bin, rootfs, exampleTrainer())
	envDump := fmt.Sprintf(`/bin/sh -c 'env > %[1]s/env.$RANK; readlink /proc/self/ns/mnt > %[1]s/mntns.$RANK; exec "$@"' sh `, dir)
	ref, low := refAndRun(t, cluster,
		containerJob(bin, dir, "ref", rootfs, mounts, conf, "", dry, envDump, args),
		containerJob(bin, dir, "low", rootfs, mounts, conf, "", "", "", args))
	preempt(t, cluster, low, "restart 0", 2, 12*time.Second, "n1")
	waitCompleted(t, cluster, 5*time.Minute, ref, low)
	log := cluster.JobOutput(low)
	if info, _ := cluster.JobInfo(context.Background(), low); info["Restarts"] == "0" || info["Restarts"] == "" {
		t.Errorf("the job was preempted but requeued %q times:\n%s", info["Restarts"], log)
	}
	for _, want := range []string{"container   " + rootfs + " (the shim starts each trainer through podman", "preempted (SIGTERM from Slurm to the step", "committed as latest", "resume      " + filepath.Join(cluster.JobsDir(), fmt.Sprintf("trainrun-%d", low), "checkpoints", "step-")} {
		if !strings.Contains(log, want) {
			t.Errorf("job log lacks %q:\n%s", want, log)
		}
	}
	sameWeights(t, dir, "low", log)
	inside := readEnvFile(t, filepath.Join(dir, "env.0"))
	if ns, _ := os.ReadFile(filepath.Join(dir, "mntns.0")); strings.TrimSpace(string(ns)) == hostMountNS(t) {
		t.Errorf("rank 0's trainer ran in the host's mount namespace (%s), not in the container", ns)
	}
	if inside["TRAINRUN_HEARTBEAT_FD"] != "3" {
		t.Errorf("TRAINRUN_HEARTBEAT_FD inside the container = %q, want 3 (the heartbeat pipe, podman --preserve-fds)", inside["TRAINRUN_HEARTBEAT_FD"])
	}
	computed := dryRunEnv(t, cluster.JobOutput(ref))
	n := 0
	for k, v := range computed {
		torchrun := strings.Contains(" MASTER_ADDR WORLD_SIZE RANK LOCAL_RANK LOCAL_WORLD_SIZE NODE_RANK GROUP_RANK ", " "+k+" ")
		if !strings.HasPrefix(k, "TRAINRUN_") && !strings.HasPrefix(k, "NCCL_") && !torchrun {
			continue
		}
		n++
		if inside[k] != v {
			t.Errorf("%s inside the container = %q, trainrun computes %q", k, inside[k], v)
		}
	}
	if n < 10 {
		t.Errorf("only %d TRAINRUN_/NCCL_/torchrun variables compared:\n%v", n, computed)
	}
}

// A SIGSTOPped rank inside the container is detected as hung (its
// heartbeat, carried into the container by podman --preserve-fds, stops)
// and the step restarts inside the allocation and finishes.
func TestContainerPodmanHungRank(t *testing.T) {
	t.Parallel()
	bin := trainrun(t)
	dir := t.TempDir()
	requireTorch(t)
	rootfs, mounts, conf := podmanImage(t, dir)
	script := containerJob(bin, dir, "hung", rootfs, mounts, conf, "--job-dir "+dir+"/job --hang-timeout 8s --max-restarts 1", "", "",
		"--steps 40 --sleep 0.15 --save-every 10 --collective-timeout 1800")
	script = strings.Replace(script, " -p low", "", 1)
	ctx := context.Background()
	id, err := cluster.SubmitBatch(ctx, script)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cluster.Run(context.Background(), "scancel", strconv.Itoa(id)) })
	progress := filepath.Join(dir, "job", "launch", "progress")
	waitStep(t, cluster, id, progress, 12)
	pid := trainerPID(t, id, 1) // podman --pid=host: the trainer is a host process
	if ns, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", pid)); ns == hostMountNS(t) {
		t.Fatalf("rank 1's trainer (pid %d) is in the host's mount namespace (%s), not in the container", pid, ns)
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	stopped := time.Now()
	resumed := waitResumed(t, cluster, id, progress, 2, stopped, stopped.Add(2*time.Second))
	if _, err := cluster.WaitJob(ctx, id, 2*time.Minute, "COMPLETED"); err != nil {
		t.Fatalf("%v\n%s", err, cluster.JobOutput(id))
	}
	log := cluster.JobOutput(id)
	// podman --pidfile: the shim watches the trainer itself, stopped (T), not podman.
	for _, want := range []string{"ranks made no progress", "process stopped (T)", "restarting the step inside the allocation", "training finished"} {
		if !strings.Contains(log, want) {
			t.Errorf("the log lacks %q:\n%s", want, log)
		}
	}
	t.Logf("steps resumed %.1f s after the SIGSTOP of the trainer in the container", resumed.Seconds())
}

// hostMountNS is the test's own mount namespace (/proc/self/ns/mnt):
// a process in a container has another.
func hostMountNS(t *testing.T) string {
	ns, err := os.Readlink("/proc/self/ns/mnt")
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

// dryRunEnv reads the rank environment trainrun run --dry-run printed in a
// job's output (KEY=VALUE lines after "# environment of rank"),
// unquoting the shell's single quotes.
func dryRunEnv(t *testing.T, log string) map[string]string {
	t.Helper()
	m := map[string]string{}
	in := false
	for _, line := range strings.Split(log, "\n") {
		switch {
		case strings.HasPrefix(line, "# environment of rank"):
			in = true
		case strings.HasPrefix(line, "#") || line == "":
			if in && len(m) > 0 {
				return m
			}
		case in:
			if k, v, ok := strings.Cut(line, "="); ok {
				if len(v) >= 2 && v[0] == '\'' && v[len(v)-1] == '\'' {
					v = strings.ReplaceAll(v[1:len(v)-1], `'\''`, "'")
				}
				m[k] = v
			}
		}
	}
	if len(m) == 0 {
		t.Fatalf("no dry-run environment in the job output:\n%s", log)
	}
	return m
}

// BenchmarkContainerStartup measures, inside one allocation of 2 nodes,
// the wall time to start and end /usr/bin/true in the podman container of
// podmanImage on both nodes: a bare `srun podman run` against `trainrun
// run --container-runtime podman` (--probe none: a restart's start), in
// alternating order, and reports the medians and their ratio.
//
//	test/e2e.sh -run '^$' -bench ContainerStartup -benchtime 1x
func BenchmarkContainerStartup(b *testing.B) {
	bin := trainrun(b)
	dir := b.TempDir()
	rootfs, mounts, conf := podmanImage(b, dir)
	const rounds = 5
	script := fmt.Sprintf(`#!/bin/bash
#SBATCH --nodes=2 --ntasks-per-node=1 --gpus-per-node=1 --time=10
export CONTAINERS_CONF=%[1]s
t() { local s=$(date +%%s%%N); "$@" >/dev/null 2>&1 || echo "FAILED $*"; echo "$(( ($(date +%%s%%N) - s) / 1000 ))"; }
variant() {
  case $1 in
  srun) echo "srun $(t srun --ntasks=2 --ntasks-per-node=1 podman run --rm --network=host --ipc=host --pid=host -v /usr:/usr:ro --rootfs %[2]s /usr/bin/true)";;
  trainrun) echo "trainrun $(t env TRAINRUN_JOB_DIR=%[3]s/j$2 %[4]s run --probe none --fix tp=1 --container-runtime podman --container-image %[2]s --container-mounts %[5]s -- /usr/bin/true)";;
  esac
}
vs=(srun trainrun)
for i in $(seq %[6]d); do
  for k in 0 1; do variant ${vs[$(( (i + k) %% 2 ))]} $i; done
done
`, conf, rootfs, dir, bin, mounts, rounds)
	us := map[string][]float64{}
	for i := 0; i < b.N; i++ {
		state, exit, out, id := runJob(b, script, 5*time.Minute)
		if state != "COMPLETED" || exit != 0 || strings.Contains(out, "FAILED") {
			b.Fatalf("job %d: %s exit %d\n%s", id, state, exit, out)
		}
		for _, m := range regexp.MustCompile(`(?m)^(srun|trainrun) (\d+)$`).FindAllStringSubmatch(out, -1) {
			v, _ := strconv.ParseFloat(m[2], 64)
			us[m[1]] = append(us[m[1]], v/1000)
		}
	}
	med := func(k string) float64 {
		v := us[k]
		if len(v) == 0 {
			b.Fatalf("no %s samples", k)
		}
		sort.Float64s(v)
		return v[len(v)/2]
	}
	s, r := med("srun"), med("trainrun")
	b.ReportMetric(s, "srun-podman-ms")
	b.ReportMetric(r, "trainrun-podman-ms")
	b.ReportMetric(r/s, "ratio")
	b.Logf("start and end of /usr/bin/true in podman on 2 nodes, median of %d: srun podman run %.0f ms, trainrun run --container-runtime podman %.0f ms (%.2fx)", len(us["srun"]), s, r, r/s)
}

// trainrun ckpt request reaches a trainer in podman's container: the
// checkpoint signal (USR2) goes to podman, whose --sig-proxy hands it in;
// --then continue checkpoints and trains on, --then stop ends the job with
// exit 7.
func TestContainerPodmanCkptRequest(t *testing.T) {
	t.Parallel()
	requireTorch(t)
	bin := trainrun(t)
	dir := t.TempDir()
	rootfs, mounts, conf := podmanImage(t, dir)
	ckpt := filepath.Join(dir, "ck")
	script := containerJob(bin, dir, "req", rootfs, mounts, conf, "--ckpt-dir "+ckpt, "", "", "--steps 400 --sleep 0.3")
	ctx := context.Background()
	id, err := cluster.SubmitBatch(ctx, strings.Replace(script, " -p low", "", 1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cluster.Run(context.Background(), "scancel", strconv.Itoa(id)) })
	waitLog(t, cluster, id, "all 2 ranks started", 90*time.Second)
	time.Sleep(10 * time.Second) // past torch's import and the rendezvous
	if _, err := cluster.Run(ctx, bin, "ckpt", "request", "--then", "continue", "--ckpt-dir", ckpt); err != nil {
		t.Fatal(err)
	}
	waitLog(t, cluster, id, "complete and committed as latest", 40*time.Second)
	if _, err := cluster.Run(ctx, bin, "ckpt", "request", "--then", "stop", "--ckpt-dir", ckpt); err != nil {
		t.Fatal(err)
	}
	if _, err := cluster.WaitJob(ctx, id, 90*time.Second, "FAILED"); err != nil {
		t.Fatalf("%v\n%s", err, cluster.JobOutput(id))
	}
	info, _ := cluster.JobInfo(ctx, id)
	log := cluster.JobOutput(id)
	if info["ExitCode"] != "7:0" || !strings.Contains(log, "stopped as requested") {
		t.Errorf("ExitCode=%s, want 7:0 (stopped) and the reason in the log:\n%s", info["ExitCode"], log)
	}
	if out, _ := cluster.Run(ctx, bin, "ckpt", "list", "--ckpt-dir", ckpt); strings.Count(out, "step-") < 2 {
		t.Errorf("want at least 2 committed checkpoints (continue, stop), got:\n%s\n%s", out, log)
	}
}
