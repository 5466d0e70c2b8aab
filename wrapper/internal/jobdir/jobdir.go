// Package jobdir is the layout of a trainrun job directory (--job-dir,
// TRAINRUN_JOB_DIR; default $SLURM_SUBMIT_DIR/trainrun-<jobid>) in one
// table: what `trainrun run` keeps there, and what sweep, branches and the
// sweep status read back. A named run keeps the same layout in Run(dir,
// NAME); an unnamed one in the job directory itself.
package jobdir

import (
	"path/filepath"
	"strconv"
)

const (
	Launch      = "launch"         // the launch files, ckpt-request, the trainers' progress file
	Topo        = "topo"           // the probe's node facts, reused by --probe auto
	Plan        = "plan.json"      // the layout and where each rank runs
	Hostfile    = "hostfile"       // one line per node, slots=GPUs
	Summary     = "summary.txt"    // what the run does
	Checkpoints = "checkpoints"    // the default --ckpt-dir
	Runs        = "runs"           // runs/NAME: each named run's own directory
	DSConfig    = "ds_config.json" // {deepspeed_config}: the plan's DeepSpeed configuration
	RunName     = "run.name"       // names the unnamed run that owns the job directory itself
)

// Run is the directory of the run named name in the job directory dir.
func Run(dir, name string) string { return filepath.Join(dir, Runs, name) }

// Hangs holds one directory per hang the controller found: hangs/<n>/ has
// every asked rank's stacks, last collectives and process state, and the
// controller's summary.txt (issue 31).
const Hangs = "hangs"

// Hang is the directory of hang n (1, 2, ...) of the run in dir.
func Hang(dir string, n int) string { return filepath.Join(dir, Hangs, strconv.Itoa(n)) }
