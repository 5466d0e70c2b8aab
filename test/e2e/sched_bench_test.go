//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/trainrun/trainrun/test/harness"
)

// TestBenchSched is `make bench-sched` (issue 34; not in CI: about 20
// minutes): one trace of training jobs replayed on the heterogeneous
// cluster (hopper: 2 nodes × 8 h100, ampere: 2 nodes × 8 a100, named 40 GB
// by the policy), once per scheduling policy, each on a fresh cluster.
// Each job sleeps for its true duration on what it got: its tokens over
// the truth table's tokens/s for its model, GPU type and size (not the
// planner's figures: the a100s are faster, the h100s slower than it
// predicts). It prints mean job completion time (arrival to end), the p90
// slowdown (completion time over run time) of the 8-GPU jobs, and the jobs
// that ran where their model does not fit.
func TestBenchSched(t *testing.T) {
	if os.Getenv("TRAINRUN_BENCH_SCHED") == "" {
		t.Skip("make bench-sched runs it (TRAINRUN_BENCH_SCHED=1): about 105 minutes")
	}
	bin := trainrun(t)
	for _, tr := range benchTraces() {
		if only := os.Getenv("TRAINRUN_BENCH_TRACES"); only != "" && !strings.Contains(","+only+",", ","+tr.name+",") {
			continue
		}
		benchOneTrace(t, bin, tr)
	}
}

// benchOneTrace replays one trace under every policy
// (TRAINRUN_BENCH_POLICIES narrows them) and prints the table.
func benchOneTrace(t *testing.T, bin string, tr benchTrace) {
	schedTruth, schedGPU, schedParts, schedTraceName = tr.truth, map[string]string{}, tr.parts, tr.name
	for _, p := range tr.parts {
		schedGPU[p.name] = p.typ
	}
	jobs := tr.jobs()
	var rows []schedRow
	for _, p := range schedPolicies() {
		if only := os.Getenv("TRAINRUN_BENCH_POLICIES"); only != "" && !strings.Contains(","+only+",", ","+p.name+",") {
			continue
		}
		rows = append(rows, runSchedPolicy(t, bin, p, jobs))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\ntrace %s: %d jobs, mean inter-arrival %.1f s, partitions %s, trainrun --late-bind %s\n", tr.name, len(jobs), tr.arrival.Seconds(), tr.describe(), cmpOr(os.Getenv("TRAINRUN_BENCH_LATE_BIND"), "default"))
	fmt.Fprintf(&b, "| policy | mean JCT | vs perfect router | p90 slowdown 8-GPU | done | not fit | timed out | requeued at limit |\n|---|---|---|---|---|---|---|---|\n")
	ref := 0.0
	for _, r := range rows {
		if r.name == "perfect-router" {
			ref = r.meanJCT
		}
	}
	for _, r := range rows {
		ratio := "-"
		if ref > 0 {
			ratio = fmt.Sprintf("%.2f×", r.meanJCT/ref)
		}
		fmt.Fprintf(&b, "| %s | %.1f s | %s | %.2f | %d/%d | %d | %d | %d |\n", r.name, r.meanJCT, ratio, r.p90Slow8, r.done, len(jobs), r.noFit, r.timedOut, r.requeued)
	}
	for _, r := range rows {
		if r.startErr != "" {
			fmt.Fprintf(&b, "%s: %s\n", r.name, r.startErr)
		}
	}
	b.WriteString(schedRunCaption(rows))
	t.Log(b.String())
	fmt.Println(b.String())
}

// benchPart is one partition of a trace's cluster: its name, its GPU type
// as the truth table and the job script name it, its nodes (8 GPUs each)
// and the trainrun policy line that names its GPU where the GRES type
// alone is ambiguous.
type benchPart struct {
	name, typ string
	nodes     int
	policy    string
}

// benchTrace is one cluster, truth table and job mix.
type benchTrace struct {
	name    string
	parts   []benchPart
	truth   map[string]map[string]map[int]float64
	arrival time.Duration // mean inter-arrival (Poisson)
	jobs    func() []schedJob
}

func (tr benchTrace) describe() string {
	var out []string
	for _, p := range tr.parts {
		out = append(out, fmt.Sprintf("%s %d×8 %s", p.name, p.nodes, p.typ))
	}
	return strings.Join(out, ", ")
}

// benchTraces are the two traces. Trace 1 (seed 34): two partitions, two
// models; its truth makes the a100s faster and the h100s slower than the
// planner predicts. Trace 2 (seed 35, added later, not used to tune any
// rule): three partitions (16 h100, 24 a100, 8 v100), four models, 30
// jobs; its truth is the planner's prediction for each (model, type,
// size) times a factor drawn once (log-normal, sd 0.3, and 0.12 more for
// 16 GPUs): 0.59-1.61, so some jobs run slower than predicted.
func benchTraces() []benchTrace {
	return []benchTrace{
		{name: "1", arrival: benchArrival, truth: schedTruth1,
			parts: []benchPart{{"hopper", "h100", 2, ""}, {"ampere", "a100", 2, "PartitionName=ampere GPUType=a100-40gb"}},
			jobs:  func() []schedJob { return schedTrace(rand.New(rand.NewPCG(34, 2026)), benchJobs()) }},
		{name: "2", arrival: 4 * time.Second, truth: schedTruth2,
			parts: []benchPart{{"hopper", "h100", 2, ""}, {"ampere", "a100", 3, "PartitionName=ampere GPUType=a100-40gb"}, {"volta", "v100", 1, "PartitionName=volta GPUType=v100-32gb"}},
			jobs:  func() []schedJob { return schedTrace2(rand.New(rand.NewPCG(35, 2026))) }},
	}
}

// schedTruth2 is trace 2's true tokens/s (seq 4096, global batch 64):
// the planner's prediction of 2026-12-05 times the drawn factor; absent =
// the planner finds no layout that fits (mixtral-8x7b and qwen2.5-32b on
// 8 v100s; 16 v100s do not exist in this cluster).
var schedTruth2 = map[string]map[string]map[int]float64{
	"gpt3-2.7b":    {"h100": {8: 314700, 16: 634500}, "a100": {8: 124600, 16: 253400}, "v100": {8: 9200}},
	"qwen2.5-14b":  {"h100": {8: 74100, 16: 156900}, "a100": {8: 18000, 16: 47300}, "v100": {8: 3000}},
	"mixtral-8x7b": {"h100": {8: 30600, 16: 151800}, "a100": {8: 10100, 16: 20100}},
	"qwen2.5-32b":  {"h100": {8: 28200, 16: 61200}, "a100": {8: 7400, 16: 11900}},
}

// schedTrace2 is trace 2's mix: 30 jobs cycling through the four models
// (the small ones twice as often), 8 GPUs three times in five, 6-20 s on
// 8 true h100s, Poisson arrivals every 4 s.
func schedTrace2(r *rand.Rand) []schedJob {
	models := []string{"gpt3-2.7b", "qwen2.5-14b", "gpt3-2.7b", "mixtral-8x7b", "qwen2.5-14b", "qwen2.5-32b"}
	var out []schedJob
	at := time.Duration(0)
	for i := 0; i < 30; i++ {
		m := models[i%len(models)]
		g := 8
		if r.Float64() < 0.4 {
			g = 16
		}
		secs := 6 + 14*r.Float64()
		out = append(out, schedJob{idx: i, model: m, gpus: g, tokens: math.Round(secs * schedTruth2[m]["h100"][8]), at: at})
		at += time.Duration(r.ExpFloat64() * float64(4*time.Second))
	}
	return out
}

// benchArrival is the trace's mean inter-arrival time (Poisson).
const benchArrival = 4 * time.Second

// schedTruth, schedGPU and schedParts are the trace being replayed
// (benchOneTrace sets them): its truth table, each partition's GPU type,
// its partitions.
var (
	schedTruth map[string]map[string]map[int]float64
	schedGPU   map[string]string
	schedParts []benchPart
	// schedTraceName is the trace's name ("1", "2").
	schedTraceName string
)

// schedCluster is the harness cluster of the trace being replayed: trace
// 1's is the harness's heterogeneous mode; others are built from their
// partitions, nodes numbered in their order.
func schedCluster() harness.Options {
	if schedTraceName == "1" {
		return harness.Options{Heterogeneous: true, Logf: func(string, ...any) {}}
	}
	o := harness.Options{Heterogeneous: true, Logf: func(string, ...any) {}}
	n := 0
	for _, p := range schedParts {
		for k := 0; k < p.nodes; k++ {
			o.GresTypes = append(o.GresTypes, p.typ)
		}
		line := fmt.Sprintf("PartitionName=%s Nodes=n[%d-%d] MaxTime=UNLIMITED State=UP", p.name, n+1, n+p.nodes)
		if p.nodes == 1 {
			line = fmt.Sprintf("PartitionName=%s Nodes=n%d MaxTime=UNLIMITED State=UP", p.name, n+1)
		}
		if n == 0 {
			line += " Default=YES"
		}
		o.Partitions = append(o.Partitions, line)
		n += p.nodes
	}
	o.Nodes = n
	return o
}

// schedNodeTypes is the job script's node → GPU type table.
func schedNodeTypes() string {
	var b strings.Builder
	n := 0
	for _, p := range schedParts {
		for k := 0; k < p.nodes; k++ {
			n++
			fmt.Fprintf(&b, "n%d %s\n", n, p.typ)
		}
	}
	return b.String()
}

// schedPolicyConf is the trainrun policy file of the trace's cluster.
func schedPolicyConf() string {
	var b strings.Builder
	for _, p := range schedParts {
		if p.policy != "" {
			b.WriteString(p.policy + "\n")
		}
	}
	return b.String()
}

// schedTruth1 is trace 1's true tokens/s of a job (seq 4096, global batch
// 64) by model, GPU type and GPUs; absent = it does not fit (70B on 8 × 40
// GB).
var schedTruth1 = map[string]map[string]map[int]float64{
	"llama3-8b":  {"h100": {8: 80000, 16: 150000}, "a100": {8: 33000, 16: 64000}},
	"llama3-70b": {"h100": {8: 6500, 16: 14500}, "a100": {16: 6000}},
}

// trueSeconds is a job's true run time on gpus GPUs of typ.
func trueSeconds(model, typ string, gpus int, tokens float64) (float64, bool) {
	r, ok := schedTruth[model][typ][gpus]
	if !ok {
		return 0, false
	}
	return tokens / r, true
}

type schedJob struct {
	idx    int
	model  string
	gpus   int
	tokens float64
	at     time.Duration // arrival after the trace's start
}

// benchJobs is the mix: 16 8B jobs and 8 70B ones, their sizes and tokens
// drawn in schedTrace.
func benchJobs() []string {
	var m []string
	for i := 0; i < 24; i++ {
		if i%3 == 2 {
			m = append(m, "llama3-70b")
		} else {
			m = append(m, "llama3-8b")
		}
	}
	return m
}

// schedTrace draws sizes (8 GPUs three times in five), tokens (8B: 8-24 s
// on 8 h100s; 70B: 12-28 s) and Poisson arrivals.
func schedTrace(r *rand.Rand, models []string) []schedJob {
	var out []schedJob
	at := time.Duration(0)
	for i, m := range models {
		g := 8
		if r.Float64() < 0.4 {
			g = 16
		}
		secs := 8 + 16*r.Float64()
		if m == "llama3-70b" {
			secs = 12 + 16*r.Float64()
		}
		tokens := math.Round(secs * schedTruth1[m]["h100"][8])
		out = append(out, schedJob{idx: i, model: m, gpus: g, tokens: tokens, at: at})
		at += time.Duration(r.ExpFloat64() * float64(benchArrival))
	}
	return out
}

type schedPolicy struct {
	name string
	// submit submits one job and returns its id; arrived is when it
	// arrived; env the variables the job script reads.
	submit func(s *schedRun, j schedJob, env string) (string, error)
}

type schedRun struct {
	t      *testing.T
	c      *harness.Cluster
	bin    string
	dir    string
	script string
	start  time.Time
	free   map[string][]time.Time // the perfect router's model: each node's free time
	policy string                 // the policy's name, for keepSchedJob
	// est is each trainrun job's estimated start by partition, from its
	// submit's candidates of its chosen size (startErrors).
	est map[int]map[string]time.Time
}

func schedPolicies() []schedPolicy {
	tr := func(size ...string) func(s *schedRun, j schedJob, env string) (string, error) {
		return func(s *schedRun, j schedJob, env string) (string, error) {
			args := []string{"submit", "--format", "json", "--model", j.model, "--seq-len", "4096", "--global-batch", "64",
				"--tokens", strconv.FormatFloat(j.tokens, 'f', 0, 64), "--policy", filepath.Join(s.dir, "trainrun.conf"),
				"--plan-dir", filepath.Join(s.dir, "plans"), "--ckpt-interval", "0s"}
			if lb := os.Getenv("TRAINRUN_BENCH_LATE_BIND"); lb != "" {
				args = append(args, "--late-bind", lb) // before the policy's own: "trainrun-bound" keeps 0
			}
			for _, a := range size {
				args = append(args, strings.ReplaceAll(a, "N", strconv.Itoa(j.gpus)))
			}
			args = append(args, "--export=ALL,"+env, "--output="+filepath.Join(s.dir, "slurm-%j.out"), "--", s.script)
			out, err := s.c.Exec(s.c.Command(context.Background(), s.bin, args...))
			if err != nil {
				return "", err
			}
			keepSchedJob(s.policy, fmt.Sprintf("%d.submit.json", j.idx), []byte(out))
			var r struct {
				ID     string `json:"submitted_job_id"`
				Chosen struct {
					GPUs int `json:"gpus"`
				} `json:"chosen"`
				Candidates []struct {
					Partition string  `json:"partition"`
					GPUs      int     `json:"gpus"`
					Start     *string `json:"start"`
				} `json:"candidates"`
			}
			if err := json.Unmarshal([]byte(out), &r); err != nil || r.ID == "" {
				return "", fmt.Errorf("trainrun submit printed no submitted_job_id: %v\n%s", err, out)
			}
			s.est[j.idx] = map[string]time.Time{}
			for _, c := range r.Candidates {
				if c.GPUs == r.Chosen.GPUs && c.Start != nil {
					if at, err := time.Parse(time.RFC3339, *c.Start); err == nil {
						s.est[j.idx][c.Partition] = at
					}
				}
			}
			return r.ID, nil
		}
	}
	return append([]schedPolicy{
		{"perfect-router", (*schedRun).submitRouted},
		{"slurm-list", (*schedRun).submitListed},
		{"trainrun", tr("--gpus", "N")},
		{"trainrun-sizing", tr("--min-gpus", "8", "--max-gpus", "16")},
		{"trainrun-bound", tr("--gpus", "N", "--late-bind", "0")},
		{"trainrun-sizing-nolearn", tr("--min-gpus", "8", "--max-gpus", "16", "--learn=false")}, // sizing without learning from the trace's finished jobs
	}, schedRunPolicies(tr)...) // sched_bench_run_test.go: jobs under trainrun run, migration off and on
}

func (s *schedRun) sbatch(j schedJob, env, partitions string, nodes int, limit float64) (string, error) {
	mins := int(math.Ceil(limit / 60))
	id, err := s.c.SubmitBatch(context.Background(), mustRead(s.t, s.script), "-p", partitions, "-N", strconv.Itoa(nodes),
		"--ntasks-per-node=8", "--gpus-per-node=8", "--exclusive", "--time="+strconv.Itoa(max(mins, 1)), "--export=ALL,"+env)
	return strconv.Itoa(id), err
}

// submitListed is Slurm's own list: every partition the job fits, a time
// limit a careful user gives (1.5 × the slowest listed's true time).
func (s *schedRun) submitListed(j schedJob, env string) (string, error) {
	var parts []string
	slowest := 0.0
	for _, sp := range schedParts {
		p := sp.name
		if d, ok := trueSeconds(j.model, schedGPU[p], j.gpus, j.tokens); ok && j.gpus/8 <= sp.nodes {
			parts = append(parts, p)
			slowest = max(slowest, d)
		}
	}
	return s.sbatch(j, env, strings.Join(parts, ","), j.gpus/8, 1.5*slowest)
}

// submitRouted is the fixed-size perfect-knowledge router: it knows every
// job's true time, keeps when each node frees by the jobs it routed, and
// sends the job where it finishes first, with a limit of its true time.
func (s *schedRun) submitRouted(j schedJob, env string) (string, error) {
	now := time.Now()
	best, bestEnd := "", time.Time{}
	n := j.gpus / 8
	for _, sp := range schedParts {
		p := sp.name
		d, ok := trueSeconds(j.model, schedGPU[p], j.gpus, j.tokens)
		if !ok || n > sp.nodes {
			continue
		}
		fr := append([]time.Time(nil), s.free[p]...)
		sort.Slice(fr, func(a, b int) bool { return fr[a].Before(fr[b]) })
		st := fr[n-1]
		if st.Before(now) {
			st = now
		}
		if end := st.Add(time.Duration(d * float64(time.Second))); best == "" || end.Before(bestEnd) {
			best, bestEnd = p, end
		}
	}
	fr := s.free[best]
	sort.Slice(fr, func(a, b int) bool { return fr[a].Before(fr[b]) })
	for k := 0; k < n; k++ {
		fr[k] = bestEnd
	}
	d, _ := trueSeconds(j.model, schedGPU[best], j.gpus, j.tokens)
	return s.sbatch(j, env, best, n, d+30)
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func mustRead(t *testing.T, p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

type schedRow struct {
	name                  string
	meanJCT, p90Slow8     float64
	done, noFit, timedOut int
	requeued              int    // jobs that requeued themselves ahead of their limit (schedScript)
	startErr              string // how far submit's start estimates were (startErrors)
}

// schedScript is the job: its GPU type from the node it runs on
// (BENCH_NODES), its size from the allocation, its true time from the truth
// table; it sleeps that long and writes start, end, type and GPUs. Like a
// trainer under trainrun run, it does not let its time limit kill it: when
// the work left does not fit in the time left (squeue %L) less a 10 s
// checkpoint lead, it works until then, records what it did
// (BENCH_OUT/IDX.progress) and requeues itself; the next run does the rest.
// The result's start is its end less the time it ran, so a requeue's wait
// counts in its completion time and not in its run time.
const schedScript = `#!/bin/bash
now=$(date +%s.%N)
typ=$(awk -v n="$SLURMD_NODENAME" '$1==n {print $2}' "$BENCH_NODES")
gpus=$(( SLURM_JOB_NUM_NODES * 8 ))
rate=$(awk -v m="$BENCH_MODEL" -v t="$typ" -v g="$gpus" '$1==m && $2==t && $3==g {print $4}' "$BENCH_TRUTH")
if [ -z "$rate" ]; then echo "$now $now $typ $gpus nofit" > "$BENCH_OUT/$BENCH_IDX.tmp"; mv "$BENCH_OUT/$BENCH_IDX.tmp" "$BENCH_OUT/$BENCH_IDX"; exit 1; fi
echo "$now - $typ $gpus running" > "$BENCH_OUT/$BENCH_IDX.run"
done_tok=0 ran=0
if [ -f "$BENCH_OUT/$BENCH_IDX.progress" ]; then read -r done_tok ran < "$BENCH_OUT/$BENCH_IDX.progress"; fi
need=$(awk -v t="$BENCH_TOKENS" -v d="$done_tok" -v r="$rate" 'BEGIN{printf "%.3f", (t-d)/r}')
left=$(squeue -h -j "$SLURM_JOB_ID" -o %L 2>/dev/null | awk -F- '{d=0; t=$1; if (NF==2) {d=$1; t=$2}; n=split(t,p,":"); if (n<2 || p[1] !~ /^[0-9]+$/) {print -1; exit}; s=0; for (i=1;i<=n;i++) s=s*60+p[i]; print d*86400+s}')
budget=$(awk -v l="$left" 'BEGIN{printf "%.3f", l-10}')
if awk -v n="$need" -v b="$budget" 'BEGIN{exit !(b>0 && n>b)}'; then
	sleep "$budget"
	awk -v d="$done_tok" -v b="$budget" -v r="$rate" -v ran="$ran" 'BEGIN{printf "%.0f %.3f\n", d+b*r, ran+b}' > "$BENCH_OUT/$BENCH_IDX.progress"
	echo "$(date +%s.%N) requeued at its limit" >> "$BENCH_OUT/$BENCH_IDX.requeues"
	scontrol requeue "$SLURM_JOB_ID"
	exit 0
fi
sleep "$need"
end=$(date +%s.%N)
start=$(awk -v e="$end" -v ran="$ran" -v n="$need" 'BEGIN{printf "%.3f", e-ran-n}')
echo "$start $end $typ $gpus ok" > "$BENCH_OUT/$BENCH_IDX.tmp"
mv "$BENCH_OUT/$BENCH_IDX.tmp" "$BENCH_OUT/$BENCH_IDX"
`

func runSchedPolicy(t *testing.T, bin string, p schedPolicy, jobs []schedJob) schedRow {
	c, err := harness.Start(schedCluster())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Stop() }()
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	var truth strings.Builder
	for m, byType := range schedTruth {
		for typ, byGPUs := range byType {
			for g, r := range byGPUs {
				fmt.Fprintf(&truth, "%s %s %d %g\n", m, typ, g, r)
			}
		}
	}
	for name, text := range map[string]string{"job.sh": schedScript, "truth.txt": truth.String(), "trainrun.conf": schedPolicyConf(), "nodes.txt": schedNodeTypes()} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(out, 0o777); err != nil {
		t.Fatal(err)
	}
	s := &schedRun{t: t, c: c, bin: bin, dir: dir, script: filepath.Join(dir, "job.sh"), start: time.Now(), free: map[string][]time.Time{}, policy: p.name,
		est: map[int]map[string]time.Time{}}
	for _, part := range schedParts {
		for k := 0; k < part.nodes; k++ {
			s.free[part.name] = append(s.free[part.name], s.start)
		}
	}
	arrived := make([]time.Time, len(jobs))
	for _, j := range jobs {
		if d := time.Until(s.start.Add(j.at)); d > 0 {
			time.Sleep(d)
		}
		arrived[j.idx] = time.Now()
		env := fmt.Sprintf("BENCH_IDX=%d,BENCH_MODEL=%s,BENCH_TOKENS=%.0f,BENCH_TRUTH=%s,BENCH_OUT=%s,BENCH_NODES=%s", j.idx, j.model, j.tokens, filepath.Join(dir, "truth.txt"), out, filepath.Join(dir, "nodes.txt"))
		if _, err := p.submit(s, j, env); err != nil {
			t.Errorf("%s: job %d: %v", p.name, j.idx, err)
		}
	}
	row := collectSched(t, c, p.name, jobs, arrived, out)
	row.startErr = startErrors(s.est, jobs, out)
	keepSchedJob(p.name, "jobs.tsv", schedJobTable(jobs, arrived, s.start, out))
	return row
}

// startErrors says how far trainrun submit's start estimates were from the
// starts: for each job that ran once (not requeued at its limit), its
// estimated start on the partition it ran in (at its chosen size) against
// its start there; the median and p90 of |estimated − actual|. Scontrol
// prints times to the second, so the estimates are ±1 s. "" for the
// policies without estimates.
func startErrors(est map[int]map[string]time.Time, jobs []schedJob, out string) string {
	part := map[string]string{}
	for _, p := range schedParts {
		part[p.typ] = p.name
	}
	var errs []float64
	for _, j := range jobs {
		if _, err := os.Stat(filepath.Join(out, strconv.Itoa(j.idx)+".requeues")); err == nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(out, strconv.Itoa(j.idx)))
		f := strings.Fields(string(b))
		if err != nil || len(f) < 5 || f[4] != "ok" {
			continue
		}
		at, ok := est[j.idx][part[f[2]]]
		if !ok {
			continue
		}
		st, _ := strconv.ParseFloat(f[0], 64)
		errs = append(errs, math.Abs(st-float64(at.UnixNano())/1e9))
	}
	if len(errs) == 0 {
		return ""
	}
	sort.Float64s(errs)
	return fmt.Sprintf("start estimates: |estimated − actual| median %.1f s, p90 %.1f s over %d jobs", errs[len(errs)/2], errs[int(math.Ceil(0.9*float64(len(errs))))-1], len(errs))
}

// keepSchedJob writes a file of one policy's replay under
// $TRAINRUN_BENCH_JOBS/<trace>-<policy>/ when that is set: what submit
// printed for each job, and the table of where and when each ran, to read
// where a policy lost time.
func keepSchedJob(policy, name string, b []byte) {
	to := os.Getenv("TRAINRUN_BENCH_JOBS")
	if to == "" {
		return
	}
	to = filepath.Join(to, schedTraceName+"-"+policy)
	if err := os.MkdirAll(to, 0o755); err == nil {
		_ = os.WriteFile(filepath.Join(to, name), b, 0o644)
	}
}

// schedJobTable is one line per job: its index, model, GPUs asked,
// arrival, start and end (seconds after the trace's start), the GPU type
// and GPUs it ran on, its true time there and its true time on 8 h100s.
func schedJobTable(jobs []schedJob, arrived []time.Time, start time.Time, out string) []byte {
	var b strings.Builder
	b.WriteString("idx\tmodel\tasked\tarrived\tstarted\tended\ttype\tgpus\ttrue_s\n")
	t0 := float64(start.UnixNano()) / 1e9
	for _, j := range jobs {
		f := []string{"-", "-", "-", "-"}
		if r, err := os.ReadFile(filepath.Join(out, strconv.Itoa(j.idx))); err == nil {
			if g := strings.Fields(string(r)); len(g) >= 4 {
				f = g[:4]
			}
		}
		st, _ := strconv.ParseFloat(f[0], 64)
		en, _ := strconv.ParseFloat(f[1], 64)
		g, _ := strconv.Atoi(f[3])
		d, _ := trueSeconds(j.model, f[2], g, j.tokens)
		fmt.Fprintf(&b, "%d\t%s\t%d\t%.1f\t%.1f\t%.1f\t%s\t%d\t%.1f\n", j.idx, j.model, j.gpus,
			float64(arrived[j.idx].UnixNano())/1e9-t0, st-t0, en-t0, f[2], g, d)
	}
	return []byte(b.String())
}

// collectSched waits for every job (8 minutes at most) and reduces the
// results.
func collectSched(t *testing.T, c *harness.Cluster, name string, jobs []schedJob, arrived []time.Time, out string) schedRow {
	deadline := time.Now().Add(8 * time.Minute)
	for time.Now().Before(deadline) {
		q, _ := c.Run(context.Background(), "squeue", "-h", "-o", "%i")
		if strings.TrimSpace(q) == "" {
			break
		}
		time.Sleep(time.Second)
	}
	row := schedRow{name: name}
	var jct, slow8, slow8at8 []float64
	grown := 0 // jobs that ran on more GPUs than the trace's size (sizing)
	for _, j := range jobs {
		if _, err := os.Stat(filepath.Join(out, strconv.Itoa(j.idx)+".requeues")); err == nil {
			row.requeued++
		}
		b, err := os.ReadFile(filepath.Join(out, strconv.Itoa(j.idx)))
		if err != nil {
			if _, rerr := os.Stat(filepath.Join(out, strconv.Itoa(j.idx)+".run")); rerr == nil {
				row.timedOut++ // started, never ended: its limit killed it
			}
			continue
		}
		f := strings.Fields(string(b))
		if len(f) < 5 {
			continue
		}
		if f[4] == "nofit" {
			row.noFit++
			continue
		}
		st, _ := strconv.ParseFloat(f[0], 64)
		en, _ := strconv.ParseFloat(f[1], 64)
		arr := float64(arrived[j.idx].UnixNano()) / 1e9
		row.done++
		jct = append(jct, en-arr)
		if j.gpus == 8 && en > st {
			slow8 = append(slow8, (en-arr)/(en-st))
		}
		if g, _ := strconv.Atoi(f[3]); g > j.gpus {
			grown++
		}
		if j.gpus == 8 && en > st { // against its run time at the trace's 8 GPUs on the type it ran on, where it fits there
			alone := en - st
			if d, ok := trueSeconds(j.model, f[2], 8, j.tokens); ok {
				alone = d
			}
			slow8at8 = append(slow8at8, max(1, (en-arr)/alone))
		}
	}
	for _, v := range jct {
		row.meanJCT += v / float64(len(jct))
	}
	if len(slow8) > 0 {
		sort.Float64s(slow8)
		row.p90Slow8 = slow8[int(math.Ceil(0.9*float64(len(slow8))))-1]
	}
	p90at8 := 0.0
	if len(slow8at8) > 0 {
		sort.Float64s(slow8at8)
		p90at8 = slow8at8[int(math.Ceil(0.9*float64(len(slow8at8))))-1]
	}
	t.Logf("%s: mean JCT %.1f s over %d jobs, p90 slowdown of 8-GPU jobs %.2f (%.2f against their time on 8 GPUs), %d not fit, %d timed out, %d requeued at their limit, %d grown", name, row.meanJCT, row.done, row.p90Slow8, p90at8, row.noFit, row.timedOut, row.requeued, grown)
	return row
}
