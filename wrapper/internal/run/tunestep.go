// The tune phase of trainrun run (--tune K[:STEPS]): the planner's K best
// layouts run STEPS steps each as short steps of the allocation, the
// fastest measured one is trained. The arithmetic is Candidates,
// TrialTick, Pick (wrapper/internal/run/tune.go); here the trials
// are launched with the controller's own phases (place, prepare, startStep,
// the monitor), each into a scratch checkpoint directory.

package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/trainrun/trainrun/internal/calib"
	"github.com/trainrun/trainrun/internal/safefs"
	"github.com/trainrun/trainrun/internal/slurm"
	"github.com/trainrun/trainrun/plan"
	"github.com/trainrun/trainrun/wrapper/internal/jobdir"
	"github.com/trainrun/trainrun/wrapper/internal/launch"
	"github.com/trainrun/trainrun/wrapper/obs"
)

// tuneOptions are the flags of the tune phase.
type tuneOptions struct {
	tune   string // --tune K[:STEPS]
	budget string // --tune-budget MIN (or a duration: 90s, 1h)
}

func (o *tuneOptions) addFlags(fs *pflag.FlagSet, getenv func(string) string) {
	fs.StringVar(&o.tune, "tune", getenv("TRAINRUN_TUNE"), "measure before training: run the planner's K best layouts that fit, STEPS steps each (default 10), as short steps of this job, and train with the fastest measured one; every candidate is recorded as an observation (env TRAINRUN_TUNE, #SBATCH --train-tune; policy Tune=)")
	fs.StringVar(&o.budget, "tune-budget", getenv("TRAINRUN_TUNE_BUDGET"), "with --tune: the trials' time in minutes (or a duration such as 90s); a candidate that does not fit in what is left is not run (env TRAINRUN_TUNE_BUDGET; policy TuneBudget=; default 5% of the job's time limit)")
}

// parsed reads the two values; name says where each came from.
func (o tuneOptions) parsed(tuneFrom, budgetFrom string) (TuneSpec, time.Duration, error) {
	spec, err := ParseTune(tuneFrom, o.tune)
	if err != nil {
		return spec, 0, usageErrorf("%v", err)
	}
	b, err := parseTuneBudget(budgetFrom, o.budget)
	return spec, b, err
}

// parseTuneBudget reads minutes ("5", "2.5") or a duration ("90s"); ""
// and "auto" are the default (0).
func parseTuneBudget(name, s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" || strings.EqualFold(s, "auto") {
		return 0, nil
	}
	if m, err := strconv.ParseFloat(s, 64); err == nil && m > 0 && m < 1e6 {
		return time.Duration(m * float64(time.Minute)).Round(time.Second), nil
	}
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return d, nil
	}
	return 0, usageErrorf("%s %q: want the trials' budget in minutes (e.g. 5) or a duration (e.g. 90s), or auto (5%% of the job's time limit)", name, s)
}

// tuneState is the running trial, while the monitor runs it.
type tuneState struct {
	rec      *calib.Recorder // the trial's progress (pollProgress feeds it)
	steps    int
	deadline time.Time
	res      *stepResult // how its step ended (endTrial)
}

// errTuneTrial ends startStep after a tune trial: its step ended and
// r.sess.tune.res says how.
var errTuneTrial = errors.New("tune trial ended")

// tuneTick ends the running trial's step once it measured its steps or
// its time is up (TrialTick): killed at once, nothing is saved.
func (m *monitor) tuneTick(now time.Time) {
	ts := m.r.sess.tune
	if ts == nil || m.reason != None {
		return
	}
	_, ok, _, span := ts.rec.Measure()
	if TrialTick(ts.steps, span, ok, now, ts.deadline) == TrialGoOn {
		return
	}
	m.reason, m.stopAt = TuneDone, now
	m.killing++
	m.do([]stopAction{{kind: actKillStep, reason: TuneDone}})
}

// endTrial takes a trial step's end: true when it was one (the monitor then
// returns errTuneTrial). A stop for any other reason (a signal, the time
// limit, a preemption) goes the normal way: afterStep decides.
func (r *runner) endTrial(res stepResult) bool {
	ts := r.sess.tune
	if ts == nil || (res.Reason != None && res.Reason != TuneDone && res.Reason != Hang) {
		return false
	}
	ts.res = &res
	return true
}

// trialOutcome turns the trial's end into its measurement or why not.
func (r *runner) trialOutcome(ts *tuneState, t *Trial) {
	res := ts.res
	o, ok, why, _ := ts.rec.Measure()
	code, _ := slurm.ExitCode(res.WaitErr)
	if ok && (res.Reason == TuneDone || res.Reason == None && code == 0) {
		t.Observed = o
		// The peak memory the trainer's last report gives, as the run's own observation.
		if p, err := obs.ReadProgressFile(r.dirs.in(jobdir.Launch, obs.ProgressFile)); err == nil {
			if v, ok := p.Metrics["peak_mem_gib"]; ok && v > 0 && !math.IsInf(v, 0) {
				t.Observed.PeakMemGiB = &v
			}
		}
		return
	}
	first := ""
	if f := res.FirstFail; f != nil && f.Rank >= 0 && f.Rank < len(r.placed.Slots) {
		s := r.placed.Slots[f.Rank]
		first = fmt.Sprintf("rank %d (node %s, GPU %d) failed first with exit %d", s.Rank, s.Node, s.GPU, f.Code)
	}
	t.Failed = Failure(code, first, res.Reason, why)
}

// silentTrainer says that a trial ran until its deadline without two
// progress reports: the trainer does not report (no Checkpointer), and
// the other candidates would spend the budget the same way.
func silentTrainer(ts *tuneState) bool {
	if ts == nil || ts.res == nil || ts.res.Reason != TuneDone {
		return false
	}
	_, _, _, span := ts.rec.Measure()
	return span == 0
}

// tuneSpec is the resolved --tune (complete checked it).
func (r *runner) tuneSpec() (TuneSpec, time.Duration) {
	spec, budget, _ := r.cfg.tune.parsed("--tune", "--tune-budget")
	return spec, budget
}

// tuneFile is where the run keeps its tune's outcome: a requeued run trains
// the layout it chose instead of tuning again.
func (r *runner) tuneFile() string { return filepath.Join(r.dirs.ckptDir, ".trainrun", "tune.json") }

// tuneDoc is tune.json.
type tuneDoc struct {
	Job    string          `json:"job"`
	At     time.Time       `json:"at"`
	Tune   string          `json:"tune"` // K:STEPS
	Chosen plan.Evaluation `json:"chosen"`
	Table  []string        `json:"table"`
}

// tune is the tune phase: nothing unless --tune; else the trials, their
// records, and r.choice and r.placed set to the fastest measured layout.
func (r *runner) tune(ctx context.Context, f runFacts, store *observedStore) error {
	spec, given := r.tuneSpec()
	if spec.K == 0 {
		return nil
	}
	if r.choice.Search == nil {
		r.logf("tune: the layout was not planned here (--plan, or --fix without a model): nothing to tune; give the model to plan from")
		return nil
	}
	world := r.alloc.World()
	if d, ok := r.tunedBefore(world); ok {
		r.logf("tune: training %s, the layout job %s chose at %s (%s)", d.Chosen.Layout.Config(), d.Job, d.At.Format(time.DateTime), r.tuneFile())
		return r.chooseTuned(f, d.Chosen, d.Table)
	}
	if tag := r.getLastTag(); tag != "" {
		r.logf("tune: resuming from checkpoint %s: its layout is not tuned again", tag)
		return nil
	}
	cands := Candidates(*r.choice.Search, spec.K, world)
	if len(cands) < 2 {
		r.logf("tune: %d layout(s) fit the %d GPUs: nothing to tune", len(cands), world)
		return nil
	}
	budget, from := TuneBudget(given, r.alloc.TimeLimit)
	r.logf("tune: %d candidate(s), %d steps each, within %s (%s)", len(cands), spec.Steps, budget, from)
	if r.cfg.dryRun {
		for i, ev := range cands {
			r.logf("tune: candidate %d: %s (predicted step %.3f s)", i+1, ev.Layout.Config(), ev.Time.Step)
		}
		return nil // the dry run shows the planner's choice
	}
	t0 := time.Now()
	trials, err := r.runTrials(ctx, f, store, cands, spec.Steps, t0.Add(budget))
	if err != nil {
		return err
	}
	w := Pick(trials)
	table := Table(trials, w)
	r.logf("tune: predicted and measured step times (* = trained):\n  %s", strings.Join(table, "\n  "))
	r.logf("%s", Cost(time.Since(t0), budget, r.alloc.TimeLimit, Ran(trials), len(trials)))
	r.recordTrials(trials, w, spec.Steps)
	chosen := *r.choice.Search.Plan
	if w < 0 {
		r.logf("tune: no candidate was measured: training the planner's choice %s", chosen.Layout.Config())
	} else {
		chosen = trials[w].Eval
	}
	d := tuneDoc{Job: slurm.JobFromEnv(r.env.Getenv).ID, At: time.Now().UTC(), Tune: spec.String(), Chosen: chosen, Table: table}
	if err := launch.WriteJSONAtomic(r.tuneFile(), d, 0o644); err != nil {
		r.logf("warning: keeping the tune's choice: %v (a requeued run tunes again)", err)
	}
	return r.chooseTuned(f, chosen, table)
}

// tunedBefore reads an earlier run's tune.json, when its layout has world
// GPUs.
func (r *runner) tunedBefore(world int) (tuneDoc, bool) {
	var d tuneDoc
	b, err := safefs.ReadFile(r.tuneFile(), 16<<20)
	if err != nil {
		return d, false
	}
	if err := json.Unmarshal(b, &d); err != nil || plan.LayoutGPUs(d.Chosen.Layout) != world {
		r.logf("warning: %s: not used (%v; layout for %d GPUs, the job has %d): tuning again", r.tuneFile(), err, plan.LayoutGPUs(d.Chosen.Layout), world)
		return d, false
	}
	return d, true
}

// chooseTuned makes ev the run's layout, placed.
func (r *runner) chooseTuned(f runFacts, ev plan.Evaluation, table []string) error {
	r.choice.Layout, r.choice.Eval = ev.Layout, &ev
	r.sess.tuneTable = table
	var err error
	r.placed, err = r.place(f, r.choice)
	return err
}

// runTrials runs each candidate that fits in what is left of the budget
// (ending at end) as a step of its own. An error is one that ends the run
// (a cancellation, a preemption, Slurm failing): afterStep decided it.
func (r *runner) runTrials(ctx context.Context, f runFacts, store *observedStore, cands []plan.Evaluation, steps int, end time.Time) ([]Trial, error) {
	trials := make([]Trial, len(cands))
	startup, measured := DefaultTrialStartup, 0
	for i, ev := range cands {
		t := &trials[i]
		t.Eval = ev
		now := time.Now()
		cost := TrialCost(ev, steps, startup)
		if left := end.Sub(now); left < cost {
			t.Failed = fmt.Sprintf("not run: %s of the budget left, the trial needs about %s (raise --tune-budget)", max(left, 0).Round(time.Second), cost.Round(time.Second))
			continue
		}
		r.logf("tune: trial %d of %d: %s (predicted step %.3f s)", i+1, len(cands), ev.Layout.Config(), ev.Time.Step)
		ts, err := r.runTrial(ctx, f, store, t, steps, TrialDeadline(now, end, cost, len(cands)-i))
		if err != nil {
			return nil, err
		}
		t.Took = time.Since(now)
		if ts != nil {
			r.trialOutcome(ts, t)
		}
		if t.Measured() {
			_, _, _, span := ts.rec.Measure()
			startup = (startup*time.Duration(measured) + t.Startup(span)) / time.Duration(measured+1)
			measured++
			r.logf("tune: trial %d: median step %.3f s over %d steady steps in %s", i+1, t.Observed.StepS, t.Observed.Steps, t.Took.Round(time.Second))
		} else {
			r.logf("tune: trial %d dropped: %s", i+1, t.Failed)
			if measured == 0 && silentTrainer(ts) {
				for j := i + 1; j < len(trials); j++ {
					trials[j].Eval, trials[j].Failed = cands[j], "not run: the trainer reports no progress"
				}
				r.logf("tune: trial %d ran its whole share of the budget without two progress reports: --tune measures the trainer's Checkpointer.report_progress; the other candidates are not run", i+1)
				break
			}
		}
	}
	r.sess.tune, r.sess.calibRec = nil, nil
	return trials, nil
}

// runTrial launches one candidate with its own flags and environment into a
// scratch checkpoint directory, removed afterwards. ts is nil when the
// candidate could not be placed or prepared (t.Failed says why).
func (r *runner) runTrial(ctx context.Context, f runFacts, store *observedStore, t *Trial, steps int, deadline time.Time) (*tuneState, error) {
	c := r.choice
	c.Layout, c.Eval = t.Eval.Layout, &t.Eval
	rec, _ := newRunRecorder(c.Eval, c.Layout, c.Inputs, r.dirs.ckptDir, r.cfg.plan.Calibration, r.jobLabel(), c.GPU, len(r.alloc.Nodes), r.env.Version)
	if rec != nil {
		t.Record = rec.Template
	}
	saved := r.choice
	r.choice = c
	var err error
	if r.placed, err = r.place(f, c); err != nil {
		r.choice, t.Failed = saved, "not placed: "+err.Error()
		return nil, nil
	}
	scratch := r.dirs.in("tune", fmt.Sprintf("trial-%d", time.Now().UnixNano()))
	ckptDir := r.dirs.ckptDir
	r.dirs.ckptDir = filepath.Join(scratch, jobdir.Checkpoints)
	defer func() {
		r.dirs.ckptDir, r.choice = ckptDir, saved
		os.RemoveAll(scratch)
	}()
	step, renv, err := r.prepare(f)
	if err != nil {
		t.Failed = "not prepared: " + err.Error()
		return nil, nil
	}
	r.step = step
	ts := &tuneState{rec: &calib.Recorder{Template: t.Record}, steps: steps, deadline: deadline}
	r.sess.tune, r.sess.calibRec = ts, ts.rec
	r.sess.progress = obs.NewProgressReader(r.dirs.in(jobdir.Launch, obs.ProgressFile))
	err = r.startStep(ctx, f, renv, store)
	r.sess.tune, r.sess.calibRec = nil, nil
	if errors.Is(err, errTuneTrial) {
		return ts, nil
	}
	if err == nil {
		err = fmt.Errorf("tune: the trial of %s ended the run", c.Layout.Config())
	}
	return nil, err
}

// jobLabel is the observation's job: the Slurm job id, and the run's name.
func (r *runner) jobLabel() string {
	job := slurm.JobFromEnv(r.env.Getenv).ID
	if r.dirs.runName != "" {
		job += "/" + r.dirs.runName
	}
	return job
}

// recordTrials appends every trial that ran to the run's store and the site
// calibration, marked as tune trials (chosen: the one trained).
func (r *runner) recordTrials(trials []Trial, chosen, steps int) {
	recs := Records(trials, chosen, steps, time.Now())
	var paths []string
	if r.dirs.ckptDir != "" {
		paths = append(paths, calib.RunStorePath(r.dirs.ckptDir))
	}
	if r.cfg.plan.Calibration != "" {
		paths = append(paths, calib.SitePath(r.cfg.plan.Calibration))
	}
	for _, p := range paths {
		n := 0
		for _, rec := range recs {
			if err := calib.Append(p, rec); err != nil {
				r.logf("warning: tune: %v", err)
				continue
			}
			n++
		}
		r.logf("tune: %d trial observation(s) recorded in %s", n, p)
	}
}

// tuneSummary is the summary's tune section ("" without one).
func (r *runner) tuneSummary() string {
	if len(r.sess.tuneTable) == 0 {
		return ""
	}
	return "  tuned       " + strings.Join(r.sess.tuneTable, "\n              ") + "\n"
}
