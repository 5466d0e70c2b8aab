package planflags

import (
	"bytes"
	"fmt"
	"io"
	"path/filepath"

	"github.com/spf13/pflag"

	"github.com/trainrun/trainrun/internal/calib"
	"github.com/trainrun/trainrun/plan"
)

// The site calibration's records as the planner's observations: plan, run,
// submit and sweep read them (--calibration DIR), and trainrun calib checks
// them.

// Observations reads a calibration directory's records as the
// planner's observations; records it cannot use are reported once on w.
func Observations(dir string, w io.Writer) ([]plan.Observation, error) {
	recs, bad, err := calib.Load(calib.SitePath(dir))
	if err != nil {
		return nil, fmt.Errorf("--calibration %s: %w", dir, err)
	}
	var obs []plan.Observation
	for i, rec := range recs {
		if !rec.Measured() {
			continue // a tune trial that failed: no step time to learn from
		}
		o, err := ObservationOf(rec, fmt.Sprintf("%s:%d", filepath.Base(calib.SitePath(dir)), i+1))
		if err != nil {
			bad = append(bad, err)
			continue
		}
		obs = append(obs, o)
	}
	if len(bad) > 0 {
		fmt.Fprintf(w, "trainrun: calibration %s: %d record(s) not used, first: %v\n", dir, len(bad), bad[0])
	}
	return obs, nil
}

// ObservationOf turns a record into an observation: the layout from its
// plan, the inputs from the plan's "inputs" or, for a record written by
// hand, from its "argv" (trainrun plan arguments).
func ObservationOf(rec calib.Record, id string) (plan.Observation, error) {
	pr, err := plan.ParsePlanJSON(rec.Plan)
	if err != nil {
		return plan.Observation{}, fmt.Errorf("%s: %w", id, err)
	}
	in := pr.Inputs
	if in == nil && len(rec.Argv) > 0 {
		if in, err = InputsFromArgv(rec.Argv); err != nil {
			return plan.Observation{}, fmt.Errorf("%s: argv: %w", id, err)
		}
	}
	if in == nil {
		return plan.Observation{}, fmt.Errorf(`%s: the plan has no "inputs" and the record no "argv": give the object trainrun plan --format json prints (it carries its inputs), or "argv": the trainrun plan arguments that reproduce it`, id)
	}
	if rec.Job != "" {
		id = rec.Job
	}
	if !rec.At.IsZero() {
		id += "@" + rec.At.UTC().Format("2006-01-02")
	}
	return plan.Observation{ID: id, Inputs: *in, Layout: pr.Layout, StepS: rec.Observed.StepS, Steps: rec.Observed.Steps, Spread: rec.Observed.Spread,
		PlannedStep: pr.Step}, nil
}

// InputsFromArgv evaluates trainrun plan arguments into plan inputs.
func InputsFromArgv(argv []string) (*plan.Inputs, error) {
	var sink bytes.Buffer
	fs := pflag.NewFlagSet("plan", pflag.ContinueOnError)
	fs.SetOutput(&sink)
	var o Options
	o.AddFlags(fs)
	if err := fs.Parse(argv); err != nil {
		return nil, usageErrorf("%v (run 'trainrun plan --help')", err)
	}
	m, err := o.ModelGiven(fs.Changed)
	if err != nil {
		return nil, err
	}
	j, err := o.Job()
	if err != nil {
		return nil, err
	}
	cs, err := o.Clusters(fs.Changed)
	if err != nil {
		return nil, err
	}
	in := plan.InputsOf(m, j, cs[0], o.Fix)
	return &in, nil
}
