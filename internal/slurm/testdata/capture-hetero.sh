#!/usr/bin/env bash
# Captures what the real Slurm 22.05 prints about partitions and nodes with
# typed GRES, and what sbatch --test-only and sbatch --parsable print, for
# the internal/slurm parsers. Run as root from the repository root,
# serialised with the e2e suite, on the harness's heterogeneous cluster:
#
#   flock /tmp/trainrun-e2e.lock go run ./test/harness/testcluster -q -hetero -- bash internal/slurm/testdata/capture-hetero.sh
#
# One job holds 4 of n1's 8 h100s (so n1 is MIXED with GresUsed), the
# --test-only answers are asked while it runs. Outputs go next to this
# script as hetero-*.
set -euo pipefail
out=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
printf '#!/bin/bash\nsleep 300\n' >job.sh
id=$(sbatch --parsable -p hopper -N1 -n4 --gpus-per-node=4 --time=10 -o /dev/null job.sh)
echo "$id" >"$out/hetero-sbatch-parsable.txt"
for _ in $(seq 100); do
	[ "$(squeue -h -j "$id" -o %T)" = RUNNING ] && break
	sleep 0.1
done
scontrol show partition -o >"$out/hetero-show-partition-o.txt"
scontrol -d show node -o >"$out/hetero-show-node-d-o.txt"
# --test-only answers on stderr, exit 0.
sbatch --test-only -p ampere -N2 --ntasks-per-node=8 --gpus-per-node=8 --exclusive --time=30 job.sh \
	>/dev/null 2>"$out/hetero-test-only.stderr"
sbatch --test-only -p hopper -N2 --ntasks-per-node=8 --gpus-per-node=8 --exclusive --time=30 job.sh \
	>/dev/null 2>"$out/hetero-test-only-busy.stderr"
set +e
sbatch --test-only -p nosuch -N1 --time=5 job.sh >/dev/null 2>"$out/hetero-test-only-bad.stderr"
echo $? >"$out/hetero-test-only-bad.rc"
sbatch --test-only -p ampere -N3 --time=5 job.sh >/dev/null 2>"$out/hetero-test-only-toobig.stderr"
echo $? >"$out/hetero-test-only-toobig.rc"
set -e
date -Iseconds >"$out/hetero-date.txt"
scancel "$id"
