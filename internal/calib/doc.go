// Package calib owns the observation records of trainrun's runs: their
// format, the steady step time taken from a trainer's progress, and the two
// stores they are appended to, a run's own (<ckpt-dir>/.trainrun/
// observations.jsonl) and a site calibration (DIR/observations.jsonl). The
// fitting is the planner's (plan.Calibrate); this package only reads and
// writes.
package calib
