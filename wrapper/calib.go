package main

import (
	"encoding/json"
	"io"

	"github.com/trainrun/trainrun/internal/calib"
	"github.com/trainrun/trainrun/plan"
	"github.com/trainrun/trainrun/wrapper/internal/planflags"
)

// The site calibration as plan, run, submit and sweep use it: --calibration
// DIR (env TRAINRUN_CALIBRATION, policy Calibration=) names the directory;
// its observations correct the planner (plan.Calibrate), and trainrun run
// appends its own to it (calib.Recorder).

// calibrationDir is --calibration, else TRAINRUN_CALIBRATION, else the
// policy's Calibration= (pol).
func (o *planOptions) calibrationDir(getenv func(string) string, pol string) string {
	if o.Calibration == "" {
		o.Calibration = getenv("TRAINRUN_CALIBRATION")
	}
	if o.Calibration == "" {
		o.Calibration = pol
	}
	return o.Calibration
}

// loadCalibration reads the calibration directory (calibrationDir) once;
// searchOptions hands its observations to the planner.
func (o *planOptions) loadCalibration(getenv func(string) string, pol string, w io.Writer) error {
	if o.calibrationDir(getenv, pol) == "" || o.Observations != nil {
		return nil
	}
	obs, err := planflags.Observations(o.Calibration, w)
	if err != nil {
		return err
	}
	o.Observations = append([]plan.Observation{}, obs...)
	return nil
}

// calibExport writes records as JSON lines.
func calibExport(w io.Writer, recs []calib.Record) error {
	enc := json.NewEncoder(w)
	for _, r := range recs {
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	return nil
}
