#!/usr/bin/env bash
# Quick start, command 1: install what is missing, build the tuner and the Python package
# (installed into .venv: scripts/python-install.sh), and tune an experiment.
#   scripts/tune.sh experiments/resnet50.yaml [brickdl-tune flags...]
# Builds brickdl-tune and the Python package only (scripts/test.sh builds everything).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh" brickdl-tune
"$root/scripts/python-install.sh"
exec "${BRICKDL_BUILD_DIR:-$root/build}/apps/brickdl-tune" "$@"
