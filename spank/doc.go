// Package spank is the SPANK plugin (spank_trainrun.so): a thin C layer holding
// Slurm's callbacks and the behaviour in testable Go, called only in the parent
// callbacks, never after slurmstepd forks a task.
package spank
