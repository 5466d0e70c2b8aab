// Package e2e is the end-to-end suite: tests that run trainrun and Slurm's own
// commands against a real local Slurm cluster started by test/harness. Every
// test file carries the build tag e2e; run them as root with `make test-e2e`
// (or `go test -tags e2e ./test/e2e/`). TestMain starts one cluster for the
// whole package and tears it down, also on failure, panic, timeout or Ctrl-C.
package e2e
