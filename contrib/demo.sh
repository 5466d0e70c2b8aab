#!/usr/bin/env bash
# The README's main command: trainrun on a built-in default.
set -euo pipefail
cd "$(dirname "$0")/.."
./bin/trainrun --help
