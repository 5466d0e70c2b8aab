// The place, store, prepare and launch phases of trainrun run: ranks onto
// GPUs, the checkpoint store, the rank environment and srun line, the step's
// start.

package run

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/trainrun/trainrun/checkpoint"
	"github.com/trainrun/trainrun/plan"
	"github.com/trainrun/trainrun/wrapper/internal/container"
	"github.com/trainrun/trainrun/wrapper/internal/exitcode"
	"github.com/trainrun/trainrun/wrapper/internal/jobdir"
	"github.com/trainrun/trainrun/wrapper/internal/launch"
)

// place puts the chosen layout's ranks on the allocation's GPUs.
func (r *runner) place(f runFacts, c choice) (p placed, err error) {
	traffic := r.planTraffic(c)
	var notes []string
	if p.Slots, p.Placement, notes, err = placeRanks(r.alloc, c.Layout, traffic, f.nodes, f.cluster); err != nil {
		return p, withCode(exitcode.NoFit, err)
	}
	for _, n := range notes {
		r.logf("placement: %s", n)
	}
	if container.SetsCPUBind(r.cfg.srunArgs) {
		for i := range p.Slots {
			p.Slots[i].CPUs = "" // srun binds (--srun-arg --cpu-bind): the shim does not
		}
	}
	return p, nil
}

// openRunStoreAsync runs openRunStore in the background; the function it
// returns waits for its result (any number of times).
func (r *runner) openRunStoreAsync() func() (*observedStore, error) {
	done := make(chan struct{})
	var s *observedStore
	var err error
	go func() {
		defer close(done)
		s, err = r.openRunStore()
	}()
	return func() (*observedStore, error) {
		<-done
		return s, err
	}
}

// openRunStore opens the checkpoint store, commits what an earlier run
// completed, and finds the checkpoint to resume from (r.ckpt.resume). A dry run
// opens nothing (nil).
func (r *runner) openRunStore() (*observedStore, error) {
	if r.cfg.dryRun {
		return nil, nil
	}
	a := r.alloc
	sa, err := openStore(r.dirs.ckptDir)
	if err != nil {
		return nil, withCode(exitcode.Checkpoint, fmt.Errorf("checkpoint store %s: %w", r.dirs.ckptDir, err))
	}
	store := &observedStore{ckptStore: sa, st: sa.s, r: r}
	// A checkpoint the previous incarnation completed but did not
	// commit (killed, node failure) is committed now, before resuming.
	// With node-local saves, an unfinished drain cannot be finished
	// (its source was on the nodes): Recover discards it, so that the
	// drains of this run start from a clean staging area.
	if r.cfg.ckptLocal != "" {
		if rep, err := sa.s.Recover(context.Background(), a.World(), true); err != nil {
			r.logf("warning: recovering the checkpoint store: %v", err)
		} else if len(rep.Committed)+len(rep.Discarded) > 0 {
			r.logf("checkpoint store recovered: committed %s; discarded unfinished %s",
				cmp.Or(strings.Join(rep.Committed, ", "), "none"), cmp.Or(strings.Join(rep.Discarded, ", "), "none"))
		}
	}
	if tag, changed, err := store.CommitComplete(a.World()); err != nil {
		r.logf("warning: committing a complete checkpoint left by an earlier run: %v", err)
	} else if changed {
		r.logf("committed checkpoint %s, completed by an earlier run of this job", tag)
	}
	r.ckpt.store = store.st
	r.setCompressMode()
	var notes []string
	if r.ckpt.resume, notes, err = store.Latest(); err != nil {
		return nil, withCode(exitcode.Checkpoint, fmt.Errorf("checkpoint store %s: %w", r.dirs.ckptDir, err))
	}
	for _, n := range notes {
		r.logf("warning: %s", n)
	}
	r.setLastTag(tagOf(r.ckpt.resume))
	if err := r.resumeOrInit(); err != nil {
		return nil, err
	}
	return store, nil
}

// prepare substitutes the command's templates, writes plan.json and the
// hostfile, and builds the rank environment and the srun command line.
func (r *runner) prepare(f runFacts) (stepLaunch, rankEnv, error) {
	a := r.alloc
	var st stepLaunch
	var unknown []string
	megatron, err := r.megatronArgs()
	if err != nil {
		return st, rankEnv{}, err
	}
	titan, err := r.torchTitanArgs()
	if err != nil {
		return st, rankEnv{}, err
	}
	vals := templateValues(r.choice.Layout, r.ckpt.resume, r.dirs.ckptDir)
	if err := r.deepSpeedConfig(vals); err != nil {
		return st, rankEnv{}, err
	}
	st.cmdArgv, unknown = substituteTemplates(r.cfg.argv, vals, megatron, map[string][]string{"torchtitan_args": titan})
	for _, u := range unknown {
		r.logf("warning: %s in the command is not a trainrun template (known: {%s}); left as is", u, strings.Join(TemplateNames, "} {"))
	}

	// Files of the job directory (a dry run writes nothing).
	planPath := r.dirs.in(jobdir.Plan)
	hostfilePath := r.dirs.in(jobdir.Hostfile)
	if !r.cfg.dryRun {
		if err := r.writePlan(planPath, st.cmdArgv); err != nil {
			return st, rankEnv{}, err
		}
		if err := launch.WriteFileAtomic(hostfilePath, []byte(hostfile(r.placed.Slots)), 0o644); err != nil {
			return st, rankEnv{}, err
		}
	}
	master := nodesInRankOrder(r.placed.Slots)[0]
	masterAddr := master
	if v := f.addrs[master]; v != "" {
		masterAddr = v
	}
	st.masterPort = masterPort(a.JobID)
	if !r.cfg.dryRun {
		st.masterPort = freeMasterPort(a.JobID, master == a.BatchNode, net.Listen, r.logf)
	}
	renv := runRankEnv(a, r.placed.Slots, envInputs{
		Layout: r.choice.Layout, MasterAddr: masterAddr, MasterPort: st.masterPort, PlanPath: planPath,
		CkptDir: r.dirs.ckptDir, ResumeDir: r.ckpt.resume, CkptSignal: strings.TrimPrefix(strings.ToUpper(r.cfg.ckptSignal), "SIG"),
		JobDir: r.dirs.jobDir, RestartCount: a.RestartCount, Framework: r.frameworkEnv(),
	})
	r.addNCCLEnv(&renv, masterAddr, st.masterPort, f.addrs, planPath)
	r.addFlightRecorderEnv(&renv) // hangevidence.go
	r.addSkipStepsEnv(&renv)      // lossspike.go
	launchDir := r.dirs.in(jobdir.Launch)
	bindInShim := false
	for _, s := range r.placed.Slots {
		if s.CPUs != "" {
			bindInShim = true
		}
	}
	st.srunArgv, st.srunEnv = launch.SrunCommand(launch.StepSpec{
		Self: r.cfg.self, Shim: r.cfg.shim, LaunchDir: launchDir, Hostfile: hostfilePath, Arbitrary: !sameOrderAsSlurm(a, r.placed.Slots),
		Nodes: len(a.Nodes), Tasks: a.World(), PerNode: a.TasksPerNode, BindInShim: bindInShim, Argv: st.cmdArgv,
		NodeList: r.stepNodeList(), Overlap: len(r.sess.spare.lost) > 0, Extra: r.stepExtra(),
	})
	return st, renv, nil
}

// startStep opens the control channel, writes the launch files and the
// summary, and launches the step, unless too many runs failed in a row.
func (r *runner) startStep(ctx context.Context, f runFacts, renv rankEnv, store *observedStore) error {
	a := r.alloc
	launchDir := r.dirs.in(jobdir.Launch)
	if r.early != nil && !r.earlyFits() {
		r.logf("the placement's rank order is not Slurm's block order: calling off the step started before the plan, starting it again with the hostfile")
		r.abortEarly()
	}
	var ctl *launch.Server
	var control string
	if e := r.early; e != nil {
		ctl, control = e.ctl, e.control
	} else {
		var err error
		if ctl, control, err = r.openControl(f.addrs); err != nil {
			return err
		}
	}
	defer func() {
		r.abortEarly() // the step did not get to the monitor: call it off before closing its channel
		ctl.Close()
	}()
	common := launch.Common{JobID: a.JobID, World: a.World(), Control: control,
		Token: ctl.Token, Signal: renv.Common["TRAINRUN_CKPT_SIGNAL"], LocalDir: r.cfg.ckptLocal, CkptDir: r.dirs.ckptDir,
		Container: r.containerRun()}
	if r.early != nil {
		common.Argv = r.step.cmdArgv
	}
	// The history is read and the start recorded (an fsync) while the
	// launch files are written.
	recorded := make(chan error, 1)
	go func() { recorded <- r.recordStartUnlessFailing() }()
	err := writeLaunchDir(launchDir, common, r.placed.Slots, renv)
	if err != nil {
		err = fmt.Errorf("launch files in %s: %w", launchDir, err)
	} else if r.sess.tune == nil { // a --tune trial logs its own line (run_tune.go)
		summary := r.summary()
		if err = launch.WriteFileAtomic(r.dirs.in(jobdir.Summary), []byte(summary), 0o644); err == nil {
			fmt.Fprint(r.env.Stdout, summary)
		}
	}
	if rerr := <-recorded; err == nil {
		err = rerr
	}
	if err != nil {
		return err
	}
	r.checkGrace("start")
	r.step.tReady = time.Since(r.t0)
	if r.sess.restarts == 0 && r.sess.tune == nil { // the observer sees one run; a restart or a tune trial inside it is not its end
		r.observeStart()
	}
	err = r.launch(ctx, ctl, store)
	if !errors.Is(err, errRestartStep) && !errors.Is(err, errTuneTrial) {
		r.observeEnd(err)
	}
	return err
}

// recordStartUnlessFailing refuses to start once the last --max-failures
// runs failed without progress; else it records this run's start in the
// history.
func (r *runner) recordStartUnlessFailing() error {
	if r.sess.tune != nil {
		return nil // a --tune trial is not a run of the job's history
	}
	if r.ckpt.store != nil && r.cfg.maxFailures > 0 {
		// Runs that ended without an end event (killed, node failure) count as failures.
		if incs, err := r.ckpt.store.History().Load(); err == nil {
			if n := checkpoint.FailuresBeforeResume(incs, tagOf(r.ckpt.resume)); n >= r.cfg.maxFailures {
				return withCode(exitcode.RequeueLimit, fmt.Errorf("the last %d run(s) of this job failed without progress (history in %s/.trainrun/history.jsonl); not starting again (--max-failures %d)",
					n, r.dirs.ckptDir, r.cfg.maxFailures))
			}
		}
	}
	r.recordStart()
	return nil
}

func tagOf(dir string) string {
	if dir == "" {
		return ""
	}
	return filepath.Base(dir)
}

// ncclPrefixes are the variables taken from the placement's environment
// (plan.RankEnv); the launcher variables and CUDA_VISIBLE_DEVICES stay the
// controller's and the shim's.
var ncclPrefixes = []string{"NCCL_", "TORCH_NCCL_"}

// addNCCLEnv adds each rank's NCCL environment from its node's topology,
// where the probe discovered it. Values the task inherits (the user's, the
// site's nccl.conf) are kept: RankEnv does not inject over them.
func (r *runner) addNCCLEnv(renv *rankEnv, masterAddr string, port int, addrs map[string]string, planPath string) {
	if r.placed.Placement == nil {
		return
	}
	user := map[string]string{}
	for _, k := range plan.ManagedEnvKeys(r.cfg.ncclPolicy) {
		if v := os.Getenv(k); v != "" {
			user[k] = v
		}
	}
	reported := false
	for i, s := range r.placed.Slots {
		f, ok := r.facts.nodes[s.Node]
		if !ok || f.Topo == nil {
			continue
		}
		var conf map[string]string
		if f.NCCLConf != "" {
			conf, _ = plan.ParseNCCLConf([]byte(f.NCCLConf))
		}
		var nodeAddrs []string
		if a := addrs[s.Node]; a != "" {
			nodeAddrs = []string{a}
		}
		e, err := plan.RankEnv(plan.EnvInput{Node: f.Topo, Placement: r.placed.Placement, Rank: s.Rank, Plan: r.choice.Layout, PlanPath: planPath,
			MasterAddr: masterAddr, MasterPort: port, NodeAddrs: nodeAddrs, UserEnv: user, NCCLConf: conf, Policy: r.cfg.ncclPolicy})
		if err != nil {
			if !reported {
				r.logf("warning: NCCL environment not computed: %v", err)
				reported = true
			}
			continue
		}
		for _, v := range e.Vars {
			if !v.Inject {
				continue
			}
			for _, p := range ncclPrefixes {
				if strings.HasPrefix(v.Key, p) {
					renv.Ranks[i][v.Key] = v.Value
				}
			}
		}
		if i == 0 {
			for _, n := range e.Notes {
				r.logf("nccl: %s", n)
			}
		}
	}
}
