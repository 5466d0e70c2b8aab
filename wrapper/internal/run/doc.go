// Package run holds the phases of `trainrun run` that decide, apart from
// the ones that do. Today it holds the last decision, the core promise of
// the product: after the step, finish, stop or requeue, and with which exit
// code (Decide, pure, table-tested over every stop reason), and the stop
// reasons it reads (StopReason). The rest of the controller (gather →
// choose → place → prepare → launch/monitor → act) is in wrapper's
// cmd_run*.go and run_*.go files; see wrapper/doc.go for where each phase
// lives.
package run
