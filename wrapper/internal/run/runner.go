package run

import (
	"context"
	"errors"
	"fmt"
	"github.com/trainrun/trainrun/internal/failclass"
	"path/filepath"
	"sync"
	"time"

	"github.com/trainrun/trainrun/checkpoint"
	"github.com/trainrun/trainrun/internal/calib"
	"github.com/trainrun/trainrun/internal/slurm"
	"github.com/trainrun/trainrun/plan"
	"github.com/trainrun/trainrun/wrapper/internal/losshist"
	"github.com/trainrun/trainrun/wrapper/obs"
)

// choice is what the choose phase hands on: the layout, its evaluation
// when the planner made one, and a planned model's Megatron arguments.
type choice struct {
	Layout   plan.Layout
	Eval     *plan.Evaluation // nil when the layout was pinned and not evaluated
	Model    *plan.Model      // the planned model (nil: none given); {megatron_args} renders it with Job
	Job      plan.Job
	Inputs   *plan.Inputs // what Eval was planned from (nil unless planned here): the observation's record
	GPU      string       // the GPU type the planner planned for ("" when it did not plan)
	PlanFile string       // the plan file the layout came from: --plan, else TRAINRUN_PLAN ("": none)
	Search   *plan.Result // the planner's search (nil unless planned here): --tune's candidates
}

// placed is what the place phase hands on: each rank's node and GPU, and
// the placement's traffic model (nil when the block order fallback was used).
type placed struct {
	Slots     []rankSlot
	Placement *plan.Placement
}

// runner holds one `trainrun run` from allocation to exit: its
// configuration, and the value each phase returned, in their order.
type runner struct {
	cfg Config // setup: the options resolved (complete) and the command; never written after
	env *Deps
	t0  time.Time

	alloc  *slurm.Allocation // setup; gather and the spares replace it, never change it
	dirs   runDirs           // dirs
	early  *earlyStep        // early: the step started before the plan; nil once handed to the monitor
	facts  runFacts          // gather
	choice choice            // choose
	placed placed            // place; a restart on spare nodes places again
	ckpt   runStore          // store (written by its goroutine, read after awaitStore)
	step   stepLaunch        // prepare; a restart prepares again
	sess   session           // while the step runs, and across restarts inside the allocation
}

// runDirs are the run's directories (makeDirs).
type runDirs struct {
	jobDir  string // JOBDIR, or JOBDIR/runs/NAME for a named run
	runName string
	ckptDir string // the checkpoint store
}

// in is the path of parts under the job directory (the names: jobdir).
func (d runDirs) in(parts ...string) string {
	return filepath.Join(append([]string{d.jobDir}, parts...)...)
}

// runStore is what the store phase opened (openRunStore).
type runStore struct {
	store  *checkpoint.Store // nil in a dry run
	resume string            // the checkpoint resumed from
}

// stepLaunch is what the prepare phase made for srun.
type stepLaunch struct {
	cmdArgv    []string      // the command with its templates filled
	srunArgv   []string      // srun's command line
	srunEnv    []string      // srun's environment additions
	masterPort int           // the step's MASTER_PORT (freeMasterPort)
	tReady     time.Duration // from start to launching srun (or its go)
}

// session is the state that lives while steps run and across restarts
// inside the allocation; the monitor's goroutines share it (tagMu guards
// lastTag).
type session struct {
	tagMu        sync.Mutex
	lastTag      string      // the latest committed checkpoint's tag known to the controller
	obs          runObserver // nil in a dry run
	progress     *obs.ProgressReader
	mig          migrateState       // --migrate (migrate.go)
	resize       resizeState        // the resize decided at this requeue (resize.go)
	lossHist     *losshist.Recorder // the loss history (issue 32); nil without a store
	fc           *forecastWatch     // --target-loss (forecast.go); nil without
	esw          *earlyStopWatch    // a sweep trial's --early-stop (forecast.go)
	endCause     checkpoint.Cause
	interrupted  map[string]bool
	commitFailed bool
	faults       faultState       // failed saves and nodes (faults.go)
	restarts     int              // steps restarted inside this allocation (hang.go)
	hangWhat     string           // the ranks the last hang points to
	failClass    failclass.Result // the last failed step's class (failclass.go); zero when it did not fail
	// The node health passes (health.go): their time so far, and the
	// events of one that ran before the observer started.
	healthTime    time.Duration
	healthPending []obs.Event
	badput        restartClock // a restart's badput (badput.go)
	badputs       []Badput     // each restart's, for the run's summary
	rankFaults    []rankFault  // hangs and stragglers seen, for the log and the report
	spare         spareState   // --spare-nodes (spare.go)
	spike         spikeState   // --loss-spike (lossspike.go)

	// The run's observation (calib.go); nil: none is recorded.
	calibRec *calib.Recorder

	tune      *tuneState // the tune trial running (tunestep.go); nil: the run's own step
	tuneTable []string   // the tune's predicted-versus-measured table, for the summary
}

func (r *runner) logf(format string, a ...any) {
	fmt.Fprintf(r.env.Stderr, "trainrun: "+format+"\n", a...)
}

// run is the controller's spine after setup: dirs → early → gather →
// choose → place → store → prepare → launch/monitor → decide → act (see
// doc.go).
func (r *runner) run(ctx context.Context) error {
	if finished, err := r.makeDirs(); err != nil || finished {
		return err
	}
	if !r.cfg.dryRun {
		if err := r.healthBeforeStart(ctx); err != nil { // health.go
			return err
		}
	}
	if err := r.startEarly(ctx); err != nil {
		return err
	}
	defer r.abortEarly() // unless the monitor took the step over
	// The observer starts while Slurm starts the early step.
	if !r.cfg.dryRun {
		if err := r.startObserver(); err != nil {
			return err
		}
		defer r.closeObserver()
		r.flushHealth()
	}
	// The store is opened (recovered, scanned for the resume point) while
	// gather waits on Slurm and the probes: on a shared file system its
	// scans and Slurm's start of the step overlap.
	awaitStore := r.openRunStoreAsync()
	defer awaitStore()
	f, err := r.gather(ctx)
	if err != nil {
		return err
	}
	r.facts = f
	if err := r.setupSpares(ctx); err != nil {
		return err
	}
	if r.choice, err = r.choosePlan(); err != nil {
		return err
	}
	if r.placed, err = r.place(f, r.choice); err != nil {
		return err
	}
	store, err := awaitStore()
	if err != nil {
		return err
	}
	if err := r.tune(ctx, f, store); err != nil { // --tune: the trials, then the fastest layout (tunestep.go)
		return err
	}
	step, renv, err := r.prepare(f)
	if err != nil {
		return err
	}
	r.step = step
	if r.cfg.dryRun {
		return r.printDryRun(renv)
	}
	for {
		if err = r.startStep(ctx, f, renv, store); !errors.Is(err, errRestartStep) {
			return err
		}
		if renv, err = r.restartStep(f, store); err != nil {
			return err
		}
	}
}
