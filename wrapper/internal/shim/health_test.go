package shim

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trainrun/trainrun/wrapper/internal/launch"
)

func fakePort(t *testing.T, root, dev, port, state, rate string) {
	t.Helper()
	d := filepath.Join(root, "class", "infiniband", dev, "ports", port)
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(d, "state"), []byte(state+"\n"), 0o644)
	os.WriteFile(filepath.Join(d, "rate"), []byte(rate+"\n"), 0o644)
}

// The pass writes the node's report: a port DOWN and a failing script
// fail it, each check named with what it saw.
func TestHealthReport(t *testing.T) {
	old := nvidiaSMI
	nvidiaSMI = "trainrun-no-such-nvidia-smi" // the same checks on a machine with GPUs
	t.Cleanup(func() { nvidiaSMI = old })
	dir, sys := t.TempDir(), t.TempDir()
	fakePort(t, filepath.Join(sys, "n2"), "mlx5_0", "1", "4: ACTIVE", "400 Gb/sec (4X NDR)")
	fakePort(t, filepath.Join(sys, "n2"), "mlx5_1", "1", "1: DOWN", "10 Gb/sec (4X SDR)")
	script := filepath.Join(dir, "check.sh")
	os.WriteFile(script, []byte("#!/bin/sh\necho checking $TRAINRUN_HEALTH_NODE\necho 'ECC: 3 retired pages' >&2\nexit 1\n"), 0o755)
	vars := map[string]string{"SLURMD_NODENAME": "n2", "SLURM_STEP_GPUS": "0,1", "SLURM_PROCID": "0"}
	env := Env{Getenv: func(k string) string { return vars[k] }, Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}}
	spec := launch.HealthSpec{GPUs: 4, Space: []string{dir}, MinFree: 1, Script: script, Timeout: "5s", Sysfs: filepath.Join(sys, "%n")}
	if err := Health(env, filepath.Join(dir, "out"), spec); err != nil {
		t.Fatal(err)
	}
	var rep launch.HealthReport
	if err := launch.ReadJSON(filepath.Join(dir, "out", "n2.json"), &rep); err != nil {
		t.Fatal(err)
	}
	failed := map[string]string{}
	for _, c := range rep.Failed() {
		failed[c.Name] = c.Detail
	}
	for name, want := range map[string]string{"gpus": "2 GPU(s) visible", "ib": `mlx5_1/1 port state "1: DOWN"`, "script": "ECC: 3 retired pages"} {
		if !strings.Contains(failed[name], want) {
			t.Errorf("check %s: %q, want a failure containing %q (report %+v)", name, failed[name], want, rep)
		}
	}
	if _, bad := failed["space"]; bad || len(rep.Checks) != 4 {
		t.Errorf("checks %+v: want gpus, ib, space (passing), script", rep.Checks)
	}
	// A healthy node: everything passes; no InfiniBand is no failure.
	vars["SLURMD_NODENAME"], vars["SLURM_STEP_GPUS"] = "n1", "0,1,2,3"
	spec.Script = ""
	if err := Health(env, filepath.Join(dir, "out"), spec); err != nil {
		t.Fatal(err)
	}
	rep = launch.HealthReport{}
	launch.ReadJSON(filepath.Join(dir, "out", "n1.json"), &rep)
	if f := rep.Failed(); len(f) != 0 || len(rep.Checks) != 3 {
		t.Errorf("healthy node: %+v", rep)
	}
}

func TestHealthScriptTimeout(t *testing.T) {
	script := filepath.Join(t.TempDir(), "slow.sh")
	os.WriteFile(script, []byte("#!/bin/sh\nsleep 5\n"), 0o755)
	c := checkScript(script, "n1", 200_000_000)
	if c.OK || !strings.Contains(c.Detail, "did not finish within 200ms") {
		t.Errorf("slow script: %+v", c)
	}
}

// nvidia-smi's answers as R535 prints them for 8 GPUs; "[N/A]" where a
// GPU does not track a field (H100s remap rows instead of retiring pages).
func TestJudgeNvidia(t *testing.T) {
	healthy := "0, 0, No, Not Active\n1, 0, No, Not Active\n2, 0, [N/A], Not Active\n3, 0, No, Not Active\n"
	if c := judgeNvidia(healthy, 4); !c.OK || c.Detail != "4 GPU(s) answered" {
		t.Errorf("healthy: %+v", c)
	}
	sick := "0, 0, No, Not Active\n1, 3, Yes, Not Active\n2, 0, No, Active\n"
	c := judgeNvidia(sick, 4)
	for _, want := range []string{"GPU 1: 3 uncorrected ECC error(s)", "GPU 1: page retirement pending", "GPU 2: hardware slowdown active", "the driver lists 3 GPU(s), the job holds 4"} {
		if c.OK || !strings.Contains(c.Detail, want) {
			t.Errorf("sick: %+v lacks %q", c, want)
		}
	}
}

// Without nvidia-smi there is no check; with one that fails, the node fails.
func TestCheckNvidiaCommand(t *testing.T) {
	old := nvidiaSMI
	t.Cleanup(func() { nvidiaSMI = old })
	nvidiaSMI = "trainrun-no-such-nvidia-smi"
	if _, ok := checkNvidia(8); ok {
		t.Error("a check without nvidia-smi")
	}
	fake := filepath.Join(t.TempDir(), "nvidia-smi")
	os.WriteFile(fake, []byte("#!/bin/sh\necho 'Unable to determine the device handle for GPU0000:3B:00.0: Unknown Error' >&2\nexit 255\n"), 0o755)
	nvidiaSMI = fake
	if c, ok := checkNvidia(8); !ok || c.OK || !strings.Contains(c.Detail, "the driver does not answer") {
		t.Errorf("failing nvidia-smi: %+v %v", c, ok)
	}
	os.WriteFile(fake, []byte("#!/bin/sh\nprintf '0, 0, No, Not Active\\n1, 0, No, Not Active\\n'\n"), 0o755)
	if c, ok := checkNvidia(2); !ok || !c.OK {
		t.Errorf("healthy nvidia-smi: %+v %v", c, ok)
	}
}
