//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/trainrun/trainrun/internal/safefs/safefstest"
)

// Review t4, F1, end to end: another user on the batch node holds 5,000
// connections against a step's control port (dialled again as fast as the
// controller closes them) from the moment its launch files name the port.
// The 16 shims of the step still all say hello and the run finishes. Before
// the fix, those sockets held every pre-hello slot and the accept queue,
// and a shim's Dial failed after about 16 s. The time to all hellos is the
// run's own "all 16 ranks started" line; it is logged, not asserted (a
// shared machine's timing is not a test's).
func TestControlChannelUnderFlood(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to open sockets as another uid")
	}
	bin := trainrun(t)
	jobDir := filepath.Join(t.TempDir(), "job")
	// A normal step (not started before the plan), so that the port is
	// known, and flooded, before srun starts the shims.
	script := fmt.Sprintf(`#!/bin/bash
#SBATCH --nodes=4 --ntasks-per-node=4 --gpus-per-node=4 --time=5
export TRAINRUN_EARLY_STEP=0
exec %s run --job-dir %s --fix tp=4 --global-batch 16 -- /bin/sh -c 'sleep 3'
`, bin, jobDir)
	floods := make(chan *safefstest.Flood, 1)
	go func() {
		deadline := time.Now().Add(60 * time.Second)
		for time.Now().Before(deadline) {
			b, err := os.ReadFile(filepath.Join(jobDir, "launch", "common.json"))
			var c struct {
				Control string `json:"control"`
			}
			if err == nil && json.Unmarshal(b, &c) == nil && c.Control != "" {
				floods <- safefstest.StartFlood(c.Control, 5000)
				return
			}
			time.Sleep(time.Millisecond)
		}
		floods <- nil
	}()
	state, exit, log, id := runJob(t, script, 120*time.Second)
	fl := <-floods
	if fl == nil {
		t.Fatalf("the launch files never named a control port\n%s", log)
	}
	fl.Stop()
	if state != "COMPLETED" || exit != 0 {
		t.Fatalf("job %d under the flood: %s exit %d\n%s", id, state, exit, log)
	}
	m := regexp.MustCompile(`all 16 ranks started ([0-9.]+) s after srun`).FindStringSubmatch(log)
	if m == nil {
		t.Fatalf("not every shim said hello under the flood (%d hostile connections made):\n%s", fl.Dials.Load(), log)
	}
	t.Logf("16 shims said hello %s s after srun, with %d hostile connections made during the run", m[1], fl.Dials.Load())
	if fl.Dials.Load() < 5000 {
		t.Errorf("the flood made only %d connections", fl.Dials.Load())
	}
	if strings.Contains(log, "no control channel") {
		t.Errorf("a shim ran without a control channel:\n%s", log)
	}
}
