#!/usr/bin/env bash
# Quick start, command 1: install what is missing, build, and tune an experiment.
#   scripts/tune.sh experiments/resnet50.yaml [brickdl-tune flags...]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh"
exec "${BRICKDL_BUILD_DIR:-$root/build}/apps/brickdl-tune" "$@"
