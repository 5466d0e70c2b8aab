#!/usr/bin/env bash
# Installs what the test suite and the demo need from Debian 12's packages,
# when missing: Slurm 22.05 (slurmctld, slurmd, clients, libslurm-dev for
# slurm/spank.h), munge, PyTorch (CPU, gloo) and Prometheus with its
# Pushgateway and node exporter, rsvg-convert (to look at trainrun report --svg
# pictures), podman and runc (the container e2e). Runs as root (as CI does here); elsewhere it
# prints a SKIP line naming what is missing and exits 0, and the e2e suite
# then skips too.
#
# The distribution's own slurmctld, slurmd, munge and Prometheus services are
# kept from starting (policy-rc.d during the install) and disabled afterwards:
# the test harness runs its own daemons on its own sockets and ports.
set -euo pipefail
pkgs=(slurm-wlm slurmctld slurmd slurm-client munge libslurm-dev python3-torch
	prometheus prometheus-pushgateway prometheus-node-exporter iproute2 procps librsvg2-bin
	zstd   # the CLI the checkpoint codec benchmark compares with
	strace # the commit metadata guard counts system calls with it (wrapper/internal/scale)
	python3-packaging # Megatron-LM's argument checks import it (make check-frameworks)
	podman runc) # the container e2e (test/e2e/container_test.go): rootful podman; runc, as crun refuses this kernel's hybrid cgroups
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
	echo "deps: all Debian packages present"
	exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
	echo "SKIP deps: missing Debian packages (${missing[*]}); run 'make deps' as root on Debian 12"
	exit 0
fi
echo "deps: installing ${missing[*]} (a few minutes on a fresh machine)"
export DEBIAN_FRONTEND=noninteractive
services=(slurmctld slurmd munge prometheus prometheus-pushgateway prometheus-node-exporter)
# Keep maintainer scripts from starting the daemons, unless the machine
# already has its own policy (containers often do).
own_policy=
if [ ! -e /usr/sbin/policy-rc.d ]; then
	own_policy=1
	printf '#!/bin/sh\n# trainrun test/deps.sh: no daemons started during package installation\nexit 101\n' >/usr/sbin/policy-rc.d
	chmod 755 /usr/sbin/policy-rc.d
	trap 'rm -f /usr/sbin/policy-rc.d' EXIT
fi
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
if [ -n "$own_policy" ]; then
	rm -f /usr/sbin/policy-rc.d
	trap - EXIT
fi
# Where systemd runs, keep the distribution's services off for good (they
# would also start at boot); elsewhere stop any that a policy let through.
if [ -d /run/systemd/system ]; then
	systemctl disable --now "${services[@]}" >/dev/null 2>&1 || true
else
	for s in "${services[@]}"; do
		[ -x "/etc/init.d/$s" ] && "/etc/init.d/$s" stop >/dev/null 2>&1 || true
	done
fi
echo "deps: installed"
