package run

import (
	"bytes"
	"cmp"
	"math"
	"time"

	"github.com/trainrun/trainrun/internal/calib"
	"github.com/trainrun/trainrun/internal/safefs"
	"github.com/trainrun/trainrun/internal/slurm"
	"github.com/trainrun/trainrun/plan"
	"github.com/trainrun/trainrun/wrapper/internal/jobdir"
	"github.com/trainrun/trainrun/wrapper/internal/planflags"
	"github.com/trainrun/trainrun/wrapper/obs"
)

// The run's observation for the site calibration: the planner reads the
// calibration directory's records (planflags.Observations), and the run
// appends its own when it ends (calib.Recorder).

// newRunRecorder prepares the observation of a run that trains ev (or,
// unevaluated, l): its plan JSON, with the inputs when they are known, and
// where the record goes. note is said once at the start when there is
// something to say.
func newRunRecorder(ev *plan.Evaluation, l plan.Layout, in *plan.Inputs, ckptDir, calibDir, job, gpu string, nodes int, version string) (rec *calib.Recorder, note string) {
	var paths []string
	if ckptDir != "" {
		paths = append(paths, calib.RunStorePath(ckptDir))
	}
	if calibDir != "" {
		paths = append(paths, calib.SitePath(calibDir))
	}
	if len(paths) == 0 {
		return nil, "no observation will be recorded: no --ckpt-dir and no --calibration to record it in"
	}
	if ev == nil {
		ev = &plan.Evaluation{Layout: l}
	}
	res := plan.Result{Plan: ev, Alternatives: []plan.Evaluation{}, Rejected: []plan.Rejection{}}
	var b bytes.Buffer
	var err error
	t := calib.Record{GPU: gpu, Nodes: nodes, Software: map[string]string{"trainrun": version}, Job: job}
	if in != nil {
		err = plan.RenderJSONWithInputs(&b, res, *in)
		t.GPU, t.Stack, t.Software["precision"] = in.GPU, in.Stack, in.Precision
	} else {
		err = plan.RenderJSON(&b, res)
		note = `the observation will carry no plan "inputs" (the layout was not planned from a model here): add "argv" (the trainrun plan arguments) to the record before 'trainrun calib import'`
	}
	if err != nil {
		return nil, "no observation will be recorded: " + err.Error()
	}
	t.Plan = bytes.TrimSpace(b.Bytes())
	return &calib.Recorder{Paths: paths, Template: t}, note
}

// loadCalibration reads the run's site calibration (complete resolved the
// directory from the flag, TRAINRUN_CALIBRATION or the policy) into po, the
// choose phase's copy of the planner's options.
func (r *runner) loadCalibration(po *planflags.Options) error {
	if po.Calibration == "" || po.Observations != nil {
		return nil
	}
	obs, err := planflags.Observations(po.Calibration, r.env.Stderr)
	if err != nil {
		return err
	}
	po.Observations = append([]plan.Observation{}, obs...)
	return nil
}

// startRecorder prepares the run's observation; why not, when not, is said
// once here.
func (r *runner) startRecorder() {
	job := slurm.JobFromEnv(r.env.Getenv).ID
	if r.dirs.runName != "" {
		job += "/" + r.dirs.runName
	}
	in := r.choice.Inputs
	if in == nil && r.choice.PlanFile != "" { // --plan FILE: trainrun plan's JSON carries its inputs
		if b, err := safefs.ReadFile(r.choice.PlanFile, 64<<20); err == nil {
			if pr, err := plan.ParsePlanJSON(b); err == nil {
				in = pr.Inputs
			}
		}
	}
	var why string
	r.sess.calibRec, why = newRunRecorder(r.choice.Eval, r.choice.Layout, in, r.dirs.ckptDir, r.cfg.plan.Calibration, job,
		cmp.Or(r.choice.GPU, r.cfg.plan.GPU, r.probedGPUName()), len(r.alloc.Nodes), r.env.Version)
	if why != "" {
		r.logf("%s", why)
	}
	if img, rt := r.containerRecord(); img != "" && r.sess.calibRec != nil {
		r.sess.calibRec.Template.Software["container_image"], r.sess.calibRec.Template.Software["container_runtime"] = img, rt
	}
}

// finishObservation writes the run's observation, with the peak memory the
// trainer's last progress report gives (metric peak_mem_gib), and logs where
// it went or why none was written.
func (r *runner) finishObservation() {
	rec := r.sess.calibRec
	if rec == nil {
		return
	}
	if p, err := obs.ReadProgressFile(r.dirs.in(jobdir.Launch, obs.ProgressFile)); err == nil {
		if v, ok := p.Metrics["peak_mem_gib"]; ok && v > 0 && !math.IsInf(v, 0) {
			rec.PeakMemGiB = &v
		}
	}
	if msg := rec.Finish(time.Now()); msg != "" {
		r.logf("%s", msg)
	}
}
