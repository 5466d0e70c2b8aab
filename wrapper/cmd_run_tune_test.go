package main

import (
	"strings"
	"testing"
)

// The dry run of --tune lists the candidates the trials would run: distinct
// parallel splits of the planner's best, each for the allocation's GPUs,
// and the budget (5% of no time limit: the no-limit default).
func TestRunTuneDryRunListsCandidates(t *testing.T) {
	m := slurmEnv4x8()
	m["SLURM_JOB_NODELIST"], m["SLURM_JOB_NUM_NODES"], m["SLURM_TASKS_PER_NODE"], m["SLURM_GPUS_ON_NODE"], m["SLURM_JOB_GPUS"] = "n1", "1", "4", "4", "0,1,2,3"
	m["TRAINRUN_JOB_DIR"] = t.TempDir()
	_, errb, err := cli{vars: m}.runRun([]string{"--dry-run", "--probe", "none", "--tune", "3:8", "--gpu", "h100-sxm",
		"--layers", "4", "--hidden", "256", "--heads", "8", "--vocab", "1024", "--seq-len", "128", "--global-batch", "16", "--", "true"}...)
	if err != nil {
		t.Fatalf("%v\n%s", err, errb)
	}
	if !strings.Contains(errb, "tune: 3 candidate(s), 8 steps each, within 10m0s") {
		t.Errorf("no candidates line:\n%s", errb)
	}
	seen := map[string]bool{}
	for _, l := range strings.Split(errb, "\n") {
		_, cfg, ok := strings.Cut(l, "tune: candidate ")
		if !ok {
			continue
		}
		f := strings.Split(cfg, ",")
		shape := f[0] + f[1] // "N: tp=..", "pp=.."
		if seen[shape[3:]] {
			t.Errorf("two candidates of one parallel split: %s", l)
		}
		seen[shape[3:]] = true
	}
	if len(seen) != 3 {
		t.Errorf("%d candidates listed, want 3:\n%s", len(seen), errb)
	}
}
