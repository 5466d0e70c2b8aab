package harness

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trainrun/trainrun/internal/golden"
)

func testLayout() *layout {
	return &layout{
		dir: "/tmp/trainrun-slurm-1", clusterName: "trtest1", host: "vm",
		ctldPort: 6817, nodePorts: []int{7001, 7002, 7003, 7004}, gpus: 8,
	}
}

func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	golden.CheckString(t, filepath.Join("testdata", name), got)
}

func TestConfigFiles(t *testing.T) {
	cases := []struct {
		name   string
		adjust func(*layout)
	}{
		{"default", func(*layout) {}},
		{"extra", func(l *layout) {
			l.extra = []string{"KillWait=30", "schedulerparameters=" + DefaultSchedulerParameters + ",preempt_send_user_signal",
				"OverTimeLimit=1", "PartitionName=debug Nodes=n1 State=UP"}
			l.topology = true
		}},
		{"partitions", func(l *layout) {
			l.partitions = []string{"PartitionName=only Nodes=n[1-2] Default=YES"}
			l.nodePorts = l.nodePorts[:2]
			l.gpus = 2
		}},
		{"hetero", func(l *layout) { l.hetero = true }},
		{"gres-types", func(l *layout) {
			l.gresTypes = []string{"h100", "a100", "a100", "v100"}
			l.partitions = []string{"PartitionName=hopper Nodes=n1 Default=YES", "PartitionName=ampere Nodes=n[2-3]", "PartitionName=volta Nodes=n4"}
		}},
		{"one-node-one-gpu", func(l *layout) {
			l.nodePorts = l.nodePorts[:1]
			l.gpus = 1
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := testLayout()
			tc.adjust(l)
			checkGolden(t, tc.name+".slurm.conf", l.slurmConf())
			checkGolden(t, tc.name+".gres.conf", l.gresConf())
		})
	}
}

func TestExtraLinesReplaceOnlySingleKeys(t *testing.T) {
	l := testLayout()
	l.extra = []string{"killwait=30", "NodeName=extra CPUs=1", "# comment"}
	conf := l.slurmConf()
	if strings.Contains(conf, fmt.Sprintf("KillWait=%d\n", DefaultKillWait)) || strings.Count(conf, "killwait=30\n") != 1 {
		t.Errorf("KillWait not replaced in place:\n%s", conf)
	}
	if strings.Count(conf, "NodeName=") != 5 || !strings.Contains(conf, "# comment\n") {
		t.Errorf("NodeName or comment line not appended:\n%s", conf)
	}
}

func TestCmdErrorNamesCommandOutputAndLogs(t *testing.T) {
	e := &CmdError{Args: []string{"srun", "-N4", "bash", "-c", "echo $X", strings.Repeat("x", 1000)}, Err: fmt.Errorf("exit status 1"),
		Stdout: "out\n", Stderr: "srun: error: Unable to allocate resources\n", Logs: "\n--- last 1 lines of slurmctld.log:\nboom"}
	msg := e.Error()
	for _, want := range []string{"srun -N4 bash -c 'echo $X' 'xxx", "...[1000 bytes]", "exit status 1", "--- stdout:\nout",
		"--- stderr:\nsrun: error: Unable to allocate resources", "slurmctld.log:\nboom"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error message lacks %q:\n%s", want, msg)
		}
	}
}

// startMarked starts `sh -c script` with the cluster marker for dir, in its
// own process group, as a stand-in for a cluster's processes.
func startMarked(t *testing.T, dir, script string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	cmd.Env = append(os.Environ(), markerVar+"="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
	return cmd
}

// TestKillAllFindsMarkedAndDescendants: a marked process and a child that
// dropped the marker (env -i, like a task started with --export=NONE) are
// found and killed; an unmarked process and other clusters' are not.
func TestKillAllFindsMarkedAndDescendants(t *testing.T) {
	dir := t.TempDir()
	other := startMarked(t, dir+"-other", "sleep 60")
	stranger := exec.Command("sleep", "60")
	if err := stranger.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stranger.Process.Kill(); _ = stranger.Wait() })
	pidFile := filepath.Join(dir, "child.pid")
	marked := startMarked(t, dir, "env -i sh -c 'echo $$ > "+pidFile+"; exec sleep 60' & wait")
	var child int
	for deadline := time.Now().Add(10 * time.Second); child == 0; {
		if data, err := os.ReadFile(pidFile); err == nil {
			fmt.Sscan(string(data), &child)
		}
		if time.Now().After(deadline) {
			t.Fatal("child did not start")
		}
		time.Sleep(10 * time.Millisecond)
	}
	found := map[int]bool{}
	for _, p := range clusterProcs(dir) {
		found[p.pid] = true
	}
	if !found[marked.Process.Pid] || !found[child] || found[other.Process.Pid] || found[stranger.Process.Pid] || found[os.Getpid()] {
		t.Fatalf("clusterProcs(%s) = %v; want the marked shell %d and its unmarked child %d only", dir, found, marked.Process.Pid, child)
	}
	if left := killAll(dir); len(left) > 0 {
		t.Fatalf("killAll left %v", left)
	}
	if running(child) {
		t.Errorf("child %d still runs", child)
	}
	if !running(other.Process.Pid) || !running(stranger.Process.Pid) {
		t.Errorf("killAll(%s) killed a process of another cluster or an unrelated one", dir)
	}
}

// TestReapStaleClusterOnly: a cluster directory whose owner is dead is reaped
// (processes killed, directory removed); one whose owner lives is left alone.
func TestReapStaleClusterOnly(t *testing.T) {
	base := t.TempDir()
	stale := filepath.Join(base, dirPrefix+"stale")
	live := filepath.Join(base, dirPrefix+"live")
	for _, d := range []string{stale, live} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// A dead owner: a process that has exited (and been reaped).
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(stale, ownerFile), []byte(fmt.Sprintf("%d 1\n", dead.Process.Pid)), 0o644); err != nil {
		t.Fatal(err)
	}
	self, err := selfOwner()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(live, ownerFile), []byte(self), 0o644); err != nil {
		t.Fatal(err)
	}
	sp := startMarked(t, stale, "sleep 60")
	lp := startMarked(t, live, "sleep 60")
	reapStale(base, t.Logf)
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("stale cluster directory still there (%v)", err)
	}
	if running(sp.Process.Pid) {
		t.Errorf("process of the stale cluster still runs")
	}
	if _, err := os.Stat(live); err != nil || !running(lp.Process.Pid) {
		t.Errorf("the live cluster was reaped: %v", err)
	}
}
