//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/trainrun/trainrun/test/harness"
)

// TestSubmitLateBound (issue 34): with both partitions held, submit chooses
// hopper (its holder ends first) and late-binds ampere in the same job
// (-p hopper,ampere, a plan for each). When ampere frees first, Slurm starts
// the job there and its trainrun run takes ampere's plan, not the chosen's.
func TestSubmitLateBound(t *testing.T) {
	t.Parallel()
	bin := trainrun(t)
	c := heteroCluster(t)
	s := &submitEnv{t: t, c: c, bin: bin, dir: t.TempDir()}
	s.policy = s.write("trainrun.conf", "PartitionName=ampere GPUType=a100-40gb\n")
	s.script = s.write("job.sh", fmt.Sprintf(`#!/bin/bash
exec %s run --probe none -- /bin/sh -c 'env > "%s/$SLURM_JOB_ID.$RANK.env"'
`, bin, s.dir))
	ctx := context.Background()
	var holders []int
	for _, h := range []struct{ part, limit string }{{"hopper", "--time=10"}, {"ampere", "--time=600"}} {
		id, err := c.SubmitBatch(ctx, "#!/bin/bash\nsleep 600\n", "-p", h.part, "-N2", "--exclusive", h.limit)
		if err != nil {
			t.Fatal(err)
		}
		holders = append(holders, id)
		defer cancelJobsOn(t, c, id)
		if _, err := c.WaitJob(ctx, id, 20*time.Second, "RUNNING"); err != nil {
			t.Fatal(err)
		}
	}
	r := s.submit(t, "--policy", s.policy, "--tokens", "2e9", "--min-gpus", "16", "--max-gpus", "16", "--late-bind", "20")
	var late struct {
		Chosen struct {
			Partitions []string `json:"partitions"`
			TimeLimitS float64  `json:"time_limit_s"`
		} `json:"chosen"`
	}
	if err := json.Unmarshal([]byte(r.raw), &late); err != nil {
		t.Fatal(err)
	}
	ampere := r.candidate("ampere", 16)
	if r.Chosen.Partition != "hopper" || strings.Join(late.Chosen.Partitions, ",") != "hopper,ampere" || ampere == nil || late.Chosen.TimeLimitS < ampere.TimeLimitS {
		t.Fatalf("chosen %s, listed %v, limit %g s: want hopper, then ampere late-bound, the limit ampere's\n%s", r.Chosen.Partition, late.Chosen.Partitions, late.Chosen.TimeLimitS, r.raw)
	}
	info, err := c.JobInfo(ctx, r.id)
	if err != nil || info["JobState"] != "PENDING" || info["Partition"] != "hopper,ampere" {
		t.Errorf("job %d while both are held: %v %v", r.id, info, err)
	}
	cancelJobsOn(t, c, holders[1]) // ampere frees first
	st, err := c.WaitJob(ctx, r.id, 40*time.Second, harness.FinalStates...)
	if err != nil || st != "COMPLETED" {
		t.Fatalf("job %d: %s %v\n%s", r.id, st, err, c.JobOutput(r.id))
	}
	out := c.JobOutput(r.id)
	if !strings.Contains(out, "late binding: the job landed in partition ampere") {
		t.Errorf("job %d's output says nothing of the partition's plan:\n%s", r.id, out)
	}
	var layout string
	for _, cd := range lateCandidates(t, r.raw) {
		if cd.Partition == "ampere" && cd.GPUs == 16 {
			layout = cd.Layout
		}
	}
	for rank, e := range s.waitRanks(t, r.id, 16) {
		tp, pp, dp := e["TRAINRUN_TP"], e["TRAINRUN_PP"], e["TRAINRUN_DP"]
		// SLURM_JOB_PARTITION may be the job's whole list (Slurm 22.05's steps): the node says where it runs.
		if node := e["SLURMD_NODENAME"]; node != "n3" && node != "n4" || !strings.HasPrefix(layout, "tp="+tp+",pp="+pp+",") || !strings.Contains(layout, ",dp="+dp+",") {
			t.Fatalf("job %d rank %d: node %q (partition %q) tp=%s pp=%s dp=%s; want ampere (n3, n4) with its plan %s (the chosen hopper's: %s)",
				r.id, rank, e["SLURMD_NODENAME"], e["SLURM_JOB_PARTITION"], tp, pp, dp, layout, r.Chosen.Layout)
		}
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "late binding") || strings.Contains(l, "TRAINRUN_PLAN") {
			t.Logf("job %d: %s", r.id, l)
		}
	}
	t.Logf("landed in ampere with %s (hopper's plan %s; ampere candidate %+v)", layout, r.Chosen.Layout, ampere)
}

func lateCandidates(t *testing.T, raw string) []struct {
	Partition string `json:"partition"`
	GPUs      int    `json:"gpus"`
	Layout    string `json:"layout"`
} {
	var v struct {
		Candidates []struct {
			Partition string `json:"partition"`
			GPUs      int    `json:"gpus"`
			Layout    string `json:"layout"`
		} `json:"candidates"`
	}
	if err := json.Unmarshal([]byte(raw), &v); err != nil {
		t.Fatal(err)
	}
	return v.Candidates
}
