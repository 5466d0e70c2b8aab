// Package plan owns the decisions: from a model, a job and a cluster it chooses
// the parallel layout, predicts memory, step time and MFU, places ranks and
// computes each rank's environment. It is pure: no I/O, no clock, no exec.
package plan
