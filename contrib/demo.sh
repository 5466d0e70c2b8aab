#!/usr/bin/env bash
# The README's main command (`make demo`): trainrun on built-in defaults.
# Installs what it needs (Debian packages, as root), builds, then shows a
# built-in H100 node's topology, a plan for Llama-3-70B, and a real PyTorch
# job on a throw-away local Slurm that is preempted, checkpointed, requeued,
# resumed and finished.
set -euo pipefail
cd "$(dirname "$0")/.."
bash test/deps.sh
make --no-print-directory build
exec go run ./test/demo -bin bin/trainrun
