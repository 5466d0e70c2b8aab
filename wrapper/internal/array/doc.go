// Package array is the job array of trainrun runs that `trainrun sweep`
// and `trainrun branches` submit (trials, branches): its manifest
// SWEEPDIR/sweep.json, the directory that holds it, its logs and scripts,
// and the batch script with one case per element. The expansion of a sweep
// into trials and the aggregation of their states are wrapper/internal/sweep
// (pure); this package writes and reads the files.
package array
