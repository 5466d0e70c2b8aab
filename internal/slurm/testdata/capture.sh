#!/usr/bin/env bash
# Captures what the real Slurm 22.05 of the e2e harness prints, for the
# internal/slurm unit tests. Run as root from the repository root, serialised
# with the e2e suite (it starts the same cluster):
#
#   flock /tmp/trainrun-e2e.lock go run ./test/harness/testcluster -q -- bash internal/slurm/testdata/capture.sh
#
# It submits one job (4 nodes x 8 fake GPUs, a comment with spaces, requeue
# allowed, 10 minutes) and writes, next to this script, the outputs the
# package parses. Re-running it rewrites them; the job ids and times change.
set -euo pipefail
out=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
cat >job.sh <<'JOB'
#!/bin/bash
env | grep -E '^SLURM' | grep -v -E '^SLURM_(CONF|CLUSTER_NAME)=' | sort >"$CAPTURE_DIR/env-batch.txt"
sleep 120
JOB
export CAPTURE_DIR=$work
id=$(sbatch --parsable -N4 --ntasks-per-node=8 --gpus-per-node=8 --time=10 --requeue \
	--job-name='run two.sh' --comment='two words  here' -o "$work/job.out" job.sh)
for _ in $(seq 200); do
	[ -s "$work/env-batch.txt" ] && break
	sleep 0.1
done
[ -s "$work/env-batch.txt" ] || { echo "job $id did not start"; cat "$work/job.out" || true; exit 1; }
cp "$work/env-batch.txt" "$out/env-batch.txt"
echo "$id" >"$out/jobid.txt"
scontrol show job -o "$id" >"$out/show-job-o.txt"
# 22.05's scontrol has no --json (squeue and sinfo do): keep the proof.
scontrol show job --json "$id" >/dev/null 2>"$out/show-job-json.stderr" || true
scontrol show node -o >"$out/show-node-o.txt"
scontrol show partition -o >"$out/show-partition-o.txt"
scontrol show config >"$out/show-config.txt"
scontrol show hostnames 'n[1-4]' >"$out/show-hostnames.txt"
set +e
scontrol show topology >"$out/show-topology-none.stdout" 2>"$out/show-topology-none.stderr"
echo $? >"$out/show-topology-none.rc"
scontrol show job -o 999999 >"$out/show-job-missing.stdout" 2>"$out/show-job-missing.stderr"
echo $? >"$out/show-job-missing.rc"
scontrol requeue 999999 >"$out/requeue-missing.stdout" 2>"$out/requeue-missing.stderr"
echo $? >"$out/requeue-missing.rc"
set -e
scancel "$id"
scontrol --version >"$out/version.txt"
