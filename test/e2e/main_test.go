//go:build e2e

package e2e

import (
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/trainrun/trainrun/test/harness"
)

// cluster is the one Slurm cluster every test of the package uses. Tests must
// leave it as they found it: cancel their jobs, restore what they change.
var cluster *harness.Cluster

// clusterTopology is the cluster's topology.conf: two leaf switches of two
// nodes under one spine, so placement sees a real `scontrol show topology`.
const clusterTopology = `SwitchName=leaf1 Nodes=n[1-2]
SwitchName=leaf2 Nodes=n[3-4]
SwitchName=spine Switches=leaf[1-2]
`

func TestMain(m *testing.M) { os.Exit(runMain(m)) }

func runMain(m *testing.M) int {
	flag.Parse()
	if os.Geteuid() != 0 {
		fmt.Println("SKIP e2e: needs root to run munged, slurmctld and slurmd")
		return 0
	}
	log.SetFlags(log.Ltime | log.Lmicroseconds)
	// TRAINRUN_E2E_KEEP=1 keeps the cluster directory (configs, logs, job
	// output) after the run, for a look at what happened.
	keep := os.Getenv("TRAINRUN_E2E_KEEP") == "1"
	c, err := harness.Start(harness.Options{TopologyConf: clusterTopology, KeepDir: keep, Logf: log.Printf})
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL e2e: the test cluster did not start:\n%v\n", err)
		return 1
	}
	cluster = c

	// Ctrl-C or a kill: stop the cluster, then exit as the signal would.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		s := <-sig
		fmt.Fprintf(os.Stderr, "e2e: %v: stopping the test cluster\n", s)
		if err := c.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		}
		os.Exit(128 + int(s.(syscall.Signal)))
	}()
	// go test -timeout panics without running deferred calls: stop the
	// cluster shortly before, so the failing tests end and their output shows.
	if f := flag.Lookup("test.timeout"); f != nil {
		if d, err := time.ParseDuration(f.Value.String()); err == nil && d > 0 {
			margin := min(d/10, 30*time.Second)
			t := time.AfterFunc(d-margin, func() {
				fmt.Fprintf(os.Stderr, "e2e: -timeout %v is %v away: dumping logs and stopping the test cluster\n", d, margin)
				c.DumpLogs(os.Stderr)
				_ = c.Stop()
			})
			defer t.Stop()
		}
	}

	code := m.Run()
	if code != 0 {
		fmt.Fprintln(os.Stderr, "e2e: tests failed; daemon logs follow")
		c.DumpLogs(os.Stderr)
	}
	if err := c.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL e2e: teardown: %v\n", err)
		code = 1
	}
	tm := c.Timings()
	fmt.Printf("e2e: cluster start %v (munged %v, slurmctld %v, 4 nodes idle %v), teardown %v\n",
		tm.Start.Round(time.Millisecond), tm.Munged.Round(time.Millisecond), tm.Slurmctld.Round(time.Millisecond),
		tm.Nodes.Round(time.Millisecond), tm.Stop.Round(time.Millisecond))
	return code
}

// ownCluster starts a cluster for one test, so a long test that mostly waits
// on Slurm's clocks (time limits, grace times, requeue delays) can run in
// parallel with the others without sharing nodes or preemptions with them.
var ownClusters atomic.Int64

// jobIDOffset shifts this test process's job ids (0-4999, below the next
// cluster's 10000).
var jobIDOffset = rand.Int64N(5000)

// lostNodeConf makes Slurm notice a killed slurmd within seconds.
var lostNodeConf = []string{"SlurmdTimeout=5", "MessageTimeout=5"}

func ownCluster(t *testing.T, extraSlurmConf ...string) *harness.Cluster {
	t.Helper()
	return startOwn(t, harness.Options{TopologyConf: clusterTopology, ExtraSlurmConf: extraSlurmConf, Logf: t.Logf})
}

// heteroCluster is a cluster of the test's own in the harness's
// heterogeneous mode: partitions hopper (n1, n2: gpu:h100) and ampere (n3,
// n4: gpu:a100).
func heteroCluster(t *testing.T) *harness.Cluster {
	t.Helper()
	return startOwn(t, harness.Options{Heterogeneous: true, Logf: t.Logf})
}

// startOwn starts opts as a cluster of the test's own, with job ids of its
// own, stopped when the test ends.
func startOwn(t *testing.T, opts harness.Options) *harness.Cluster {
	t.Helper()
	// Job ids of their own: every cluster's "nodes" are this one machine, and
	// trainrun derives MASTER_PORT from the job id, so job 2 of two clusters
	// would otherwise race for the same port. The offset, one per test
	// process, does the same for two test processes at once (two worktrees'
	// e2e runs, or a chaos run beside them, raced for job 10001's port).
	first := fmt.Sprintf("FirstJobId=%d", 10000*ownClusters.Add(1)+jobIDOffset)
	opts.ExtraSlurmConf = append([]string{first}, opts.ExtraSlurmConf...)
	c, err := harness.Start(opts)
	if err != nil {
		t.Fatalf("a cluster of the test's own did not start: %v", err)
	}
	t.Cleanup(func() { // cleanups run last-in first-out: the logs are read before Stop
		if err := c.Stop(); err != nil {
			t.Errorf("teardown of the test's own cluster: %v", err)
		}
	})
	c.LogOnFailure(t)
	return c
}

var (
	torchOnce sync.Once
	torchErr  error
)

// requireTorch skips a test that needs Debian's python3-torch where it is
// missing, or fails it under TRAINRUN_E2E_REQUIRED=1 (CI), where a skipped
// training test would hide that nothing was checked. The import, seconds of
// CPU on this machine, is tried once per run.
func requireTorch(t *testing.T) {
	t.Helper()
	torchOnce.Do(func() { torchErr = exec.Command("/usr/bin/python3", "-c", "import torch").Run() })
	if torchErr == nil {
		return
	}
	msg := fmt.Sprintf("/usr/bin/python3 cannot import torch (%v); 'make deps' installs python3-torch", torchErr)
	if os.Getenv("TRAINRUN_E2E_REQUIRED") == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// exampleTrainer is the PyTorch trainer the training tests run
// (contrib/trainer/train_example.py).
func exampleTrainer() string {
	return filepath.Join(repoRoot(), "contrib", "trainer", "train_example.py")
}
