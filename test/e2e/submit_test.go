//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/trainrun/trainrun/test/harness"
)

// TestSubmitHetero runs trainrun submit on the harness's heterogeneous
// cluster (hopper = n[1-2] gpu:h100:8, ampere = n[3-4] gpu:a100:8, the
// policy naming ampere's a100s 40 GB ones) and checks each choice (issue
// 15) and that the submitted job runs where it was sent, with the layout
// submit chose (TRAINRUN_PLAN).
func TestSubmitHetero(t *testing.T) {
	t.Parallel()
	bin := trainrun(t)
	c := heteroCluster(t)
	s := &submitEnv{t: t, c: c, bin: bin, dir: t.TempDir()}
	s.policy = s.write("trainrun.conf", "PartitionName=ampere GPUType=a100-40gb\n")
	s.priced = s.write("priced.conf", "PartitionName=hopper GPUHourCost=20\nPartitionName=ampere GPUType=a100-40gb GPUHourCost=2\n")
	// Every rank writes its environment; with a release file named, it waits
	// for it (the partial-node jobs must run at the same time).
	s.script = s.write("job.sh", fmt.Sprintf(`#!/bin/bash
exec %s run --probe none -- /bin/sh -c 'env > "%s/$SLURM_JOB_ID.$RANK.env"; [ -z "$RELEASE" ] || for i in $(seq 300); do [ -e "$RELEASE" ] && break; sleep 0.1; done'
`, bin, s.dir))

	t.Run("BothIdleFaster", func(t *testing.T) {
		t0 := time.Now()
		r := s.submit(t, "--policy", s.policy, "--tokens", "1e9", "--min-gpus", "16")
		s.wantRuns(t, r, "hopper", 16)
		// The run in the job knows the model beside TRAINRUN_PLAN (submit
		// exports TRAINRUN_MODEL and TRAINRUN_BATCH): it places the ranks
		// with the plan's traffic, not in Slurm's order with none (issue 26).
		out := c.JobOutput(r.id)
		if !strings.Contains(out, "traffic     per step: NVLink ") || strings.Contains(out, "NVLink 0 B") {
			t.Errorf("job %d: no placement traffic in its output:\n%s", r.id, out)
		}
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, "traffic     per step") {
				t.Logf("job %d:%s", r.id, l)
			}
		}
		t.Logf("took %v", time.Since(t0).Round(time.Millisecond))
	})
	t.Run("BusyFastPartition", func(t *testing.T) {
		t0 := time.Now()
		holder, err := c.SubmitBatch(context.Background(), "#!/bin/bash\nsleep 600\n", "-p", "hopper", "-N2", "--exclusive", "--time=60")
		if err != nil {
			t.Fatal(err)
		}
		defer cancelJobsOn(t, c, holder)
		if _, err := c.WaitJob(context.Background(), holder, 20*time.Second, "RUNNING"); err != nil {
			t.Fatal(err)
		}
		s.wantPartitions(t, map[string][2]int{"hopper": {2, 0}, "ampere": {0, 16}})
		// Short: ampere finishes it before hopper is free.
		short := s.submit(t, "--policy", s.policy, "--tokens", "2e7", "--min-gpus", "16")
		if h := short.candidate("hopper", 16); h == nil || h.Start == nil || !short.finish().Before(h.finishTime(t)) {
			t.Errorf("short job: hopper candidate %+v should finish after the chosen %s", h, short.finish())
		}
		s.wantRuns(t, short, "ampere", 16)
		// Long: it still waits for the faster hopper.
		long := s.submit(t, "--policy", s.policy, "--tokens", "2e9", "--min-gpus", "16")
		// 70B on 8 GPUs fits only the 80 GB h100s: hopper, though busy.
		big := s.submit(t, "--policy", s.policy, "--model", "llama3-70b", "--global-batch", "256", "--tokens", "1e8", "--min-gpus", "8", "--max-gpus", "8")
		for _, a := range big.Candidates {
			if a.Partition == "ampere" && a.Fits {
				t.Errorf("70B fits a 40 GB ampere candidate: %+v", a)
			}
		}
		for _, r := range []*submitResult{long, big} {
			if r.Chosen.Partition != "hopper" {
				t.Fatalf("chose %s, want hopper (output %s)", r.Chosen.Partition, r.raw)
			}
			if info, err := c.JobInfo(context.Background(), r.id); err != nil || info["JobState"] != "PENDING" || info["Partition"] != "hopper" {
				t.Errorf("job %d while hopper is held: %v %v", r.id, info, err)
			}
		}
		cancelJobsOn(t, c, holder)
		s.wantRuns(t, long, "hopper", 16)
		s.wantRuns(t, big, "hopper", 8)
		t.Logf("took %v", time.Since(t0).Round(time.Millisecond))
	})
	t.Run("CostFlips", func(t *testing.T) {
		t0 := time.Now()
		r := s.submit(t, "--policy", s.priced, "--objective", "cost", "--tokens", "1e9", "--min-gpus", "16")
		s.wantRuns(t, r, "ampere", 16)
		for _, cd := range r.Candidates {
			if cd.Cost == nil {
				t.Errorf("candidate without a cost: %+v", cd)
			}
		}
		t.Logf("took %v", time.Since(t0).Round(time.Millisecond))
	})
	t.Run("PartialNodesSideBySide", func(t *testing.T) {
		t0 := time.Now()
		release := filepath.Join(s.dir, "release")
		var rs []*submitResult
		for i := 0; i < 2; i++ {
			r := s.submitEnv(t, []string{"RELEASE=" + release}, "--partition", "hopper", "--tokens", "1e9", "--gpus", "4")
			if r.Chosen.GPUsPerNode != 4 || r.Chosen.Exclusive {
				t.Fatalf("chosen %+v, want a partial node of 4 GPUs", r.Chosen)
			}
			rs = append(rs, r)
		}
		var nodes, gpus []string
		for _, r := range rs {
			if _, err := c.WaitJob(context.Background(), r.id, 20*time.Second, "RUNNING"); err != nil {
				t.Fatal(err)
			}
			info, _ := c.JobInfo(context.Background(), r.id)
			nodes = append(nodes, info["NodeList"])
			env := s.waitRanks(t, r.id, 4)
			gpus = append(gpus, env[0]["SLURM_JOB_GPUS"])
			tp, _ := strconv.Atoi(env[0]["TRAINRUN_TP"])
			if !strings.Contains(r.Chosen.Layout, fmt.Sprintf("tp=%d,", tp)) {
				t.Errorf("job %d: TRAINRUN_TP=%d, chosen layout %s", r.id, tp, r.Chosen.Layout)
			}
			// Each TP group is on the job's own GPUs: every rank of it sees
			// only the job's GPUs.
			for rank, e := range env {
				if e["SLURM_JOB_GPUS"] != env[0]["SLURM_JOB_GPUS"] || e["SLURMD_NODENAME"] != info["NodeList"] {
					t.Errorf("job %d rank %d: GPUs %q on %s, rank 0 has %q on %s", r.id, rank, e["SLURM_JOB_GPUS"], e["SLURMD_NODENAME"], env[0]["SLURM_JOB_GPUS"], info["NodeList"])
				}
			}
		}
		t.Logf("the two 4-GPU jobs: nodes %v, GPUs %v", nodes, gpus)
		if nodes[0] != nodes[1] || !disjoint(gpus[0], gpus[1]) {
			t.Errorf("the two 4-GPU jobs ran on %v with GPUs %v: want one node, disjoint GPUs", nodes, gpus)
		}
		if err := os.WriteFile(release, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			if st, err := c.WaitJob(context.Background(), r.id, 30*time.Second, harness.FinalStates...); err != nil || st != "COMPLETED" {
				t.Errorf("job %d: %s %v\n%s", r.id, st, err, c.JobOutput(r.id))
			}
		}
		t.Logf("took %v", time.Since(t0).Round(time.Millisecond))
	})
	t.Run("LearnsFromItsRun", func(t *testing.T) { s.learnsFromItsRun(t) })
}

// learnsFromItsRun: a job submit sent that runs 8 s where 5.4 s were
// predicted (1e6 tokens on 16 h100s) completes; the next submission from
// the same --plan-dir reads its run in Slurm's record, writes it down as
// an observation, and predicts the measured time for the same job.
func (s *submitEnv) learnsFromItsRun(t *testing.T) {
	t0 := time.Now()
	dir := filepath.Join(s.dir, "learn")
	script := s.write("sleep8.sh", "#!/bin/bash\nsleep 8\n")
	run := func(extra ...string) submitLearned {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		args := append([]string{"submit", "--format", "json", "--model", "llama3-8b", "--seq-len", "4096", "--global-batch", "64", "--tokens", "1e6",
			"--partition", "hopper", "--gpus", "16", "--policy", s.policy, "--plan-dir", dir, "--output=" + filepath.Join(s.c.JobsDir(), "slurm-%j.out")}, extra...)
		out, err := s.c.Exec(s.c.Command(ctx, s.bin, append(args, "--", script)...))
		if err != nil {
			t.Fatalf("trainrun submit: %v", err)
		}
		var r submitLearned
		if err := json.Unmarshal([]byte(out), &r); err != nil || len(r.Candidates) != 1 {
			t.Fatalf("%v\n%s", err, out)
		}
		return r
	}
	first := run()
	id, _ := strconv.Atoi(first.JobID)
	if st, err := s.c.WaitJob(context.Background(), id, 40*time.Second, harness.FinalStates...); err != nil || st != "COMPLETED" {
		t.Fatalf("job %d: %s %v", id, st, err)
	}
	info, _ := s.c.JobInfo(context.Background(), id)
	st, _ := time.ParseInLocation("2006-01-02T15:04:05", info["StartTime"], time.Local)
	en, _ := time.ParseInLocation("2006-01-02T15:04:05", info["EndTime"], time.Local)
	ran := en.Sub(st).Seconds()
	second := run("--dry-run")
	t.Logf("predicted %.1f s, ran %.0f s (Slurm's record), predicted after learning %.1f s; learned %+v", first.Candidates[0].TrainS, ran, second.Candidates[0].TrainS, second.Learned)
	if second.Learned == nil || len(second.Learned.Added) != 1 || second.Learned.Added[0] != first.JobID || second.Learned.Observations != 1 {
		t.Fatalf("second submission learned %+v, want job %s", second.Learned, first.JobID)
	}
	if got := second.Candidates[0].TrainS; got < ran-1.5 || got > ran+1.5 || first.Candidates[0].TrainS > 6 {
		t.Errorf("train %.1f s after learning, want the measured %.0f s (±1.5: Slurm's times are to the second); %.1f s before", got, ran, first.Candidates[0].TrainS)
	}
	if third := run("--dry-run"); third.Learned == nil || len(third.Learned.Added) != 0 || third.Learned.Observations != 1 {
		t.Errorf("third submission: %+v, want the one observation, nothing new", third.Learned)
	}
	t.Logf("took %v", time.Since(t0).Round(time.Millisecond))
}

// submitLearned is what learnsFromItsRun reads of submit's JSON.
type submitLearned struct {
	JobID      string `json:"submitted_job_id"`
	Candidates []struct {
		TrainS float64 `json:"train_s"`
	} `json:"candidates"`
	Learned *struct {
		Observations int      `json:"observations"`
		Added        []string `json:"added"`
	} `json:"learned"`
}

// TestSubmitDryRunManyPartitions measures trainrun submit --dry-run over 8
// partitions × 4 sizes (2 and 4 GPUs of a node, 1 and 2 whole nodes): 32
// sbatch --test-only calls, 8 at a time (issue 15: under 2 s).
func TestSubmitDryRunManyPartitions(t *testing.T) {
	t.Parallel()
	bin := trainrun(t)
	var parts []string
	conf := ""
	for i := 1; i <= 8; i++ {
		nodes := "n[1-2]"
		if i > 4 {
			nodes = "n[3-4]"
			conf += fmt.Sprintf("PartitionName=p%d GPUType=a100-80gb\n", i)
		}
		parts = append(parts, fmt.Sprintf("PartitionName=p%d Nodes=%s MaxTime=UNLIMITED State=UP", i, nodes))
	}
	c, err := harness.Start(harness.Options{Heterogeneous: true, Partitions: parts, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	c.LogOnFailure(t)
	dir := t.TempDir()
	pol := filepath.Join(dir, "trainrun.conf")
	script := filepath.Join(dir, "job.sh")
	for p, text := range map[string]string{pol: conf, script: "#!/bin/bash\ntrue\n"} {
		if err := os.WriteFile(p, []byte(text), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := c.Command(ctx, bin, "submit", "--dry-run", "--format", "json", "--policy", pol, "--model", "llama3-8b", "--seq-len", "4096",
		"--global-batch", "64", "--tokens", "1e9", "--min-gpus", "2", "--", script)
	var best time.Duration
	for try := 0; try < 3; try++ {
		cmd := c.Command(ctx, cmd.Args[0], cmd.Args[1:]...)
		t0 := time.Now()
		out, err := c.Exec(cmd)
		d := time.Since(t0)
		if err != nil {
			t.Fatal(err)
		}
		var r submitResult
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatal(err)
		}
		asked := 0
		for _, cd := range r.Candidates {
			if cd.Start != nil {
				asked++
			}
		}
		if len(r.Candidates) != 32 || asked != 32 || r.JobID != "" {
			t.Fatalf("%d candidates, %d with Slurm's start, job %q; want 32, 32, none", len(r.Candidates), asked, r.JobID)
		}
		if try == 0 || d < best {
			best = d
		}
		t.Logf("trainrun submit --dry-run, 8 partitions × 4 sizes, 32 sbatch --test-only: %v", d.Round(time.Millisecond))
	}
	// The figure is reported, not asserted: the machine is shared. The
	// issue asks under 2 s.
	t.Logf("best of 3: %v", best.Round(time.Millisecond))
}

// wantPartitions checks trainrun partitions --free: per partition, nodes
// allocated and GPUs free.
func (s *submitEnv) wantPartitions(t *testing.T, want map[string][2]int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := s.c.Exec(s.c.Command(ctx, s.bin, "partitions", "--free", "--format", "json", "--policy", s.policy))
	if err != nil {
		t.Fatal(err)
	}
	var pj struct {
		Partitions []struct {
			Name      string `json:"name"`
			GPUType   string `json:"gpu_type"`
			Allocated int    `json:"allocated"`
			FreeGPUs  int    `json:"free_gpus"`
		} `json:"partitions"`
		Free []struct {
			Node string `json:"node"`
		} `json:"free"`
	}
	if err := json.Unmarshal([]byte(out), &pj); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	types := map[string]string{"hopper": "h100-sxm", "ampere": "a100-40gb"}
	for _, p := range pj.Partitions {
		if w := want[p.Name]; p.Allocated != w[0] || p.FreeGPUs != w[1] || p.GPUType != types[p.Name] {
			t.Errorf("partitions: %+v, want allocated %d, free %d, %s", p, w[0], w[1], types[p.Name])
		}
	}
	if len(pj.Partitions) != 2 || len(pj.Free) != 2 || pj.Free[0].Node != "n3" {
		t.Errorf("partitions --free: %s", out)
	}
}

func disjoint(a, b string) bool {
	seen := map[string]bool{}
	for _, x := range strings.Split(a, ",") {
		seen[x] = true
	}
	for _, x := range strings.Split(b, ",") {
		if seen[x] {
			return false
		}
	}
	return true
}

type submitEnv struct {
	t                      *testing.T
	c                      *harness.Cluster
	bin, dir               string
	policy, priced, script string
}

func (s *submitEnv) write(name, text string) string {
	p := filepath.Join(s.dir, name)
	if err := os.WriteFile(p, []byte(text), 0o755); err != nil {
		s.t.Fatal(err)
	}
	return p
}

type submitCandidate struct {
	TimeLimitS float64  `json:"time_limit_s"`
	Partition  string   `json:"partition"`
	GPUs       int      `json:"gpus"`
	Fits       bool     `json:"fits"`
	Why        string   `json:"why"`
	Start      *string  `json:"start"`
	Finish     *string  `json:"finish"`
	Cost       *float64 `json:"cost"`
}

type submitResult struct {
	Chosen struct {
		Partition   string `json:"partition"`
		Nodes       int    `json:"nodes"`
		GPUs        int    `json:"gpus"`
		GPUsPerNode int    `json:"gpus_per_node"`
		Layout      string `json:"layout"`
		Exclusive   bool   `json:"exclusive"`
	} `json:"chosen"`
	Candidates []submitCandidate `json:"candidates"`
	JobID      string            `json:"submitted_job_id"`
	id         int
	raw        string
}

func (r *submitResult) candidate(part string, gpus int) *submitCandidate {
	for i := range r.Candidates {
		if c := &r.Candidates[i]; c.Partition == part && c.GPUs == gpus {
			return c
		}
	}
	return nil
}

func (r *submitResult) finish() time.Time {
	c := r.candidate(r.Chosen.Partition, r.Chosen.GPUs)
	if c == nil || c.Finish == nil {
		return time.Time{}
	}
	t, _ := time.Parse(time.RFC3339, *c.Finish)
	return t
}

func (c *submitCandidate) finishTime(t *testing.T) time.Time {
	if c.Finish == nil {
		t.Fatalf("candidate %+v has no finish", c)
	}
	f, err := time.Parse(time.RFC3339, *c.Finish)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// submit runs trainrun submit (8B model unless args say otherwise) and
// returns its JSON; the job's output goes to the cluster's jobs directory.
func (s *submitEnv) submit(t *testing.T, args ...string) *submitResult {
	return s.submitEnv(t, nil, args...)
}

func (s *submitEnv) submitEnv(t *testing.T, env []string, args ...string) *submitResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	full := []string{"submit", "--format", "json", "--model", "llama3-8b", "--seq-len", "4096", "--global-batch", "64", "--plan-dir", filepath.Join(s.dir, "plans")}
	full = append(full, args...)
	full = append(full, "--output="+filepath.Join(s.c.JobsDir(), "slurm-%j.out"), "--", s.script)
	cmd := s.c.Command(ctx, s.bin, full...)
	cmd.Dir = s.dir
	cmd.Env = append(cmd.Env, env...)
	t0 := time.Now()
	out, err := s.c.Exec(cmd)
	if err != nil {
		t.Fatalf("trainrun %s: %v", strings.Join(full, " "), err)
	}
	t.Logf("trainrun submit %s: %v", strings.Join(args, " "), time.Since(t0).Round(time.Millisecond))
	r := &submitResult{raw: out}
	if err := json.Unmarshal([]byte(out), r); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if r.id, err = strconv.Atoi(r.JobID); err != nil {
		t.Fatalf("no job id: %s", out)
	}
	t.Cleanup(func() { _, _ = s.c.Run(context.Background(), "scancel", r.JobID) })
	return r
}

// wantRuns checks the choice and that the job ran there to completion with
// the chosen layout and size.
func (s *submitEnv) wantRuns(t *testing.T, r *submitResult, part string, gpus int) {
	t.Helper()
	if r.Chosen.Partition != part || r.Chosen.GPUs != gpus {
		t.Fatalf("chose %s × %d, want %s × %d\n%s", r.Chosen.Partition, r.Chosen.GPUs, part, gpus, r.raw)
	}
	st, err := s.c.WaitJob(context.Background(), r.id, 40*time.Second, harness.FinalStates...)
	if err != nil || st != "COMPLETED" {
		t.Fatalf("job %d: %s %v\n%s", r.id, st, err, s.c.JobOutput(r.id))
	}
	env := s.waitRanks(t, r.id, gpus)
	for rank, e := range env {
		tp, pp, dp := e["TRAINRUN_TP"], e["TRAINRUN_PP"], e["TRAINRUN_DP"]
		if e["SLURM_JOB_PARTITION"] != part || e["WORLD_SIZE"] != strconv.Itoa(gpus) ||
			!strings.HasPrefix(r.Chosen.Layout, "tp="+tp+",pp="+pp+",") || !strings.Contains(r.Chosen.Layout, ",dp="+dp+",") {
			t.Fatalf("job %d rank %d: partition %q world %q tp=%s pp=%s dp=%s; want %s, %d, %s", r.id, rank, e["SLURM_JOB_PARTITION"], e["WORLD_SIZE"], tp, pp, dp, part, gpus, r.Chosen.Layout)
		}
	}
	if !strings.Contains(s.c.JobOutput(r.id), "layout from TRAINRUN_PLAN=") {
		t.Errorf("job %d did not take its layout from TRAINRUN_PLAN:\n%s", r.id, s.c.JobOutput(r.id))
	}
}

// waitRanks waits for the n ranks' environment files of the job.
func (s *submitEnv) waitRanks(t *testing.T, id, n int) []map[string]string {
	t.Helper()
	var env []map[string]string
	err := harness.WaitFor(context.Background(), 20*time.Second, fmt.Sprintf("job %d's %d ranks' environment", id, n), func() bool {
		for r := len(env); r < n; r++ {
			p := filepath.Join(s.dir, fmt.Sprintf("%d.%d.env", id, r))
			if b, err := os.ReadFile(p); err != nil || !strings.Contains(string(b), "TRAINRUN_TP=") {
				return false
			}
			env = append(env, readEnvFile(t, p))
		}
		return true
	})
	if err != nil {
		t.Fatalf("job %d: %d of %d ranks wrote their environment: %v\n%s", id, len(env), n, err, s.c.JobOutput(id))
	}
	return env
}
