package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
)

// The policy's NVMeBW (GB/s per node, per partition) is the default of
// --nvme-bw for trainrun plan (--policy, --partition) and trainrun run (the
// job's partition); the flag wins. With offload=nvme the step time depends
// on it, so each source shows in the predicted step.
func TestPolicyNVMeBW(t *testing.T) {
	pol := filepath.Join(t.TempDir(), "trainrun.conf")
	if err := os.WriteFile(pol, []byte("NVMeBW=5\nPartitionName=low NVMeBW=50\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	base := []string{"--model", "llama3-70b", "--gpu", "h100-sxm", "--seq-len", "4096", "--global-batch", "256", "--fix", "offload=nvme"}
	stepOf := func(t *testing.T, args ...string) float64 {
		t.Helper()
		out, errOut, code := runPlanCmd(t, append(append([]string{"plan", "--gpus", "32", "--gpus-per-node", "8", "--format", "json"}, base...), args...)...)
		if code != exitcode.OK {
			t.Fatalf("trainrun plan %v: exit %d: %s", args, code, errOut)
		}
		var doc struct {
			Plan struct {
				Time struct {
					Step float64 `json:"step_s"`
				} `json:"time"`
			} `json:"plan"`
		}
		if err := json.Unmarshal([]byte(out), &doc); err != nil || doc.Plan.Time.Step <= 0 {
			t.Fatalf("trainrun plan: %v %s", err, out)
		}
		return doc.Plan.Time.Step
	}
	s5, s50, s25 := stepOf(t, "--nvme-bw", "5"), stepOf(t, "--nvme-bw", "50"), stepOf(t)
	if !(s5 > s25 && s25 > s50) {
		t.Fatalf("step %g s at 5 GB/s, %g at 25 (default), %g at 50: the bandwidth does not show", s5, s25, s50)
	}
	t.Run("plan", func(t *testing.T) {
		for _, tc := range []struct {
			args []string
			want float64
		}{
			{[]string{"--policy", pol}, s5},                                           // site-wide
			{[]string{"--policy", pol, "--partition", "low"}, s50},                    // the partition's
			{[]string{"--policy", pol, "--partition", "other"}, s5},                   // not named: site-wide
			{[]string{"--policy", pol, "--partition", "low", "--nvme-bw", "25"}, s25}, // the flag wins
		} {
			if got := stepOf(t, tc.args...); got != tc.want {
				t.Errorf("%v: step %g s, want %g", tc.args, got, tc.want)
			}
		}
	})
	t.Run("run", func(t *testing.T) {
		predicted := func(t *testing.T, args ...string) string {
			t.Helper()
			m := slurmEnv4x8() // partition low
			m["TRAINRUN_JOB_DIR"] = t.TempDir()
			argv := append(append([]string{"--dry-run", "--probe", "none"}, base...), args...)
			out, errb, err := cli{vars: m}.runRun(append(argv, "--", "true")...)
			if err != nil {
				t.Fatalf("%v\n%s", err, errb)
			}
			for _, l := range strings.Split(out, "\n") {
				if _, after, ok := strings.Cut(l, "predicted   step "); ok {
					return strings.Fields(after)[0]
				}
			}
			t.Fatalf("no predicted step in\n%s", out)
			return ""
		}
		for _, tc := range []struct {
			args []string
			want float64
		}{
			{[]string{"--policy", pol}, s50},
			{[]string{"--policy", pol, "--nvme-bw", "5"}, s5},
			{nil, s25},
		} {
			if got, want := predicted(t, tc.args...), fmt.Sprintf("%.3f", tc.want); got != want {
				t.Errorf("%v: predicted step %s s, want %s", tc.args, got, want)
			}
		}
	})
	t.Run("bad value", func(t *testing.T) {
		bad := filepath.Join(t.TempDir(), "trainrun.conf")
		if err := os.WriteFile(bad, []byte("NVMeBW=-3\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		_, errOut, code := runPlanCmd(t, append([]string{"plan", "--gpus", "32", "--policy", bad}, base...)...)
		if code != exitcode.Usage || !strings.Contains(errOut, `NVMeBW: bad value "-3": want auto or a positive number of GB/s per node`) {
			t.Errorf("exit %d, stderr %s", code, errOut)
		}
	})
}
