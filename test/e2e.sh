#!/usr/bin/env bash
# End-to-end suite: starts a real local Slurm (see test/harness) and runs test/e2e.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" != 0 ]; then
	echo "SKIP e2e: needs root to start munge, slurmctld and slurmd"
	exit 0
fi
exec go test -tags e2e -count=1 -timeout 30m -v ./test/e2e/ 2>&1
