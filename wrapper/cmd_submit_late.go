package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	"github.com/trainrun/trainrun/checkpoint"
	"github.com/trainrun/trainrun/internal/calib"
	"github.com/trainrun/trainrun/internal/slurm"
	"github.com/trainrun/trainrun/internal/units"
	"github.com/trainrun/trainrun/wrapper/internal/jobdir"
	"github.com/trainrun/trainrun/wrapper/internal/planflags"
	"github.com/trainrun/trainrun/wrapper/internal/submit"
	"github.com/trainrun/trainrun/wrapper/obs"
)

// trainrun submit's scheduling beyond one binding (issue 34): honest time
// limits from the plan's band and the job's measured saves, and late
// binding to a short list of partitions with a plan for each.

func (o *submitOptions) addHonestFlags(fs *pflag.FlagSet, getenv func(string) string) {
	fs.StringVar(&o.ckptDir, "ckpt-dir", getenv("TRAINRUN_CKPT_DIR"), "the job's checkpoint store (env TRAINRUN_CKPT_DIR): its measured saves size the time limit's checkpoint lead, its observations narrow the plan's error band; none yet = a predicted save (--ckpt-bw)")
	fs.Float64Var(&o.lateMargin, "late-bind", 1, "late binding: also list, in one job (-p A,B), the partitions whose predicted finish is within this share of the best's time to finish (and within 15 % of their own best size's), each with its own plan; Slurm starts the job on the first that frees (0 = the best partition alone)")
	fs.BoolVar(&o.learn, "learn", true, "learn from the runs of the jobs submitted with this --plan-dir: each that completed whole in Slurm's record (scontrol show job) becomes an observation in --plan-dir/observations.jsonl, which corrects the predicted step times, their band and so the limits (--learn=false: the planner's figures alone)")
	fs.Lookup("time-margin").Usage = "fraction added to the predicted training time (default: the plan's own error band, from its calibration)"
	fs.Lookup("ckpt-lead").Usage = "checkpoint lead added to the time limit (default: the longest measured save of --ckpt-dir plus a quarter, at least 10 s; without measurements a predicted save)"
}

// runObservations reads what the job's store has measured (--ckpt-dir):
// its checkpoints' save times, returned, and its observed step times,
// added to the calibration. A store that does not exist yet has none.
func (o *submitOptions) runObservations(env *runEnv) ([]checkpoint.Event, error) {
	if o.ckptDir == "" {
		return nil, nil
	}
	if _, err := os.Stat(o.ckptDir); errors.Is(err, fs.ErrNotExist) {
		return nil, nil // a first submission: nothing measured yet
	}
	evs, err := submit.ReadSaves(o.ckptDir)
	if err != nil {
		return nil, usageErrorf("%v", err)
	}
	store := calib.RunStorePath(o.ckptDir)
	if _, err := os.Stat(store); err == nil {
		obs, err := planflags.Observations(filepath.Dir(store), env.stderr)
		if err != nil {
			return nil, err
		}
		o.plan.Observations = append(o.plan.Observations, obs...)
	}
	return evs, nil
}

// honestLimits sets the request's limit terms: the plan's band unless
// --time-margin is given, a lead from the saves unless --ckpt-lead is.
func (o *submitOptions) honestLimits(fs *pflag.FlagSet, req *submit.Request, saves []checkpoint.Event) {
	req.AutoMargin = !fs.Changed("time-margin")
	req.AutoLead = !fs.Changed("ckpt-lead")
	req.MeasuredSave, req.MeasuredSaves = submit.MeasuredSave(saves)
}

// lateList is the chosen candidate and, with --objective finish, the
// late-bound ones (--late-bind).
func (o *submitOptions) lateList(cands []submit.Candidate, chosen int) []int {
	if o.objective != submit.Finish {
		return []int{chosen} // a cost choice is one partition's price
	}
	return submit.LateBind(cands, chosen, o.lateMargin, nowFunc())
}

// lateRequest is the one sbatch request of the listed candidates: the
// chosen's size, every listed partition (-p A,B), the longest limit.
func lateRequest(cands []submit.Candidate, list []int) submit.Candidate {
	c := cands[list[0]]
	names := make([]string, 0, len(list))
	for _, i := range list {
		names = append(names, cands[i].Partition)
	}
	c.Partition = strings.Join(names, ",")
	c.TimeLimit = submit.Limit(cands, list)
	return c
}

// jobExports are what the job's controller needs of the choice besides
// TRAINRUN_PLAN: the lead its limit was sized with (the longest listed),
// the size range when there is one (TRAINRUN_MIN_GPUS, TRAINRUN_MAX_GPUS),
// and, when late-bound, where the plan of each listed partition is
// (TRAINRUN_PLAN_BY_PARTITION, %p the partition the job landed in).
func (o *submitOptions) jobExports(cands []submit.Candidate, list []int, dir, stamp string) []string {
	var lead time.Duration
	for _, i := range list {
		lead = max(lead, cands[i].Lead)
	}
	out := []string{"TRAINRUN_SUBMIT_LEAD=" + strconv.FormatFloat(lead.Seconds(), 'f', -1, 64)}
	out = append(out, submit.ResizeExports(cands, list)...) // TRAINRUN_MIN_GPUS, TRAINRUN_MAX_GPUS: a range its requeues may resize within
	if len(list) > 1 {
		out = append(out, "TRAINRUN_PLAN_BY_PARTITION="+filepath.Join(dir, fmt.Sprintf("plan-%%p-%dgpus-%s.json", cands[list[0]].GPUs, stamp)))
	}
	return out
}

// lateJSON are the fields of "chosen" that late binding and honest limits
// add (PRODUCT.md: fields only grow).
type lateJSON struct {
	*chosenJSON
	Partitions   []string `json:"partitions"`               // every partition listed (-p), the chosen first
	TimeLimitWhy string   `json:"time_limit_why,omitempty"` // where the chosen's margin and lead came from
}

type submitLateJSON struct {
	Chosen *lateJSON `json:"chosen"`
	submitJSON
}

func (o *submitOptions) withLateJSON(out submitJSON, cands []submit.Candidate) any {
	if out.Chosen == nil || len(o.list) == 0 {
		return out
	}
	lj := &lateJSON{chosenJSON: out.Chosen, TimeLimitWhy: cands[o.list[0]].LimitWhy}
	for _, i := range o.list {
		lj.Partitions = append(lj.Partitions, cands[i].Partition)
	}
	lj.TimeLimitS = submit.Limit(cands, o.list).Seconds()
	return submitLateJSON{Chosen: lj, submitJSON: out}
}

// printLate adds the late-bound partitions and the limit's terms under the
// table's "chosen:" line.
func (o *submitOptions) printLate(w io.Writer, cands []submit.Candidate, chosen int) {
	if chosen < 0 || len(o.list) == 0 {
		return
	}
	fmt.Fprintf(w, "time limit: train %s + %s\n", units.Seconds(cands[chosen].TrainS), cands[chosen].LimitWhy)
	if len(o.list) > 1 {
		fmt.Fprintf(w, "late-bound: -p %s, --time=%s (the slowest listed); the job takes the plan of the partition it starts in\n",
			lateRequest(cands, o.list).Partition, slurmDuration(submit.Limit(cands, o.list)))
	}
}

// noteIdle keeps a partition's idle nodes for betterStarts.
func (o *submitOptions) noteIdle(pi submit.PartitionInfo) {
	o.infos = append(o.infos, pi)
	if o.idle == nil {
		o.idle = map[string]int{}
	}
	o.idle[pi.Name] = pi.Idle
}

// betterStarts moves candidates' starts earlier where the partition is
// held by jobs trainrun submitted, predicted to end before their limits
// (submit.BetterStarts). Slurm's answer stands where the jobs cannot be
// read (said once on stderr).
func (o *submitOptions) betterStarts(ctx context.Context, env *runEnv, cands []submit.Candidate) {
	jobs := o.jobs // read by learnRuns, a moment ago
	if jobs == nil {
		var err error
		if jobs, err = env.slurm.Jobs(ctx); err != nil {
			fmt.Fprintf(env.stderr, "trainrun: submit: start estimates are Slurm's alone: %v\n", err)
			return
		}
	}
	loc := env.slurm.Location
	if loc == nil {
		loc = time.Local
	}
	progress := onceEach(trainerProgress) // the queues and the replay read the same reports
	o.queues = submit.QueuesObserved(jobs, loc, progress)
	tl := submit.Simulate(o.infos, jobs, loc, nowFunc(), progress)
	submit.BetterStarts(cands, o.queues, o.idle, tl, nowFunc())
}

// growFair drops the larger sizes that would take nodes small jobs start
// on (submit.GrowFair), from the idle nodes and the queues betterStarts
// read; without the queues (Slurm's jobs unreadable) nothing is dropped.
func (o *submitOptions) growFair(cands []submit.Candidate) {
	if o.queues == nil {
		return
	}
	room := submit.Room{Idle: o.idle, Pending: map[string]int{}}
	for p, q := range o.queues {
		room.Pending[p] = q.PendingNodes
	}
	submit.GrowFair(cands, room)
}

// markArgs is the --comment that marks the job as trainrun's, with its
// predicted training time on each listed partition, for later submissions'
// start estimates; none when the user gives a --comment of their own.
func (o *submitOptions) markArgs(cands []submit.Candidate, list []int, extra []string) []string {
	for _, a := range extra {
		if a == "--comment" || strings.HasPrefix(a, "--comment=") {
			return nil
		}
	}
	return []string{"--comment=" + submit.MarkTokens(submit.Mark(cands, list), o.tokens)}
}

// onceEach reads each job's progress once (by job id) however often it is
// asked.
func onceEach(read func(slurm.Job) (submit.Progress, bool)) func(slurm.Job) (submit.Progress, bool) {
	type got struct {
		p  submit.Progress
		ok bool
	}
	seen := map[string]got{}
	return func(j slurm.Job) (submit.Progress, bool) {
		if g, ok := seen[j.ID]; ok {
			return g.p, g.ok
		}
		p, ok := read(j)
		seen[j.ID] = got{p, ok}
		return p, ok
	}
}

// trainerProgress is a running job's trainer's last report, read from its
// default job directory (WorkDir/trainrun-ID/launch/progress, jobdir); ok
// is false where there is none to read (another --job-dir, no report yet)
// or the rate would mislead (a requeued job).
func trainerProgress(j slurm.Job) (submit.Progress, bool) {
	wd := j.Record["WorkDir"]
	if wd == "" || j.ID == "" || j.Restarts > 0 { // a requeued job's tokens include the incarnations before its StartTime
		return submit.Progress{}, false
	}
	b, err := os.ReadFile(filepath.Join(wd, "trainrun-"+j.ID, jobdir.Launch, "progress"))
	if err != nil {
		return submit.Progress{}, false
	}
	_, tokens, at, ok := obs.ParseProgress(strings.TrimSpace(string(b)))
	if !ok || tokens <= 0 {
		return submit.Progress{}, false
	}
	return submit.Progress{Tokens: float64(tokens), At: at}, true
}

// loadQueue is `partitions --queue`'s table: nil without the flag.
func (o *partitionsOptions) loadQueue(ctx context.Context, env *runEnv) ([]submit.GroupSlowdown, error) {
	if !o.queue {
		return nil, nil
	}
	jobs, err := env.slurm.Jobs(ctx)
	if err != nil {
		return nil, withSlurmCode(err)
	}
	loc := env.slurm.Location
	if loc == nil {
		loc = time.Local
	}
	return submit.Fairness(jobs, loc, nowFunc()), nil
}

func printQueue(w io.Writer, gs []submit.GroupSlowdown, show bool) error {
	if !show {
		return nil
	}
	fmt.Fprintln(w, "\nqueue by user and account (slowdown: completion time over run time, of the jobs trainrun submitted; pending: at least)")
	if len(gs) == 0 {
		fmt.Fprintln(w, "  no running or pending jobs")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "USER\tACCOUNT\tRUNNING\tPENDING\tTRAINRUN\tMEAN SLOWDOWN\tMAX SLOWDOWN")
	for _, g := range gs {
		mean, mx := "-", "-"
		if g.Marked > 0 {
			mean, mx = strconv.FormatFloat(g.MeanSlow, 'f', 2, 64), strconv.FormatFloat(g.MaxSlow, 'f', 2, 64)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\t%s\n", g.User, g.Account, g.Running, g.Pending, g.Marked, mean, mx)
	}
	return tw.Flush()
}

// writeQueueMetrics writes the queue's per-user and per-account series
// (obs.QueueRegistry) to a node_exporter textfile; none without a file.
func writeQueueMetrics(file string, queue []submit.GroupSlowdown) error {
	if file == "" {
		return nil
	}
	if !strings.HasSuffix(file, ".prom") {
		return usageErrorf("--metrics-textfile %s: node_exporter reads only files ending in .prom: name it so", file)
	}
	groups := make([]obs.QueueGroup, len(queue))
	for i, g := range queue {
		groups[i] = obs.QueueGroup{User: g.User, Account: g.Account, Running: g.Running, Pending: g.Pending,
			Marked: g.Marked, MeanSlow: g.MeanSlow, MaxSlow: g.MaxSlow}
	}
	if err := prometheus.WriteToTextfile(file, obs.QueueRegistry(groups)); err != nil {
		return fmt.Errorf("--metrics-textfile %s: %w", file, err)
	}
	return nil
}

// learnedJSON is the "learned" object of submit --format json: the runs
// of --plan-dir's jobs the plans were corrected from.
type learnedJSON struct {
	From         string   `json:"from"`         // the observations file
	Observations int      `json:"observations"` // runs in it
	Added        []string `json:"added"`        // job ids learned from this time
	Skipped      []string `json:"skipped,omitempty"`
}

// maxLearned bounds the runs of --plan-dir the plans are corrected from:
// the most recent, so that a plan directory years old does not slow every
// submission.
const maxLearned = 500

// learnRuns turns the completed runs of the jobs --plan-dir's ledger names
// into observations there (submit.LearnRuns) and adds that file's
// observations to the planner's calibration. Nothing stops the submission:
// what cannot be read is said on stderr, and the plans are the
// planner's alone.
func (o *submitOptions) learnRuns(ctx context.Context, env *runEnv) {
	if !o.learn {
		return
	}
	dir, err := filepath.Abs(o.planDir)
	if err != nil {
		return
	}
	if _, err := os.Stat(filepath.Join(dir, submit.LedgerFile)); err != nil {
		return // nothing submitted from here yet
	}
	jobs, err := env.slurm.Jobs(ctx)
	if err != nil {
		fmt.Fprintf(env.stderr, "trainrun: submit: not learning from earlier runs: %v\n", err)
		return
	}
	o.jobs = jobs
	loc := env.slurm.Location
	if loc == nil {
		loc = time.Local
	}
	l, err := submit.LearnRuns(dir, jobs, loc)
	if err != nil {
		fmt.Fprintf(env.stderr, "trainrun: submit: not learning from earlier runs: %v\n", err)
		return
	}
	obs, err := planflags.Observations(dir, env.stderr)
	if err != nil || len(obs) == 0 {
		return
	}
	if len(obs) > maxLearned { // the planner fits each candidate from every one: the recent ones
		obs = obs[len(obs)-maxLearned:]
	}
	o.plan.Observations = append(o.plan.Observations, obs...)
	o.learned = &learnedJSON{From: calib.SitePath(dir), Observations: len(obs), Added: []string{}, Skipped: l.Skipped}
	for _, r := range l.Added {
		o.learned.Added = append(o.learned.Added, r.Job)
	}
}

// printLearned says, under the table, what the plans learned from.
func (o *submitOptions) printLearned(w io.Writer) {
	if o.learned == nil {
		return
	}
	fmt.Fprintf(w, "learned: %d run(s) of jobs submitted from --plan-dir correct the plans (%s", o.learned.Observations, o.learned.From)
	if n := len(o.learned.Added); n > 0 {
		fmt.Fprintf(w, "; %d new: job %s", n, strings.Join(o.learned.Added, ", "))
	}
	fmt.Fprintln(w, ")")
	if n := len(o.learned.Skipped); n > 0 {
		fmt.Fprintf(w, "  %d completed job(s) not learned from, first: %s\n", n, o.learned.Skipped[0])
	}
}
