#!/usr/bin/env bash
# Installs what the test suite needs from Debian's packages, when missing.
# Runs as root (as CI does here); elsewhere it says what is missing and stops.
set -euo pipefail
pkgs=(slurm-wlm slurmctld slurmd munge libslurm-dev python3-torch prometheus prometheus-pushgateway iproute2)
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
	echo "SKIP deps: missing Debian packages (${missing[*]}); run 'make deps' as root on Debian 12" >&2
	exit 0
fi
echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# Debian starts the daemons on install; the test harness runs its own.
for s in slurmctld slurmd munge prometheus prometheus-pushgateway prometheus-node-exporter; do
	systemctl disable --now "$s" >/dev/null 2>&1 || service "$s" stop >/dev/null 2>&1 || true
done
