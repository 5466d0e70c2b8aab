// Package sweep is the pure part of `trainrun sweep` and `trainrun
// branches`: the expansion of a grid and random samples into trials, the
// substitution of a trial's parameters into its command, and the
// aggregation of trial states and metrics into a status with a best trial.
// No I/O: the command reads Slurm and the files and passes the facts in.
package sweep
