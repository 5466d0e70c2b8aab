#!/usr/bin/env bash
# End-to-end suite: test/e2e against a real local Slurm that test/harness
# starts (munged, slurmctld, 4 slurmd with 8 fake GPUs each) and removes.
#
#   test/e2e.sh                     # the whole suite (make test-e2e)
#   test/e2e.sh -run Hostlist       # extra flags go to go test
#   test/e2e.sh -run '^$' -bench .  # the e2e benchmarks (make bench)
#
# Not root, or Slurm/munge not installed: prints a SKIP line saying why and
# exits 0, unless TRAINRUN_E2E_REQUIRED=1 (CI), where a skip is a failure.
set -uo pipefail
cd "$(dirname "$0")/.."

skip() {
	if [ "${TRAINRUN_E2E_REQUIRED:-}" = 1 ]; then
		echo "FAIL e2e: $* (TRAINRUN_E2E_REQUIRED=1: the e2e suite must run here)"
		exit 1
	fi
	echo "SKIP e2e: $*"
	exit 0
}

# munged, slurmctld and slurmd live in /usr/sbin, which a PATH from su may lack.
case ":$PATH:" in *:/usr/sbin:*) ;; *) export PATH="$PATH:/usr/sbin:/sbin" ;; esac
[ "$(id -u)" = 0 ] || skip "needs root to run munged, slurmctld and slurmd and to mknod the fake GPUs"
missing=()
for b in munged slurmctld slurmd srun sbatch scontrol squeue scancel; do
	command -v "$b" >/dev/null || missing+=("$b")
done
[ ${#missing[@]} -eq 0 ] || skip "${missing[*]} not installed; 'make deps' (as root, Debian 12) installs slurm-wlm and munge"

export GOFLAGS="${GOFLAGS:--mod=mod}"
log=$(mktemp -t trainrun-e2e.XXXXXX.log)
# -timeout leaves room on a loaded machine, and the harness stops the cluster
# shortly before it fires. The parallel tests (each on a cluster of its own)
# mostly wait on Slurm's clocks (time limits, grace times, requeue delays),
# not on the CPU: go test's default of GOMAXPROCS at a time (2 here) left the
# suite's wall time the sum of their waits; E2E_PARALLEL sets how many run at
# once.
go test -tags e2e -count=1 -timeout 14m -parallel "${E2E_PARALLEL:-4}" -v "$@" ./test/e2e/... 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
pass=$(grep -c '^--- PASS' "$log")
fail=$(grep -c '^--- FAIL' "$log")
skipped=$(grep -c '^--- SKIP' "$log")
if [ "$rc" = 0 ]; then
	echo "e2e: $pass passed, $fail failed, $skipped skipped"
	rm -f "$log"
else
	echo "e2e: $pass passed, $fail failed, $skipped skipped; go test exit status $rc; full log $log"
	grep '^--- FAIL' "$log" | sed 's/^/  /'
fi
exit "$rc"
