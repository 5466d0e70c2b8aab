// Command demo is the README's main command: it shows trainrun doing its job
// on built-in defaults. It prints the topology of a built-in 8-GPU H100 node
// and a plan for Llama-3-70B on 64 H100s, then starts a throw-away local Slurm
// (test/harness: munged, slurmctld, 4 slurmd with 8 fake GPUs each), runs the
// example PyTorch trainer under `trainrun run`, preempts it once with a
// high-priority job, and shows it checkpoint, requeue, resume from the
// verified checkpoint and finish with the same weights as an uninterrupted run.
//
// Usage (as root, from the repository root, after `make build`):
//
//	go run ./test/demo [-bin bin/trainrun] [-keep]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/trainrun/trainrun/test/harness"
)

func main() {
	bin := flag.String("bin", "bin/trainrun", "the trainrun binary")
	keep := flag.Bool("keep", false, "keep the cluster's directory (configs, logs, job output) after the demo")
	flag.Parse()
	if err := run(*bin, *keep); err != nil {
		fmt.Fprintf(os.Stderr, "demo: %v\n", err)
		os.Exit(1)
	}
}

func step(title string) { fmt.Printf("\n==== %s\n\n", title) }

// show runs a trainrun command and copies its output.
func show(bin string, args ...string) error {
	fmt.Printf("$ trainrun %s\n", strings.Join(args, " "))
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("trainrun %s: %w", strings.Join(args, " "), err)
	}
	return nil
}

func run(bin string, keep bool) error {
	bin, trainer, err := demoPaths(bin)
	if err != nil {
		return err
	}
	step("1. The node: a built-in snapshot of an 8-GPU HGX H100 (trainrun topo --machine hgx-h100)")
	if err := show(bin, "topo", "--machine", "hgx-h100"); err != nil {
		return err
	}
	step("2. The plan: Llama-3-70B on 64 H100s, 8K sequence, 512 sequences per step")
	if err := show(bin, "plan", "--model", "llama3-70b", "--gpu", "h100-sxm", "--gpus", "64", "--seq-len", "8192", "--global-batch", "512"); err != nil {
		return err
	}

	step("3. A real run on a local Slurm: preempted once, checkpointed, requeued, resumed, finished")
	if why := cannotRunSlurm(); why != "" {
		fmt.Println(why)
		return nil
	}
	c, err := startCluster(keep)
	if err != nil {
		return err
	}
	defer stopCluster(c, keep)
	out := filepath.Join(c.JobsDir(), "demo")
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	ctx := context.Background()
	low, err := preemptOnce(ctx, c, bin, trainer, out)
	if err != nil {
		return err
	}
	return showOutcome(ctx, c, bin, out, low)
}

// demoPaths checks that the trainrun binary and the example trainer exist:
// the binary's absolute path and the trainer's.
func demoPaths(bin string) (string, string, error) {
	bin, err := filepath.Abs(bin)
	if err != nil {
		return "", "", err
	}
	if _, err := os.Stat(bin); err != nil {
		return "", "", fmt.Errorf("%s: %w (run `make build` first)", bin, err)
	}
	root, err := os.Getwd()
	if err != nil {
		return "", "", err
	}
	trainer := filepath.Join(root, "contrib", "trainer", "train_example.py")
	if _, err := os.Stat(trainer); err != nil {
		return "", "", fmt.Errorf("%s: %w (run the demo from the repository root)", trainer, err)
	}
	return bin, trainer, nil
}

// cannotRunSlurm says why this machine cannot run the local Slurm part ("":
// it can): it needs root, Slurm and Debian's python3-torch.
func cannotRunSlurm() string {
	if os.Geteuid() != 0 {
		return "SKIP: starting munged, slurmctld and slurmd needs root; run `make demo` as root for this part"
	}
	if _, err := exec.LookPath("slurmctld"); err != nil {
		return "SKIP: Slurm is not installed; `make demo` installs it (test/deps.sh) as root on Debian 12"
	}
	if err := exec.Command("/usr/bin/python3", "-c", "import torch").Run(); err != nil {
		return "SKIP: Debian's python3-torch is not installed; `make deps` installs it"
	}
	return ""
}

// startCluster starts the local Slurm, which an interrupt stops.
func startCluster(keep bool) (*harness.Cluster, error) {
	fmt.Println("starting a local Slurm: munged, slurmctld, 4 slurmd (n1..n4) with 8 fake GPUs each ...")
	c, err := harness.Start(harness.Options{KeepDir: keep})
	if err != nil {
		return nil, err
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sig
		fmt.Fprintln(os.Stderr, "demo: interrupted: stopping the local Slurm")
		_ = c.Stop()
		os.Exit(130)
	}()
	tm := c.Timings()
	fmt.Printf("cluster up in %v\n", tm.Start.Round(time.Millisecond))
	return c, nil
}

// stopCluster stops the local Slurm, saying where its directory is when kept.
func stopCluster(c *harness.Cluster, keep bool) {
	if err := c.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "demo: teardown: %v\n", err)
	}
	if keep {
		fmt.Printf("cluster directory kept: %s\n", c.Dir())
	}
}

// preemptOnce submits the demo's two jobs into out, the reference and one
// that a high-priority job preempts, and waits for all three to end; it
// returns the preempted job's id.
func preemptOnce(ctx context.Context, c *harness.Cluster, bin, trainer, out string) (int, error) {
	job := func(name string) string {
		return fmt.Sprintf(`#!/bin/bash
#SBATCH --job-name=%s --nodes=2 --ntasks-per-node=2 --gpus-per-node=2 --time=10 --requeue --open-mode=append -p low
# exec: trainrun becomes the batch shell's process and gets Slurm's B: signals itself.
export GLOO_SOCKET_IFNAME=lo
exec %s run --fix tp=2 -- /usr/bin/python3 %s --steps 100 --sleep 0.4 --out %s/%s.weights --report %s/%s
`, name, bin, trainer, out, name, out, name)
	}
	ref, err := c.SubmitBatch(ctx, job("uninterrupted"), "--nodelist=n3,n4")
	if err != nil {
		return 0, err
	}
	low, err := c.SubmitBatch(ctx, job("preempted"), "--nodelist=n1,n2")
	if err != nil {
		return 0, err
	}
	fmt.Printf("submitted job %d (will be preempted) on n[1-2] and job %d (reference, never interrupted) on n[3-4], partition low\n", low, ref)

	deadline := time.Now().Add(3 * time.Minute)
	for !strings.Contains(c.JobOutput(low), "ranks started") {
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("job %d did not start its ranks within 3 minutes:\n%s", low, c.JobOutput(low))
		}
		time.Sleep(500 * time.Millisecond)
	}
	time.Sleep(20 * time.Second) // let it load torch and train a while
	high, err := c.SubmitBatch(ctx, "#!/bin/bash\nsleep 2\n", "-p", "high", "--nodelist=n1", "--exclusive", "--time=2", "--job-name=urgent")
	if err != nil {
		return 0, err
	}
	fmt.Printf("submitted job %d to partition high on n1: it preempts job %d\n", high, low)
	if _, err := c.WaitJob(ctx, high, 3*time.Minute, "COMPLETED"); err != nil {
		return 0, err
	}
	for _, id := range []int{ref, low} {
		if _, err := c.WaitJob(ctx, id, 6*time.Minute, "COMPLETED"); err != nil {
			return 0, err
		}
	}

	return low, nil
}

// showOutcome prints the preempted job's log and compares its final weights
// with the uninterrupted run's.
func showOutcome(ctx context.Context, c *harness.Cluster, bin, out string, low int) error {
	info, _ := c.JobInfo(ctx, low)
	step(fmt.Sprintf("job %d's log (both incarnations)", low))
	fmt.Print(c.JobOutput(low))

	step("outcome")
	a, errA := os.ReadFile(filepath.Join(out, "uninterrupted.weights"))
	b, errB := os.ReadFile(filepath.Join(out, "preempted.weights"))
	restarts, _ := strconv.Atoi(info["Restarts"])
	fmt.Printf("job %d: %s after %d requeue(s)\n", low, info["JobState"], restarts)
	if err := errors.Join(errA, errB); err != nil {
		return fmt.Errorf("final weights missing: %w", err)
	}
	if string(a) != string(b) || len(a) == 0 {
		return fmt.Errorf("final weights differ: uninterrupted %q, preempted %q", a, b)
	}
	fmt.Printf("final weights of the preempted run are bit-identical to the uninterrupted run's (%s)\n", strings.TrimSpace(string(a)))
	ckpt := filepath.Join(c.JobsDir(), fmt.Sprintf("trainrun-%d", low), "checkpoints")
	if _, err := os.Stat(ckpt); err == nil {
		fmt.Println()
		if err := show(bin, "ckpt", "list", "--ckpt-dir", ckpt); err != nil {
			fmt.Fprintf(os.Stderr, "demo: %v\n", err)
		}
	}
	if restarts < 1 {
		return fmt.Errorf("job %d was not requeued (Restarts=%q)", low, info["Restarts"])
	}
	return nil
}
