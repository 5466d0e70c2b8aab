package spank

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trainrun/trainrun/plan"
	"github.com/trainrun/trainrun/plan/policy"
	"github.com/trainrun/trainrun/topo"
)

// The worst inputs a user can hand root slurmstepd, one class each (issue
// 12: no request may make a root process use more than 256 MiB or 10 s of
// CPU). BenchmarkRootWorstInputs runs each in a fresh process (this test
// binary, as worstChild) and reports that process's peak RSS and CPU time
// from getrusage, the figures the bound is about; the Go runtime alone is
// part of them.
const worstArg = "__worst-input"

var worstInputs = map[string]func(dir string) error{
	// a 4 KB SLURM_STEP_NODELIST that once expanded to 259 MiB: refused
	"nodelist-4k-attack": func(string) error {
		var r []string
		for i := 0; i < 15; i++ {
			r = append(r, strings.Repeat("0", 250)+"-65535")
		}
		if _, err := topo.ExpandHostlist("n[" + strings.Join(r, ",") + "]"); err == nil {
			return fmt.Errorf("accepted")
		}
		return nil
	},
	// the largest expansion the caps accept: 65,536 names of 240 bytes
	"nodelist-worst-accepted": func(string) error {
		_, err := topo.ExpandHostlist("n[" + strings.Join([]string{strings.Repeat("0", 239) + "-65535"}, ",") + "]")
		return err
	},
	// TRAINRUN_MODEL naming a 512 MiB file
	"config-512MiB": func(dir string) error {
		p := filepath.Join(dir, "big.json")
		f, err := os.Create(p)
		if err != nil {
			return err
		}
		f.Truncate(512 << 20)
		f.Close()
		if _, err := readModelConfig(&Config{}, p); err == nil {
			return fmt.Errorf("accepted")
		}
		return nil
	},
	// num_hidden_layers 2^24 (18 s and 520 MB before the caps): refused
	"config-2^24-layers": func(dir string) error {
		_, err := planWorst(dir, map[string]any{"num_hidden_layers": 1 << 24}, 64)
		if err == nil || !strings.Contains(err.Error(), "limit") {
			return fmt.Errorf("not refused: %v", err)
		}
		return nil
	},
	// the costliest config.json the caps accept, planned on 3,840 tasks
	"config-worst-accepted": func(dir string) error {
		_, err := planWorst(dir, map[string]any{"num_hidden_layers": plan.MaxLayers, "hidden_size": 960, "num_attention_heads": 960,
			"num_key_value_heads": 960, "intermediate_size": 3840, "num_local_experts": 3840, "num_experts_per_tok": 8}, 3840)
		if err != nil && !strings.Contains(err.Error(), "plan for") {
			return err
		}
		return nil
	},
	// --train-layout tp=8,pp=2^61+1 (wrapped to 8, then a panic)
	"layout-overflow": func(string) error {
		if _, err := plan.ParsePins("tp=8,pp=2305843009213693953"); err == nil {
			return fmt.Errorf("accepted")
		}
		return nil
	},
}

// planWorst writes Mixtral's config.json with fields replaced and plans it
// as PlanStep does in slurmstepd, on tasks tasks (8 per node).
func planWorst(dir string, set map[string]any, tasks int) (*StepPlan, error) {
	b, err := os.ReadFile("../plan/testdata/hf/mixtral-8x7b-v0.1.json")
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	for k, v := range set {
		m[k] = v
	}
	b, _ = json.Marshal(m)
	p := filepath.Join(dir, "config.json")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		return nil, err
	}
	pol, err := policy.Parse(strings.NewReader("GPUType=h100-sxm\n"), "trainrun.conf")
	if err != nil {
		return nil, err
	}
	c := &Config{Policy: pol}
	r, err := Resolve(c, "", map[string]string{"train-model": p, "train-batch": "7680x8192"}, func(string) string { return "" })
	if err != nil {
		return nil, err
	}
	sp, _, err := PlanStep(c, r, Step{TotalTasks: tasks, LocalTasks: 8, NNodes: tasks / 8}, nil)
	return sp, err
}

// worstChild runs one worst input (called from TestMain).
func worstChild(name string) int {
	f := worstInputs[name]
	if f == nil {
		fmt.Fprintln(os.Stderr, "unknown worst input", name)
		return 2
	}
	dir, _ := os.MkdirTemp("", "trainrun-worst-")
	defer os.RemoveAll(dir)
	if err := f(dir); err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		return 1
	}
	return 0
}

func BenchmarkRootWorstInputs(b *testing.B) {
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	for name := range worstInputs {
		b.Run(name, func(b *testing.B) {
			var peak int64
			var cpu time.Duration
			for b.Loop() {
				// wait4 itself, for the child's own rusage (ProcessState's
				// Maxrss read the same figure for every child here)
				cmd := exec.Command(self, worstArg, name)
				cmd.Stderr = os.Stderr
				if err := cmd.Start(); err != nil {
					b.Fatal(err)
				}
				var ws syscall.WaitStatus
				var ru syscall.Rusage
				if _, err := syscall.Wait4(cmd.Process.Pid, &ws, 0, &ru); err != nil || ws.ExitStatus() != 0 {
					b.Fatalf("%s: %v, exit %d", name, err, ws.ExitStatus())
				}
				peak = max(peak, ru.Maxrss*1024)
				cpu = max(cpu, time.Duration(ru.Utime.Nano()+ru.Stime.Nano()))
			}
			b.ReportMetric(float64(peak)/(1<<20), "peak-MiB")
			b.ReportMetric(cpu.Seconds(), "cpu-s")
			if peak > 256<<20 || cpu > 10*time.Second {
				b.Errorf("%s: peak %d MiB, %.2f s of CPU: over the bound of 256 MiB and 10 s", name, peak>>20, cpu.Seconds())
			}
		})
	}
}

// TestWorstInputsFinish runs every worst input once in-process: each is
// refused or finishes (the bound is BenchmarkRootWorstInputs' to measure).
func TestWorstInputsFinish(t *testing.T) {
	for name, f := range worstInputs {
		if err := f(t.TempDir()); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
