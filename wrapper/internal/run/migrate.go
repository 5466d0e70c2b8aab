package run

// Migration of a running job (issue 34). A late-bound job (trainrun submit
// to -p A,B with a plan per partition, TRAINRUN_PLAN_BY_PARTITION) is bound
// to the partition that freed first; with --migrate yes (policy Migrate=yes)
// its controller checks every --migrate-every whether checkpointing and
// requeueing into another of its partitions would finish it sooner by more
// than the move costs, and if so moves: the checkpoint-and-stop request the
// time limit uses (reason Migrated), the requeue (Decide), the job's
// partition set to the one it moves to (scontrol update), a history end
// with cause migrated, the metric trainrun_migrations_total{from,to} and
// the report's migrations section. The next incarnation resumes from the
// checkpoint with the plan for its new partition (latebind.go). At most one
// move per MigrateMinInterval (1h), and never a move that would delay a
// job waiting in the partition it moves to by more than MigrateMaxDelay
// (0 by default: not at all; see waitingFor and DecideMigrate).
//
// DecideMigrate is the pure rule; checkMigrate (the monitor's tick) gathers
// its inputs cheaply: the observed step time of this incarnation, the
// plans' predicted step times, one `scontrol show node` for idle nodes, the
// measured save time and requeue waits from the job's history.

import (
	"cmp"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/trainrun/trainrun/checkpoint"
	"github.com/trainrun/trainrun/internal/slurm"
	"github.com/trainrun/trainrun/wrapper/internal/planjson"
	"github.com/trainrun/trainrun/wrapper/obs"
)

// Migrated is the stop reason of a step stopped to move the job to another
// partition.
const Migrated StopReason = "migrate"

// The move's defaults where nothing was measured yet.
const (
	defaultMigrateEvery    = 5 * time.Minute
	defaultMigrateInterval = time.Hour
	defaultMigrateSave     = 30 * time.Second // a save before any was measured
	defaultRequeueWait     = 10 * time.Second // from the requeue into a partition with idle nodes to the next start, before any was measured
	migrateMargin          = 0.10             // the move must finish at least 10% sooner than staying
)

type migrateOptions struct {
	migrate string
	every   string
}

func (o *migrateOptions) addFlags(fs *pflag.FlagSet, getenv func(string) string) {
	fs.StringVar(&o.migrate, "migrate", cmp.Or(getenv("TRAINRUN_MIGRATE"), "no"), "yes: a late-bound job (trainrun submit to several partitions, TRAINRUN_PLAN_BY_PARTITION) checks every --migrate-every whether checkpointing and requeueing into another of its partitions finishes it sooner by more than the move costs (save + requeue wait + restart), and moves; needs --train-steps; at most one move per the policy's MigrateMinInterval (1h) (env TRAINRUN_MIGRATE; the policy's Migrate)")
	fs.StringVar(&o.every, "migrate-every", cmp.Or(getenv("TRAINRUN_MIGRATE_EVERY"), defaultMigrateEvery.String()), "with --migrate yes: how often to check (env TRAINRUN_MIGRATE_EVERY; the policy's MigrateEvery)")
}

func (o migrateOptions) check() error {
	switch strings.ToLower(o.migrate) {
	case "", "yes", "no":
	default:
		return usageErrorf("--migrate %q (or TRAINRUN_MIGRATE): want yes or no", o.migrate)
	}
	if _, err := o.interval(); err != nil {
		return err
	}
	return nil
}

func (o migrateOptions) interval() (time.Duration, error) {
	if o.every == "" {
		return defaultMigrateEvery, nil
	}
	d, err := time.ParseDuration(o.every)
	if err != nil {
		if n, e2 := strconv.Atoi(o.every); e2 == nil {
			d, err = time.Duration(n)*time.Second, nil
		}
	}
	if err != nil || d <= 0 {
		return 0, usageErrorf("--migrate-every %q (or TRAINRUN_MIGRATE_EVERY): want a duration above 0, such as 5m or 90s", o.every)
	}
	return d, nil
}

// MigrateCandidate is another partition of the job's list.
type MigrateCandidate struct {
	Partition string
	StepTime  time.Duration // predicted there (its plan), scaled by the observed/predicted ratio here
	StartIn   time.Duration // when a requeued job would start there
	NoWhy     string        // why it cannot be moved to ("": it can)
	Waiting   []WaitingJob  // jobs waiting there that the nodes the move takes would keep from starting (migrateQueue)
}

// WaitingJob is a job pending in a candidate partition that a move would
// go ahead of.
type WaitingJob struct {
	ID    string
	Nodes int // the nodes it asks for (its NumNodes' minimum; 0: not known)
}

// MigrateInput is what DecideMigrate weighs.
type MigrateInput struct {
	From        string
	StepsLeft   int64
	StepTime    time.Duration // observed here
	Candidates  []MigrateCandidate
	Save        time.Duration // a checkpoint's save (measured, else defaultMigrateSave)
	RequeueWait time.Duration // requeue to the next start (measured, else defaultRequeueWait)
	Restart     time.Duration // start to the first step (measured in this incarnation)
	Margin      float64       // the move must finish this share sooner (0.10)
	MaxDelay    time.Duration // MigrateMaxDelay: the most the move may delay a job waiting where it goes (0: not at all)
}

// MigrateVerdict is DecideMigrate's answer. Stay and Moved are the
// predicted times to finish from now; Cost the move's.
type MigrateVerdict struct {
	Move        bool
	To          string
	Stay, Moved time.Duration
	Cost        time.Duration
	Why         string
}

// DecideMigrate says whether to move, and where: to the candidate whose
// finish after the move (cost + steps left × its step time) is earliest,
// when that is at least Margin sooner than staying and the gain is more
// than twice the move's cost (a prediction error of the size of the cost
// does not turn the move into a loss), and, where jobs wait there that the
// nodes the move takes would keep from starting (Waiting), when the delay
// the move would cause them is at most MaxDelay. That delay is estimated
// as the moved job's whole predicted stay there from now (its cost plus
// its steps left at the step time there): a waiting job that could
// otherwise start at once would start when the moved job ends, and one that
// waits for other jobs too is delayed less. An upper bound, so the rule
// errs on the waiting jobs' side.
func DecideMigrate(in MigrateInput) MigrateVerdict {
	if in.StepsLeft <= 0 || in.StepTime <= 0 {
		return MigrateVerdict{Why: "no steps left or no step time observed yet"}
	}
	stay := time.Duration(in.StepsLeft) * in.StepTime
	v := MigrateVerdict{Stay: stay}
	var whys []string
	best := -1
	for i, c := range in.Candidates {
		if c.NoWhy != "" {
			whys = append(whys, c.Partition+": "+c.NoWhy)
			continue
		}
		if c.StepTime <= 0 {
			whys = append(whys, c.Partition+": no predicted step time")
			continue
		}
		cost := in.Save + max(in.RequeueWait, c.StartIn) + in.Restart
		moved := cost + time.Duration(in.StepsLeft)*c.StepTime
		gain := stay - moved
		switch {
		case float64(moved) > float64(stay)*(1-in.Margin):
			whys = append(whys, fmt.Sprintf("%s: finishes in %s moved vs %s staying, not %.0f%% sooner", c.Partition, rnd(moved), rnd(stay), in.Margin*100))
		case gain <= 2*cost:
			whys = append(whys, fmt.Sprintf("%s: gains %s, not more than twice the move's cost %s", c.Partition, rnd(gain), rnd(cost)))
		case len(c.Waiting) > 0 && moved > in.MaxDelay:
			whys = append(whys, fmt.Sprintf("%s: %s waiting there would be delayed up to %s (until the moved job ends there), over MigrateMaxDelay %s: a move would go ahead of them",
				c.Partition, waitingNames(c.Waiting), rnd(moved), in.MaxDelay))
		case best < 0 || moved < v.Moved:
			best, v.Moved, v.Cost = i, moved, cost
		}
	}
	if best < 0 {
		v.Why = "staying in " + in.From + ": " + cmp.Or(strings.Join(whys, "; "), "no other partition")
		return v
	}
	v.Move, v.To = true, in.Candidates[best].Partition
	v.Why = fmt.Sprintf("moving from %s to %s: %d steps left finish in %s there (%s/step, move cost %s: save %s + requeue wait %s + restart %s) vs %s staying (%s/step observed)",
		in.From, v.To, in.StepsLeft, rnd(v.Moved), rnd(in.Candidates[best].StepTime), rnd(v.Cost), rnd(in.Save), rnd(max(in.RequeueWait, in.Candidates[best].StartIn)), rnd(in.Restart), rnd(stay), rnd(in.StepTime))
	if w := in.Candidates[best].Waiting; len(w) > 0 {
		v.Why += fmt.Sprintf("; delays %s waiting there up to %s, within MigrateMaxDelay %s", waitingNames(w), rnd(v.Moved), in.MaxDelay)
	}
	return v
}

func rnd(d time.Duration) time.Duration {
	if d > time.Minute {
		return d.Round(time.Second)
	}
	return d.Round(time.Millisecond)
}

// migrateState is the run's migration watch.
type migrateState struct {
	off         bool      // not enabled, not late-bound, or no budget: never checks
	nextAt      time.Time // the next check
	firstStep   int64     // the first progress seen in this incarnation (its time excludes the start)
	firstAt     time.Time
	lastStep    int64
	lastAt      time.Time
	seen        int // progress events seen
	to          string
	moveWhy     string
	fromPart    string
	lastVerdict string
}

// migrateProgress takes one progress report (pollProgress).
func (r *runner) migrateProgress(step int64, at time.Time) {
	s := &r.sess.mig
	s.seen++
	if s.seen == 1 {
		s.firstStep, s.firstAt = step, at
	}
	s.lastStep, s.lastAt = step, at
}

// observedStep is this incarnation's mean step time since its first report.
func (s *migrateState) observedStep() time.Duration {
	if s.lastStep-s.firstStep < 2 {
		return 0
	}
	return s.lastAt.Sub(s.firstAt) / time.Duration(s.lastStep-s.firstStep)
}

// checkMigrate (the monitor's request tick): every --migrate-every, weigh a
// move and ask for the checkpoint that makes it.
func (m *monitor) checkMigrate(now time.Time) {
	r := m.r
	s := &r.sess.mig
	if s.off || m.reason != None {
		return
	}
	if s.nextAt.IsZero() {
		if why := r.migrateOff(); why != "" {
			s.off = true
			if strings.EqualFold(r.cfg.migrate.migrate, "yes") {
				r.logf("--migrate yes: not checking: %s", why)
			}
			return
		}
		every, _ := r.cfg.migrate.interval()
		s.nextAt = now.Add(every)
		return
	}
	if now.Before(s.nextAt) {
		return
	}
	every, _ := r.cfg.migrate.interval()
	s.nextAt = now.Add(every)
	in, why := r.migrateInput(now)
	if why != "" {
		if why != s.lastVerdict { // said once while it holds
			r.logf("migration check: %s", why)
		}
		s.lastVerdict = why
		return
	}
	v := DecideMigrate(in)
	if v.Move { // it would pay were it to start at once: ask Slurm whether it can
		r.migrateQueue(in.Candidates)
		v = DecideMigrate(in)
	}
	if !v.Move {
		if v.Why != s.lastVerdict {
			r.logf("migration check: %s", v.Why)
		}
		s.lastVerdict = v.Why
		return
	}
	s.to, s.fromPart, s.moveWhy = v.To, in.From, v.Why
	r.logf("migration: %s; checkpointing", v.Why)
	m.requestCkpt(Migrated)
}

// migrateOff says why the run does not check for moves ("": it does).
func (r *runner) migrateOff() string {
	switch {
	case !strings.EqualFold(r.cfg.migrate.migrate, "yes"):
		return "--migrate no"
	case !strings.Contains(r.env.Getenv(planByPartitionEnv), "%p"):
		return "the job is not late-bound (no " + planByPartitionEnv + " with a plan per partition: submit with trainrun submit to several partitions)"
	case r.cfg.obs.trainSteps == "":
		return "the steps left are not known: give --train-steps (TRAINRUN_TRAIN_STEPS)"
	case r.ckpt.store == nil:
		return "no checkpoint store (--ckpt-dir): a move resumes from a checkpoint"
	case r.cfg.dryRun:
		return "a dry run"
	}
	return ""
}

// migrateInput gathers DecideMigrate's inputs; why says what is missing.
func (r *runner) migrateInput(now time.Time) (MigrateInput, string) {
	s := &r.sess.mig
	from := r.partition()
	if strings.Contains(from, ",") { // a step may see the job's whole -p list: scontrol names the one it runs in (latebind.go)
		from = r.facts.job.Partition
	}
	in := MigrateInput{From: from, StepTime: s.observedStep(), Margin: migrateMargin, MaxDelay: r.cfg.migrateMaxDelay}
	total, err := strconv.ParseInt(r.cfg.obs.trainSteps, 10, 64)
	if err != nil {
		return in, fmt.Sprintf("--train-steps %q is not a step count", r.cfg.obs.trainSteps)
	}
	if in.StepTime <= 0 {
		return in, "no step time observed yet (the trainer reports progress with trainrun's client)"
	}
	in.StepsLeft = total - s.lastStep
	if why := r.migrateCannotRequeue(); why != "" {
		return in, why
	}
	incs, _ := r.ckpt.store.History().Load()
	if last, ok := lastMigration(incs); ok {
		minIv := cmp.Or(r.cfg.migrateMin, defaultMigrateInterval)
		if now.Sub(last) < minIv {
			s.nextAt = last.Add(minIv) // no check before a move is allowed again
			return in, fmt.Sprintf("the job moved at %s: at most one move per %s (MigrateMinInterval)", last.UTC().Format(time.RFC3339), minIv)
		}
	}
	evs, _ := r.ckpt.store.History().CkptTimes()
	if d, n := measuredCkpt(evs); n > 0 {
		in.Save = d
	} else {
		in.Save = defaultMigrateSave
	}
	in.RequeueWait = cmp.Or(requeueWait(incs), defaultRequeueWait)
	in.Restart = max(s.firstAt.Sub(r.t0), 0)
	in.Candidates = r.migrateCandidates(from, in.StepTime)
	return in, ""
}

// migrateCannotRequeue says why a move would not be requeued ("": it
// would): the stop would then end the job instead of moving it.
func (r *runner) migrateCannotRequeue() string {
	switch j := r.facts.job; {
	case !j.IsBatch():
		return "an interactive allocation cannot be requeued"
	case !j.Requeue:
		return "the job may not be requeued (Requeue=0: submit with --requeue)"
	case r.alloc.RestartCount+1 >= r.cfg.maxRequeue:
		return fmt.Sprintf("restart %d of --max-requeue %d: a move would use the job's last requeue", r.alloc.RestartCount, r.cfg.maxRequeue)
	}
	return ""
}

// migrateCandidates are the job's other partitions: those with a plan file
// for the TRAINRUN_PLAN_BY_PARTITION template, each with its predicted step
// time scaled by what this partition's was observed to be against its
// plan's. Slurm is not asked here (migrateQueue).
func (r *runner) migrateCandidates(from string, observed time.Duration) []MigrateCandidate {
	tmpl := r.env.Getenv(planByPartitionEnv)
	here, _ := planStep(strings.ReplaceAll(tmpl, "%p", from))
	scale := 1.0
	if here > 0 {
		scale = observed.Seconds() / here
	}
	var out []MigrateCandidate
	for _, p := range planPartitions(tmpl) {
		if p == from {
			continue
		}
		c := MigrateCandidate{Partition: p}
		st, err := planStep(strings.ReplaceAll(tmpl, "%p", p))
		if err != nil {
			c.NoWhy = err.Error()
		}
		c.StepTime = time.Duration(st * scale * float64(time.Second))
		out = append(out, c)
	}
	return out
}

// migrateQueue asks Slurm, once a move would pay were it to start at once,
// whether each candidate can take the job: which jobs wait there that the
// move would go ahead of (Waiting: DecideMigrate weighs their delay against
// MigrateMaxDelay), and enough idle nodes now, else when sbatch --test-only
// would start it (StartIn). Checks that stay cost no Slurm query.
func (r *runner) migrateQueue(cands []MigrateCandidate) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	nodes, nerr := r.env.Slurm.Nodes(ctx)
	jobs, jerr := r.env.Slurm.Jobs(ctx)
	need := len(r.alloc.Nodes)
	for i := range cands {
		c, p := &cands[i], cands[i].Partition
		switch {
		case c.NoWhy != "":
		case nerr != nil:
			c.NoWhy = fmt.Sprintf("its nodes are not known: %v", nerr)
		case jerr != nil:
			c.NoWhy = fmt.Sprintf("its queue is not known: %v", jerr)
		default:
			idle := slurm.IdleNodes(nodes, p)
			c.Waiting = waitingFor(jobs, p, r.alloc.JobID, idle-need)
			if idle < need {
				c.StartIn, c.NoWhy = r.migrateStart(ctx, p, need, idle)
			}
		}
	}
}

// migrateStart: the partition has too few idle nodes now; sbatch
// --test-only says when the job's shape would start there (from the running
// jobs' limits, so late rather than early), and the move's cost waits that
// long.
func (r *runner) migrateStart(ctx context.Context, p string, need, idle int) (time.Duration, string) {
	tpn := max(r.alloc.TasksPerNode, 1)
	mins := max(int(r.alloc.TimeLimit/time.Minute), 1)
	est, err := r.env.Slurm.TestOnly(ctx, "--partition="+p, "--nodes="+strconv.Itoa(need), "--ntasks-per-node="+strconv.Itoa(tpn),
		"--gpus-per-node="+strconv.Itoa(tpn), "--exclusive", "--time="+strconv.Itoa(mins), "--wrap=true")
	if err != nil {
		return 0, fmt.Sprintf("%d idle node(s), the job needs %d, and sbatch --test-only failed: %v", idle, need, err)
	}
	return max(time.Until(est.Start), 0), ""
}

// waitingFor are the jobs other than self pending with partition in their
// -p list that the move would go ahead of: taken in the queue's order, each
// that fits on the nodes the move leaves idle there (left: the idle nodes
// less the move's) takes its nodes from them and is not delayed; the first
// that does not, and every one after it (no backfill assumed), is. A job
// whose node count is not known counts as one that does not fit.
func waitingFor(jobs []slurm.Job, partition, self string, left int) []WaitingJob {
	var out []WaitingJob
	for _, j := range jobs {
		if j.ID == self || j.State != "PENDING" || !slices.Contains(strings.Split(j.Partition, ","), partition) {
			continue
		}
		n := jobNodes(j)
		if len(out) == 0 && n > 0 && n <= left {
			left -= n
			continue
		}
		out = append(out, WaitingJob{ID: j.ID, Nodes: n})
	}
	return out
}

// jobNodes is the least node count the job asks for (NumNodes=2 or 2-4;
// 0: not known).
func jobNodes(j slurm.Job) int {
	v, _, _ := strings.Cut(j.Record["NumNodes"], "-")
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// waitingNames names waiting jobs for a log line: "job 8 (1 node)", or
// "3 jobs (8: 1 node, 9: 2 nodes, 10: ? nodes)".
func waitingNames(w []WaitingJob) string {
	size := func(j WaitingJob) string {
		switch j.Nodes {
		case 0:
			return "? nodes"
		case 1:
			return "1 node"
		}
		return strconv.Itoa(j.Nodes) + " nodes"
	}
	if len(w) == 1 {
		return "job " + w[0].ID + " (" + size(w[0]) + ")"
	}
	parts := make([]string, 0, min(len(w), 5))
	for i, j := range w {
		if i == 5 {
			parts = append(parts, "...")
			break
		}
		parts = append(parts, j.ID+": "+size(j))
	}
	return fmt.Sprintf("%d jobs (%s)", len(w), strings.Join(parts, ", "))
}

// planPartitions are the partitions the template has a plan file for.
func planPartitions(tmpl string) []string {
	i := strings.Index(tmpl, "%p")
	if i < 0 {
		return nil
	}
	pre, post := tmpl[:i], strings.ReplaceAll(tmpl[i+2:], "%p", "*")
	matches, _ := filepath.Glob(escapeGlob(pre) + "*" + escapeGlob(post))
	var out []string
	for _, m := range matches {
		p := strings.TrimSuffix(strings.TrimPrefix(m, pre), post)
		if p != "" && !strings.ContainsAny(p, "/,") && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

func escapeGlob(s string) string {
	r := strings.NewReplacer(`\`, `\\`, "*", `\*`, "?", `\?`, "[", `\[`)
	return r.Replace(s)
}

// planStep is the predicted step time, in seconds, of the plan at path.
func planStep(path string) (float64, error) {
	b, err := planjson.ReadSubmitted(path)
	if err != nil {
		return 0, err
	}
	pf, err := planjson.Decode(b)
	if err != nil {
		return 0, fmt.Errorf("%s: %v", path, err)
	}
	if pf.Plan == nil || pf.Plan.Time.Step <= 0 {
		return 0, fmt.Errorf("%s has no predicted step time", path)
	}
	return pf.Plan.Time.Step, nil
}

// lastMigration is when the job last moved (a migrated end).
func lastMigration(incs []checkpoint.Incarnation) (time.Time, bool) {
	for i := len(incs) - 1; i >= 0; i-- {
		if incs[i].Cause == checkpoint.CauseMigrated {
			return incs[i].End, true
		}
	}
	return time.Time{}, false
}

// requeueWait is the median wait from one incarnation's end to the next's
// start in the history (0: none measured).
func requeueWait(incs []checkpoint.Incarnation) time.Duration {
	var ws []time.Duration
	for i := 1; i < len(incs); i++ {
		if !incs[i-1].End.IsZero() && !incs[i].Start.IsZero() && incs[i].Start.After(incs[i-1].End) {
			ws = append(ws, incs[i].Start.Sub(incs[i-1].End))
		}
	}
	if len(ws) == 0 {
		return 0
	}
	slices.Sort(ws)
	return ws[len(ws)/2]
}

// migrateRequeued: the job was requeued for a move; send it to the
// partition it moves to (Slurm takes the update once the job is pending),
// and tell the observer.
func (r *runner) migrateRequeued() {
	s := &r.sess.mig
	if s.to == "" {
		return
	}
	r.observe(obs.Event{Kind: obs.KindMigrate, MigrateFrom: s.fromPart, MigrateTo: s.to, Message: s.moveWhy})
	var err error
	for try := 0; try < 10; try++ {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err = r.env.Slurm.SetPartition(ctx, r.alloc.JobID, s.to)
		cancel()
		if err == nil {
			r.logf("migration: the requeued job %s goes to partition %s", r.alloc.JobID, s.to)
			return
		}
		time.Sleep(300 * time.Millisecond)
	}
	r.logf("warning: migration: setting the requeued job's partition to %s: %v (it may start again in %s; set it with scontrol update jobid=%s Partition=%s)", s.to, err, s.fromPart, r.alloc.JobID, s.to)
}
