#!/usr/bin/env bash
# Proves the unit tests hermetic: runs `go test` of every package outside
# test/ (or of the packages given) with scontrol, srun, sbatch, scancel,
# sinfo and squeue on PATH replaced by programs that record each call and
# fail, then fails if any call was recorded. The one exception is hostlist
# expansion against the real `scontrol show hostnames|hostlist` (topo's
# parser is checked against Slurm's own), which is passed through.
#
#   test/hermetic.sh                       # make test-hermetic
#   test/hermetic.sh ./wrapper/... -run X  # some packages; flags go to go test
set -uo pipefail
cd "$(dirname "$0")/.."

fake=$(mktemp -d -t trainrun-hermetic.XXXXXX)
trap 'rm -rf "$fake"' EXIT
log=$fake/calls.log
: >"$log"
real_scontrol=$(command -v scontrol || true)
for c in scontrol srun sbatch scancel sinfo squeue; do
	cat >"$fake/$c" <<FAKE
#!/bin/bash
if [ "$c" = scontrol ] && [ "\$1" = show ] && { [ "\$2" = hostnames ] || [ "\$2" = hostlist ]; } && [ -n "$real_scontrol" ]; then
	echo "passed: $c \$*" >>"$log"
	exec "$real_scontrol" "\$@"
fi
echo "called: $c \$* (from \$(cat /proc/\$PPID/cmdline 2>/dev/null | tr '\0' ' ' | cut -c1-200))" >>"$log"
echo "$c: a unit test ran Slurm's $c (test/hermetic.sh)" >&2
exit 1
FAKE
	chmod +x "$fake/$c"
done

pkgs=()
flags=()
for a in "$@"; do
	case "$a" in ./*) pkgs+=("$a") ;; *) flags+=("$a") ;; esac
done
if [ ${#pkgs[@]} -eq 0 ]; then
	mapfile -t pkgs < <(go list ./... | grep -v '/test/')
fi
PATH="$fake:$PATH" go test -count=1 "${flags[@]}" "${pkgs[@]}"
rc=$?
passed=$(grep -c '^passed:' "$log")
if grep -q '^called:' "$log"; then
	echo "FAIL hermetic: unit tests ran Slurm's client commands:"
	grep '^called:' "$log" | sort | uniq -c | sort -rn
	exit 1
fi
echo "hermetic: no Slurm command run by the unit tests ($passed hostlist expansions passed to the real scontrol)"
exit $rc
